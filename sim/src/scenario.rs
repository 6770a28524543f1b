//! A simulated experiment: the shared workload and client parts plus the server model,
//! and the paper's presets.

use heisenbench_model::ModelError;
use heisenbench_model::plan::{Assignment, Budget, Hardware, Load, plan_workers};
use heisenbench_model::scenario::{
    Arrivals, ClientModel, EventCosts, Lengths, Policy, Stamp, Stop, Workload,
};
use heisenbench_model::service::Service;
use heisenbench_model::slo::Slo;
use heisenbench_model::units::{Quantile, Rate, Seconds};
use serde::{Deserialize, Serialize};

pub use heisenbench_model::server::ServerModel;

/// One simulated experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimScenario {
    /// A label for reports.
    #[serde(default)]
    pub name: String,
    /// The root seed of every random stream ([`DEFAULT_SEED`] when the file omits it).
    ///
    /// [`DEFAULT_SEED`]: heisenbench_model::scenario::DEFAULT_SEED
    #[serde(default = "heisenbench_model::scenario::default_seed")]
    pub seed: u64,
    /// What is sent and when.
    pub workload: Workload,
    /// The benchmark client.
    pub client: ClientModel,
    /// The server model.
    #[serde(default)]
    pub server: ServerModel,
    /// Service-level objectives to judge every request by: the report then gives goodput
    /// from the server's own latencies, from the intended send and from the actual send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
}

impl SimScenario {
    /// Checks the whole scenario; the error names the first bad field.
    pub fn validate(&self) -> Result<(), ModelError> {
        self.workload.validate()?;
        self.client.validate()?;
        self.server.validate()?;
        if let Some(slo) = &self.slo {
            slo.validate()?;
        }
        self.validate_work()
    }

    /// What the simulation would be asked to do, from the product of its inputs: its
    /// requests (memory, when an overloaded client holds them), its events (time), and
    /// the work each loop is given (its clock, in nanoseconds, must hold it).
    fn validate_work(&self) -> Result<(), ModelError> {
        use heisenbench_model::limits::{MAX_SECONDS, MAX_SIM_EVENTS, MAX_SIM_REQUESTS};
        let Some(requests) = self
            .workload
            .expected_requests()
            .or_else(|| self.closed_loop_requests())
        else {
            return Err(ModelError::invalid(
                "workload.arrivals",
                "a closed loop",
                "its requests take no simulated time, with no think time, no server latency \
                 and no client cost, so it would never end: give one of them, or a count",
            ));
        };
        let too_much =
            |value: String, reason| Err(ModelError::invalid("simulation", value, reason));
        if requests > MAX_SIM_REQUESTS {
            return too_much(
                format!("{requests:.3e} requests"),
                "is more than the 5e7 requests one simulation holds: lower the rate, the \
                 duration or the count",
            );
        }
        let tokens = self.workload.mean_tokens().1.max(0.0);
        let events = requests * (tokens + 2.0);
        if events > MAX_SIM_EVENTS {
            return too_much(
                format!("{events:.3e} events"),
                "is more than the 1e10 events (sends, chunks, finishes) one simulation \
                 processes: fewer requests or shorter responses",
            );
        }
        let per_loop = requests / f64::from(self.client.workers.max(1))
            * mean_request_cost_s(&self.client.costs, tokens.round() as u32)?;
        if per_loop > MAX_SECONDS {
            return too_much(
                format!("{per_loop:.3e} s of work a loop"),
                "is more than the 1e9 s a simulated loop's clock holds: cheaper events or \
                 fewer requests a loop",
            );
        }
        Ok(())
    }

