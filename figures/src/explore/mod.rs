//! `heisenbench explore`: the interactive page, as a pure request handler.
//!
//! [`handle`] takes a path and a query string and returns the bytes to send: the page and
//! its two assets (compiled in: no CDN, no network), a JSON API computed by `model`, and the
//! charts as SVG drawn by the same functions that draw `reproduce`'s figures, so a fix to a
//! figure fixes both. The command serves it over the project's HTTP server code; tests
//! call it directly.
//!
//! Every parameter is bounded ([`Controls::from_query`]) and the work per call is fixed: a
//! bad parameter is a 400 with its reason, never a panic or an unbounded computation.

use heisenbench_model::error::ModelError;
use heisenbench_model::plan::{
    Assignment, Budget, Hardware, Load, plan_workers, plan_workers_unless,
};
use heisenbench_model::queue::WaitModel;
use heisenbench_model::service::Service;
use heisenbench_model::units::{Quantile, Rate, Seconds};
use plotters::prelude::*;
use serde::Serialize;

use crate::figure::{rate_failure, timeline, ttft_cdf, wait_vs_utilization, workers_needed};
use crate::{CiPoint, RateFailure, Series, Timeline, TtftCdfs, WaitVsUtilization, WorkersNeeded};

/// Chunks per response drawn in the trace (more would not be readable).
const TRACE_CHUNKS: u32 = 8;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

/// What the handler answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Content type.
    pub content_type: &'static str,
    /// Body.
    pub body: Vec<u8>,
}

impl Reply {
    fn ok(content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            content_type,
            body: body.into(),
        }
    }

    fn bad(reason: impl Into<String>) -> Self {
        let body = serde_json::json!({ "error": reason.into() }).to_string();
        Self {
            status: 400,
            content_type: "application/json",
            body: body.into_bytes(),
        }
    }
}

/// Why a chart was not finished: its request was abandoned.
const ABANDONED: &str = "abandoned: nobody waits for this chart any more";

/// Answers one request: `path` without the query, `query` without the `?`.
pub fn handle(path: &str, query: &str) -> Reply {
    handle_unless(path, query, &|| false)
}

/// [`handle`], giving up between a chart's points once `abandoned` says nobody waits for
/// the answer any more (the browser tab went away): then the reply is a 503 nobody reads.
pub fn handle_unless(path: &str, query: &str, abandoned: &dyn Fn() -> bool) -> Reply {
    match path {
        "/" | "/index.html" => Reply::ok("text/html; charset=utf-8", INDEX),
        "/app.js" => Reply::ok("text/javascript; charset=utf-8", SCRIPT),
        "/style.css" => Reply::ok("text/css; charset=utf-8", STYLE),
        "/api/state" | "/api/trace" | "/chart/wait.svg" | "/chart/rate.svg"
        | "/chart/loops.svg" | "/chart/ttft.svg" | "/chart/trace.svg" => {
            let state = match Controls::from_query(query) {
                Ok(s) => s,
                Err(e) => return Reply::bad(e.to_string()),
            };
            match path {
                "/api/state" => match state.evaluate() {
                    Ok(v) => Reply::ok(
                        "application/json",
                        serde_json::to_vec(&v).expect("plain data serialises"),
                    ),
                    Err(e) => Reply::bad(e.to_string()),
                },
                "/api/trace" => Reply::ok(
                    "application/json",
                    serde_json::to_vec(&state.trace_chart()).expect("plain data serialises"),
                ),
                chart => match state.chart(chart, abandoned) {
                    Ok(svg) => Reply::ok("image/svg+xml", svg),
                    Err(_) if abandoned() => Reply {
                        status: 503,
                        content_type: "text/plain; charset=utf-8",
                        body: ABANDONED.as_bytes().to_vec(),
                    },
                    Err(e) => Reply::bad(e),
                },
            }
        }
        _ => Reply {
            status: 404,
            content_type: "text/plain; charset=utf-8",
            body: b"no such page".to_vec(),
        },
    }
}

