//! `heisenbench k8s`: the manifests of a sharded run on Kubernetes
//! ([`heisenbench_live::run::k8s`]).

use std::io::Write;

use heisenbench_live::run::config::ShardMode;
use heisenbench_live::run::k8s::{Deployment, manifests};

use super::run::config as run_config;
use crate::Failure;
use crate::args::K8sArgs;

pub fn run(a: K8sArgs, out: &mut dyn Write) -> Result<(), Failure> {
    if a.run.flags.url.is_none() {
        return Err(Failure::Usage(
            "k8s needs the server's --url (pods cannot reach an embedded mock)".into(),
        ));
    }
    let r = &a.run;
    let ignored = [
        ("--shard", r.shard.is_some()),
        ("--start-at", r.start_at.is_some()),
        ("--workers (use --shards)", r.flags.workers.is_some()),
        ("--shard-mode", r.flags.shard_mode != ShardMode::Process),
        ("--calibration", r.calibration.is_some()),
        ("--out", r.out.is_some()),
        ("--csv", r.csv),
        ("--json", r.json),
    ];
    if let Some((flag, _)) = ignored.iter().find(|(_, given)| *given) {
        return Err(Failure::Usage(format!(
            "k8s does not use {flag}: the pods' commands are fixed by the manifests"
        )));
    }
    let api_key_secret = match &a.api_key_secret {
        Some(s) => Some(
            s.split_once('/')
                .map(|(n, k)| (n.to_string(), k.to_string()))
                .filter(|(n, k)| !n.is_empty() && !k.is_empty())
                .ok_or_else(|| {
                    Failure::Usage(format!("--api-key-secret {s}: expected NAME/KEY"))
                })?,
        ),
        None => None,
    };
    let deployment = Deployment {
        namespace: a.namespace.clone(),
        image: a.image.clone(),
        cpu_per_shard: a.cpu_per_shard.unwrap_or(1.0),
        start_at_s: heisenbench_live::run::distributed::utc_now_s() + a.start_delay.get(),
        api_key_secret,
    };
    if a.run.flags.model.is_none() && a.run.config.is_none() {
        return Err(Failure::Usage(
            "k8s needs --model: the manifests are written without asking the server".into(),
        ));
    }
    let (mut cfg, _) = run_config(&a.run)?;
    cfg.workers = a.shards;
    cfg.validate()?;
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
