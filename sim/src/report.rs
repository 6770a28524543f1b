//! What a simulation reports, and the model's prediction next to it.

use std::io::{self, Write};

use heisenbench_model::compare::{Comparison, LoopArrivals, Observation, compare};
use heisenbench_model::metrics::{NtpotParts, Scalars};
use heisenbench_model::scenario::{Arrivals, Policy, Stop};
use heisenbench_model::table::write_pairs;
use heisenbench_model::units::{Quantile, format_seconds};
use serde::{Deserialize, Serialize};

use crate::scenario::{SimScenario, request_cost};
use crate::time::ns_from_secs;
use heisenbench_model::slo::{Attained, Goodput, SloCounts};
use heisenbench_model::stats::{Dist, Recorder};

/// Report format version; bumped when fields change meaning.
pub const REPORT_VERSION: u32 = 1;

/// Counters of a run. Conservation: scheduled = completed + rejected + timed_out +
/// in_system_at_end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Requests the schedule issued.
    pub scheduled: u64,
    /// Requests whose whole response the client processed.
    pub completed: u64,
    /// Requests answered 429.
    pub rejected: u64,
    /// Requests abandoned at their timeout.
    pub timed_out: u64,
    /// Requests still in the system when the run stopped (0 after a full run).
    pub in_system_at_end: u64,
    /// Jobs the client loops processed (sends, chunks, finishes).
    pub client_events: u64,
    /// Events popped from the heap.
    pub heap_events: u64,
    /// Prompt tokens the server's prefix cache was asked for (0 without a cache).
    #[serde(default)]
    pub prefix_cache_queried_tokens: u64,
    /// Prompt tokens it served.
    #[serde(default)]
    pub prefix_cache_cached_tokens: u64,
}

/// Streaming recorders of one run (nanoseconds).
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    pub send_lag: Recorder,
    pub ttft_send_start: Recorder,
    pub client_wait: Recorder,
    pub due_wait: Recorder,
    pub first_chunk_delay: Recorder,
    pub server_queue: Recorder,
    pub itl_true: Recorder,
    pub itl_measured: Recorder,
    pub ttft_true: Recorder,
    pub ttft_intended: Recorder,
    pub ttft_actual: Recorder,
    pub tpot_true: Recorder,
    pub tpot_measured: Recorder,
    pub e2e_true: Recorder,
    pub e2e_intended: Recorder,
    pub e2e_actual: Recorder,
    pub ntpot_true: Recorder,
    pub ntpot_intended: Recorder,
    pub ntpot_actual: Recorder,
    pub parts_sum: NtpotParts,
    /// Completed requests judged against the scenario's SLO from both sends.
    pub slo: SloCounts,
    /// The same requests judged on the server's own latencies.
    pub slo_server: Attained,
    /// TTFT by conversation turn (index: turn - 1), from the intended send and the
    /// server's own.
    pub ttft_by_turn: Vec<[Recorder; 2]>,
}

fn rec(r: &mut Recorder, s: f64) {
    r.record(ns_from_secs(s));
}

impl Tally {
    pub(crate) fn record(&mut self, intended: &Scalars, actual: &Scalars, server: &Scalars) {
        rec(&mut self.ttft_true, server.ttft_s);
        rec(&mut self.ttft_intended, intended.ttft_s);
        rec(&mut self.ttft_actual, actual.ttft_s);
        rec(&mut self.e2e_true, server.e2e_s);
        rec(&mut self.e2e_intended, intended.e2e_s);
        rec(&mut self.e2e_actual, actual.e2e_s);
        rec(&mut self.ntpot_true, server.ntpot_s);
        rec(&mut self.ntpot_intended, intended.ntpot_s);
        rec(&mut self.ntpot_actual, actual.ntpot_s);
        if let (Some(t), Some(m)) = (server.tpot_s, actual.tpot_s) {
            rec(&mut self.tpot_true, t);
            rec(&mut self.tpot_measured, m);
        }
        self.parts_sum.add(&intended.ntpot_parts);
    }

