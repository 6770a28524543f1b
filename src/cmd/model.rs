//! `heisenbench model <queue>`.

use std::io::Write;

use heisenbench_model::batch::BatchMg1;
use heisenbench_model::gig1::Gig1;
use heisenbench_model::mg1::Mg1;
use heisenbench_model::mmc::Mgc;
use heisenbench_model::queue::{TailMethod, WaitModel};
use heisenbench_model::service::{Service, ServiceKind};
use heisenbench_sim::plancheck::PoolCheck;

use super::write_json;
use crate::Failure;
use crate::args::{BasicQueue, GeneralQueue, QueueCmd};
use heisenbench_model::table::{queue_rows, write_pairs};

fn service(q: &GeneralQueue) -> Result<Service, Failure> {
    Ok(Service::named(
        q.service_dist,
        q.basic.service_mean.get(),
        q.service_scv,
    )?)
}

pub fn run(cmd: QueueCmd, out: &mut dyn Write) -> Result<(), Failure> {
    let (queue, json): (Box<dyn WaitModel>, bool) = match &cmd {
        QueueCmd::Mm1(b) => (
            Box::new(Mg1::new(
                b.rate.get(),
                Service::exponential(b.service_mean.get())?,
            )?),
            b.json,
        ),
        QueueCmd::Md1(b) => (
            Box::new(Mg1::new(
                b.rate.get(),
                Service::deterministic(b.service_mean.get())?,
            )?),
            b.json,
        ),
        QueueCmd::Mg1(g) => (
            Box::new(Mg1::new(g.basic.rate.get(), service(g)?)?),
            g.basic.json,
        ),
        QueueCmd::Mxg1 { queue, batch } => {
            let burst_rate = queue.basic.rate.get() / f64::from(*batch);
            (
                Box::new(BatchMg1::new(burst_rate, *batch, service(queue)?)?),
                queue.basic.json,
            )
        }
        QueueCmd::Ekg1 { queue, k, batch } => {
            let burst_rate = queue.basic.rate.get() / f64::from(*batch);
            (
                Box::new(Gig1::erlang(*k, burst_rate, *batch, service(queue)?)?),
                queue.basic.json,
            )
        }
        QueueCmd::Gg1 {
            queue,
            arrival_scv,
            batch,
        } => {
            let burst_rate = queue.basic.rate.get() / f64::from(*batch);
            (
                Box::new(Gig1::new(
                    burst_rate,
                    *arrival_scv,
                    *batch,
                    service(queue)?,
                )?),
                queue.basic.json,
            )
        }
        QueueCmd::Mmc {
            queue:
                BasicQueue {
                    rate,
                    service_mean,
                    json,
                },
            servers,
        } => (
            Box::new(Mgc::new(
                rate.get(),
                *servers,
                Service::named(ServiceKind::Exponential, service_mean.get(), 1.0)?,
            )?),
            *json,
        ),
        QueueCmd::Mgc { queue, servers, .. } => (
            Box::new(Mgc::new(queue.basic.rate.get(), *servers, service(queue)?)?),
            queue.basic.json,
        ),
    };
    let report = queue.report();
    // A pool the model only approximates is answered by simulation as well.
    let check = match &cmd {
        QueueCmd::Mgc {
            customers,
            seed,
            no_check: false,
            ..
        } if report.tail_method == TailMethod::ExponentialFit => PoolCheck::run(
            report.arrival_rate_per_s,
            report.servers,
            queue.service(),
            *customers,
            *seed,
        ),
        _ => None,
    };
    if json {
        let mut v = serde_json::to_value(&report).map_err(|e| Failure::Runtime(e.into()))?;
        if let (Some(c), Some(o)) = (&check, v.as_object_mut()) {
            let c = serde_json::to_value(c).map_err(|e| Failure::Runtime(e.into()))?;
            o.insert("simulation".into(), c);
        }
        return write_json(out, &v);
    }
    writeln!(out, "{}", report.model)?;
    write_pairs(out, &queue_rows(&report))?;
    if let Some(c) = &check {
        c.write_summary(&report, out)?;
    }
    Ok(())
}
