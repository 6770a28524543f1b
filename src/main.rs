//! The `heisenbench` command: parse, run, report one line on failure.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = heisenbench::run(std::env::args_os(), &mut out);
    let _ = out.flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) if failure.is_broken_pipe() => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("heisenbench: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}