    pub(crate) fn record_turn(&mut self, turn: u32, intended: &Scalars, server: &Scalars) {
        let i = turn as usize - 1;
        if self.ttft_by_turn.len() <= i {
            self.ttft_by_turn.resize_with(i + 1, Default::default);
        }
        rec(&mut self.ttft_by_turn[i][0], intended.ttft_s);
        rec(&mut self.ttft_by_turn[i][1], server.ttft_s);
    }
}

/// TTFT at one turn of the users' conversations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TurnTtft {
    /// The turn, from 1.
    pub turn: u32,
    /// From the intended send.
    pub from_intended: Dist,
    /// As the server produced it.
    pub server: Dist,
}

/// A metric as the server produced it and as the client measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Views {
    /// Server-side truth.
    pub server: Dist,
    /// Measured by the client from the intended send time.
    pub from_intended: Dist,
    /// Measured by the client from the actual send time.
    pub from_actual: Dist,
}

/// One loop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Jobs processed.
    pub jobs: u64,
    /// Busy time over the run's length.
    pub utilization: f64,
    /// Mean wait of a job for this loop, seconds.
    pub mean_wait_s: f64,
    /// Most requests in flight at once.
    pub max_in_flight: u32,
}

/// The model's view of the client queue, next to what the run saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Events per second on one loop, from the configuration.
    pub loop_event_rate_per_s: f64,
    /// Events per request on a loop (send if it shares the loop, chunks, finish).
    pub events_per_request: f64,
    /// Events arriving together (the whole response when tokens leave at once).
    pub burst: u32,
    /// The comparison of the observed client-queue wait with the model.
    pub comparison: Comparison,
}

/// Everything a run reports. Deterministic: the same scenario and seed give the same
/// bytes (no wall-clock figures in here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimReport {
    /// Format version.
    pub version: u32,
    /// The validated scenario, seed included, that produced this report.
    pub scenario: SimScenario,
    /// Counters.
    pub counts: Counts,
    /// Simulated seconds, to the last event.
    pub simulated_s: f64,
    /// Requests per second the schedule asked for.
    pub offered_qps: f64,
    /// Completed requests per simulated second.
    pub achieved_qps: f64,
    /// Actual minus intended send time.
    pub send_lag: Dist,
    /// TTFT from the start of the request's send job: where a client that starts its
    /// clock at the top of its request's task starts it (its loop's backlog before that
    /// left out, its own send job in).
    #[serde(default)]
    pub ttft_from_send_start: Dist,
    /// Time to first token.
    pub ttft: Views,
    /// Time per output token after the first (server vs client, origin-free).
    pub tpot: Views,
    /// End to end.
    pub e2e: Views,
    /// Normalised time per output token.
    pub ntpot: Views,
    /// Mean NTPOT parts (queue, prefill, decode) from the intended send.
    pub ntpot_parts_mean: NtpotParts,
    /// Inter-token latency as emitted by the server.
    pub itl_server: Dist,
    /// Inter-token latency as stamped by the client.
    pub itl_measured: Dist,
    /// Wait of every job for its loop (the client queue).
    pub client_wait: Dist,
    /// Wait of every job from when it was due: its arrival, or for an instant server its
    /// request's intended time, when the whole response would have been there. This is
    /// the wait M^X/G/1 describes when a response's events come as one burst: a loop that
    /// also sends holds the response back until the send is done, and this counts that.
    pub client_wait_from_due: Dist,
    /// A response's first chunk: stamp minus network arrival (the client's share of TTFT).
    pub first_chunk_delay: Dist,
    /// Wait for a server slot.
    pub server_queue: Dist,
    /// TTFT CDF as the server saw it: (seconds, probability).
    pub ttft_cdf_server: Vec<(f64, f64)>,
    /// TTFT CDF measured from the intended send.
    pub ttft_cdf_from_intended: Vec<(f64, f64)>,
    /// Per loop.
    pub workers: Vec<WorkerReport>,
    /// The model's prediction of the client queue (absent for closed loops and free clients).
    pub prediction: Option<Prediction>,
    /// Goodput against the scenario's SLO, from the server's latencies, the intended send
    /// and the actual send (absent without an SLO). Rejected and timed-out requests are
    /// judged and never good; requests still in flight at the end are not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// TTFT by turn, when closed-loop users hold conversations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_by_turn: Vec<TurnTtft>,
}