    /// At most how many requests a closed loop over a duration sends: each user's cycle
    /// lasts at least its think time plus the server's mean latency (none for users beyond
    /// the server's slots and queue, who are refused at once), and the loops can finish no
    /// more than their cost allows. `None` when neither bounds it.
    fn closed_loop_requests(&self) -> Option<f64> {
        let (Arrivals::Closed { users, think_s, .. }, Stop::Duration { seconds }) =
            (&self.workload.arrivals, self.workload.stop)
        else {
            return None;
        };
        let server = &self.server;
        let (input, tokens) = self.workload.mean_tokens();
        let tokens = tokens.max(1.0);
        let latency = server.time_to_first_token_s
            + server.prefill_overhead_s
            + server.prefill_time_per_token_s * input
            + server.inter_token_latency_s * (tokens - 1.0);
        let admitted = u64::from(server.max_num_seqs) + u64::from(server.max_waiting_queue_length);
        // Users beyond the slots and the queue are refused at once: their cycle is their
        // think time alone.
        let cycle = if u64::from(*users) > admitted {
            *think_s
        } else {
            think_s + latency
        };
        let by_users = f64::from(*users) * seconds / cycle;
        let cost = mean_request_cost_s(&self.client.costs, tokens.round() as u32).unwrap_or(0.0);
        let by_loops = f64::from(self.client.workers) * seconds / cost;
        let n = by_users.min(by_loops);
        n.is_finite().then_some(n)
    }

    /// Parses and validates a JSON scenario.
    pub fn from_json(text: &str) -> Result<Self, ScenarioError> {
        let sc: SimScenario =
            serde_json::from_str(text).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        sc.validate()?;
        Ok(sc)
    }
}

/// Why a scenario was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// Not valid JSON for a scenario (serde's message names the field and line).
    #[error("scenario: {0}")]
    Parse(String),
    /// A field is out of range.
    #[error("scenario: {0}")]
    Invalid(#[from] ModelError),
    /// Not a preset.
    #[error("unknown preset '{0}': expected paper-1000 or paper-5000")]
    UnknownPreset(String),
    /// Neither a scenario nor a preset was given.
    #[error("give a scenario file, --preset NAME, or `sim queue`")]
    Missing,
}

/// Per-chunk cost of a Python asyncio client: read, split the SSE frame, JSON-decode,
/// record. Tens of microseconds; 25 us (gamma, SCV 0.5) makes a loop top out near 190
/// requests/s x 200 tokens, between the paper's single-process tools (146 and 443).
pub const PYTHON_CHUNK_COST_S: f64 = 25e-6;
/// Building and writing one request on the same loop.
pub const PYTHON_SEND_COST_S: f64 = 150e-6;
/// Closing a response.
pub const PYTHON_FINISH_COST_S: f64 = 50e-6;
/// SCV of each of those costs.
pub const PYTHON_COST_SCV: f64 = 0.5;
/// The sharded preset's budget: p99 of a request's wait for its loop before its send
/// starts (the send lag less the send itself), which every latency measured from the
/// intended send includes.
pub const PRESET_BUDGET_S: f64 = 10e-3;

/// The Python-like per-event costs.
pub fn python_costs() -> EventCosts {
    let g = |m| Service::gamma(m, PYTHON_COST_SCV).expect("valid constants");
    EventCosts {
        send: Some(g(PYTHON_SEND_COST_S)),
        chunk: Some(g(PYTHON_CHUNK_COST_S)),
        finish: Some(g(PYTHON_FINISH_COST_S)),
        slice_s: None,
        wake: None,
        preempt_per_cpu_s: None,
    }
}

/// The server `sweep` profiles when given neither a URL nor a scenario (and the
/// reproduction's latency profile): 8 slots, 20 ms to the first token, 1 ms per later
/// token, 50 tokens, behind a sharded client; a request holds a slot 69 ms, so the server
/// saturates at 8 / 0.069 = 116 req/s.
pub fn profile_server(seconds: f64) -> Result<SimScenario, ScenarioError> {
    let mut sc = preset("paper-1000", seconds, 1)?.remove(1);
    sc.name = "profile".into();
    sc.workload.output_tokens = Lengths::Fixed { tokens: 50 };
    sc.server = ServerModel {
        max_num_seqs: 8,
        max_waiting_queue_length: 100_000,
        time_to_first_token_s: 20e-3,
        inter_token_latency_s: 1e-3,
        ..ServerModel::default()
    };
    Ok(sc)
}

/// How long a preset's schedule runs when no length is given, seconds.
pub const PRESET_SECONDS: f64 = 10.0;

