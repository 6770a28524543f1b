//! One module per subcommand.

use std::io::Write;

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
        Command::Mock(m) => mock::run(*m, out),
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
            let text = std::fs::read(&data_path)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", data_path.display())))?;
            let data: heisenbench_figures::FigureData = serde_json::from_slice(&text)
                .map_err(|e| Failure::Usage(format!("{}: {e}", data_path.display())))?;
            let files = heisenbench_figures::draw_all(&data, &f.out)
                .map_err(|e| Failure::Runtime(e.into()))?;
            writeln!(out, "drew {} files into {}", files.len(), f.out.display())?;
            Ok(())
        }
        Command::Shard => heisenbench_live::run::shard_process_main()
            .map_err(|e| Failure::Runtime(anyhow::anyhow!(e))),
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

/// Writes `bytes` to `path` atomically: a temporary file beside it, then a rename, so a
/// reader never sees half a report.
pub(crate) fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<(), Failure> {
    file_dir(path)?;
    heisenbench_live::files::write_atomic(path, bytes)
        .map_err(|e| Failure::Runtime(anyhow::anyhow!("cannot write {}: {e}", path.display())))
}

/// Checks, before any work, that `dir` can be made and written into, so that minutes of
/// measurement are never lost to an output that fails at the end.
pub(crate) fn check_out_dir(dir: &std::path::Path) -> Result<(), Failure> {
    if dir.exists() && !dir.is_dir() {
        return Err(Failure::Usage(format!(
            "--out {} exists and is not a directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::Usage(format!("cannot create {}: {e}", dir.display())))?;
    probe(dir)
}

/// The directory a file `path` goes into; refuses a path that is a directory.
fn file_dir(path: &std::path::Path) -> Result<&std::path::Path, Failure> {
    if path.is_dir() {
        return Err(Failure::Usage(format!(
            "--out {} is a directory; name a file",
            path.display()
        )));
    }
    Ok(path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new(".")))
}

/// Writes and removes an empty file in `dir`, to learn that it takes files.
fn probe(dir: &std::path::Path) -> Result<(), Failure> {
    let probe = dir.join(format!(".heisenbench-probe{}", std::process::id()));
    std::fs::write(&probe, b"")
        .map_err(|e| Failure::Usage(format!("cannot write into {}: {e}", dir.display())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Checks, before any work, that the file `path` can be written (its directory exists and
/// takes files; it is not a directory itself).
pub(crate) fn check_out_file(path: &std::path::Path) -> Result<(), Failure> {
    let dir = file_dir(path)?;
    if !dir.is_dir() {
        return Err(Failure::Usage(format!(
            "--out {}: no directory {}",
            path.display(),
            dir.display()
        )));
    }
    probe(dir)
}

/// Send times from a trace file: one per line, seconds from the start; blank lines and
/// `#` comments are skipped.
pub(crate) fn read_trace(path: &std::path::Path) -> Result<Vec<f64>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read trace {}: {e}", path.display())))?;
    let mut times = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let v: f64 = t.parse().map_err(|_| {
            Failure::Usage(format!(
                "{}:{}: '{t}' is not a time in seconds",
                path.display(),
                i + 1
            ))
        })?;
        times.push(v);
    }
    Ok(times)
}
