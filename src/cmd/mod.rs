//! One module per subcommand.

use std::io::Write;

use heisenbench_live::files;

use crate::Failure;
use crate::args::{Cli, Command};

mod audit;
mod calibrate;
mod compare;
mod explore;
mod k8s;
mod merge;
mod mock;
mod model;
mod plan;
mod report_page;
mod reproduce;
mod run;
mod sim;
mod sweep;

/// Runs the parsed command.
pub fn dispatch(cli: Cli, out: &mut dyn Write) -> Result<(), Failure> {
    match cli.command {
        Command::Model(q) => model::run(q, out),
        Command::Plan(p) => plan::run(p, out),
        Command::Sim(s) => sim::run(*s, out),
        Command::Mock(m) => mock::run((*m).into(), out),
        Command::Run(r) => run::run(*r, out),
        Command::Calibrate(c) => calibrate::run(c, out),
        Command::Compare(c) => compare::run(c, out),
        Command::Merge(m) => merge::run(m, out),
        Command::K8s(k) => k8s::run(*k, out),
        Command::Sweep(s) => sweep::run(*s, out),
        Command::Figures(f) => {
            if !f.audit.is_empty() {
                return audit::figure_from_files(&f.audit, &f.out, out);
            }
            let data_path = f.data.expect("clap requires data without --audit");
            let text = heisenbench_live::files::read_bounded(
                &data_path,
                heisenbench_live::files::FileKind::Report,
            )
            .map_err(|e| Failure::Usage(e.to_string()))?;
            let data: heisenbench_figures::FigureData = serde_json::from_slice(&text)
                .map_err(|e| Failure::Usage(format!("{}: {e}", data_path.display())))?;
            let files = heisenbench_figures::draw_all(&data, &f.out)
                .map_err(|e| Failure::Runtime(e.into()))?;
            writeln!(out, "drew {} files into {}", files.len(), f.out.display())?;
            Ok(())
        }
        Command::Shard => heisenbench_live::generator::shard_process_main()
            .map_err(|e| Failure::Runtime(e.into())),
        Command::Reproduce(r) => reproduce::run(r, out),
        Command::Audit(a) => audit::run(*a, out),
        Command::Explore(e) => explore::run(e, out),
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

/// Writes `bytes` to `path` whole or not at all ([`heisenbench_live::files`]).
pub(crate) fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<(), Failure> {
    files::write_atomic(path, bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::IsADirectory => Failure::Usage(format!("--out {e}")),
        _ => Failure::Runtime(e.into()),
    })
}

/// Checks, before any work, that the output directory `dir` can be made and written into.
pub(crate) fn check_out_dir(dir: &std::path::Path) -> Result<(), Failure> {
    files::check_dir(dir).map_err(|e| Failure::Usage(format!("--out {e}")))
}

/// Checks, before any work, that the output file `path` can be written.
pub(crate) fn check_out_file(path: &std::path::Path) -> Result<(), Failure> {
    files::check_file(path).map_err(|e| Failure::Usage(format!("--out {e}")))
}

/// A trace file ([`crate::flags::run::read_trace`]).
pub(crate) fn read_trace(
    path: &std::path::Path,
) -> Result<heisenbench_model::scenario::Trace, Failure> {
    crate::flags::run::read_trace(path).map_err(|e| Failure::Usage(e.to_string()))
}
