//! `heisenbench audit`: another client against the mock, its report against the truth.

use std::collections::VecDeque;
use std::io::Write;

use crate::flags::audit::AuditFlags;
use heisenbench_figures::{AuditPoint, AuditedClient};
use heisenbench_live::audit::predict;
use heisenbench_live::audit::report::{
    AuditReport, AuditSeries, BatchedAudit, DrawnGaps, ForecastRange, GivenMachine, GivenSpeed,
    HeldOut, Simulated, SpeedBand, SplitFrom, WalkRead,
};
use heisenbench_live::audit::{self, AuditConfig, AuditError};
use heisenbench_model::client_loop::{
    AuditedLoad, ClockStart, GapLateness, GapReading, HELD_SHARE, LatencyShape, LoopPrediction,
    Pacing,
};
use heisenbench_model::units::format_seconds;
use heisenbench_sim::client_loop::{self, GaugedSpeed, LoopReading};

use super::{check_out_file, write_atomic, write_json};
use crate::Failure;

pub fn run(a: AuditFlags, out: &mut dyn Write) -> Result<(), Failure> {
    if !a.from.is_empty() {
        return read_again(&a.from, &a, out);
    }
    let budget = a.budget()?;
    if let Some(p) = &a.out {
        check_out_file(p)?;
    }
    if let Some(d) = &a.figure {
        super::check_out_dir(d)?;
    }
    let work_dir = match &a.work_dir {
        Some(d) => {
            super::check_out_dir(d)?;
            d.clone()
        }
        None => AuditConfig::fresh_work_dir(),
    };
    // A folder of the audit's own making goes when the audit is done with it: at once
    // after an interrupt or an error, and after a clean audit; an audit that found a
    // problem keeps it, since its summary names the client's logs in it.
    let own_folder = a.work_dir.is_none();
    let discard = |dir: &std::path::Path| {
        if own_folder {
            let _ = std::fs::remove_dir_all(dir);
        }
    };
    let stop = heisenbench_live::generator::stop::StopSignal::new();
    heisenbench_live::generator::stop::listen_for_signals(stop.clone(), true)?;
    let series = a.is_series();
    let bursts = heisenbench_live::mock::config::MockConfig::from(a.mock.clone())
        .law()
        .streams_in_bursts();
    let server = format!(
        "embedded mock: TTFT {}, ITL {}",
        format_seconds(a.mock.time_to_first_token.as_secs_f64()),
        format_seconds(a.mock.inter_token_latency.as_secs_f64())
    );
    let mut reports = Vec::new();
    let mut failure = None;
    let mut configs = a.configs(&work_dir, &stop);
    // The cost split's shorter audits go first: at the first rate, and at twice it (the
    // second rate separates the CPU spent per second from the CPU spent per request).
    let split_at: Vec<AuditConfig> = a
        .cost_split
        .map(|tokens| {
            [(1.0, "cost-split"), (2.0, "cost-split-2x")].map(|(times, dir)| AuditConfig {
                output_tokens: tokens,
                rate_per_s: configs[0].rate_per_s * times,
                work_dir: work_dir.join(dir),
                ..configs[0].clone()
            })
        })
        .into_iter()
        .flatten()
        .collect();
    // With --batched, one more at twice the first rate and the longer length, the
    // server releasing its responses together on the period asked for.
    let batched_at = a.batched.map(|period| AuditConfig {
        rate_per_s: configs[0].rate_per_s * 2.0,
        work_dir: work_dir.join("batched"),
        mock: heisenbench_live::mock::config::MockConfig {
            release_every: period,
            // Every response waits for the period: none may wait for a slot as well.
            max_num_seqs: configs[0].mock.max_num_seqs.max(1_000_000),
            ..configs[0].mock.clone()
        },
        ..configs[0].clone()
    });
    let split_at: Vec<AuditConfig> = split_at.into_iter().chain(batched_at).collect();
    let calibrations = split_at.len();
    let mut batched: Option<BatchedAudit> = None;
    let mut shorts: Vec<AuditReport> = Vec::new();
    // The loop is read once the audits it is fitted on are in; those before the last of
    // them are simulated then.
    let mut fit_on = a.fit_on_count();
    let mut reading: Option<Result<(LoopReading, SplitFrom), String>> = None;
    // The audit --fit-at asks for joins the queue, and the fit, once the listed ones are
    // done; the loop is then read again with it.
    let mut fit_at_queued = a.fit_at.is_none();
    // The held-out audits --hold-at asks for join the queue once the listed ones are done.
    let template = configs.last().cloned();
    let mut held_queued = a.hold_at.is_empty();
    let mut queue: VecDeque<AuditConfig> = split_at.into_iter().chain(configs.drain(..)).collect();
    for i in 0.. {
        let Some(cfg) = queue.pop_front() else { break };
        let rate = cfg.rate_per_s;
        let observed = audit::run(&cfg).map_err(|e| {
            discard(&work_dir);
            match e {
                AuditError::Interrupted => Failure::Interrupted(if reports.is_empty() {
                    "the client's process tree was killed; no audit was written (an audit \
                 compares the client's whole run with the truth)"
                        .into()
                } else {
                    format!(
                        "the client's process tree was killed; the {} audit(s) above were \
                     finished, and nothing was written",
                        reports.len()
                    )
                }),
                AuditError::Start { .. } | AuditError::NoCommand | AuditError::StaleOutput(_) => {
                    Failure::Usage(e.to_string())
                }
                AuditError::Mock(heisenbench_live::mock::MockError::Config(c)) => {
                    Failure::Usage(c.to_string())
                }
                other => Failure::Runtime(other.into()),
            }
        })?;
        let prediction =
            predict::predict(&observed, bursts, a.loops, a.loop_cpu, budget, a.tolerance);
        let mut report = AuditReport::new(a.label.clone(), observed, prediction, server.clone());
        if let (true, Some(period)) = (i + 1 == calibrations, a.batched) {
            report.server = format!(
                "{server}, the responses released together every {}",
                format_seconds(period.as_secs_f64())
            );
            if !a.json {
                writeln!(
                    out,
                    "== batched: offered {rate} req/s x {} tokens, the responses released together every {}",
                    cfg.output_tokens,
                    format_seconds(period.as_secs_f64())
                )?;
                report.write_summary(out)?;
            }
            if failure.is_none() {
                failure = report.failure();
            }
            batched = Some(BatchedAudit {
                release_every_s: period.as_secs_f64(),
                audit: report,
            });
            continue;
        }
        if i < calibrations {
            if !a.json {
                writeln!(
                    out,
                    "== cost split: offered {rate} req/s x {} tokens",
                    cfg.output_tokens
                )?;
                report.write_summary(out)?;
            }
            if failure.is_none() {
                failure = report.failure();
            }
            shorts.push(report);
            continue;
        }
        let index = reports.len();
        let mut fitted_before = Vec::new();
        if !shorts.is_empty() && index + 1 >= fit_on {
            let r = reading.get_or_insert_with(|| {
                let on: Vec<&AuditReport> = reports.iter().chain([&report]).collect();
                read_client_loop(
                    &shorts,
                    &on,
                    (a.clock, a.latency_shape),
                    a.preemptions,
                    batched.as_ref(),
                    &[],
                )
            });
            let simulated = r.as_ref().map_err(Clone::clone).and_then(|r| {
                if index + 1 == fit_on {
                    for (j, earlier) in reports.iter_mut().enumerate() {
                        earlier.simulated = Some(simulate_at(r, earlier, j == 0, true)?);
                        fitted_before.push(j);
                    }
                }
                simulate_at(r, &report, index == 0, index < fit_on)
            });
            match simulated {
                Ok(sim) => report.simulated = Some(sim),
                Err(why) if !a.json => writeln!(out, "simulated loop: not made: {why}")?,
                Err(_) => {}
            }
        }
        if !a.json {
            if !shorts.is_empty() {
                writeln!(
                    out,
                    "== offered {rate} req/s x {} tokens",
                    cfg.output_tokens
                )?;
            } else if series {
                writeln!(out, "== offered {rate} req/s")?;
            }
            report.write_summary(out)?;
            for &j in &fitted_before {
                let (o, sim) = (&reports[j].observed.offered, &reports[j].simulated);
                writeln!(
                    out,
                    "== the loop at offered {} req/s x {} tokens, fitted on it with this one",
                    o.rate_per_s, o.output_tokens
                )?;
                if let Some(sim) = sim {
                    sim.write(out, &reports[j].observed)?;
                }
            }
        }
        if failure.is_none() {
            failure = report.failure();
        }
        reports.push(report);
        if queue.is_empty() && !fit_at_queued {
            fit_at_queued = true;
            let more = saturation_of(&reading, "--fit-at").and_then(|saturation| {
                a.fit_rate(saturation)
                    .map(|rate| rate.map(|r| (saturation, r)))
            });
            match (more, &template) {
                (Ok(Some((saturation, rate))), Some(t)) => {
                    if !a.json {
                        writeln!(
                            out,
                            "== fitted again with one more audit at {} of the fitted loop's saturation ({saturation:.0} req/s): {rate} req/s",
                            a.fit_at.unwrap_or_default()
                        )?;
                    }
                    queue.push_back(AuditConfig {
                        rate_per_s: rate,
                        work_dir: work_dir.join(format!("fit-{rate}")),
                        ..t.clone()
                    });
                    // Read the loop again once it is in, on every audit so far and it.
                    fit_on = reports.len() + 1;
                    reading = None;
                }
                (Err(why), _) => {
                    if !a.json {
                        writeln!(out, "fitted-at audit: not made: {why}")?;
                    }
                    failure.get_or_insert(why);
                }
                (Ok(_), _) => {}
            }
        }
        if queue.is_empty() && !held_queued {
            held_queued = true;
            let held = saturation_of(&reading, "--hold-at")
                .and_then(|saturation| a.held_rates(saturation).map(|rates| (saturation, rates)));
            match (held, &template) {
                (Ok((saturation, rates)), Some(t)) => {
                    if !a.json {
                        writeln!(
                            out,
                            "== held out at {} of the fitted loop's saturation ({saturation:.0} req/s): {} req/s",
                            join(&a.hold_at),
                            join(&rates)
                        )?;
                    }
                    queue.extend(rates.into_iter().map(|r| AuditConfig {
                        rate_per_s: r,
                        work_dir: work_dir.join(format!("held-{r}")),
                        ..t.clone()
                    }));
                }
                (Err(why), _) => {
                    if !a.json {
                        writeln!(out, "held-out audits: not made: {why}")?;
                    }
                    failure.get_or_insert(why);
                }
                (Ok(_), None) => {}
            }
        }
    }
    if !a.json {
        AuditReport::write_held_out_tally(&reports, out)?;
    }
    let summaries: Vec<AuditReport> = reports.iter().map(AuditReport::summary).collect();
    let with_calibration = |points: Vec<AuditReport>| AuditSeries {
        calibration: shorts.iter().map(AuditReport::summary).collect(),
        batched: batched.as_ref().map(|b| BatchedAudit {
            audit: b.audit.summary(),
            ..b.clone()
        }),
        ..AuditSeries::new(points)
    };
    if let Some(p) = &a.out {
        // A single audit's file keeps every served request; a series' does not.
        let bytes = if series {
            serde_json::to_vec_pretty(&with_calibration(summaries.clone()))
        } else {
            serde_json::to_vec_pretty(&reports[0])
        }
        .map_err(|e| Failure::Runtime(e.into()))?;
        write_atomic(p, &bytes)?;
    }
    if a.json {
        if series {
            write_json(out, &with_calibration(summaries.clone()))?;
        } else {
            write_json(out, &summaries[0])?;
        }
    }
    if let Some(dir) = &a.figure {
        let files = heisenbench_figures::draw_audit(&[client_line(&summaries)], dir)
            .map_err(|e| Failure::Runtime(e.into()))?;
        if !a.json {
            writeln!(out, "drew {}", files[0].display())?;
        }
    }
    match failure {
        Some(f) => Err(Failure::Runtime(anyhow::anyhow!(f))),
        None => {
            discard(&work_dir);
            Ok(())
        }
    }
}

