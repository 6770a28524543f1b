//! Command-line syntax. Values are parsed into the model's checked types here, so a
//! malformed duration or rate is refused before anything runs.

use clap::{Args, Parser, Subcommand};
use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::run::config::RunFlags;
use heisenbench_live::run::distributed::ShardSpec;
use heisenbench_model::plan::{Assignment, Budget};
use heisenbench_model::scenario::{Gaps, Lengths};
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
    /// Serve the embedded OpenAI-compatible mock LLM server (llm-d-inference-sim's flags).
    Mock(Box<MockConfig>),
    /// Run the live sharded load generator against a server (or the embedded mock).
    Run(Box<RunArgs>),
    /// Merge shard results (files or pod logs) of one plan into one report.
    Merge(MergeArgs),
    /// Print Kubernetes manifests (a ConfigMap and an Indexed Job) for a sharded run.
    K8s(Box<K8sArgs>),
    /// Hold a report (sim, live, or a foreign client's measurements) against the model.
    Compare(CompareArgs),
    /// A latency profile: stages of rising rate until saturation, and the knee.
    Sweep(Box<SweepArgs>),
    /// Redraw the figures from a figure-data.json file.
    Figures(FiguresArgs),
    /// Measure this machine's per-event cost of the generator, for `plan` and `run`.
    Calibrate(CalibrateArgs),
    /// A shard worker process (started by `run`; reads its task on stdin).
    #[command(name = "__shard", hide = true)]
    Shard,
    /// Reproduce the paper's findings on this machine: theory, simulation, live runs,
    /// comparison, figures and a summary.
    Reproduce(ReproduceArgs),
    /// Audit another benchmark client: run it against the embedded mock, whose truth is
    /// known, and measure how much of what it reports is its own delay.
    Audit(Box<AuditArgs>),
    /// Serve the interactive page that teaches the client-queue effect (loopback only).
    Explore(ExploreArgs),
}

/// `heisenbench explore`.
#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8300)]
    pub port: u16,
    /// Open the page in the desktop's browser (xdg-open).
    #[arg(long)]
    pub open: bool,
}

