//! The flags of `heisenbench model` (one queue), `heisenbench plan`, `heisenbench sweep` and
//! the workload flags `sim` and `run` share. Every value is parsed by its type's
//! `FromStr` (or [`Seconds::parse_positive`]), so the grammar is the type's own.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use heisenbench_model::batch::BatchMg1;
use heisenbench_model::dataset::{Dataset, DatasetFormat};
use heisenbench_model::error::Result;
use heisenbench_model::gig1::Gig1;
use heisenbench_model::mg1::Mg1;
use heisenbench_model::mmc::Mgc;
use heisenbench_model::plan::{Assignment, Budget, Hardware, Load};
use heisenbench_model::queue::WaitModel;
use heisenbench_model::scenario::{Gaps, Lengths, Popularity, Trace, WorkloadFlags};
use heisenbench_model::service::{Service, ServiceKind};
use heisenbench_model::slo::Slo;
use heisenbench_model::units::{Rate, Seconds};

/// What `heisenbench model` evaluates: a queue, or a prefix cache.
#[derive(Debug, Subcommand)]
pub enum ModelCmd {
    /// A queue.
    #[command(flatten)]
    Queue(QueueCmd),
    /// A prefix cache's hit rate under shared prompt prefixes (Che's approximation for LRU).
    PrefixCache(PrefixCacheFlags),
}

/// `heisenbench model prefix-cache`.
#[derive(Debug, Args)]
pub struct PrefixCacheFlags {
    /// Shared prefixes.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub groups: u32,
    /// Tokens in each prefix.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub prefix_tokens: u32,
    /// Each request's own tokens after its prefix.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub own_tokens: u32,
    /// How often each prefix is drawn: uniform or zipf:S.
    #[arg(long, default_value = "uniform")]
    pub popularity: Popularity,
    /// The cache's capacity, blocks.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub capacity: u32,
    /// Tokens per block.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub block_size: u32,
    /// The server's fixed prefill time, e.g. 1ms (with --prefill-time-per-token: the TTFT
    /// the hit rate implies is printed).
    #[arg(long, value_parser = Seconds::parse, allow_hyphen_values = true)]
    pub prefill_overhead: Option<Seconds>,
    /// The server's prefill time per prompt token the cache did not serve, e.g. 10us.
    #[arg(long, value_parser = Seconds::parse, allow_hyphen_values = true)]
    pub prefill_time_per_token: Option<Seconds>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The queues `heisenbench model` knows.
#[derive(Debug, Subcommand)]
pub enum QueueCmd {
    /// M/M/1: Poisson arrivals, exponential service.
    Mm1(BasicQueue),
    /// M/D/1: Poisson arrivals, constant service (exact Erlang series).
    Md1(BasicQueue),
    /// M/G/1: Poisson arrivals, general service (Pollaczek-Khinchine).
    Mg1(GeneralQueue),
    /// M^X/G/1: Poisson bursts of --batch events (token bursts).
    Mxg1 {
        /// The queue.
        #[command(flatten)]
        queue: GeneralQueue,
        /// Events per burst.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
    },
    /// E_k/G/1: Erlang-k arrivals (one of k round-robin loops), Lindley's equation on a lattice.
    Ekg1 {
        /// The queue.
        #[command(flatten)]
        queue: GeneralQueue,
        /// Erlang order: the number of loops in the rotation.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        k: u32,
        /// Events per burst.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
    },
    /// G/G/1: gamma-family renewal arrivals with a given inter-arrival SCV, on a lattice.
    Gg1 {
        /// The queue.
        #[command(flatten)]
        queue: GeneralQueue,
        /// Squared coefficient of variation of the inter-arrival times (1 = Poisson).
        #[arg(long, allow_hyphen_values = true)]
        arrival_scv: f64,
        /// Events per burst.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
    },
    /// M/M/c: one queue, c pooled loops (Erlang C).
    Mmc {
        /// The queue.
        #[command(flatten)]
        queue: BasicQueue,
        /// Pooled servers.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_SERVERS)))]
        servers: u32,
    },
    /// M/G/c: one queue, c pooled loops, general service. Exact for exponential and
    /// deterministic service; otherwise Lee-Longton's approximation, checked by simulation.
    Mgc {
        /// The queue.
        #[command(flatten)]
        queue: GeneralQueue,
        /// Pooled servers.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_SERVERS)))]
        servers: u32,
        /// Customers the check by simulation measures (where the model is approximate).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1000..=heisenbench_model::limits::MAX_CUSTOMERS))]
        customers: u64,
        /// Seed of the check by simulation.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Skip the check by simulation.
        #[arg(long)]
        no_check: bool,
    },
}

/// A queue whose service family is fixed by its name.
#[derive(Debug, Args)]
pub struct BasicQueue {
    /// Arrival rate of events (customers), per second.
    #[arg(long, allow_hyphen_values = true)]
    pub rate: Rate,
    /// Mean service time per event, e.g. 20us, 1.5ms, 2s.
    #[arg(long, value_parser = Seconds::parse_positive, allow_hyphen_values = true)]
    pub service_mean: Seconds,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A queue with a general service time.
#[derive(Debug, Args)]
pub struct GeneralQueue {
    /// The rate, mean and output format.
    #[command(flatten)]
    pub basic: BasicQueue,
    /// Squared coefficient of variation of the service time (0 = constant).
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub service_scv: f64,
    /// Service-time family; quantiles depend on it, the mean only on mean and SCV.
    #[arg(long, default_value = "gamma")]
    pub service_dist: ServiceKind,
}

impl GeneralQueue {
    fn service(&self) -> Result<Service> {
        Service::named(
            self.service_dist,
            self.basic.service_mean.get(),
            self.service_scv,
        )
    }