/// The saturation the loop read so far predicts, for `flag` to place its audits by; the
/// reason it cannot where the loop was not read.
fn saturation_of(
    reading: &Option<Result<(LoopReading, SplitFrom), String>>,
    flag: &str,
) -> Result<f64, String> {
    match reading {
        Some(Ok((r, _))) => Ok(r.fitted.saturation_per_s),
        Some(Err(why)) => Err(format!("{flag}: the loop was not read: {why}")),
        None => Err(format!("{flag}: the loop was not read")),
    }
}

/// The client's loop read from the shorter audits `shorts` and the longer `fit_on` (the
/// share before the send, the latency and the slice fitted on all of them at once), with
/// where its costs came from; `clock` and `shape`: where the tool starts its TTFT and the
/// shape of its latency beyond the CPU, each by the tool read where not given;
/// `preemptions`: the loop also loses its core while it has work, as often as the audits
/// read. A tool that sleeps each gap has its lateness read net of the draws in `drawn`
/// where every calibration audit has them.
fn read_client_loop(
    shorts: &[AuditReport],
    fit_on: &[&AuditReport],
    (clock, shape): (Option<ClockStart>, Option<LatencyShape>),
    preemptions: bool,
    batched: Option<&BatchedAudit>,
    drawn: &[DrawnGaps],
) -> Result<(LoopReading, SplitFrom), String> {
    const SEED: u64 = heisenbench_model::scenario::DEFAULT_SEED;
    let loads = |reports: &mut dyn Iterator<Item = &AuditReport>, what: &str| {
        reports
            .map(|r| {
                if let Some(why) = r.observed.off_schedule() {
                    return Err(why);
                }
                r.audited_load()
                    .map(|l| AuditedLoad {
                        preempt_per_cpu_s: l.preempt_per_cpu_s.filter(|_| preemptions),
                        ..l
                    })
                    .ok_or(format!("{what} has no CPU figures or no completed request"))
            })
            .collect::<Result<Vec<AuditedLoad>, String>>()
    };
    let s = loads(&mut shorts.iter(), "a shorter audit")?;
    let longs = loads(
        &mut fit_on.iter().copied(),
        "an audit the loop is fitted on",
    )?;
    let clock = clock
        .or(fit_on[0].observed.reported.as_ref().map(|r| r.clock()))
        .unwrap_or(ClockStart::OwnSend);
    let shape = shape
        .or(fit_on[0]
            .observed
            .reported
            .as_ref()
            .map(|r| r.latency_shape()))
        .unwrap_or(LatencyShape::Constant);
    let mut r =
        client_loop::read_loop(&s, &longs, clock, shape, SEED).map_err(|e| e.to_string())?;
    // A tool that sleeps each gap from its last wake sends less than it was asked for at
    // any load: how much less, read from every calibration audit.
    let paces_each_gap = fit_on[0]
        .observed
        .reported
        .as_ref()
        .is_some_and(|t| t.pacing() == Pacing::EachGap);
    let lateness = if paces_each_gap {
        let readings: Vec<GapReading> = shorts
            .iter()
            .chain(fit_on.iter().copied())
            .map(|a| GapReading {
                offered_per_s: a.observed.offered.rate_per_s,
                achieved_per_s: a.observed.truth.achieved_rate_per_s,
                gaps: a.observed.truth.gaps(),
                drawn_mean_gap_s: DrawnGaps::of(drawn, a).map(|d| d.mean_gap_s),
            })
            .collect();
        GapLateness::fit(&readings).ok()
    } else {
        None
    };
    // The CPU a request with the work met in batches, where the series read it.
    let bound = batched.and_then(BatchedAudit::bound);
    let carry = |p: LoopPrediction| p.with_pacing(lateness).with_batched(bound);
    r.shorter = r.shorter.into_iter().map(carry).collect();
    r.fitted = carry(r.fitted);
    let from = SplitFrom {
        rate_per_s: shorts[0].observed.offered.rate_per_s,
        short: s[0].sample(),
        long: longs[0].sample(),
        short_measured_excess_s: s[0].excess_s,
        short_predicted_s: r.shorter[0].reported_s,
        mean_noise: SplitFrom::noise_of(fit_on.iter().copied()),
        short_at_other_rate: s.get(1).zip(r.shorter.get(1)).map(|(s, p)| HeldOut {
            sample: s.sample(),
            measured_excess_s: s.excess_s,
            predicted_s: p.reported_s,
        }),
    };
    Ok((r, from))
}