/// `heisenbench audit [options] -- COMMAND ARGS...`.
///
/// The command may hold placeholders: {url} {host} {port} {model} {rate} {duration}
/// {requests} {prompt_tokens} {output_tokens} {out}.
#[derive(Debug, Args)]
#[command(mut_arg("port", |a| a.default_value("0")))]
pub struct AuditArgs {
    /// The request rate the client is asked to offer ({rate}).
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true, required_unless_present = "rates", conflicts_with = "rates")]
    pub rate: Option<Rate>,
    /// Audit once per rate (comma-separated) and draw achieved rate and reported TTFT
    /// against offered rate (`--figure`).
    #[arg(long, value_parser = parse_rate, value_delimiter = ',', num_args = 1..)]
    pub rates: Vec<Rate>,
    /// The client's name in reports and on the figure (default: the tool whose results
    /// were read, else the command's file name).
    #[arg(long)]
    pub label: Option<String>,
    /// Draw the audit figure (audit.png and audit.svg) into this directory.
    #[arg(long)]
    pub figure: Option<std::path::PathBuf>,
    /// How long the client is asked to run ({duration}, whole seconds).
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub duration: Seconds,
    /// Prompt tokens per request ({prompt_tokens}).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub prompt_tokens: u32,
    /// Output tokens per request ({output_tokens}).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub output_tokens: u32,
    /// Stop the client after this long (default: three times the duration plus 60 s).
    #[arg(long, value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub timeout: Option<Seconds>,
    /// The plan's budget on the client's wait before the first chunk: a quantile only.
    #[arg(long, default_value = "p99=1ms", value_parser = from_str::<Budget>)]
    pub budget: Budget,
    /// Relative error within which the TTFT excess counts as explained by the model.
    #[arg(long, default_value_t = 0.25)]
    pub tolerance: f64,
    /// The client's loops: its N busiest processes (default: every process that spent a
    /// tenth of the tree's CPU). Give 1 for a client with one worker beside a coordinator.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub loops: Option<u32>,
    /// Where the client's results and logs go ({out} is a folder inside); default: a
    /// fresh folder under the system's temporary directory.
    #[arg(long)]
    pub work_dir: Option<std::path::PathBuf>,
    /// Write the audit (with every request the server answered) to this JSON file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The server: any flag of `heisenbench mock` (zero latency by default).
    #[command(flatten)]
    pub mock: MockConfig,
    /// The client command and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
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
    /// Inter-arrival shape: poisson, constant, gamma:shape=X or erlang:k=K.
    #[arg(long, default_value = "poisson", value_parser = from_str::<Gaps>)]
    pub arrival: Gaps,
    /// Arrivals per second.
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub rate: Rate,
    /// Service: deterministic:mean=1s, exponential:mean=1s, gamma:mean=1s,scv=0.5,
    /// lognormal:mean=1s,scv=2.
    #[arg(long, value_parser = from_str::<heisenbench_model::service::Service>)]
    pub service: heisenbench_model::service::Service,
    /// Customers measured after the warm-up (a tenth as many are simulated first).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(100..))]
    pub customers: u64,
    /// Root seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// lindley, events or both.
    #[arg(long, default_value = "both")]
    pub engine: heisenbench_sim::textbook::Engines,
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
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        servers: u32,
    },
    /// M/G/c: one queue, c pooled loops, general service. Exact for exponential and
    /// deterministic service; otherwise Lee-Longton's approximation, checked by simulation.
    Mgc {
        /// The queue.
        #[command(flatten)]
        queue: GeneralQueue,
        /// Pooled servers.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        servers: u32,
        /// Customers the check by simulation measures (where the model is approximate).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1000..))]
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
    /// Mean client cost per event on one core, e.g. 20us (default: this machine's
    /// measurement from `heisenbench calibrate`).
    #[arg(long, value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub event_cost: Option<Seconds>,
    /// SCV of the per-event cost (default 0, or the calibrated one).
    #[arg(long, allow_hyphen_values = true)]
    pub event_cost_scv: Option<f64>,
    /// Calibration file to read when --event-cost is not given.
    #[arg(long)]
    pub calibration: Option<std::path::PathBuf>,
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
    /// How requests reach the loops: round-robin (heisenbench's own shards), random
    /// (independent choice) or pooled (one queue shared by all loops).
    #[arg(long = "policy", alias = "assignment", default_value = "round-robin", value_parser = parse_assignment)]
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
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `heisenbench reproduce`.
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// A few minutes on two cores (the default).
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// Paper-scale durations (300 s simulations, 60 s live runs).
    #[arg(long)]
    pub full: bool,
    /// A reduced scale for tests: seconds instead of minutes.
    #[arg(long, hide = true)]
    pub smoke: bool,
    /// Where figures, reports and the summary go.
    #[arg(long, default_value = "figures/out")]
    pub out: std::path::PathBuf,
    /// Print the summary data as one JSON object instead of tables.
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
    Seconds::parse_positive(s).map_err(|e| e.to_string())
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

/// Any value whose meaning (and grammar) lives in its library type.
fn from_str<T: std::str::FromStr<Err = heisenbench_model::ModelError>>(
    s: &str,
) -> Result<T, String> {
    s.parse()
        .map_err(|e: heisenbench_model::ModelError| e.to_string())
}

fn parse_utc_arg(s: &str) -> Result<f64, String> {
    heisenbench_live::run::distributed::parse_utc(s).map_err(|e| e.to_string())
}

/// `heisenbench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A scenario file (the same JSON `heisenbench sim` reads; its workload and client parts).
    pub scenario: Option<std::path::PathBuf>,
    /// A resolved run config (as `heisenbench k8s` puts in its ConfigMap); flags still override.
    #[arg(long, conflicts_with = "scenario")]
    pub config: Option<std::path::PathBuf>,
    /// Run only shard I of N (I from 0): the plan is the N-shard plan, the result is this
    /// shard's, printed between marker lines (or written to --out DIR/shard-I.json) for
    /// `heisenbench merge`.
    #[arg(long, value_parser = from_str::<ShardSpec>)]
    pub shard: Option<ShardSpec>,
    /// With --shard: the common start, UTC (2026-11-30T10:00:00Z or seconds since the epoch).
    #[arg(long, requires = "shard", value_parser = parse_utc_arg)]
    pub start_at: Option<f64>,
    /// The flags that set the run's fields (server, API, shards, timeouts, seed).
    #[command(flatten)]
    pub flags: RunFlags,
    /// Requests per second.
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub qps: Option<Rate>,
    /// Arrival process: poisson, constant, gamma:shape=X or erlang:k=K.
    #[arg(long, value_parser = from_str::<Gaps>)]
    pub arrival: Option<Gaps>,
    /// Closed loop with this many users instead of a rate.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub users: Option<u32>,
    /// Send times from a file, one per line, seconds from the start.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// Schedule length (default 10s).
    #[arg(long, value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub duration: Option<Seconds>,
    /// Request count instead of a duration.
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Prompt tokens: N, uniform:MIN,MAX, normal:MEAN,SD or lognormal:MEAN,SCV.
    #[arg(long, value_parser = from_str::<Lengths>)]
    pub prompt_tokens: Option<Lengths>,
    /// Output tokens (sent with ignore_eos): same forms as --prompt-tokens.
    #[arg(long, value_parser = from_str::<Lengths>)]
    pub output_tokens: Option<Lengths>,
    /// A Hugging Face tokenizer.json: prompts of exactly --prompt-tokens tokens of the
    /// prompt text (without BOS or chat template), checked against the server's usage.
    /// Without it a token is a word, exact only for the embedded mock.
    #[arg(long)]
    pub tokenizer: Option<std::path::PathBuf>,
    /// Calibration file (default: $HEISENBENCH_CALIBRATION or ~/.cache/heisenbench/calibration.json).
    #[arg(long)]
    pub calibration: Option<std::path::PathBuf>,
    /// After the run, measure this machine's loopback floor (4 s: idle, and at the run's
    /// chunk rate) and report the observer overhead as a multiple of it. Without it, the
    /// floor stored by `heisenbench calibrate` is used when there is one.
    #[arg(long)]
    pub floor: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write report.json (and requests.csv with --csv) into this directory.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Also write one CSV row per request (needs --out).
    #[arg(long, requires = "out")]
    pub csv: bool,
}