impl SimReport {
    /// This run as a stage of a latency profile offered `offered_qps` (its p99 is TTFT's
    /// from the intended send).
    pub fn profile_stage(&self, offered_qps: f64) -> heisenbench_model::profile::Stage {
        let scheduled_qps = match self.scenario.workload.stop {
            Stop::Duration { seconds }
                if self.scenario.workload.arrivals.rate_per_s().is_some() =>
            {
                Some(self.counts.scheduled as f64 / seconds)
            }
            _ => None,
        };
        heisenbench_model::profile::Stage {
            scheduled_qps,
            ..heisenbench_model::profile::Stage::at_rate(
                offered_qps,
                self.achieved_qps,
                self.ttft.from_intended.p99_s,
            )
        }
    }

    pub(crate) fn build(
        sc: &SimScenario,
        counts: Counts,
        t: &Tally,
        workers: Vec<WorkerReport>,
        makespan_ns: u64,
        last_intended_ns: u64,
    ) -> Self {
        let simulated_s = makespan_ns as f64 * 1e-9;
        let window_s = match sc.workload.stop {
            Stop::Duration { seconds } => seconds,
            Stop::Count { .. } => last_intended_ns as f64 * 1e-9,
        };
        let offered_qps = sc.workload.arrivals.rate_per_s().unwrap_or_else(|| {
            if window_s > 0.0 {
                counts.scheduled as f64 / window_s
            } else {
                0.0
            }
        });
        let achieved_qps = if simulated_s > 0.0 {
            counts.completed as f64 / simulated_s
        } else {
            0.0
        };
        let n = counts.completed.max(1) as f64;
        let tpot_view = Views {
            server: t.tpot_true.summary(),
            from_intended: t.tpot_measured.summary(),
            from_actual: t.tpot_measured.summary(),
        };
        Self {
            version: REPORT_VERSION,
            scenario: sc.clone(),
            counts,
            simulated_s,
            offered_qps,
            achieved_qps,
            send_lag: t.send_lag.summary(),
            ttft_from_send_start: t.ttft_send_start.summary(),
            ttft: Views {
                server: t.ttft_true.summary(),
                from_intended: t.ttft_intended.summary(),
                from_actual: t.ttft_actual.summary(),
            },
            tpot: tpot_view,
            e2e: Views {
                server: t.e2e_true.summary(),
                from_intended: t.e2e_intended.summary(),
                from_actual: t.e2e_actual.summary(),
            },
            ntpot: Views {
                server: t.ntpot_true.summary(),
                from_intended: t.ntpot_intended.summary(),
                from_actual: t.ntpot_actual.summary(),
            },
            ntpot_parts_mean: NtpotParts::mean(t.parts_sum, n),
            itl_server: t.itl_true.summary(),
            itl_measured: t.itl_measured.summary(),
            client_wait: t.client_wait.summary(),
            client_wait_from_due: t.due_wait.summary(),
            first_chunk_delay: t.first_chunk_delay.summary(),
            server_queue: t.server_queue.summary(),
            ttft_cdf_server: t.ttft_true.cdf(50),
            ttft_cdf_from_intended: t.ttft_intended.cdf(50),
            prediction: predict(sc, &t.due_wait),
            ttft_by_turn: t
                .ttft_by_turn
                .iter()
                .enumerate()
                .map(|(i, [intended, server])| TurnTtft {
                    turn: i as u32 + 1,
                    from_intended: intended.summary(),
                    server: server.summary(),
                })
                .collect(),
            workers,
            goodput: sc.slo.map(|slo| {
                let mut judged = t.slo.clone();
                judged.judged = judged
                    .judged
                    .saturating_add(counts.rejected)
                    .saturating_add(counts.timed_out);
                let per_s = |n: u64| {
                    if simulated_s > 0.0 {
                        n as f64 / simulated_s
                    } else {
                        0.0
                    }
                };
                Goodput::from_counts(&slo, &judged, Some(&t.slo_server), per_s)
            }),
        }
    }