/// The client's loop `reading` simulated at `this` audit's load; `first`: this is the
/// first audit it was fitted on, whose prediction the fit already made.
fn simulate_at(
    reading: &(LoopReading, SplitFrom),
    this: &AuditReport,
    first: bool,
    fitted_here: bool,
) -> Result<Simulated, String> {
    const SEED: u64 = heisenbench_model::scenario::DEFAULT_SEED;
    let (r, from) = reading;
    if let Some(why) = this.observed.off_schedule() {
        return Err(why);
    }
    let measured = this
        .audited_load()
        .ok_or("this audit has no CPU figures or no completed request")?;
    let prediction = if first {
        r.fitted.clone()
    } else {
        client_loop::predict_audit(&r.fitted, &measured, SEED).map_err(|e| e.to_string())?
    };
    // A held-out audit is also simulated at its own speed, and at the calibration's
    // fastest and slowest.
    let (given_its_speed, given_the_machine, given_the_walk, across_speeds) = if fitted_here {
        (None, None, None, None)
    } else {
        let given = client_loop::predict_given_speed(r, &measured, SEED)
            .map_err(|e| e.to_string())?
            .map(|(speed, g)| GivenSpeed {
                speed,
                reported_s: g.reported_s,
            });
        let band = client_loop::predict_across_speeds(r, &measured, SEED)
            .map_err(|e| e.to_string())?
            .zip(r.speeds)
            .map(|([fast, slow], s)| SpeedBand {
                speeds: [s.fastest, s.slowest],
                audits: s.audits,
                reported_s: [fast.reported_s, slow.reported_s],
            });
        let gauge_line = |predicted: Option<(f64, LoopPrediction)>,
                          line: Option<GaugedSpeed>,
                          reading: Option<f64>| {
            predicted
                .zip(line)
                .zip(reading)
                .map(|(((speed, g), line), unit_s)| GivenMachine {
                    unit_s,
                    calibration_unit_s: line.unit_s,
                    calibration_speed: line.speed,
                    audits: line.audits,
                    power: line.power,
                    speed,
                    reported_s: g.reported_s,
                })
        };
        let machine = gauge_line(
            client_loop::predict_given_machine(r, &measured, SEED).map_err(|e| e.to_string())?,
            r.gauged,
            measured.gauge_s,
        );
        let walk = gauge_line(
            client_loop::predict_given_walk(r, &measured, SEED).map_err(|e| e.to_string())?,
            r.walked,
            measured.walk_s,
        );
        (given, machine, walk, band)
    };
    let forecast_range = across_speeds
        .zip(from.mean_noise)
        .map(|(band, h)| ForecastRange::of(&prediction.reported_s, &band, h));
    let held_chance = prediction
        .gap_lateness
        .and_then(|g| Simulated::held_chance_of(&g, &this.observed));
    Ok(Simulated {
        held_chance,
        drawn_sent_per_s: None,
        drawn_held_chance: None,
        split_from: from.clone(),
        prediction,
        measured_excess_s: measured.excess_s,
        fitted_here,
        given_its_speed,
        given_the_machine,
        given_the_walk,
        across_speeds,
        forecast_range,
    })
}

