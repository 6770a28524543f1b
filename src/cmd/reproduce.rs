//! `heisenbench reproduce`: the paper's story on embedded defaults.
//!
//! This version runs the theory part only: the paper's operating points through the
//! model and the worker plan. The simulator, the live run and the figures join it as
//! they are built.

use std::io::Write;

use heisenbench_model::batch::BatchMg1;
use heisenbench_model::plan::{Assignment, Budget, Hardware, Load, WorkerPlan, plan_workers};
use heisenbench_model::queue::{QueueReport, WaitModel};
use heisenbench_model::service::Service;
use heisenbench_model::units::{Rate, Seconds, format_seconds};
use serde::Serialize;

use super::write_json;
use crate::Failure;
use crate::args::ReproduceArgs;

/// Per-event cost of a Python asyncio client reading, splitting and decoding one SSE
/// chunk: tens of microseconds; 20 us with SCV 0.5 is the embedded default.
const PYTHON_EVENT_COST_S: f64 = 20e-6;
const PYTHON_EVENT_SCV: f64 = 0.5;
/// The paper's workload: 200 output tokens per request, one chunk each.
const EVENTS_PER_REQUEST: u32 = 200;

#[derive(Serialize)]
struct Point {
    qps: f64,
    single_loop_utilization: f64,
    single_loop: Option<QueueReport>,
    plan: WorkerPlan,
}

#[derive(Serialize)]
struct Theory {
    event_cost_mean_s: f64,
    event_cost_scv: f64,
    events_per_request: u32,
    budget: Budget,
    points: Vec<Point>,
}

pub fn run(a: ReproduceArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let cost = Service::gamma(PYTHON_EVENT_COST_S, PYTHON_EVENT_SCV)?;
    let budget = Budget::Quantile {
        q: heisenbench_model::units::Quantile::P99,
        limit_s: Seconds::new(1e-3)?,
    };
    let mut points = Vec::new();
    for qps in [100.0, 250.0, 1000.0, 5000.0] {
        let load = Load::new(
            Rate::per_s(qps)?,
            EVENTS_PER_REQUEST,
            1,
            cost.clone(),
            Assignment::Random,
        )?;
        let single = BatchMg1::new(load.event_rate_per_s(), 1, cost.clone())
            .ok()
            .map(|q| q.report());
        let plan = plan_workers(
            &load,
            &budget,
            Hardware {
                cores: None,
                cores_per_machine: None,
            },
        )?;
        points.push(Point {
            qps,
            single_loop_utilization: load.offered_erlangs(),
            single_loop: single,
            plan,
        });
    }
    let theory = Theory {
        event_cost_mean_s: PYTHON_EVENT_COST_S,
        event_cost_scv: PYTHON_EVENT_SCV,
        events_per_request: EVENTS_PER_REQUEST,
        budget,
        points,
    };
    if a.json {
        return write_json(out, &theory);
    }
    writeln!(
        out,
        "heisenbench reproduce: theory (simulation, live run and figures are not built yet)"
    )?;
    writeln!(
        out,
        "one client loop, {} per event (SCV {}), {} events per request, budget {}",
        format_seconds(PYTHON_EVENT_COST_S),
        PYTHON_EVENT_SCV,
        EVENTS_PER_REQUEST,
        budget
    )?;
    writeln!(
        out,
        "{:>8}  {:>11}  {:>12}  {:>12}  {:>7}  {:>12}",
        "qps", "1-loop rho", "1-loop mean", "1-loop p99", "loops", "p99 at loops"
    )?;
    for p in &theory.points {
        let (mean, p99) = match &p.single_loop {
            Some(r) => (format_seconds(r.wq_mean_s), format_seconds(r.wq_p99_s)),
            None => ("unstable".into(), "unstable".into()),
        };
        writeln!(
            out,
            "{:>8}  {:>11.3}  {:>12}  {:>12}  {:>7}  {:>12}",
            p.qps,
            p.single_loop_utilization,
            mean,
            p99,
            p.plan.workers,
            format_seconds(p.plan.predicted_wait_s)
        )?;
    }
    writeln!(
        out,
        "a single loop saturates at rho = 1, i.e. {:.0} req/s; beyond it the client's backlog, not the server, sets every latency it reports",
        1.0 / (PYTHON_EVENT_COST_S * f64::from(EVENTS_PER_REQUEST))
    )?;
    Ok(())
}