/// The page's controls, each bounded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Controls {
    /// Offered requests per second.
    pub rate: f64,
    /// Output tokens (chunks) per request.
    pub tokens: u32,
    /// The client's CPU per chunk, microseconds.
    pub cost_us: f64,
    /// Its variability (SCV; 0 constant, 1 exponential).
    pub scv: f64,
    /// Client loops.
    pub loops: u32,
    /// Dispatch policy.
    pub policy: Assignment,
    /// The server's inter-token latency, milliseconds (0: a response's chunks arrive
    /// together, as one burst).
    pub itl_ms: f64,
    /// The server's TTFT, milliseconds.
    pub ttft_ms: f64,
    /// The budget: p99 of the client's wait, milliseconds.
    pub budget_ms: f64,
    /// Whether the wait chart also shows the simulator's points (slower).
    pub sim: bool,
}

impl Default for Controls {
    fn default() -> Self {
        Self {
            rate: 100.0,
            tokens: 200,
            cost_us: 25.0,
            scv: 0.5,
            loops: 1,
            policy: Assignment::RoundRobin,
            itl_ms: 0.0,
            ttft_ms: 2.0,
            budget_ms: 10.0,
            sim: true,
        }
    }
}

/// (name, lowest, highest) of every numeric control.
const BOUNDS: [(&str, f64, f64); 8] = [
    ("rate", 0.1, 100_000.0),
    ("tokens", 1.0, 10_000.0),
    ("cost_us", 0.1, 100_000.0),
    ("scv", 0.0, 20.0),
    ("loops", 1.0, 1024.0),
    ("itl_ms", 0.0, 10_000.0),
    ("ttft_ms", 0.0, 100_000.0),
    ("budget_ms", 0.001, 100_000.0),
];

/// Why a query names no state of the page; its text is the body of the 400.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// Longer than any the page makes.
    #[error("query too long")]
    TooLong,
    /// `sim` takes 0 or 1.
    #[error("sim must be 0 or 1, not {0}")]
    Sim(String),
    /// The policy is not one of the three.
    #[error(transparent)]
    Policy(#[from] ModelError),
    /// No control has this name.
    #[error("unknown parameter '{0}'")]
    Unknown(String),
    /// A numeric control's value is not a number.
    #[error("{name}: '{value}' is not a number")]
    NotANumber {
        /// The control.
        name: String,
        /// What it was given.
        value: String,
    },
    /// A numeric control's value is outside its bounds.
    #[error("{name} must be between {lo} and {hi}, not {value}")]
    OutOfBounds {
        /// The control.
        name: String,
        /// Its lowest value.
        lo: f64,
        /// Its highest value.
        hi: f64,
        /// What it was given.
        value: String,
    },
}

impl Controls {
    /// Reads `key=value&...`; a missing key keeps its default, an unknown key, a
    /// malformed or out-of-range value is refused with its reason.
    pub fn from_query(query: &str) -> Result<Self, QueryError> {
        let mut s = Self::default();
        if query.len() > 2048 {
            return Err(QueryError::TooLong);
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if k == "sim" {
                s.sim = match v {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(QueryError::Sim(v.into())),
                };
                continue;
            }
            if k == "policy" {
                s.policy = v.replace("%2D", "-").parse()?;
                continue;
            }
            let Some(&(_, lo, hi)) = BOUNDS.iter().find(|(n, _, _)| *n == k) else {
                return Err(QueryError::Unknown(k.into()));
            };
            let x: f64 = v.parse().map_err(|_| QueryError::NotANumber {
                name: k.into(),
                value: v.into(),
            })?;
            if !(x.is_finite() && (lo..=hi).contains(&x)) {
                return Err(QueryError::OutOfBounds {
                    name: k.into(),
                    lo,
                    hi,
                    value: v.into(),
                });
            }
            match k {
                "rate" => s.rate = x,
                "tokens" => s.tokens = x.round() as u32,
                "cost_us" => s.cost_us = x,
                "scv" => s.scv = x,
                "loops" => s.loops = x.round() as u32,
                "itl_ms" => s.itl_ms = x,
                "ttft_ms" => s.ttft_ms = x,
                _ => s.budget_ms = x,
            }
        }
        Ok(s)
    }