    /// Bursts per second: the event rate over the events a burst holds.
    fn burst_rate(&self, batch: u32) -> f64 {
        self.basic.rate.get() / f64::from(batch)
    }
}

impl QueueCmd {
    /// The queue the flags describe, refused when unstable or out of range.
    pub fn build(&self) -> Result<Box<dyn WaitModel>> {
        Ok(match self {
            Self::Mm1(b) => Box::new(Mg1::new(
                b.rate.get(),
                Service::exponential(b.service_mean.get())?,
            )?),
            Self::Md1(b) => Box::new(Mg1::new(
                b.rate.get(),
                Service::deterministic(b.service_mean.get())?,
            )?),
            Self::Mg1(g) => Box::new(Mg1::new(g.basic.rate.get(), g.service()?)?),
            Self::Mxg1 { queue, batch } => Box::new(BatchMg1::new(
                queue.burst_rate(*batch),
                *batch,
                queue.service()?,
            )?),
            Self::Ekg1 { queue, k, batch } => Box::new(Gig1::erlang(
                *k,
                queue.burst_rate(*batch),
                *batch,
                queue.service()?,
            )?),
            Self::Gg1 {
                queue,
                arrival_scv,
                batch,
            } => Box::new(Gig1::new(
                queue.burst_rate(*batch),
                *arrival_scv,
                *batch,
                queue.service()?,
            )?),
            Self::Mmc { queue, servers } => Box::new(Mgc::new(
                queue.rate.get(),
                *servers,
                Service::exponential(queue.service_mean.get())?,
            )?),
            Self::Mgc { queue, servers, .. } => Box::new(Mgc::new(
                queue.basic.rate.get(),
                *servers,
                queue.service()?,
            )?),
        })
    }

