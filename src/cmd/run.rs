//! `heisenbench run`: the live sharded load generator.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use crate::flags::run::RunArgs;
use heisenbench_live::generator::config::{Checked, RunConfig};
use heisenbench_live::generator::prepare::{Pending, prepare};
use heisenbench_live::generator::result::RunReport;
use heisenbench_live::generator::stop::{StopSignal, listen_for_signals};
use heisenbench_live::generator::{RunOptions, run as run_live};
use heisenbench_live::measure::calibration::{default_path, load};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_model::scenario::Stop;

use super::{write_atomic, write_json};
use crate::Failure;

pub fn run(a: RunArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let (mut cfg, pending) = config(&a)?;
    if let Some(spec) = a.shard {
        let shard = spec.index;
        let only_the_model = Pending {
            shards: false,
            ..pending
        };
        prepared(&mut cfg, &only_the_model, None, &mut |_| {})?;
        if a.flags.url.is_none() && a.config.is_none() {
            return Err(Failure::Usage(
                "--shard needs the server's --url (or a --config that has it)".into(),
            ));
        }
        let start = a.start_at;
        if let Some(at) = start {
            heisenbench_live::generator::distributed::check_start(
                at,
                heisenbench_live::generator::distributed::utc_now_s(),
            )?;
        }
        let stop = StopSignal::new();
        listen_for_signals(stop.clone(), true)?;
        let report =
            heisenbench_live::generator::distributed::run_one_shard(&cfg, shard, start, &stop)
                .map_err(|e| Failure::Runtime(e.into()))?;
        let json = serde_json::to_vec(&report).map_err(|e| Failure::Runtime(e.into()))?;
        match &a.out {
            Some(dir) => {
                super::check_out_dir(dir)?;
                write_atomic(&dir.join(format!("shard-{shard}.json")), &json)?;
            }
            None => {
                use heisenbench_live::generator::distributed::{RESULT_BEGIN, RESULT_END};
                writeln!(out, "{RESULT_BEGIN}")?;
                out.write_all(&json)?;
                writeln!(out, "\n{RESULT_END}")?;
            }
        }
        return Ok(());
    }
    let mut tell = |line: &str| {
        if !a.json {
            let _ = writeln!(out, "shards: {line}").and_then(|()| out.flush());
        }
    };
    let reasoning = prepared(&mut cfg, &pending, a.calibration.as_deref(), &mut tell)?;
    if let Some(dir) = &a.out {
        super::check_out_dir(dir)?;
    }
    // The embedded mock, when no URL was given.
    let mock = if a.flags.url.is_none() {
        let m =
            MockServer::start(MockConfig::embedded()).map_err(|e| Failure::Runtime(e.into()))?;
        cfg.set_url(m.url())
            .map_err(|e| Failure::Runtime(e.into()))?;
        Some(m)
    } else {
        None
    };
    if !a.json {
        for line in &reasoning {
            writeln!(out, "shards: {line}")?;
        }
        if mock.is_some() {
            writeln!(
                out,
                "server: the embedded mock at {} (zero latency)",
                cfg.url
            )?;
        }
        out.flush()?;
    }
    let stop = StopSignal::new();
    listen_for_signals(stop.clone(), true)?;
    let mut report = with_progress(&cfg, || {
        run_live(
            &cfg,
            &RunOptions {
                shards_reasoning: reasoning.clone(),
                stop: stop.clone(),
                server_in_process: mock.is_some(),
                in_process_metrics: mock.as_ref().map(|m| {
                    heisenbench_live::scrape::InProcess(std::sync::Arc::new(m.exposition()))
                }),
                ..RunOptions::default()
            },
        )
    })
    .map_err(|e| match e {
        heisenbench_live::generator::RunError::Config(c) => Failure::Usage(c.to_string()),
        other => Failure::Runtime(other.into()),
    })?;
    drop(mock);
    report.floor = if a.floor && !report.interrupted {
        // The chunk rate the run achieved, so the floor is loaded as the run was.
        let rate = report.chunk_rate();
        if !a.json {
            writeln!(out, "measuring this machine's loopback floor (4 s)...")?;
            out.flush()?;
        }
        Some(
            heisenbench_live::measure::floor::measure(rate)
                .map_err(|e| Failure::Runtime(e.into()))?,
        )
    } else {
        a.calibration
            .clone()
            .or_else(default_path)
            .and_then(|p| load(&p).ok().flatten())
            .and_then(|c| c.floor)
            // A floor measured by an older method is not this run's quantity.
            .filter(|f| f.current())
    };
    // Printed first: if the files cannot be written (a full disk, a directory removed
    // meanwhile), what was measured has still reached the terminal.
    if a.json {
        let mut v = serde_json::to_value(&report).map_err(|e| Failure::Runtime(e.into()))?;
        // The merged histograms are for `merge`; the printed report stays readable.
        v.as_object_mut().map(|o| o.remove("merged"));
        write_json(out, &v)?;
    } else {
        report.write_summary(out)?;
    }
    if let Some(dir) = &a.out {
        let page = super::report_page::html(&report)?;
        let written = report.write_files(dir, a.csv).and_then(|()| {
            heisenbench_live::files::write_atomic(&dir.join("report.html"), page.as_bytes())
        });
        if let Err(e) = written {
            return Err(Failure::Runtime(anyhow::anyhow!(
                "{e}; the report was printed above but not saved"
            )));
        }
    }
    verdict(&report)
}

