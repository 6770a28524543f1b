//! Command-line syntax. Values are parsed into the model's checked types here, so a
//! malformed duration or rate is refused before anything runs.

use clap::{Args, Parser, Subcommand};
use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::run::config::RunFlags;
use heisenbench_live::run::distributed::ShardSpec;
use heisenbench_model::units::Seconds;

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
    Model(heisenbench_model::cli::QueueCmd),
    /// How many client loops a load needs under a wait budget (or, with --max-qps, how
    /// much load k loops carry).
    Plan(heisenbench_model::cli::PlanFlags),
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
    Sweep(Box<heisenbench_model::cli::SweepFlags>),
    /// Redraw the figures from a figure-data.json file.
    Figures(FiguresArgs),
    /// Measure this machine's per-event cost of the generator, for `plan` and `run`.
    Calibrate(heisenbench_live::calibrate::CalibrateFlags),
    /// A shard worker process (started by `run`; reads its task on stdin).
    #[command(name = "__shard", hide = true)]
    Shard,
    /// Reproduce the paper's findings on this machine: theory, simulation, live runs,
    /// comparison, figures and a summary.
    Reproduce(ReproduceArgs),
    /// Audit another benchmark client: run it against the embedded mock, whose truth is
    /// known, and measure how much of what it reports is its own delay.
    Audit(Box<heisenbench_live::audit::flags::AuditFlags>),
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

/// `heisenbench sim`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimArgs {
    /// Textbook mode.
    #[command(subcommand)]
    pub textbook: Option<SimSub>,
    /// The scenario and its overrides.
    #[command(flatten)]
    pub flags: heisenbench_sim::cli::SimFlags,
}

/// Subcommands of `sim`.
#[derive(Debug, Subcommand)]
pub enum SimSub {
    /// One FIFO queue by the Lindley recursion and the event engine, against the model.
    Queue(heisenbench_sim::cli::QueueFlags),
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
    #[arg(long)]
    pub shard: Option<ShardSpec>,
    /// With --shard: the common start, UTC (2026-11-30T10:00:00Z or seconds since the epoch).
    #[arg(long, requires = "shard", value_parser = heisenbench_live::run::distributed::parse_utc)]
    pub start_at: Option<f64>,
    /// The flags that set the run's fields (server, API, shards, timeouts, seed).
    #[command(flatten)]
    pub flags: RunFlags,
    /// The workload's flags (each replaces the scenario's value).
    #[command(flatten)]
    pub workload: heisenbench_model::cli::WorkloadArgs,
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
    #[arg(long, default_value = "2m", value_parser = Seconds::parse_positive)]
    pub start_delay: Seconds,
    /// The API key's Secret as NAME/KEY (the pod gets it in --api-key-env's variable).
    #[arg(long)]
    pub api_key_secret: Option<String>,
    /// CPU cores each shard's pod requests (default: what `plan` gives per shard, at least 1).
    #[arg(long)]
    pub cpu_per_shard: Option<f64>,
}