/// `audit --from FILE[,FILE...]`: the client's loop read again from the calibration
/// audits of one series, or of several series of one client read as one calibration, and
/// simulated at each of their audits; nothing is run.
fn read_again(
    files: &[std::path::PathBuf],
    a: &AuditFlags,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    if let Some(p) = &a.out {
        check_out_file(p)?;
    }
    if let Some(d) = &a.figure {
        super::check_out_dir(d)?;
    }
    let mut all: Vec<(AuditSeries, &std::path::Path)> = Vec::new();
    for f in files {
        let series = AuditSeries::read(f).map_err(Failure::Usage)?;
        if series.calibration.is_empty() {
            return Err(Failure::Usage(format!(
                "{}: no calibration audits to read the loop from (made without --cost-split, or by a version that did not keep them)",
                f.display()
            )));
        }
        if let Some((first, _)) = all.first() {
            let (this, that) = (
                AuditReport::client_name(&series.points),
                AuditReport::client_name(&first.points),
            );
            if this != that {
                return Err(Failure::Usage(format!(
                    "--from {}: a series of {this}, not of {that} as {} is",
                    f.display(),
                    files[0].display()
                )));
            }
        }
        all.push((series, f.as_path()));
    }
    let mut others = held_out(&all[0].0.points, &a.held_out)?;
    let drawn = match &a.drawn {
        Some(f) => drawn_gaps(f, &others)?,
        None => Vec::new(),
    };
    let holders_read = all.iter().any(|(series, _)| {
        series
            .calibration
            .iter()
            .chain(&series.points)
            .any(|r| r.observed.client.connected.is_some())
    });
    if a.loops.is_some() || holders_read || !a.loop_cpu.is_main_thread() {
        // Another reading of the client's layout: every audit's closed-form reading made
        // again with that many loops, or with the processes that held its connections
        // where the file has them, and with the loop's CPU as asked, which the simulated
        // loop then takes.
        let budget = a.budget()?;
        for r in all
            .iter_mut()
            .flat_map(|(series, _)| {
                series
                    .calibration
                    .iter_mut()
                    .chain(series.points.iter_mut())
                    .chain(series.batched.iter_mut().map(|b| &mut b.audit))
            })
            .chain(others.iter_mut().map(|(r, _)| r))
        {
            if let Some(bursts) = r.prediction.as_ref().map(|p| p.bursts) {
                r.prediction = predict::predict(
                    &r.observed,
                    bursts,
                    a.loops,
                    a.loop_cpu,
                    budget,
                    a.tolerance,
                );
            }
        }
    }
    // Fitted as each file's series was (its first audits marked fitted), unless told.
    let mut fitted = Vec::new();
    let mut rest = Vec::new();
    let mut calibration = Vec::new();
    let mut batched = None;
    for (k, (series, f)) in all.into_iter().enumerate() {
        let fitted_in_file = series
            .points
            .iter()
            .take_while(|p| p.simulated.as_ref().is_some_and(|s| s.fitted_here))
            .count();
        let fit_on = a.fit_on.map_or(fitted_in_file.max(1), |n| n as usize);
        if fit_on > series.points.len() {
            return Err(Failure::Usage(format!(
                "--fit-on {fit_on}: {} holds {} audit(s) at the longer length",
                f.display(),
                series.points.len()
            )));
        }
        // The first series' audits are printed as its own; a later one's with its file.
        let from = if k == 0 {
            String::new()
        } else {
            format!(", from {}", f.display())
        };
        let mut points = series.points.into_iter().map(|p| (p, from.clone()));
        fitted.extend(points.by_ref().take(fit_on));
        rest.extend(points);
        calibration.extend(series.calibration);
        // One batched audit bounds the loop: the first series' that made one.
        batched = batched.or(series.batched);
    }
    let fit_on = fitted.len();
    let on: Vec<&AuditReport> = fitted.iter().map(|(p, _)| p).collect();
    let reading = read_client_loop(
        &calibration,
        &on,
        (a.clock, a.latency_shape),
        a.preemptions,
        batched.as_ref(),
        &drawn,
    );
    let held_from = fit_on + rest.len();
    let mut points = Vec::new();
    for (i, (mut p, from)) in fitted
        .into_iter()
        .chain(rest)
        .chain(
            others
                .into_iter()
                .map(|(r, f)| (r, format!(", held out from {}", f.display()))),
        )
        .enumerate()
    {
        let o = &p.observed.offered;
        if !a.json {
            writeln!(
                out,
                "== offered {} req/s x {} tokens{from}",
                o.rate_per_s, o.output_tokens
            )?;
            if let Some(w) = p.wire_account() {
                w.write(out)?;
            }
        }
        let simulated = reading
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|r| simulate_at(r, &p, i == 0, i < fit_on))
            .map(|sim| {
                let given = sim.prediction.gap_lateness.zip(DrawnGaps::of(&drawn, &p));
                Simulated {
                    drawn_sent_per_s: given
                        .map(|(g, d)| g.achieved_given_draws_per_s(d.mean_gap_s)),
                    drawn_held_chance: given.map(|(g, d)| {
                        g.held_chance_given_draws(d.rate_per_s, d.mean_gap_s, HELD_SHARE)
                    }),
                    ..sim
                }
            });
        p.simulated = match simulated {
            Ok(sim) => {
                if !a.json {
                    sim.write(out, &p.observed)?;
                }
                Some(sim)
            }
            Err(why) => {
                if !a.json {
                    writeln!(out, "simulated loop: not made: {why}")?;
                }
                None
            }
        };
        points.push(p);
    }
    // A tool that sleeps each gap: its held-out audits read as a walk up their rates.
    let knee_walk = reading.as_ref().ok().and_then(|(r, _)| {
        let held: Vec<&AuditReport> = points[held_from..].iter().collect();
        WalkRead::of(&r.fitted.gap_lateness?, &held, &drawn)
    });
    if !a.json {
        AuditReport::write_held_out_tally(&points, out)?;
        if let Some(w) = &knee_walk {
            w.write(out)?;
        }
    }
    let again = AuditSeries {
        calibration,
        batched,
        knee_walk,
        ..AuditSeries::new(points)
    };
    if let Some(p) = &a.out {
        let bytes = serde_json::to_vec_pretty(&again).map_err(|e| Failure::Runtime(e.into()))?;
        write_atomic(p, &bytes)?;
    }
    if a.json {
        write_json(out, &again)?;
    }
    if let Some(dir) = &a.figure {
        let files = heisenbench_figures::draw_audit(&[client_line(&again.points)], dir)
            .map_err(|e| Failure::Runtime(e.into()))?;
        if !a.json {
            writeln!(out, "drew {}", files[0].display())?;
        }
    }
    Ok(())
}