/// The exit status a finished run earns: interrupted, or requests unaccounted for.
pub(crate) fn verdict(report: &RunReport) -> Result<(), Failure> {
    if report.interrupted {
        return Err(Failure::Interrupted(
            "the report holds what was measured until then".into(),
        ));
    }
    match report.accounting_problem() {
        Some(problem) => Err(Failure::Accounting(problem)),
        None => Ok(()),
    }
}

fn with_progress<T>(cfg: &RunConfig, f: impl FnOnce() -> T) -> T {
    let expected = match cfg.workload.stop {
        Stop::Duration { seconds } => seconds,
        Stop::Count { requests } => {
            requests as f64 / cfg.workload.arrivals.rate_per_s().unwrap_or(f64::INFINITY)
        }
    };
    if !std::io::stderr().is_terminal() || expected.is_nan() || expected <= 2.0 {
        return f();
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let start = Instant::now();
    let ticker = std::thread::spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let t = start.elapsed().as_secs_f64();
            let width = 30;
            let filled = ((t / expected).min(1.0) * width as f64) as usize;
            eprint!(
                "\r[run] [{}{}] {:.0}/{:.0} s",
                "#".repeat(filled),
                " ".repeat(width - filled),
                t.min(expected),
                expected
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        eprintln!();
    });
    let r = f();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = ticker.join();
    r
}

/// The run the flags (and the scenario or config file) describe, and what it leaves open
/// ([`RunArgs::config`]).
pub(crate) fn config(a: &RunArgs) -> Result<(Checked, Pending), Failure> {
    a.config().map_err(|e| Failure::Usage(e.to_string()))
}

/// `cfg` with what `pending` leaves open settled ([`prepare`]); the reasons for the shard
/// count.
pub(crate) fn prepared(
    cfg: &mut Checked,
    pending: &Pending,
    calibration: Option<&std::path::Path>,
    tell: &mut dyn FnMut(&str),
) -> Result<Vec<String>, Failure> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    prepare(cfg, pending, calibration, cores, tell).map_err(|e| match e.is_usage() {
        true => Failure::Usage(e.to_string()),
        false => Failure::Runtime(e.into()),
    })
}

/// The one model the server at `cfg.url` serves ([`heisenbench_live::net::client::served_model`]).
pub(crate) fn served_model(cfg: &RunConfig) -> Result<String, Failure> {
    use heisenbench_live::net::client::{ModelChoiceError, served_model};
    served_model(cfg.server()).map_err(|e| match e {
        ModelChoiceError::Unreachable(_) => Failure::Runtime(e.into()),
        _ => Failure::Usage(e.to_string()),
    })
}
