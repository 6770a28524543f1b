//! `heisenbench mock`: serve until Ctrl-C.

use std::io::Write;

use heisenbench_live::mock::config::{FailureType, MockConfig};
use heisenbench_live::mock::{MockError, MockServer};

use crate::Failure;
use crate::args::MockArgs;

/// The configuration the flags describe.
pub fn config(a: MockArgs) -> MockConfig {
    MockConfig {
        host: a.host,
        port: a.port,
        model: a.model,
        time_to_first_token: a.time_to_first_token,
        time_to_first_token_std_dev: a.time_to_first_token_std_dev,
        inter_token_latency: a.inter_token_latency,
        inter_token_latency_std_dev: a.inter_token_latency_std_dev,
        prefill_overhead: a.prefill_overhead,
        prefill_time_per_token: a.prefill_time_per_token,
        max_num_seqs: a.max_num_seqs,
        max_waiting_queue_length: a.max_waiting_queue_length,
        time_factor_under_load: a.time_factor_under_load,
        max_model_len: a.max_model_len,
        mode: a.mode,
        seed: a.seed,
        failure_injection_rate: a.failure_injection_rate,
        failure_types: if a.failure_types.is_empty() {
            FailureType::ALL.to_vec()
        } else {
            a.failure_types
        },
        threads: a.threads,
        header_timeout: a.header_timeout,
    }
}

pub fn run(a: MockArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let server = MockServer::start(config(a)).map_err(|e| match e {
        MockError::Config(c) => Failure::Usage(c.to_string()),
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
