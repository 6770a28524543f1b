//! Command-line syntax. Values are parsed into the model's checked types here, so a
//! malformed duration or rate is refused before anything runs.

use clap::{Args, Parser, Subcommand};
use heisenbench_model::plan::{Assignment, Budget};
use heisenbench_model::service::ServiceKind;
use heisenbench_model::units::{Rate, Seconds};

/// Honest performance measurement of LLM serving: predict, simulate and measure the
/// benchmark client's own delay.
#[derive(Debug, Parser)]
#[command(name = "heisenbench", version, propagate_version = true)]
pub struct Cli {
    /// The job to run.
    #[command(subcommand)]
    pub command: Command,
}

/// One subcommand per job.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate one queue: mean, quantiles and counts of the wait.
    #[command(subcommand)]
    Model(QueueCmd),
    /// How many client loops a load needs under a wait budget (or, with --max-qps, how
    /// much load k loops carry).
    Plan(PlanArgs),
    /// Simulate a benchmark client and server (a scenario file or a preset), or one
    /// textbook queue (`sim queue`).
    Sim(Box<SimArgs>),
    /// Reproduce the paper's findings on this machine (theory and simulation so far).
    Reproduce(ReproduceArgs),
}

/// `heisenbench sim`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimArgs {
    /// Textbook mode.
    #[command(subcommand)]
    pub textbook: Option<SimSub>,
    /// A scenario file (JSON: workload, client, server, seed).
    pub scenario: Option<std::path::PathBuf>,
    /// A built-in scenario pair instead of a file: paper-1000 or paper-5000.
    #[arg(long, conflicts_with = "scenario")]
    pub preset: Option<String>,
    /// Root seed (overrides the file's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Schedule length in seconds (overrides the file's stop; presets default to 10).
    #[arg(long, value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub duration: Option<Seconds>,
    /// Request count instead of a duration.
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Offered requests per second (overrides the arrival rate).
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub qps: Option<Rate>,
    /// Client loops (overrides the file's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Send times from a file, one per line, seconds from the start (replaces the arrivals).
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// Print the full report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write the full report here (atomically).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

/// Subcommands of `sim`.
#[derive(Debug, Subcommand)]
pub enum SimSub {
    /// One FIFO queue by the Lindley recursion and the event engine, against the model.
    Queue(QueueSimArgs),
}

/// `heisenbench sim queue`.
#[derive(Debug, Args)]
pub struct QueueSimArgs {
    /// Inter-arrival shape: poisson, constant, or gamma:shape=X (erlang:k=K).
    #[arg(long, default_value = "poisson")]
    pub arrival: String,
    /// Arrivals per second.
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub rate: Rate,
    /// Service: deterministic:mean=1s, exponential:mean=1s, gamma:mean=1s,scv=0.5,
    /// lognormal:mean=1s,scv=2.
    #[arg(long)]
    pub service: String,
    /// Customers measured after the warm-up (a tenth as many are simulated first).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(100..))]
    pub customers: u64,
    /// Root seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// lindley, events or both.
    #[arg(long, default_value = "both")]
    pub engine: String,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report here (atomically).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
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
    /// E_k/G/1: Erlang-k arrivals (one of k round-robin loops), Kingman.
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
    /// G/G/1: renewal arrivals with a given inter-arrival SCV, Kingman.
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
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        servers: u32,
    },
    /// M/G/c: one queue, c pooled loops, general service (Lee-Longton).
    Mgc {
        /// The queue.
        #[command(flatten)]
        queue: GeneralQueue,
        /// Pooled servers.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        servers: u32,
    },
}

/// A queue whose service family is fixed by its name.
#[derive(Debug, Args)]
pub struct BasicQueue {
    /// Arrival rate of events (customers), per second.
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub rate: Rate,
    /// Mean service time per event, e.g. 20us, 1.5ms, 2s.
    #[arg(long, value_parser = parse_positive_duration, allow_hyphen_values = true)]
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
    #[arg(long, default_value = "gamma", value_parser = parse_kind)]
    pub service_dist: ServiceKind,
}

/// `heisenbench plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Target requests per second.
    #[arg(long, value_parser = parse_rate, required_unless_present = "max_qps", allow_hyphen_values = true)]
    pub qps: Option<Rate>,
    /// Events (streamed chunks) the client handles per request.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub events_per_request: u32,
    /// Mean client cost per event on one core, e.g. 20us.
    #[arg(long, value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub event_cost: Seconds,
    /// SCV of the per-event cost (0 = constant).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub event_cost_scv: f64,
    /// Family of the per-event cost.
    #[arg(long, default_value = "gamma", value_parser = parse_kind)]
    pub event_cost_dist: ServiceKind,
    /// Events that reach the client together (1: spread out; = events per request: all
    /// at once, as from a server with zero inter-token latency).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub burst: u32,
    /// Wait budget: mean=DURATION or pQ=DURATION (p50, p90, p99, p99.9).
    #[arg(long, value_parser = parse_budget)]
    pub budget: Budget,
    /// How requests are dealt to loops: random or round-robin.
    #[arg(long, default_value = "random", value_parser = parse_assignment)]
    pub assignment: Assignment,
    /// Cores available to the client; with fewer cores than loops, loops share them.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cores: Option<u32>,
    /// Cores per machine, to count machines.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cores_per_machine: Option<u32>,
    /// Instead: the largest QPS that --workers loops carry under the budget.
    #[arg(long, requires = "workers")]
    pub max_qps: bool,
    /// Loops, for --max-qps.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `heisenbench reproduce`.
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

fn parse_rate(s: &str) -> Result<Rate, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    Rate::per_s(v).map_err(|e| e.to_string())
}

fn parse_positive_duration(s: &str) -> Result<Seconds, String> {
    let d = Seconds::parse(s).map_err(|e| e.to_string())?;
    if d.get() > 0.0 {
        Ok(d)
    } else {
        Err("must be greater than zero".into())
    }
}

fn parse_kind(s: &str) -> Result<ServiceKind, String> {
    s.parse()
        .map_err(|e: heisenbench_model::ModelError| e.to_string())
}

fn parse_budget(s: &str) -> Result<Budget, String> {
    s.parse()
        .map_err(|e: heisenbench_model::ModelError| e.to_string())
}

fn parse_assignment(s: &str) -> Result<Assignment, String> {
    s.parse()
        .map_err(|e: heisenbench_model::ModelError| e.to_string())
}