    /// Whether one JSON object is asked for instead of a table.
    pub fn json(&self) -> bool {
        match self {
            Self::Mm1(b) | Self::Md1(b) | Self::Mmc { queue: b, .. } => b.json,
            Self::Mg1(g)
            | Self::Mxg1 { queue: g, .. }
            | Self::Ekg1 { queue: g, .. }
            | Self::Gg1 { queue: g, .. }
            | Self::Mgc { queue: g, .. } => g.basic.json,
        }
    }
}

/// The flags of `heisenbench plan`.
#[derive(Debug, Args)]
pub struct PlanFlags {
    /// Target requests per second.
    #[arg(long, required_unless_present = "max_qps", allow_hyphen_values = true)]
    pub qps: Option<Rate>,
    /// Events (streamed chunks) the client handles per request.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub events_per_request: u32,
    /// Mean client cost per event on one core, e.g. 20us (default: this machine's
    /// measurement from `heisenbench calibrate`).
    #[arg(long, value_parser = Seconds::parse_positive, allow_hyphen_values = true)]
    pub event_cost: Option<Seconds>,
    /// SCV of the per-event cost (default 0, or the calibrated one).
    #[arg(long, allow_hyphen_values = true)]
    pub event_cost_scv: Option<f64>,
    /// Calibration file to read when --event-cost is not given.
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Family of the per-event cost.
    #[arg(long, default_value = "gamma")]
    pub event_cost_dist: ServiceKind,
    /// Events that reach the client together (1: spread out; = events per request: all
    /// at once, as from a server with zero inter-token latency).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub burst: u32,
    /// Wait budget: mean=DURATION or pQ=DURATION (p50, p90, p99, p99.9).
    #[arg(long)]
    pub budget: Budget,
    /// How requests reach the loops: round-robin (heisenbench's own shards), random
    /// (independent choice) or pooled (one queue shared by all loops).
    #[arg(long = "policy", alias = "assignment", default_value = "round-robin")]
    pub assignment: Assignment,
    /// Cores available to the client; with fewer cores than loops, loops share them.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cores: Option<u32>,
    /// Cores per machine, to count machines.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cores_per_machine: Option<u32>,
    /// Instead: the largest QPS that --loops loops carry under the budget.
    #[arg(long, requires = "loops")]
    pub max_qps: bool,
    /// Skip the check by simulation. By default every plan is checked: the chosen count
    /// and one fewer, each loop simulated (Lindley's recursion over bursts, about 2
    /// million events), with 95 % intervals. Pooled plans are sized by simulating the pool
    /// (Kiefer-Wolfowitz's recursion) either way.
    #[arg(long)]
    pub no_check: bool,
    /// The default (kept for scripts that ask for it).
    #[arg(long, hide = true, conflicts_with = "no_check")]
    pub check: bool,
    /// Loops, for --max-qps.
    #[arg(long, alias = "workers", value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_SERVERS)))]
    pub loops: Option<u32>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl crate::flags::IdleFlags for PlanFlags {
    fn idle_rules() -> Vec<crate::flags::Rule> {
        use crate::flags::Rule;
        let capacity = "--max-qps answers how much load the loops carry";
        vec![
            Rule::without(
                "loops",
                "max_qps",
                "it is the loop count --max-qps answers for; a plan finds the count itself",
            ),
            Rule::with("qps", "max_qps", capacity),
            Rule::with(
                "no_check",
                "max_qps",
                "a capacity is not checked by simulation",
            ),
            Rule::with(
                "cores_per_machine",
                "max_qps",
                "a capacity counts no machines",
            ),
            Rule::with(
                "calibration",
                "event_cost",
                "the cost given replaces the calibration's",
            ),
        ]
    }
}

impl PlanFlags {
    /// The load these flags describe, with a per-event cost of `mean_s` and `scv` in the
    /// family asked for. With --max-qps the rate is the answer, not an input: any positive
    /// placeholder keeps [`Load::new`]'s checks in one place.
    pub fn load(&self, mean_s: f64, scv: f64) -> Result<Load> {
        let cost = Service::named(self.event_cost_dist, mean_s, scv)?;
        let qps = self.qps.map_or_else(|| Rate::per_s(1.0), Ok)?;
        Load::new(
            qps,
            self.events_per_request,
            self.burst,
            cost,
            self.assignment,
        )
    }

