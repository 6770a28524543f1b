//! One module per subcommand.

use std::io::Write;

use crate::Failure;
use crate::args::{Cli, Command};

mod model;
mod plan;
mod reproduce;

/// Runs the parsed command.
pub fn dispatch(cli: Cli, out: &mut dyn Write) -> Result<(), Failure> {
    match cli.command {
        Command::Model(q) => model::run(q, out),
        Command::Plan(p) => plan::run(p, out),
        Command::Reproduce(r) => reproduce::run(r, out),
    }
}

/// Writes `value` as one line of JSON.
pub(crate) fn write_json(
    out: &mut dyn Write,
    value: &impl serde::Serialize,
) -> Result<(), Failure> {
    serde_json::to_writer(&mut *out, value).map_err(|e| Failure::Runtime(e.into()))?;
    writeln!(out)?;
    Ok(())
}