/// The paper's presets: `paper-1000` and `paper-5000` (320 input and 200 output tokens,
/// zero-latency server, Poisson arrivals for `seconds`), each as a pair: one Python-like
/// loop, and the same client sharded over the loop count `plan` gives.
pub fn preset(name: &str, seconds: f64, seed: u64) -> Result<Vec<SimScenario>, ScenarioError> {
    let qps = match name {
        "paper-1000" => 1000.0,
        "paper-5000" => 5000.0,
        other => return Err(ScenarioError::UnknownPreset(other.to_string())),
    };
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate_per_s: qps },
        stop: Stop::Duration { seconds },
        input_tokens: Lengths::Fixed { tokens: 320 },
        output_tokens: Lengths::Fixed { tokens: 200 },
        prefix: None,
        dataset: None,
    };
    let single = ClientModel {
        workers: 1,
        policy: Policy::RoundRobin,
        costs: python_costs(),
        stamp: Stamp::AfterProcessing,
        max_in_flight_per_worker: None,
        timeout_s: None,
        send_shares_loop: true,
    };
    let k = sharded_workers(qps, &single.costs, 200)?;
    // Three llm-d-inference-sim replicas at their default of 5 slots each.
    let server = ServerModel {
        max_num_seqs: 15,
        max_waiting_queue_length: 100_000,
        ..ServerModel::default()
    };
    let mk = |label: &str, client: ClientModel| SimScenario {
        name: format!("{name} {label}"),
        seed,
        workload: workload.clone(),
        client,
        server: server.clone(),
        slo: None,
    };
    let sharded = ClientModel {
        workers: k,
        ..single.clone()
    };
    let out = vec![
        mk("single loop", single),
        mk(&format!("{k} loops"), sharded),
    ];
    for s in &out {
        s.validate()?;
    }
    Ok(out)
}

/// The loops a zero-latency workload needs so that the p99 wait of a request for its
/// loop stays under [`PRESET_BUDGET_S`]: with a zero-latency server each request (send,
/// its chunks, the finish) is one unit of work for its loop, so a loop is a queue of
/// whole requests; round robin makes its arrivals Erlang-k.
pub fn sharded_workers(
    qps: f64,
    costs: &EventCosts,
    output_tokens: u32,
) -> Result<u32, ScenarioError> {
    let per_request = request_cost(costs, output_tokens)?;
    let load = Load::new(Rate::per_s(qps)?, 1, 1, per_request, Assignment::RoundRobin)?;
    let budget = Budget::Quantile {
        q: Quantile::P99,
        limit_s: Seconds::new(PRESET_BUDGET_S)?,
    };
    Ok(plan_workers(&load, &budget, Hardware::default())?.workers)
}

/// The mean cost of one whole request on a loop, seconds: 0 when no event costs anything,
/// else [`request_cost`]'s mean.
fn mean_request_cost_s(costs: &EventCosts, output_tokens: u32) -> Result<f64, ModelError> {
    if costs.send.is_none() && costs.chunk.is_none() && costs.finish.is_none() {
        return Ok(0.0);
    }
    Ok(request_cost(costs, output_tokens)?.moments().mean_s)
}

/// The cost of one whole request on a loop (send + chunks + finish), as the two-moment
/// gamma fit of the sum; an error when the sum passes the longest duration accepted
/// (each part within it).
pub fn request_cost(costs: &EventCosts, output_tokens: u32) -> Result<Service, ModelError> {
    let parts = [
        (costs.send.as_ref(), 1u32),
        (costs.chunk.as_ref(), output_tokens),
        (costs.finish.as_ref(), 1),
    ];
    let (mut mean, mut var) = (0.0, 0.0);
    for (cost, n) in parts {
        if let Some(s) = cost {
            let m = s.moments();
            mean += f64::from(n) * m.mean_s;
            var += f64::from(n) * (m.m2 - m.mean_s * m.mean_s);
        }
    }
    let scv = if mean > 0.0 { var / (mean * mean) } else { 0.0 };
    let mean = mean.max(heisenbench_model::limits::MIN_NONZERO_SECONDS);
    Service::gamma_fitted(mean, scv).map_err(|_| {
        ModelError::invalid(
            "client.costs",
            format!("{mean:.3e} s a request"),
            "send + output tokens x chunk + finish sums past the 1e9 s a duration may last",
        )
    })
}