    /// Events that arrive together: the whole response when the server streams at once.
    fn burst(&self) -> u32 {
        if self.itl_ms == 0.0 { self.tokens } else { 1 }
    }

    fn load(&self, rate: f64) -> Result<Load, ModelError> {
        Load::new(
            Rate::per_s(rate)?,
            self.tokens,
            self.burst(),
            Service::gamma(self.cost_us * 1e-6, self.scv)?,
            self.policy,
        )
    }

    /// The queue a response's first chunk waits in: with bursts, the loop's queue of whole
    /// bursts (a request's chunks cost the sum of their costs), so the first chunk waits
    /// only for the work before its burst; with spread chunks, the chunks' own queue.
    fn first_chunk_queue(&self) -> Result<Box<dyn WaitModel>, ModelError> {
        if self.burst() == 1 {
            return self.load(self.rate)?.worker_queue(self.loops, 1.0);
        }
        let cost = Service::gamma(self.cost_us * 1e-6, self.scv)?;
        let (burst_cost, _) = cost.sum_of(self.tokens);
        Load::new(Rate::per_s(self.rate)?, 1, 1, burst_cost, self.policy)?
            .worker_queue(self.loops, 1.0)
    }

    fn budget(&self) -> Result<Budget, ModelError> {
        Ok(Budget::Quantile {
            q: Quantile::P99,
            limit_s: Seconds::new(self.budget_ms * 1e-3)?,
        })
    }

    /// Requests per second the loops can carry at most: loops / (tokens x cost).
    pub fn capacity(&self) -> f64 {
        f64::from(self.loops) / (f64::from(self.tokens) * self.cost_us * 1e-6)
    }

