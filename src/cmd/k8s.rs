//! `heisenbench k8s`: the manifests of a sharded run on Kubernetes
//! ([`heisenbench_live::generator::k8s`]).

use std::io::Write;

use crate::flags::run::K8sArgs;
use heisenbench_live::generator::k8s::manifests;

use super::run::{config as run_config, prepared};
use crate::Failure;
use heisenbench_live::generator::prepare::Pending;

pub fn run(a: K8sArgs, out: &mut dyn Write) -> Result<(), Failure> {
    if let Some(why) = a.refused_flag() {
        return Err(Failure::Usage(why));
    }
    let deployment = a.deployment();
    let (mut cfg, pending) = run_config(&a.run)?;
    cfg.set_shards(a.run.flags.shards.unwrap_or(1))
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let only_the_model = Pending {
        shards: false,
        ..pending
    };
    prepared(&mut cfg, &only_the_model, None, &mut |_| {})?;
    if deployment.api_key_secret.is_none() && cfg.api_key_env.is_some() {
        eprintln!(
            "heisenbench: warning: --api-key-env without --api-key-secret: the pods get no such variable and send no key"
        );
    }
    let list = manifests(&cfg, &deployment).map_err(|e| Failure::Usage(e.to_string()))?;
    serde_json::to_writer_pretty(&mut *out, &list).map_err(|e| Failure::Runtime(e.into()))?;
    writeln!(out)?;
    Ok(())
}
