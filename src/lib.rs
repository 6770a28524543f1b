//! The heisenbench command line as a library: `main` parses nothing itself and calls
//! [`run`], which tests call in process.
//!
//! Exit status (the table in docs/run.md): 0 on success; 1 for anything that went wrong while
//! running; 2 for bad input (a malformed flag, an impossible or unstable configuration);
//! 3 when a run or merge finished but its accounting shows requests lost or unbalanced;
//! 130 when interrupted (Ctrl-C, SIGTERM), after writing what was measured.
//!
//! ```
//! // The mean wait of M/M/1 at rho 0.5 with a 1 s service: rho / (mu - lambda) = 1 s.
//! let mut out = Vec::new();
//! heisenbench::run(
//!     ["heisenbench", "model", "mm1", "--rate", "0.5", "--service-mean", "1s", "--json"],
//!     &mut out,
//! )
//! .unwrap();
//! let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
//! assert!((v["wq_mean_s"].as_f64().unwrap() - 1.0).abs() < 1e-12);
//!
//! // Bad input: exit status 2 and one line saying why.
//! let e = heisenbench::run(["heisenbench", "model", "mm1", "--rate", "-1"], &mut out).unwrap_err();
//! assert_eq!(e.exit_code(), 2);
//! ```

use std::ffi::OsString;
use std::fmt;
use std::io::Write;

mod args;
mod cmd;
mod flags;

pub use args::Cli;

/// Why a command failed, and so which exit status it gets.
#[derive(Debug)]
pub enum Failure {
    /// The input is wrong: exit 2.
    Usage(String),
    /// Something failed while running: exit 1.
    Runtime(anyhow::Error),
    /// The work finished, but requests are lost or the accounting does not balance: exit 3.
    Accounting(String),
    /// Stopped by a signal: exit 130. The text says what was kept (printed, written, or
    /// nothing at all).
    Interrupted(String),
}

impl Failure {
    /// The process's exit status.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Runtime(_) => 1,
            Self::Accounting(_) => 3,
            Self::Interrupted(_) => 130,
        }
    }

    /// A write to a closed stdout (`heisenbench ... | head`) is not an error.
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            Self::Runtime(e) => e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }),
            _ => false,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(m) | Self::Accounting(m) => f.write_str(&shorten_numbers(m)),
            Self::Interrupted(kept) => write!(f, "interrupted; {kept}"),
            // One line: the chain joined by ": ", each cause once (a message that already
            // quotes its cause, as "cannot listen on A: {source}" does, is not followed by
            // it again).
            Self::Runtime(e) => {
                let mut line = e.to_string();
                for cause in e.chain().skip(1) {
                    let text = cause.to_string();
                    if !line.contains(&text) {
                        line.push_str(": ");
                        line.push_str(&text);
                    }
                }
                f.write_str(&line)
            }
        }
    }
}

impl From<heisenbench_live::net::server::ServeError> for Failure {
    /// An address that cannot be listened on (in use, not this host's, a privileged port)
    /// is the user's to change: exit 2, the same for every command that serves.
    fn from(e: heisenbench_live::net::server::ServeError) -> Self {
        match e {
            heisenbench_live::net::server::ServeError::Bind { .. } => Self::Usage(e.to_string()),
            other => Self::Runtime(other.into()),
        }
    }
}

impl From<heisenbench_model::ModelError> for Failure {
    fn from(e: heisenbench_model::ModelError) -> Self {
        Self::Usage(e.to_string())
    }
}

impl From<heisenbench_figures::paper::ExperimentError> for Failure {
    fn from(e: heisenbench_figures::paper::ExperimentError) -> Self {
        Self::Runtime(e.into())
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Self::Runtime(e.into())
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self::Runtime(e)
    }
}

/// Parses `args` (the first is the program name) and runs the command, writing its output
/// to `out`.
pub fn run<I, T>(args: I, out: &mut dyn Write) -> Result<(), Failure>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match parse(args) {
        Ok(cli) => cli,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            write!(out, "{}", e.render())?;
            return Ok(());
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            return Err(Failure::Usage("a command is needed; try --help".into()));
        }
        Err(e) => return Err(Failure::Usage(one_line(&e))),
    };
    cmd::dispatch(cli, out)
}

/// Parses the command line. Negative numbers are taken as values (so `--seed -1` is refused
/// for its sign, not read as an unknown flag `-1`).
fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    let cmd = Cli::command().mut_subcommands(|c| {
        c.allow_negative_numbers(true)
            .mut_subcommands(|c| c.allow_negative_numbers(true))
    });
    let matches = cmd.clone().try_get_matches_from(args)?;
    if let Some((name, sub)) = matches.subcommand()
        && let Some(sub_cmd) = cmd.find_subcommand(name)
        && let Some(why) = flags::idle_flag(sub_cmd, sub, &args::idle_rules(name))
    {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            why,
        ));
    }
    Cli::from_arg_matches(&matches)
}

/// clap's message on one line: without its "error: " tag, with the names of missing
/// arguments (which clap lists on the lines below), and with the reason a negative value
/// was refused said plainly.
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    if first.ends_with(':') {
        // "the following required arguments were not provided:" then one per line.
        let names: Vec<&str> = lines
            .take_while(|l| l.starts_with(' '))
            .map(str::trim)
            .collect();
        return format!("{} {}", first, names.join(", "));
    }
    if e.kind() == clap::error::ErrorKind::ValueValidation
        && first.contains("invalid value '-")
        && first.contains("invalid digit")
    {
        return match first.rsplit_once(": ") {
            Some((head, _)) => format!("{head}: must not be negative"),
            None => first,
        };
    }
    // A range open above is clap's `A..=<the type's maximum>`: say what it means.
    for max in [
        u32::MAX.to_string(),
        u64::MAX.to_string(),
        i64::MAX.to_string(),
    ] {
        let open = format!("..={max}");
        // "invalid value '0' for '--shards <SHARDS>': 0 is not in 1..=4294967295"
        if let Some(at) = first.find(&open)
            && let Some(is_not) = first[..at].rfind(" is not in ")
            && let Some(head) = first[..is_not].rfind(": ")
        {
            let from = &first[is_not + " is not in ".len()..at];
            return format!("{}: must be at least {from}", &first[..head]);
        }
    }
    first
}

/// `text` with every number longer than 20 characters written in scientific notation, so an
/// echoed `1e300` given as 301 digits does not fill the screen.
fn shorten_numbers(text: &str) -> String {
    let is_num = |c: char| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit() || c == '-') {
        let len = rest[start..]
            .find(|c: char| !is_num(c))
            .unwrap_or(rest.len() - start);
        let token = &rest[start..start + len];
        out.push_str(&rest[..start]);
        match token.parse::<f64>() {
            Ok(v) if len > 20 && v.is_finite() => out.push_str(&format!("{v:e}")),
            _ => out.push_str(token),
        }
        // `len` >= 1: the token starts with the digit or '-' found.
        rest = &rest[start + len..];
    }
    out.push_str(rest);
    out
}