/// The replayed draws in `file`, one for every held-out audit (matched by rate and
/// requests), or a usage error that names the first audit without.
fn drawn_gaps(
    file: &std::path::Path,
    held: &[(AuditReport, &std::path::Path)],
) -> Result<Vec<DrawnGaps>, Failure> {
    let bytes = std::fs::read(file)
        .map_err(|e| Failure::Usage(format!("--drawn {}: {e}", file.display())))?;
    let drawn: Vec<DrawnGaps> = serde_json::from_slice(&bytes).map_err(|e| {
        Failure::Usage(format!(
            "--drawn {}: not a list of rate_per_s, requests and mean_gap_s: {e}",
            file.display()
        ))
    })?;
    if let Some(bad) = drawn
        .iter()
        .find(|d| !(d.rate_per_s > 0.0 && d.mean_gap_s > 0.0 && d.mean_gap_s.is_finite()))
    {
        return Err(Failure::Usage(format!(
            "--drawn {}: a rate and a mean gap must be positive, not {} req/s and {} s",
            file.display(),
            bad.rate_per_s,
            bad.mean_gap_s
        )));
    }
    if let Some((r, f)) = held
        .iter()
        .find(|(r, _)| DrawnGaps::of(&drawn, r).is_none())
    {
        return Err(Failure::Usage(format!(
            "--drawn {}: no draws for the held-out audit at {} req/s x {} requests ({})",
            file.display(),
            r.observed.offered.rate_per_s,
            r.observed.truth.requests,
            f.display()
        )));
    }
    Ok(drawn)
}

