//! Command-line syntax: the commands, and the flags of those that belong to no one crate.
//! A command's flags are declared beside the types they build (`model::cli`, `sim::cli`,
//! `live::run::cli`, ...) and every value is parsed by its type, so a malformed duration
//! or rate is refused before anything runs.

use crate::flags::mock::MockFlags;
use crate::flags::run::{K8sArgs, RunArgs};
use clap::{Args, Parser, Subcommand};

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
    Model(crate::flags::model::ModelCmd),
    /// How many client loops a load needs under a wait budget (or, with --max-qps, how
    /// much load k loops carry).
    Plan(crate::flags::model::PlanFlags),
    /// Simulate a benchmark client and server (a scenario file or a preset), or one
    /// textbook queue (`sim queue`).
    Sim(Box<SimArgs>),
    /// Serve the embedded OpenAI-compatible mock LLM server (llm-d-inference-sim's flags).
    Mock(Box<MockFlags>),
    /// Run the live sharded load generator against a server (or the embedded mock).
    Run(Box<RunArgs>),
    /// Merge shard results (files or pod logs) of one plan into one report.
    Merge(MergeArgs),
    /// Print Kubernetes manifests (a ConfigMap and an Indexed Job) for a sharded run.
    K8s(Box<K8sArgs>),
    /// Hold a report (sim, live, or a foreign client's measurements) against the model.
    Compare(CompareArgs),
    /// A latency profile: stages of rising rate until saturation, and the knee.
    Sweep(Box<crate::flags::model::SweepFlags>),
    /// Redraw the figures from a figure-data.json file.
    Figures(FiguresArgs),
    /// Measure this machine's per-event cost of the generator, for `plan` and `run`.
    Calibrate(crate::flags::calibrate::CalibrateFlags),
    /// A shard worker process (started by `run`; reads its task on stdin).
    #[command(name = "__shard", hide = true)]
    Shard,
    /// Reproduce the paper's findings on this machine: theory, simulation, live runs,
    /// comparison, figures and a summary.
    Reproduce(ReproduceArgs),
    /// Audit another benchmark client: run it against the embedded mock, whose truth is
    /// known, and measure how much of what it reports is its own delay.
    Audit(Box<crate::flags::audit::AuditFlags>),
    /// Serve the interactive page that teaches the client-queue effect (loopback only).
    Explore(ExploreArgs),
}

/// The flags the command `name` ignores in some company ([`crate::flags::IdleFlags`]).
pub fn idle_rules(name: &str) -> Vec<crate::flags::Rule> {
    use crate::flags::IdleFlags;
    match name {
        "plan" => crate::flags::model::PlanFlags::idle_rules(),
        "sweep" => crate::flags::model::SweepFlags::idle_rules(),
        "audit" => crate::flags::audit::AuditFlags::idle_rules(),
        _ => Vec::new(),
    }
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
    pub flags: crate::flags::sim::SimFlags,
}

/// Subcommands of `sim`.
#[derive(Debug, Subcommand)]
pub enum SimSub {
    /// One FIFO queue by the Lindley recursion and the event engine, against the model.
    Queue(crate::flags::sim::QueueFlags),
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
    /// Write the merged report's page here (self-contained HTML, as `run --out` writes).
    #[arg(long)]
    pub html: Option<std::path::PathBuf>,
    /// Print the merged report as one JSON object.
    #[arg(long)]
    pub json: bool,
}
