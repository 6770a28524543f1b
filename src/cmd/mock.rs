//! `heisenbench mock`: serve until Ctrl-C.

use std::io::Write;

use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::mock::{MockError, MockServer};

use crate::Failure;

pub fn run(config: MockConfig, out: &mut dyn Write) -> Result<(), Failure> {
    let server = MockServer::start(config).map_err(|e| match e {
        MockError::Config(c) => Failure::Usage(c.to_string()),
        MockError::Serve(s) => s.into(),
        other => Failure::Runtime(other.into()),
    })?;
    writeln!(
        out,
        "heisenbench mock serving on {} (Ctrl-C stops it)",
        server.url()
    )?;
    out.flush()?;
    until_ctrl_c()?;
    server.shutdown();
    writeln!(out, "heisenbench mock stopped")?;
    Ok(())
}

/// Blocks until Ctrl-C (a server command's lifetime).
pub fn until_ctrl_c() -> Result<(), Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(e.into()))?;
    rt.block_on(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    Ok(())
}