    /// The client's machines.
    pub fn hardware(&self) -> Hardware {
        Hardware {
            cores: self.cores,
            cores_per_machine: self.cores_per_machine,
        }
    }
}

/// The workload flags of `heisenbench run` (and `k8s`): each replaces the scenario's
/// value ([`heisenbench_model::scenario::Workload::apply`] holds the rules of their meeting).
#[derive(Debug, Clone, Args)]
pub struct WorkloadArgs {
    /// Requests per second.
    #[arg(long, allow_hyphen_values = true)]
    pub qps: Option<Rate>,
    /// Arrival process: poisson, constant, gamma:shape=X or erlang:k=K.
    #[arg(long)]
    pub arrival: Option<Gaps>,
    /// Closed loop with this many users instead of a rate.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_USERS)))]
    pub users: Option<u32>,
    /// With --users: each user holds conversations of this many turns, each turn sending
    /// the whole conversation so far (the server's replies in it) and a new message of
    /// --prompt-tokens; the report gives the TTFT of each turn.
    #[arg(long, requires = "users", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub turns: Option<u32>,
    /// With --users: think time between a response and the user's next request.
    #[arg(long, requires = "users", value_parser = Seconds::parse, allow_hyphen_values = true)]
    pub think_time: Option<Seconds>,
    /// A trace file: send times one per line (seconds from the start), mooncake's JSONL
    /// (timestamp in ms, input_length, output_length) or Azure's LLM inference CSV
    /// (TIMESTAMP, ContextTokens, GeneratedTokens); the last two give each request's
    /// lengths.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Schedule length (default: the scenario file's, else 10s).
    #[arg(long, value_parser = Seconds::parse_positive, allow_hyphen_values = true)]
    pub duration: Option<Seconds>,
    /// Request count instead of a duration.
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Prompt tokens: N, uniform:MIN,MAX, normal:MEAN,SD or lognormal:MEAN,SCV.
    #[arg(long)]
    pub prompt_tokens: Option<Lengths>,
    /// Output tokens (sent with ignore_eos): same forms as --prompt-tokens.
    #[arg(long)]
    pub output_tokens: Option<Lengths>,
    /// Shared prefixes: each prompt starts with one of this many prefixes (a system
    /// prompt, a shared document); --prompt-tokens is then each request's own part.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub prefix_groups: Option<u32>,
    /// Shared prefixes: tokens in each.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub prefix_tokens: Option<u32>,
    /// Shared prefixes: how often each is drawn, uniform or zipf:S.
    #[arg(long)]
    pub prefix_popularity: Option<Popularity>,
    /// Prompts from a dataset file: ShareGPT's JSON (the first turn is the prompt, the
    /// reply's length the output's) or JSONL (`prompt` or `messages`, optional
    /// `output_tokens`); entries drawn in a seeded order. --output-tokens overrides the
    /// dataset's output lengths.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// The dataset's format: auto (told by its first character), sharegpt or jsonl.
    #[arg(long, default_value = "auto", requires = "dataset")]
    pub dataset_format: DatasetFormat,
    /// Leave out dataset entries whose prompt has fewer tokens.
    #[arg(long, requires = "dataset", value_parser = clap::value_parser!(u32).range(1..))]
    pub dataset_min_tokens: Option<u32>,
    /// Leave out dataset entries whose prompt has more tokens.
    #[arg(long, requires = "dataset", value_parser = clap::value_parser!(u32).range(1..))]
    pub dataset_max_tokens: Option<u32>,
}

impl WorkloadArgs {
    /// The overrides these flags make, with the trace read from `--trace`'s file.
    pub fn flags(&self, trace: Option<Trace>) -> WorkloadFlags {
        WorkloadFlags {
            qps: self.qps.map(Rate::get),
            arrival: self.arrival,
            users: self.users,
            turns: self.turns,
            think_s: self.think_time.map(Seconds::get),
            trace,
            duration_s: self.duration.map(Seconds::get),
            requests: self.requests,
            input_tokens: self.prompt_tokens,
            output_tokens: self.output_tokens,
            prefix_groups: self.prefix_groups,
            prefix_tokens: self.prefix_tokens,
            prefix_popularity: self.prefix_popularity,
            dataset: self.dataset.as_ref().map(|path| Dataset {
                min_prompt_tokens: self.dataset_min_tokens,
                max_prompt_tokens: self.dataset_max_tokens,
                ..Dataset::new(path.clone(), self.dataset_format)
            }),
        }
    }
}

/// `heisenbench sweep`.
#[derive(Debug, Args)]
pub struct SweepFlags {
    /// A simulator scenario file; without it and without --url, the built-in profile
    /// scenario (8 slots, 69 ms per request: saturation at 116 req/s).
    pub scenario: Option<PathBuf>,
    /// Sweep a live server at this URL instead of the simulator.
    #[arg(long)]
    pub url: Option<String>,
    /// Lowest rate.
    #[arg(long, required_unless_present = "users", conflicts_with = "users")]
    pub from: Option<Rate>,
    /// Highest rate.
    #[arg(long, required_unless_present = "users", conflicts_with = "users")]
    pub to: Option<Rate>,
    /// A concurrency ladder instead of rates: closed-loop users per stage, as a list
    /// (1,2,4,8) or a doubling ladder (1..64: 1, 2, 4, ... 64).
    #[arg(long, value_parser = parse_users)]
    pub users: Option<UserLadder>,
    /// Search for the highest rate (or users) that meets the criterion, by bisection
    /// between --from and --to (or the ladder's ends), instead of stepping through stages.
    #[arg(long)]
    pub search: bool,
    /// The search's tolerance: it stops when the highest load met and the lowest missed
    /// are this close (relative; users stop at neighbours).
    #[arg(long, default_value = "5%", value_parser = parse_percent)]
    pub tolerance: f64,
    /// Live: service-level objectives for goodput (as `run --slo`); a stage must also
    /// have at least --min-goodput of its requests within them.
    #[arg(long, value_parser = |s: &str| s.parse::<Slo>())]
    pub slo: Option<Slo>,
    /// With --slo: the share of a stage's requests that must meet it.
    #[arg(long, default_value = "90%", value_parser = parse_percent)]
    pub min_goodput: f64,
    /// Live: the server's Prometheus metrics, read during every stage (as `run
    /// --server-metrics`: auto, off, or endpoint URLs); each stage's report splits TTFT.
    #[arg(long = "server-metrics", value_name = "auto|off|URL")]
    pub server_metrics: Vec<String>,
    /// Live: time between two scrapes of the server's metrics (10ms to 1h; default 1s).
    #[arg(long = "scrape-interval", value_name = "INTERVAL", value_parser = Seconds::parse_positive)]
    pub scrape_interval: Option<Seconds>,
    /// Stages.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..1000))]
    pub steps: u32,
    /// Space the rates geometrically instead of evenly.
    #[arg(long)]
    pub geometric: bool,
    /// Length of each stage (simulated or live).
    #[arg(long, default_value = "10s", value_parser = Seconds::parse_positive)]
    pub stage_duration: Seconds,
    /// Criterion: p99 TTFT from the intended send must stay under this.
    #[arg(long, default_value = "100ms", value_parser = Seconds::parse_positive)]
    pub max_p99: Seconds,
    /// Criterion: achieved over offered must stay above this.
    #[arg(long, default_value_t = 0.99)]
    pub min_achieved: f64,
    /// Live: shards.
    #[arg(long, alias = "workers", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_LOCAL_SHARDS)))]
    pub shards: u32,
    /// Live: output tokens per request.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_TOKENS)))]
    pub output_tokens: u32,
    /// Live: prompt tokens per request.
    #[arg(long, default_value_t = 320, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_TOKENS)))]
    pub prompt_tokens: u32,
    /// Live: the model field (default: the one model the server's /v1/models lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Keep going after two failing stages in a row (by default the sweep stops there).
    #[arg(long)]
    pub no_early_stop: bool,
    /// Write each stage's report and the profile into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Closed-loop users, stage by stage, lowest first.
#[derive(Debug, Clone, PartialEq)]
pub struct UserLadder(pub Vec<u32>);

/// `1,2,4,8` or `1..64` (doubling from the first to the last, the last always included).
fn parse_users(s: &str) -> std::result::Result<UserLadder, heisenbench_model::ModelError> {
    let bad = |reason| heisenbench_model::ModelError::invalid("users", s, reason);
    let one = |t: &str| match t.trim().parse::<u32>() {
        Ok(n) if (1..=heisenbench_model::limits::MAX_USERS).contains(&n) => Ok(n),
        _ => Err(bad(
            "each must be a whole number of users from 1 to 100,000",
        )),
    };
    let mut users = if let Some((a, b)) = s.split_once("..") {
        let (a, b) = (one(a)?, one(b)?);
        if a >= b {
            return Err(bad(
                "a ladder runs from fewer users to more: write e.g. 1..64",
            ));
        }
        let mut v: Vec<u32> = std::iter::successors(Some(a), |n| n.checked_mul(2))
            .take_while(|n| *n < b)
            .collect();
        v.push(b);
        v
    } else {
        s.split(',')
            .map(one)
            .collect::<std::result::Result<Vec<_>, _>>()?
    };
    users.sort_unstable();
    users.dedup();
    if users.len() < 2 {
        return Err(bad("a ladder needs at least two stages"));
    }
    Ok(UserLadder(users))
}

/// `5%` or a fraction such as `0.05`, in (0, 1].
fn parse_percent(s: &str) -> std::result::Result<f64, heisenbench_model::ModelError> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(heisenbench_model::ModelError::invalid(
            "fraction",
            s,
            "write a percentage such as 5% (above 0, at most 100%)",
        )),
    }
}

impl crate::flags::IdleFlags for SweepFlags {
    fn idle_rules() -> Vec<crate::flags::Rule> {
        use crate::flags::Rule;
        let live = "it sets a live sweep's requests; the simulator takes the scenario's";
        let ladder = "the ladder's users are the stages";
        let mut rules: Vec<Rule> = [
            "shards",
            "output_tokens",
            "prompt_tokens",
            "model",
            "server_metrics",
            "scrape_interval",
        ]
        .into_iter()
        .map(|flag| Rule::without(flag, "url", live))
        .collect();
        rules.extend([
            Rule::without(
                "slo",
                "url",
                "it judges live requests (the simulator reports no goodput)",
            ),
            Rule::with(
                "scenario",
                "url",
                "a live sweep sends its own requests, not the scenario's",
            ),
            Rule::without(
                "min_goodput",
                "slo",
                "it is the share of a stage's requests that must meet --slo",
            ),
            Rule::without(
                "tolerance",
                "search",
                "it is how close a search's bounds come before it stops",
            ),
            Rule::with(
                "tolerance",
                "users",
                "a search over users stops at neighbours",
            ),
            Rule::with("steps", "search", "a search chooses its own stages"),
            Rule::with("steps", "users", ladder),
            Rule::with("geometric", "users", ladder),
            Rule::with(
                "no_early_stop",
                "search",
                "a search runs until its bounds meet",
            ),
        ]);
        rules
    }
}

impl SweepFlags {
    /// The stopping rule the flags set.
    pub fn criterion(&self) -> Result<heisenbench_model::profile::Criterion> {
        let c = heisenbench_model::profile::Criterion::new(self.min_achieved, self.max_p99.get())?;
        match self.slo {
            Some(_) => c.with_goodput(self.min_goodput),
            None => Ok(c),
        }
    }

