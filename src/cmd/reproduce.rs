//! `heisenbench reproduce`: the paper's story on embedded defaults.
//!
//! This version runs the theory (the paper's operating points through the model and the
//! worker plan) and the simulation (the paper presets: one Python-like loop against the
//! loop count the plan gives), and holds the two against each other. The live run and the
//! figures join it as they are built.

use std::io::Write;

use heisenbench_model::plan::{Assignment, Budget, Hardware, Load, WorkerPlan, plan_workers};
use heisenbench_model::service::Service;
use heisenbench_model::units::{Quantile, Rate, Seconds, format_seconds};
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::report::SimReport;
use heisenbench_sim::scenario::{PRESET_BUDGET_S, preset, python_costs, request_cost};
use serde::Serialize;

use super::write_json;
use crate::Failure;
use crate::args::ReproduceArgs;

/// The paper's output length: one streamed chunk per token.
const OUTPUT_TOKENS: u32 = 200;
/// Simulated seconds of schedule per preset run.
const SIM_SECONDS: f64 = 10.0;
const SIM_SEED: u64 = 1;

#[derive(Serialize)]
struct Point {
    qps: f64,
    /// One loop's utilisation: qps x the cost of a whole response on the loop.
    single_loop_utilization: f64,
    plan: WorkerPlan,
}

#[derive(Serialize)]
struct Theory {
    /// Cost of one whole request (send, 200 chunks, finish) on a Python-like loop.
    request_cost: Service,
    budget: Budget,
    points: Vec<Point>,
}

#[derive(Serialize)]
struct Reproduction {
    theory: Theory,
    simulation: Vec<SimReport>,
}

pub fn run(a: ReproduceArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let cost = request_cost(&python_costs(), OUTPUT_TOKENS);
    let budget = Budget::Quantile {
        q: Quantile::P99,
        limit_s: Seconds::new(PRESET_BUDGET_S)?,
    };
    let mut points = Vec::new();
    for qps in [100.0, 250.0, 1000.0, 5000.0] {
        // With a zero-latency server a response is one unit of work for its loop.
        let load = Load::new(
            Rate::per_s(qps)?,
            1,
            1,
            cost.clone(),
            Assignment::RoundRobin,
        )?;
        let plan = plan_workers(&load, &budget, Hardware::default())?;
        points.push(Point {
            qps,
            single_loop_utilization: load.offered_erlangs(),
            plan,
        });
    }
    let theory = Theory {
        request_cost: cost,
        budget,
        points,
    };
    let mut simulation = Vec::new();
    for name in ["paper-1000", "paper-5000"] {
        for sc in preset(name, SIM_SECONDS, SIM_SEED).map_err(|e| Failure::Runtime(e.into()))? {
            simulation.push(Simulation::new(sc).run());
        }
    }
    let all = Reproduction { theory, simulation };
    if a.json {
        return write_json(out, &all);
    }
    print(out, &all)
}

fn print(out: &mut dyn Write, all: &Reproduction) -> Result<(), Failure> {
    let t = &all.theory;
    writeln!(
        out,
        "heisenbench reproduce: theory and simulation (the live run and the figures are not built yet)"
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "1. theory: a Python-like loop spends {} on a 200-token response (send, chunks, finish); \
         each loop is a queue of whole requests; budget: {} before a request's send starts",
        format_seconds(t.request_cost.mean_s()),
        t.budget
    )?;
    writeln!(
        out,
        "{:>8}  {:>11}  {:>7}  {:>15}  {:>12}",
        "qps", "1-loop rho", "loops", "rho per loop", "p99 wait"
    )?;
    for p in &t.points {
        writeln!(
            out,
            "{:>8}  {:>11.3}  {:>7}  {:>15.3}  {:>12}",
            p.qps,
            p.single_loop_utilization,
            p.plan.workers,
            p.plan.utilization,
            format_seconds(p.plan.predicted_wait_s)
        )?;
    }
    writeln!(
        out,
        "one loop saturates at {:.0} req/s; past it the client's backlog, not the server, sets every latency it reports",
        1.0 / t.request_cost.mean_s()
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "2. simulation: {SIM_SECONDS} s of Poisson arrivals, 320 in / 200 out tokens, zero-latency server, seed {SIM_SEED}"
    )?;
    writeln!(
        out,
        "{:<24} {:>8} {:>10} {:>11} {:>11} {:>15} {:>15}",
        "client", "offered", "achieved", "TTFT p50", "TTFT p99", "send lag p99", "theory p99"
    )?;
    // The send lag is the request's wait for its loop plus the send itself.
    let send_cost_s = python_costs().send.map_or(0.0, |s| s.mean_s());
    for r in &all.simulation {
        let theory = t
            .points
            .iter()
            .find(|p| p.qps == r.offered_qps && p.plan.workers == r.scenario.client.workers)
            .map_or("unstable".to_string(), |p| {
                format_seconds(p.plan.predicted_wait_s + send_cost_s)
            });
        writeln!(
            out,
            "{:<24} {:>8.0} {:>10.1} {:>11} {:>11} {:>16} {:>16}",
            r.scenario.name,
            r.offered_qps,
            r.achieved_qps,
            format_seconds(r.ttft.from_intended.p50_s),
            format_seconds(r.ttft.from_intended.p99_s),
            format_seconds(r.send_lag.p99_s),
            theory
        )?;
    }
    writeln!(
        out,
        "TTFT is measured from the intended send; the server's own TTFT is 0 throughout. Theory: the p99 wait \
         plus the mean send cost."
    )?;
    writeln!(out)?;
    writeln!(out, "3. the paper's claims, as reproduced here")?;
    let [s1, k1, s5, k5] = [0, 1, 2, 3].map(|i| &all.simulation[i]);
    writeln!(
        out,
        "- single-process clients collapse at 1,000 req/s (paper: 146 and 443 achieved): one simulated \
         Python-like loop achieves {:.0}",
        s1.achieved_qps
    )?;
    writeln!(
        out,
        "- they inject from 8 ms up to 58 s of TTFT (paper): the simulated loop reports a median TTFT of {} at \
         1,000 and {} at 5,000 req/s, against a server TTFT of 0",
        format_seconds(s1.ttft.from_intended.p50_s),
        format_seconds(s5.ttft.from_intended.p50_s)
    )?;
    writeln!(
        out,
        "- a multi-process client holds the rate (paper: 4,998 of 5,000): {} loops achieve {:.0} of 1,000 and \
         {} loops {:.0} of 5,000 req/s, the loop counts the plan gives",
        k1.scenario.client.workers, k1.achieved_qps, k5.scenario.client.workers, k5.achieved_qps
    )?;
    Ok(())
}