    /// Everything the page shows, from the model.
    pub fn evaluate(&self) -> Result<Evaluated, ModelError> {
        let load = self.load(self.rate)?;
        let rho = load.offered_erlangs() / f64::from(self.loops);
        let (model, wait) = match load.worker_queue(self.loops, 1.0) {
            Ok(q) => (q.name().to_string(), Some(Waits::of(q.as_ref()))),
            Err(ModelError::Unstable { .. }) => ("unstable".to_string(), None),
            Err(e) => return Err(e),
        };
        let plan = plan_workers(&load, &self.budget()?, Hardware::default());
        let (loops_needed, plan_reasoning) = match plan {
            Ok(p) => (Some(p.workers), p.reasoning),
            Err(e) => (None, vec![e.to_string()]),
        };
        let ttft = self.ttft_ms * 1e-3;
        let first = match self.first_chunk_queue() {
            Ok(q) => Some(Waits::of(q.as_ref())),
            Err(ModelError::Unstable { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(Evaluated {
            state: self.clone(),
            utilisation: rho,
            capacity_per_s: self.capacity(),
            achieved_per_s: self.rate.min(self.capacity()),
            model,
            wait,
            true_ttft_s: ttft,
            first_chunk_wait: first,
            reported_ttft_mean_s: first.map(|w| ttft + w.mean_s),
            reported_ttft_p99_s: first.map(|w| ttft + w.p99_s),
            loops_needed,
            plan_reasoning,
        })
    }

    /// One chart as SVG text.
    fn chart(&self, which: &str, abandoned: &dyn Fn() -> bool) -> Result<String, String> {
        crate::font().map_err(|e| e.to_string())?;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (720, 450)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| e.to_string())?;
            let drawn = match which {
                "/chart/wait.svg" => wait_vs_utilization::draw(&root, &self.wait_chart(abandoned)?),
                "/chart/rate.svg" => rate_failure::draw(&root, &self.rate_chart()),
                "/chart/ttft.svg" => ttft_cdf::draw(&root, &self.ttft_chart()?),
                "/chart/trace.svg" => timeline::draw(&root, &self.trace_chart()),
                _ => workers_needed::draw(&root, &self.loops_chart(abandoned)?),
            };
            drawn.map_err(|e| e.to_string())?;
            root.present().map_err(|e| e.to_string())?;
        }
        Ok(svg)
    }

    /// Figure 2 for this client: mean and p99 of the wait (in units of E\[S\]) over the
    /// utilisation of its loops, and where this rate puts it.
    fn wait_chart(&self, abandoned: &dyn Fn() -> bool) -> Result<WaitVsUtilization, String> {
        let es = self.cost_us * 1e-6;
        let mut mean = Vec::new();
        let mut p99 = Vec::new();
        // Nineteen points bound the work of one chart (each quantile is a bisection).
        for i in 1..=19 {
            let rho = f64::from(i) * 0.05;
            let rate = rho * self.capacity();
            let Ok(q) = self
                .load(rate)
                .and_then(|l| l.worker_queue(self.loops, 1.0))
            else {
                continue;
            };
            mean.push((rho, q.wait_mean_s() / es));
            p99.push((rho, q.wait_quantile_s(Quantile::P99) / es));
        }
        let here = self.evaluate().map_err(|e| e.to_string())?;
        // Where this client is: a vertical line at its utilisation (when stable).
        let mut curves = vec![
            Series {
                label: "mean wait (model)".into(),
                points: mean,
            },
            Series {
                label: "p99 wait (model)".into(),
                points: p99,
            },
        ];
        if let Some(w) = here.wait {
            curves.push(Series {
                label: format!("your client (utilisation {:.2})", here.utilisation),
                points: vec![
                    (here.utilisation, (w.mean_s / es).max(1e-3) / 3.0),
                    (here.utilisation, (w.p99_s / es).max(1e-3) * 3.0),
                ],
            });
        }
        // The simulator at four utilisations: means and p99s with 95 % intervals (batch
        // means over about two million events each), so the curves are checked on the page.
        let (mut mean_points, mut p99_points) = (Vec::new(), Vec::new());
        let limit = Seconds::new(1.0).map_err(|e| e.to_string())?;
        let checked: &[f64] = if self.sim { &[0.3, 0.5, 0.7, 0.9] } else { &[] };
        for &rho in checked {
            if abandoned() {
                return Err(ABANDONED.into());
            }
            let Ok(load) = self.load(rho * self.capacity()) else {
                continue;
            };
            for (budget, points) in [
                (Budget::Mean { limit_s: limit }, &mut mean_points),
                (
                    Budget::Quantile {
                        q: Quantile::P99,
                        limit_s: limit,
                    },
                    &mut p99_points,
                ),
            ] {
                if let Some(c) = heisenbench_sim::plancheck::simulate(&load, &budget, self.loops) {
                    points.push(CiPoint {
                        x: rho,
                        y: c.simulated_s / es,
                        ci: c.ci95_s / es,
                    });
                }
            }
        }
        Ok(WaitVsUtilization {
            curves,
            mean_points,
            p99_points,
            points_label: None,
        })
    }

    /// Figure 3 for this client: the server's TTFT against the TTFT the client reports
    /// (the server's plus the first chunk's wait), as distributions.
    fn ttft_chart(&self) -> Result<TtftCdfs, String> {
        let ttft = self.ttft_ms * 1e-3;
        let q = self.first_chunk_queue().map_err(|e| match e {
            ModelError::Unstable { .. } => {
                "the client is saturated: its reported TTFT grows without bound".to_string()
            }
            e => e.to_string(),
        })?;
        let floor = (ttft * 1e-3).max(1e-7);
        // The requests that found the loop idle report the truth: a step there.
        let mut reported = vec![(ttft.max(floor), 0.0), (ttft.max(floor), 1.0 - q.p_wait())];
        // Thirty levels from the probability of not waiting to 0.999.
        let p0 = 1.0 - q.p_wait();
        for i in 1..=30 {
            let p = p0 + (0.999 - p0) * f64::from(i) / 30.0;
            if let Ok(level) = Quantile::new(p) {
                reported.push((ttft + q.wait_quantile_s(level), p));
            }
        }
        Ok(TtftCdfs {
            series: vec![
                Series {
                    label: "server's TTFT (the truth)".into(),
                    points: vec![(ttft.max(floor), 0.0), (ttft.max(floor), 1.0)],
                },
                Series {
                    label: "TTFT the client reports".into(),
                    points: reported,
                },
            ],
            title: Some(format!("Reported vs true TTFT at {} requests/s", self.rate)),
        })
    }

    /// Figure 8 for this client: a simulated trace of its first requests through one loop
    /// and through its loops (at most eight lanes). A response is drawn as at most
    /// [`TRACE_CHUNKS`] chunks, each costing the share of the request's work that the
    /// full number would: the same work per request, so the same utilisation.
    fn trace_chart(&self) -> Timeline {
        use heisenbench_model::scenario::{
            Arrivals, ClientModel, EventCosts, Lengths, Policy, Stamp, Stop, Workload,
        };
        use heisenbench_model::server::ServerModel;
        use heisenbench_sim::scenario::SimScenario;
        let shown = self.tokens.min(TRACE_CHUNKS);
        let cost = self.cost_us * 1e-6 * f64::from(self.tokens) / f64::from(shown);
        let scenario = |workers: u32| SimScenario {
            name: "explore trace".into(),
            seed: 1,
            workload: Workload {
                arrivals: Arrivals::Poisson {
                    rate_per_s: self.rate,
                },
                stop: Stop::Count { requests: 10 },
                input_tokens: Lengths::Fixed { tokens: 8 },
                output_tokens: Lengths::Fixed { tokens: shown },
                prefix: None,
                dataset: None,
            },
            client: ClientModel {
                workers,
                policy: match self.policy {
                    Assignment::Random => Policy::Random,
                    Assignment::RoundRobin => Policy::RoundRobin,
                    Assignment::Pooled => Policy::LeastLoaded,
                },
                costs: EventCosts {
                    send: None,
                    chunk: Service::gamma(cost, self.scv).ok(),
                    finish: None,
                    slice_s: None,
                    wake: None,
                    preempt_per_cpu_s: None,
                },
                stamp: Stamp::AfterProcessing,
                max_in_flight_per_worker: None,
                timeout_s: None,
                send_shares_loop: false,
            },
            server: ServerModel {
                time_to_first_token_s: self.ttft_ms * 1e-3,
                inter_token_latency_s: self.itl_ms * 1e-3,
                max_num_seqs: 100_000,
                ..ServerModel::default()
            },
            slo: None,
        };
        let trace = TRACE_CHUNKS as usize * 10;
        let lanes = |workers: u32, label: &dyn Fn(u32) -> String| {
            crate::simulated_lanes(scenario(workers), workers, trace, label)
        };
        let k = self.loops.min(8);
        Timeline {
            single: lanes(1, &|_| "one loop".into()),
            sharded: if k > 1 {
                lanes(k, &|w| format!("loop {} of {k}", w + 1))
            } else {
                Vec::new()
            },
        }
    }

    /// Figure 1 for this client: achieved against offered, up to twice its capacity.
    fn rate_chart(&self) -> RateFailure {
        let cap = self.capacity();
        let top = (2.0 * cap).max(self.rate * 1.2);
        let points = (0..=40)
            .map(|i| {
                let x = top * f64::from(i) / 40.0;
                (x, x.min(cap))
            })
            .collect();
        RateFailure {
            series: vec![Series {
                label: format!("{} loop(s)", self.loops),
                points,
            }],
        }
    }

    /// Figure 6 for this client: loops needed against the request rate.
    fn loops_chart(&self, abandoned: &dyn Fn() -> bool) -> Result<WorkersNeeded, String> {
        let budget = self.budget().map_err(|e| e.to_string())?;
        let mut points = Vec::new();
        // Seven rates, an octave apart around this one: a plan under round robin solves
        // several Erlang-k queues numerically, so the points are few.
        for i in -3..=3 {
            if abandoned() {
                return Err(ABANDONED.into());
            }
            let rate = self.rate * 2f64.powi(i);
            let Ok(load) = self.load(rate) else { continue };
            match plan_workers_unless(&load, &budget, Hardware::default(), abandoned) {
                Ok(p) => points.push((rate, f64::from(p.workers))),
                Err(ModelError::Stopped) => return Err(ABANDONED.into()),
                Err(_) => {}
            }
        }
        Ok(WorkersNeeded {
            series: vec![Series {
                label: format!("{} us per chunk, {} chunks", self.cost_us, self.tokens),
                points,
            }],
            budget: format!("p99 wait <= {} ms", self.budget_ms),
        })
    }
}

/// The wait's statistics, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Waits {
    /// Mean.
    pub mean_s: f64,
    /// Median.
    pub p50_s: f64,
    /// 90th percentile.
    pub p90_s: f64,
    /// 99th percentile.
    pub p99_s: f64,
}