    /// The stages' loads, lowest first: rates, or users with --users.
    pub fn loads(&self) -> Vec<f64> {
        match (&self.users, self.from, self.to) {
            (Some(u), _, _) => u.0.iter().map(|n| f64::from(*n)).collect(),
            (None, Some(from), Some(to)) => heisenbench_model::profile::rates(
                from.get(),
                to.get(),
                self.steps as usize,
                self.geometric,
            ),
            // clap requires --from and --to without --users.
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{FromArgMatches, Subcommand};

    fn queue(args: &[&str]) -> QueueCmd {
        let cmd = QueueCmd::augment_subcommands(clap::Command::new("model"));
        let m = cmd
            .try_get_matches_from(std::iter::once("model").chain(args.iter().copied()))
            .unwrap();
        QueueCmd::from_arg_matches(&m).unwrap()
    }

    /// Bursts of events: the utilisation is the event rate times the mean cost, whatever
    /// the burst, and a burst of one is M/G/1 itself.
    #[test]
    fn bursts_carry_the_event_rate() {
        let flags = ["--rate", "1000", "--service-mean", "500us"];
        let one = queue(&[&["mxg1"][..], &flags, &["--batch", "1"]].concat()).build();
        let ten = queue(&[&["mxg1"][..], &flags, &["--batch", "10"]].concat()).build();
        let mg1 = queue(&[&["mg1"][..], &flags].concat()).build();
        let (one, ten, mg1) = (
            one.unwrap().report(),
            ten.unwrap().report(),
            mg1.unwrap().report(),
        );
        assert!((ten.rho - 0.5).abs() < 1e-12, "{}", ten.rho);
        assert!((one.wq_mean_s - mg1.wq_mean_s).abs() < 1e-12 * mg1.wq_mean_s);
        // M/M/1 at rho 0.5, E[S] = 0.5 ms: Wq = rho E[S] / (1 - rho) = 0.5 ms.
        assert!((mg1.wq_mean_s - 5e-4).abs() < 1e-12, "{}", mg1.wq_mean_s);
        assert!(ten.wq_mean_s > mg1.wq_mean_s);
    }

    #[test]
    fn the_json_flag_is_read_from_every_queue() {
        assert!(queue(&["mm1", "--rate", "1", "--service-mean", "0.5s", "--json"]).json());
        assert!(
            !queue(&[
                "mgc",
                "--rate",
                "1",
                "--service-mean",
                "0.5s",
                "--servers",
                "2"
            ])
            .json()
        );
    }

    fn sweep(args: &[&str]) -> SweepFlags {
        crate::flags::parse_checked(args).unwrap()
    }

    #[test]
    fn a_sweep_steps_evenly_or_geometrically_under_its_criterion() {
        let even = sweep(&["--from", "10", "--to", "40", "--steps", "4"]);
        assert_eq!(even.loads(), [10.0, 20.0, 30.0, 40.0]);
        let geo = sweep(&[
            "--from",
            "10",
            "--to",
            "1000",
            "--steps",
            "3",
            "--geometric",
        ]);
        let r = geo.loads();
        assert!(
            (r[1] - 100.0).abs() < 1e-9 && (r[2] - 1000.0).abs() < 1e-9,
            "{r:?}"
        );
        assert!(even.criterion().is_ok());
        let bad = sweep(&["--from", "1", "--to", "2", "--min-achieved", "1.5"]);
        assert!(bad.criterion().is_err());
    }

    /// Users as a list or a doubling ladder (its end always included), sorted and without
    /// repeats; a ladder of one stage, zero users or a bad range is refused, and so is a
    /// rate beside a ladder.
    #[test]
    fn users_ladders_and_their_refusals() {
        let list = sweep(&["--users", "8,1,4,4"]);
        assert_eq!(list.loads(), [1.0, 4.0, 8.0]);
        let ladder = sweep(&["--users", "1..48", "--search"]);
        assert_eq!(ladder.loads(), [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 48.0]);
        assert!(ladder.search);
        let rates = sweep(&["--from", "1", "--to", "9", "--search", "--tolerance", "2%"]);
        assert!((rates.tolerance - 0.02).abs() < 1e-12);
        for bad in [
            &["--users", "4"][..],
            &["--users", "0,2"],
            &["--users", "8..2"],
            &["--users", "1..x"],
            &["--users", "1,2", "--from", "10"],
            &["--from", "10"],
            &["--from", "1", "--to", "2", "--tolerance", "0%"],
            &["--from", "1", "--to", "2", "--min-goodput", "120%"],
        ] {
            assert!(
                crate::flags::parse_checked::<SweepFlags>(bad).is_err(),
                "{bad:?}"
            );
        }
        let goodput = sweep(&[
            "--url",
            "http://127.0.0.1:8000",
            "--from",
            "1",
            "--to",
            "2",
            "--slo",
            "ttft=1s",
            "--min-goodput",
            "95%",
        ]);
        assert_eq!(goodput.criterion().unwrap().min_good_fraction, Some(0.95));
    }

    /// A flag that would do nothing in the company it is given in is refused in one line
    /// that names both flags; in the company it works in, or left at its default, it
    /// passes. Every flag the rules name is one of the command's.
    #[test]
    fn flags_that_would_do_nothing_are_refused() {
        use crate::flags::{assert_rules_name_flags, parse_checked};
        assert_rules_name_flags::<SweepFlags>();
        assert_rules_name_flags::<PlanFlags>();
        let rates = ["--from", "10", "--to", "20"];
        let refused = |args: &[&str], head: &str| {
            let why = parse_checked::<SweepFlags>(&[&rates[..], args].concat()).unwrap_err();
            assert!(why.starts_with(head), "{args:?}: {why}");
            assert!(!why.contains('\n'), "{why}");
        };
        refused(&["--shards", "4"], "--shards does nothing without --url: ");
        refused(&["--model", "m"], "--model does nothing without --url: ");
        refused(
            &["--output-tokens", "5"],
            "--output-tokens does nothing without --url",
        );
        refused(
            &["--server-metrics", "auto"],
            "--server-metrics does nothing without --url",
        );
        refused(&["--slo", "ttft=1s"], "--slo does nothing without --url");
        refused(
            &["--tolerance", "10%"],
            "--tolerance does nothing without --search",
        );
        refused(
            &["--search", "--steps", "4"],
            "--steps does nothing beside --search",
        );
        refused(
            &["--search", "--no-early-stop"],
            "--no-early-stop does nothing beside --search",
        );
        refused(
            &["--url", "http://h", "--min-goodput", "50%"],
            "--min-goodput does nothing without --slo",
        );
        refused(
            &["s.json", "--url", "http://h"],
            "<SCENARIO> does nothing beside --url",
        );
        let ladder = |args: &[&str]| {
            parse_checked::<SweepFlags>(&[&["--users", "1,2,4"][..], args].concat())
        };
        assert!(
            ladder(&["--steps", "3"])
                .unwrap_err()
                .starts_with("--steps does nothing beside --users")
        );
        assert!(ladder(&["--geometric"]).is_err());
        assert!(ladder(&["--search", "--tolerance", "1%"]).is_err());
        // In their company, or at their defaults, the same flags pass.
        for ok in [
            &[
                "--url",
                "http://h",
                "--shards",
                "4",
                "--model",
                "m",
                "--output-tokens",
                "5",
            ][..],
            &[
                "--url",
                "http://h",
                "--slo",
                "ttft=1s",
                "--min-goodput",
                "50%",
            ],
            &["--search", "--tolerance", "10%", "--geometric"],
            &["--steps", "4", "--no-early-stop", "--geometric"],
            &["s.json"],
            &[],
        ] {
            let args = [&rates[..], ok].concat();
            assert!(parse_checked::<SweepFlags>(&args).is_ok(), "{args:?}");
        }
        let plan = |args: &[&str]| {
            let cost = [
                "--events-per-request",
                "200",
                "--event-cost",
                "20us",
                "--budget",
                "p99=1ms",
            ];
            parse_checked::<PlanFlags>(&[&cost[..], args].concat())
        };
        for (bad, head) in [
            (
                &["--qps", "100", "--loops", "3"][..],
                "--loops does nothing without --max-qps",
            ),
            (
                &["--max-qps", "--loops", "3", "--qps", "100"],
                "--qps does nothing beside --max-qps",
            ),
            (
                &["--max-qps", "--loops", "3", "--no-check"],
                "--no-check does nothing beside --max-qps",
            ),
            (
                &["--max-qps", "--loops", "3", "--cores-per-machine", "4"],
                "--cores-per-machine does nothing beside --max-qps",
            ),
            (
                &["--qps", "100", "--calibration", "c.json"],
                "--calibration does nothing beside --event-cost",
            ),
        ] {
            let why = plan(bad).unwrap_err();
            assert!(why.starts_with(head), "{bad:?}: {why}");
        }
        for ok in [
            &[
                "--qps",
                "100",
                "--no-check",
                "--cores",
                "4",
                "--cores-per-machine",
                "2",
            ][..],
            &["--max-qps", "--loops", "3", "--cores", "2"],
        ] {
            assert!(plan(ok).is_ok(), "{ok:?}");
        }
    }
}
