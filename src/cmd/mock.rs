//! `heisenbench mock`: serve until Ctrl-C.

use std::io::Write;

use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::mock::{MockError, MockServer};

use crate::Failure;

pub fn run(config: MockConfig, out: &mut dyn Write) -> Result<(), Failure> {
    let ctrl_c = CtrlC::listen()?;
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
    ctrl_c.wait();
    server.shutdown();
    writeln!(out, "heisenbench mock stopped")?;
    Ok(())
}

/// A server command's lifetime: from [`CtrlC::listen`] to Ctrl-C.
///
/// The listener is set up before the server announces its address, because it needs
/// descriptors of its own (the runtime's poller, the signal pipe): set up after, a client
/// quick enough to take every descriptor first (under a low `ulimit -n`) would make it
/// fail, and the server stop with nobody asking.
pub struct CtrlC {
    rt: tokio::runtime::Runtime,
    interrupt: tokio::signal::unix::Signal,
}

impl CtrlC {
    pub fn listen() -> Result<Self, Failure> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::Runtime(e.into()))?;
        let interrupt = rt
            .block_on(async {
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            })
            .map_err(|e| Failure::Runtime(e.into()))?;
        Ok(CtrlC { rt, interrupt })
    }

    /// Blocks until Ctrl-C.
    pub fn wait(mut self) {
        self.rt.block_on(self.interrupt.recv());
    }
}