/// `heisenbench calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// How long to measure each load.
    #[arg(long, default_value = "2s", value_parser = parse_positive_duration)]
    pub duration: Seconds,
    /// The loads to measure, requests per second of 200-token streams from the embedded
    /// mock (the cost per event falls as the load rises).
    #[arg(long, value_delimiter = ',', default_values = ["100", "500", "2000"], value_parser = parse_rate)]
    pub qps: Vec<Rate>,
    /// Where to store the result (default: $HEISENBENCH_CALIBRATION or ~/.cache/heisenbench/calibration.json).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `heisenbench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A report from `sim --json/--out` or `run --out`, or a foreign client's JSON:
    /// {"requests_per_s" with "events_per_request", or "events_per_s"; "event_cost_mean_s",
    /// "event_cost_scv", "burst", "round_robin_k", "observed": {"mean_s", "p50_s", "p90_s",
    /// "p99_s"}}, for one client loop.
    pub report: std::path::PathBuf,
    /// Relative error within which the observation counts as explained by the model.
    #[arg(long, default_value_t = 0.1)]
    pub tolerance: f64,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `heisenbench sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// A simulator scenario file; without it and without --url, the built-in profile
    /// scenario (8 slots, 69 ms per request: saturation at 116 req/s).
    pub scenario: Option<std::path::PathBuf>,
    /// Sweep a live server at this URL instead of the simulator.
    #[arg(long)]
    pub url: Option<String>,
    /// Lowest rate.
    #[arg(long, value_parser = parse_rate)]
    pub from: Rate,
    /// Highest rate.
    #[arg(long, value_parser = parse_rate)]
    pub to: Rate,
    /// Stages.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..1000))]
    pub steps: u32,
    /// Space the rates geometrically instead of evenly.
    #[arg(long)]
    pub geometric: bool,
    /// Length of each stage (simulated or live).
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub stage_duration: Seconds,
    /// Criterion: p99 TTFT from the intended send must stay under this.
    #[arg(long, default_value = "100ms", value_parser = parse_positive_duration)]
    pub max_p99: Seconds,
    /// Criterion: achieved over offered must stay above this.
    #[arg(long, default_value_t = 0.99)]
    pub min_achieved: f64,
    /// Live: shards.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: u32,
    /// Live: output tokens per request.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub output_tokens: u32,
    /// Live: prompt tokens per request.
    #[arg(long, default_value_t = 320, value_parser = clap::value_parser!(u32).range(1..))]
    pub prompt_tokens: u32,
    /// Live: the model field (default: the one model the server's /v1/models lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Keep going after two failing stages in a row (by default the sweep stops there).
    #[arg(long)]
    pub no_early_stop: bool,
    /// Write each stage's report and the profile into this directory.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `heisenbench figures`.
#[derive(Debug, Args)]
pub struct FiguresArgs {
    /// The figure-data.json that `reproduce` wrote.
    #[arg(required_unless_present = "audit")]
    pub data: Option<std::path::PathBuf>,
    /// Instead: draw the audit figure from these `audit --out` files (one client each,
    /// one rate or a `--rates` series), all on one chart.
    #[arg(long, num_args = 1.., conflicts_with = "data")]
    pub audit: Vec<std::path::PathBuf>,
    /// Where to draw.
    #[arg(long, default_value = "figures/out")]
    pub out: std::path::PathBuf,
}

/// `heisenbench merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Shard result files, or logs holding them between marker lines.
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
    /// Write the merged report here (atomically).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Print the merged report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `heisenbench k8s`.
#[derive(Debug, Args)]
pub struct K8sArgs {
    /// The run, as for `heisenbench run` (needs --url).
    #[command(flatten)]
    pub run: RunArgs,
    /// Shards, one pod each.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..10000))]
    pub shards: u32,
    /// Container image holding the heisenbench binary.
    #[arg(long, default_value = "heisenbench:latest")]
    pub image: String,
    /// Namespace.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// How far ahead of now the common start is, for pods to be scheduled and pull images.
    #[arg(long, default_value = "2m", value_parser = parse_positive_duration)]
    pub start_delay: Seconds,
    /// The API key's Secret as NAME/KEY (the pod gets it in --api-key-env's variable).
    #[arg(long)]
    pub api_key_secret: Option<String>,
    /// CPU cores each shard's pod requests (default: what `plan` gives per shard, at least 1).
    #[arg(long)]
    pub cpu_per_shard: Option<f64>,
}