impl Waits {
    fn of(q: &dyn WaitModel) -> Self {
        Self {
            mean_s: q.wait_mean_s(),
            p50_s: q.wait_quantile_s(Quantile::P50),
            p90_s: q.wait_quantile_s(Quantile::P90),
            p99_s: q.wait_quantile_s(Quantile::P99),
        }
    }
}

/// What `/api/state` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluated {
    /// The inputs, as read.
    pub state: Controls,
    /// Per-loop utilisation.
    pub utilisation: f64,
    /// Requests per second the loops carry at most.
    pub capacity_per_s: f64,
    /// What the client achieves: the offered rate up to its capacity.
    pub achieved_per_s: f64,
    /// The queue model.
    pub model: String,
    /// A chunk's wait for its loop (None: saturated).
    pub wait: Option<Waits>,
    /// The server's TTFT, seconds.
    pub true_ttft_s: f64,
    /// A response's first chunk's wait for its loop (None: saturated).
    pub first_chunk_wait: Option<Waits>,
    /// The TTFT a client that stamps a chunk when its loop gets to it reports, from the
    /// intended send: the server's TTFT plus the first chunk's wait; mean.
    pub reported_ttft_mean_s: Option<f64>,
    /// The same, p99.
    pub reported_ttft_p99_s: Option<f64>,
    /// `plan`'s answer for the budget.
    pub loops_needed: Option<u32>,
    /// Why.
    pub plan_reasoning: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(path: &str, query: &str) -> serde_json::Value {
        let r = handle(path, query);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        serde_json::from_slice(&r.body).expect("JSON")
    }

    #[test]
    fn the_page_and_its_assets_are_served() {
        for (p, ct) in [
            ("/", "text/html"),
            ("/app.js", "text/javascript"),
            ("/style.css", "text/css"),
        ] {
            let r = handle(p, "");
            assert_eq!(r.status, 200);
            assert!(r.content_type.starts_with(ct));
        }
        assert_eq!(handle("/nope", "").status, 404);
        let total: usize = [INDEX, SCRIPT, STYLE].iter().map(|s| s.len()).sum();
        assert!(total < 300 << 10, "{total} bytes");
    }

    #[test]
    fn the_api_is_the_model() {
        // One loop, 100 req/s of 20 chunks at 200 us: rho 0.4, bursts of 20 (zero ITL).
        let v = json("/api/state", "rate=100&tokens=20&cost_us=200&scv=0&loops=1");
        let rho = v["utilisation"].as_f64().unwrap();
        assert!((rho - 0.4).abs() < 1e-12);
        // M^X/D/1: Wq = rho B / (2 (1 - rho)) + (N - 1) S / 2, B = 4 ms, S = 200 us.
        let want = 0.4 * 0.004 / (2.0 * 0.6) + 19.0 * 200e-6 / 2.0;
        let got = v["wait"]["mean_s"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        assert_eq!(v["achieved_per_s"].as_f64(), Some(100.0));
        // The first chunk waits only for the bursts before its own: M/D/1 of 4 ms bursts.
        let first = v["first_chunk_wait"]["mean_s"].as_f64().unwrap();
        let want = 0.4 * 0.004 / (2.0 * 0.6);
        assert!((first - want).abs() < 1e-9, "{first} vs {want}");
        let reported = v["reported_ttft_mean_s"].as_f64().unwrap();
        assert!((reported - (0.002 + want)).abs() < 1e-9);
        assert!(v["loops_needed"].as_u64() >= Some(1));
        // The trace: ten requests of at most eight chunks through one loop, each chunk
        // waiting (arrival <= start) and then processed (start < end).
        let t = json("/api/trace", "rate=100&tokens=20&cost_us=200&loops=2");
        let one = t["single"][0]["chunks"].as_array().unwrap();
        assert_eq!(one.len(), 80);
        for c in one {
            let (a, st, e) = (
                c["arrival"].as_f64().unwrap(),
                c["start"].as_f64().unwrap(),
                c["end"].as_f64().unwrap(),
            );
            assert!(a <= st && st < e, "{c}");
        }
        assert_eq!(t["sharded"].as_array().unwrap().len(), 2);
        // Past capacity the loop saturates: no wait, achieved = capacity.
        let s = json("/api/state", "rate=1000&tokens=20&cost_us=200&loops=1");
        assert!(s["wait"].is_null());
        assert!((s["achieved_per_s"].as_f64().unwrap() - 250.0).abs() < 1e-9);
    }

    #[test]
    fn bad_parameters_are_400s_with_a_reason() {
        for q in [
            "rate=-1",
            "rate=abc",
            "rate=1e300",
            "tokens=0",
            "loops=100000",
            "policy=sideways",
            "colour=red",
            "scv=NaN",
            "sim=maybe",
        ] {
            let r = handle("/api/state", q);
            assert_eq!(r.status, 400, "{q}");
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{q}");
            assert_eq!(handle("/chart/wait.svg", q).status, 400, "{q}");
        }
        assert_eq!(handle("/api/state", &"a".repeat(5000)).status, 400);
    }

    #[test]
    fn charts_are_svg_at_the_extremes() {
        for q in [
            "",
            "rate=100000&tokens=10000&cost_us=100000&loops=1024",
            "rate=0.1&tokens=1&cost_us=0.1",
            "policy=pooled&loops=8",
            "itl_ms=5",
        ] {
            for c in [
                "/chart/wait.svg",
                "/chart/rate.svg",
                "/chart/loops.svg",
                "/chart/ttft.svg",
                "/chart/trace.svg",
            ] {
                let r = handle(c, q);
                // A state with nothing to draw is a 400, never a panic.
                if r.status == 200 {
                    assert!(String::from_utf8_lossy(&r.body).contains("<svg"), "{c}?{q}");
                }
            }
        }
        assert_eq!(handle("/chart/wait.svg", "").status, 200);
    }

    /// The charts that take many steps stop at the next one once nobody waits for them,
    /// and say so with a 503; the others are drawn whole.
    #[test]
    fn an_abandoned_chart_stops_at_its_next_step() {
        let asked = std::cell::Cell::new(0);
        let gone = || {
            asked.set(asked.get() + 1);
            true
        };
        for c in ["/chart/loops.svg", "/chart/wait.svg"] {
            asked.set(0);
            let r = handle_unless(c, "", &gone);
            assert_eq!(r.status, 503, "{c}");
            assert!(String::from_utf8_lossy(&r.body).contains("abandoned"));
            assert!(asked.get() >= 1, "{c} never asked");
        }
        assert_eq!(handle_unless("/chart/rate.svg", "", &gone).status, 200);
    }
}