    /// Conservation of requests: every scheduled request is accounted for.
    pub fn is_balanced(&self) -> bool {
        let c = &self.counts;
        c.scheduled == c.completed + c.rejected + c.timed_out + c.in_system_at_end
    }
}

/// The model for one loop of this scenario: per-loop event rate from the configured
/// request rate, the events' cost as the two-moment mixture of send, chunk and finish,
/// bursts when the server emits a response at once, Erlang-k arrivals under round robin.
fn predict(sc: &SimScenario, observed: &Recorder) -> Option<Prediction> {
    let rate = sc.workload.arrivals.rate_per_s()?;
    let k = sc.client.workers;
    let tokens = sc.workload.mean_tokens().1.round().max(1.0) as u32;
    let mut costs = sc.client.costs.clone();
    if !sc.client.send_shares_loop {
        costs.send = None;
    }
    let events = f64::from(tokens)
        + f64::from(u8::from(costs.finish.is_some()))
        + f64::from(u8::from(costs.send.is_some()));
    if events == 0.0 || costs.chunk.is_none() && costs.send.is_none() && costs.finish.is_none() {
        return None;
    }
    // Mixture of the per-event costs: the request's total over its event count.
    let total = request_cost(&costs, tokens).ok()?;
    let m = total.moments();
    let per_event_mean = m.mean_s / events;
    // Per-event SCV of the mixture: E[S^2] = sum n_i E[S_i^2] / events.
    let mut m2 = 0.0;
    for (c, n) in [
        (costs.send.as_ref(), 1.0),
        (costs.chunk.as_ref(), f64::from(tokens)),
        (costs.finish.as_ref(), 1.0),
    ] {
        if let Some(s) = c {
            m2 += n * s.moments().m2;
        }
    }
    m2 /= events;
    let scv = (m2 / (per_event_mean * per_event_mean) - 1.0).max(0.0);
    let service = heisenbench_model::service::Service::gamma(per_event_mean, scv).ok()?;
    let burst = if sc.server.streams_in_bursts() {
        events.round() as u32
    } else {
        1
    };
    let per_loop_rate = match sc.client.policy {
        Policy::Random | Policy::RoundRobin | Policy::LeastLoaded => rate / f64::from(k) * events,
    };
    let arrivals = match (sc.client.policy, &sc.workload.arrivals) {
        (Policy::RoundRobin, Arrivals::Poisson { .. }) if k > 1 && burst > 1 => {
            LoopArrivals::RoundRobin { k }
        }
        _ => LoopArrivals::Poisson,
    };
    let obs = Observation {
        event_rate_per_s: per_loop_rate,
        service,
        burst,
        arrivals,
        wait_mean_s: Some(observed.mean_s()),
        wait_quantiles_s: [Quantile::P50, Quantile::P99]
            .iter()
            .map(|q| (*q, observed.quantile_s(q.get())))
            .collect(),
    };
    let comparison = compare(&obs, 0.1).ok()?;
    Some(Prediction {
        loop_event_rate_per_s: per_loop_rate,
        events_per_request: events,
        burst,
        comparison,
    })
}

// ----- text ----------------------------------------------------------------------------