/// The audits in `files`, each with the file it came from, checked to be of the client
/// the series `points` audited.
fn held_out<'f>(
    points: &[AuditReport],
    files: &'f [std::path::PathBuf],
) -> Result<Vec<(AuditReport, &'f std::path::Path)>, Failure> {
    let client = AuditReport::client_name(points);
    let mut audits = Vec::new();
    for f in files {
        let reports = AuditReport::read(f).map_err(Failure::Usage)?;
        let name = AuditReport::client_name(&reports);
        if name != client {
            return Err(Failure::Usage(format!(
                "--held-out {}: an audit of {name}, not of {client} as the series is",
                f.display()
            )));
        }
        audits.extend(reports.into_iter().map(|r| (r, f.as_path())));
    }
    Ok(audits)
}

/// One client's line on the audit figure: its reports ordered by offered rate.
fn client_line(reports: &[AuditReport]) -> AuditedClient {
    let label = AuditReport::client_name(reports);
    let mut points: Vec<AuditPoint> = reports
        .iter()
        .map(|r| {
            let o = &r.observed;
            let ttft = o.reported.as_ref().and_then(|x| x.ttft);
            AuditPoint {
                offered: o.offered.rate_per_s,
                achieved: o.truth.achieved_rate_per_s,
                reported_p50_s: ttft.and_then(|t| t.p50_s),
                reported_p99_s: ttft.and_then(|t| t.p99_s),
                true_p50_s: o.truth.ttft.p50_s,
                true_p99_s: o.truth.ttft.p99_s,
                predicted_p50_s: r
                    .simulated
                    .as_ref()
                    .map(|s| o.truth.ttft.p50_s + s.prediction.reported_s[1]),
                predicted_p99_s: r
                    .simulated
                    .as_ref()
                    .map(|s| o.truth.ttft.p99_s + s.prediction.reported_s[3]),
            }
        })
        .collect();
    points.sort_by(|a, b| a.offered.total_cmp(&b.offered));
    AuditedClient { label, points }
}

/// `heisenbench figures --audit FILE...`: one line per client (files of a client's single
/// audits and series are joined by the client's name).
pub fn figure_from_files(
    files: &[std::path::PathBuf],
    dir: &std::path::Path,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let mut clients: Vec<AuditedClient> = Vec::new();
    for f in files {
        let reports = AuditReport::read(f).map_err(Failure::Usage)?;
        // Files of the same client (one per rate) make one line.
        let line = client_line(&reports);
        match clients.iter_mut().find(|c| c.label == line.label) {
            Some(c) => {
                c.points.extend(line.points);
                c.points.sort_by(|a, b| a.offered.total_cmp(&b.offered));
            }
            None => clients.push(line),
        }
    }
    let drawn =
        heisenbench_figures::draw_audit(&clients, dir).map_err(|e| Failure::Runtime(e.into()))?;
    writeln!(out, "drew {}", drawn[0].display())?;
    Ok(())
}

/// Numbers as a comma-separated list, each in its shortest form.
fn join(xs: &[f64]) -> String {
    xs.iter().map(f64::to_string).collect::<Vec<_>>().join(", ")
}