impl SimReport {
    /// A preset's verdict in one line: what one loop achieved and its median TTFT against
    /// the server's, then what the sharded client achieved and its p99 send lag.
    pub fn preset_verdict(single: &SimReport, sharded: &SimReport) -> String {
        format!(
            "verdict: one loop achieved {:.0}% of the offered rate with median TTFT {} (server: {}); \
             {} loops achieved {:.1}% with a p99 send lag of {}",
            100.0 * single.achieved_qps / single.offered_qps,
            format_seconds(single.ttft.from_intended.p50_s),
            format_seconds(single.ttft.server.p50_s),
            sharded.scenario.client.workers,
            100.0 * sharded.achieved_qps / sharded.offered_qps,
            format_seconds(sharded.send_lag.p99_s),
        )
    }

    /// The report as text for a terminal.
    pub fn write_summary(&self, out: &mut dyn Write) -> io::Result<()> {
        let r = self;
        let c = &r.counts;
        writeln!(
            out,
            "{} (seed {}): {} loop(s), offered {:.1} req/s, achieved {:.1} req/s",
            r.scenario.name,
            r.scenario.seed,
            r.scenario.client.workers,
            r.offered_qps,
            r.achieved_qps
        )?;
        let mut rows = vec![
            (
                "requests".to_string(),
                format!(
                    "scheduled {}, completed {}, rejected {}, timed out {}, left {}",
                    c.scheduled, c.completed, c.rejected, c.timed_out, c.in_system_at_end
                ),
            ),
            (
                "simulated".into(),
                format!(
                    "{} client events, {} heap events, {:.3} s",
                    c.client_events, c.heap_events, r.simulated_s
                ),
            ),
        ];
        if let Some(d) = &r.scenario.workload.dataset
            && let Some((input, output)) = d.mean_lengths()
        {
            rows.push((
                "dataset".into(),
                format!(
                    "{}: {} entries drawn; prompt tokens mean {input:.1}, output tokens {}",
                    d.path.display(),
                    d.entries.len(),
                    output.map_or("drawn".to_string(), |o| format!(
                        "the dataset's, mean {o:.1}"
                    ))
                ),
            ));
        }
        for t in &r.ttft_by_turn {
            rows.push((
                format!("TTFT turn {}", t.turn),
                format!(
                    "server p50 {}, from intended p50 {} p99 {} ({} requests)",
                    format_seconds(t.server.p50_s),
                    format_seconds(t.from_intended.p50_s),
                    format_seconds(t.from_intended.p99_s),
                    t.from_intended.count
                ),
            ));
        }
        if c.prefix_cache_queried_tokens > 0 {
            rows.push((
                "prefix cache".into(),
                format!(
                    "{} of {} prompt tokens served from it ({:.1} %)",
                    c.prefix_cache_cached_tokens,
                    c.prefix_cache_queried_tokens,
                    100.0 * c.prefix_cache_cached_tokens as f64
                        / c.prefix_cache_queried_tokens as f64
                ),
            ));
        }
        rows.push((
            "".into(),
            format!(
                "{:>10}  {:>12}  {:>12}",
                "server", "from intended", "from actual"
            ),
        ));
        rows.extend(views_row("TTFT", &r.ttft));
        rows.extend(views_row("E2E", &r.e2e));
        rows.extend(views_row("NTPOT", &r.ntpot));
        rows.push((
            "TPOT p50".into(),
            format!(
                "{:>10}  {:>12}",
                format_seconds(r.tpot.server.p50_s),
                format_seconds(r.tpot.from_actual.p50_s)
            ),
        ));
        rows.push((
            "ITL p99".into(),
            format!(
                "{:>10}  {:>12}",
                format_seconds(r.itl_server.p99_s),
                format_seconds(r.itl_measured.p99_s)
            ),
        ));
        rows.push(pair(
            "send lag p50 / p99",
            r.send_lag.p50_s,
            r.send_lag.p99_s,
        ));
        rows.push(pair(
            "client wait mean / p99",
            r.client_wait.mean_s,
            r.client_wait.p99_s,
        ));
        rows.push(pair(
            "client wait from due mean / p99",
            r.client_wait_from_due.mean_s,
            r.client_wait_from_due.p99_s,
        ));
        rows.push((
            "client share of TTFT p99".into(),
            format_seconds(r.first_chunk_delay.p99_s),
        ));
        let max_util = r.workers.iter().map(|w| w.utilization).fold(0.0, f64::max);
        rows.push(("busiest loop utilisation".into(), format!("{max_util:.3}")));
        if let Some(p) = &r.prediction {
            let cmp = &p.comparison;
            let predicted = cmp.predicted.as_ref().map_or("unbounded".to_string(), |q| {
                format!(
                    "mean {} / p99 {}",
                    format_seconds(q.wq_mean_s),
                    format_seconds(q.wq_p99_s)
                )
            });
            rows.push((
                "model".into(),
                format!("{} (rho {:.3}): {predicted}", cmp.model, cmp.rho),
            ));
            rows.push(("model says".into(), cmp.verdict_text.clone()));
        }
        if let Some(g) = &r.goodput {
            let view = |v: &heisenbench_model::slo::GoodputView| {
                format!(
                    "{:.1} req/s ({:.1} %)",
                    v.requests_per_s,
                    100.0 * v.good_fraction
                )
            };
            let server = g.server.as_ref().map_or(0.0, |s| s.good_fraction);
            rows.push((
                format!("goodput ({})", g.slo),
                format!(
                    "server {}, from intended {}, from actual {} of {} judged; the client failed {:.1} % that the server met ({:.1} % by its send delay alone)",
                    g.server.as_ref().map_or("-".into(), view),
                    view(&g.from_intended),
                    view(&g.from_actual),
                    g.judged,
                    100.0 * (server - g.from_intended.good_fraction).max(0.0),
                    100.0 * g.client_share,
                ),
            ));
        }
        write_pairs(out, &rows)?;
        writeln!(out)?;
        Ok(())
    }
}

fn views_row(name: &str, v: &Views) -> Vec<(String, String)> {
    let f = format_seconds;
    vec![
        (
            format!("{name} p50"),
            format!(
                "{:>10}  {:>12}  {:>12}",
                f(v.server.p50_s),
                f(v.from_intended.p50_s),
                f(v.from_actual.p50_s)
            ),
        ),
        (
            format!("{name} p99"),
            format!(
                "{:>10}  {:>12}  {:>12}",
                f(v.server.p99_s),
                f(v.from_intended.p99_s),
                f(v.from_actual.p99_s)
            ),
        ),
    ]
}

/// A row of two durations, `a / b`.
fn pair(label: &str, a: f64, b: f64) -> (String, String) {
    (
        label.to_string(),
        format!("{} / {}", format_seconds(a), format_seconds(b)),
    )
}

/// The model's comparison of each run in a `sim --json/--out` report (its JSON), with the
/// run's scenario name; None for a run the model does not predict (a closed loop, a free
/// client). Empty when the report holds no runs.
pub fn run_comparisons(v: &serde_json::Value) -> Vec<(String, Option<Comparison>)> {
    let runs = v["runs"].as_array().map_or(&[][..], Vec::as_slice);
    runs.iter()
        .map(|run| {
            let label = run["scenario"]["name"]
                .as_str()
                .unwrap_or("sim")
                .to_string();
            let c = serde_json::from_value(run["prediction"]["comparison"].clone()).ok();
            (label, c)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_a_prediction_is_named_and_has_no_comparison() {
        assert!(run_comparisons(&serde_json::json!({"kind": "sim"})).is_empty());
        let v = serde_json::json!({"kind": "sim", "runs": [
            {"scenario": {"name": "closed"}, "prediction": null}
        ]});
        let runs = run_comparisons(&v);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].0, "closed");
        assert!(runs[0].1.is_none());
    }
}
