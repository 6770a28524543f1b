//! `heisenbench k8s`: the manifests of a sharded run on Kubernetes, from typed objects.
//!
//! A ConfigMap holds the resolved run; an Indexed Job (completion mode Indexed,
//! completions = parallelism = N) runs one pod per shard. Each pod runs `heisenbench run
//! --config ... --shard $(JOB_COMPLETION_INDEX)/N --start-at T` and prints its result
//! between marker lines in its log; `kubectl logs` collects them and `heisenbench merge`
//! merges them.

use std::collections::BTreeMap;
use std::io::Write;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec,
    ResourceRequirements, SecretKeySelector, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use heisenbench_live::run::config::ShardMode;

use super::run::config as run_config;
use crate::Failure;
use crate::args::K8sArgs;

/// The manifests: apply with `kubectl apply -f`.
#[derive(Debug, Serialize)]
pub struct Manifests {
    /// "v1".
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    /// "List".
    pub kind: &'static str,
    /// The ConfigMap and the Job.
    pub items: Vec<serde_json::Value>,
}

const CONFIG_DIR: &str = "/etc/heisenbench";

/// Refuses names Kubernetes would refuse, and run flags the pods would never see.
fn check_names(a: &K8sArgs) -> Result<(), Failure> {
    let ns = &a.namespace;
    let label_ok = ns.len() <= 63
        && !ns.is_empty()
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if !label_ok {
        return Err(Failure::Usage(format!(
            "--namespace {ns:?}: not an RFC 1123 label (1-63 of a-z, 0-9 and '-', starting and ending with a letter or digit)"
        )));
    }
    if a.image.trim().is_empty() || a.image.chars().any(char::is_whitespace) {
        return Err(Failure::Usage(format!(
            "--image {:?}: an image reference has no spaces and is not empty",
            a.image
        )));
    }
    let r = &a.run;
    let ignored = [
        ("--shard", r.shard.is_some()),
        ("--start-at", r.start_at.is_some()),
        ("--workers (use --shards)", r.workers.is_some()),
        ("--shard-mode", r.shard_mode != ShardMode::Process),
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
    Ok(())
}

pub fn run(a: K8sArgs, out: &mut dyn Write) -> Result<(), Failure> {
    if a.run.url.is_none() {
        return Err(Failure::Usage(
            "k8s needs the server's --url (pods cannot reach an embedded mock)".into(),
        ));
    }
    check_names(&a)?;
    if a.run.model.is_none() && a.run.config.is_none() {
        return Err(Failure::Usage(
            "k8s needs --model: the manifests are written without asking the server".into(),
        ));
    }
    let (mut cfg, _) = run_config(&a.run)?;
    if heisenbench_live::run::config::redact_url(&cfg.url) != cfg.url {
        return Err(Failure::Usage(
            "k8s: the --url carries credentials, which would be written into the ConfigMap; keep the key in a Secret (--api-key-secret NAME/KEY)".into(),
        ));
    }
    cfg.workers = a.shards;
    cfg.shard_mode = heisenbench_live::run::config::ShardMode::Thread;
    cfg.validate()?;
    if a.api_key_secret.is_none() && cfg.api_key_env.is_some() {
        eprintln!(
            "heisenbench: warning: --api-key-env without --api-key-secret: the pods get no such variable and send no key"
        );
    }
    if a.api_key_secret.is_some() && cfg.api_key_env.is_none() {
        cfg.api_key_env = Some("OPENAI_API_KEY".into());
    }
    let secret = match &a.api_key_secret {
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
    let cpu = match a.cpu_per_shard {
        Some(c) if c.is_finite() && c > 0.0 => c,
        Some(c) => return Err(Failure::Usage(format!("--cpu-per-shard {c} must be > 0"))),
        // One single-threaded loop per pod: a whole core, so the loop never shares one.
        None => 1.0,
    };
    let start = heisenbench_live::run::distributed::utc_now_s() + a.start_delay.get();
    let name = format!("heisenbench-{}", cfg.plan_hash());
    let labels = BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "heisenbench".to_string(),
        ),
        ("heisenbench/plan".to_string(), cfg.plan_hash()),
    ]);
    let config_json = serde_json::to_string_pretty(&cfg).map_err(|e| Failure::Runtime(e.into()))?;
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-config")),
            namespace: Some(a.namespace.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("run.json".to_string(), config_json)])),
        ..Default::default()
    };
    let mut env = Vec::new();
    if let (Some((secret_name, key)), Some(var)) = (&secret, &cfg.api_key_env) {
        env.push(EnvVar {
            name: var.clone(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: secret_name.clone(),
                    key: key.clone(),
                    optional: Some(false),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let quantities = BTreeMap::from([
        ("cpu".to_string(), Quantity(format!("{cpu}"))),
        ("memory".to_string(), Quantity("512Mi".into())),
    ]);
    let container = Container {
        name: "shard".into(),
        image: Some(a.image.clone()),
        command: Some(vec!["heisenbench".into()]),
        args: Some(vec![
            "run".into(),
            "--config".into(),
            format!("{CONFIG_DIR}/run.json"),
            "--shard".into(),
            format!("$(JOB_COMPLETION_INDEX)/{}", a.shards),
            "--start-at".into(),
            format!("{start:.3}"),
        ]),
        env: (!env.is_empty()).then_some(env),
        resources: Some(ResourceRequirements {
            requests: Some(quantities.clone()),
            limits: Some(quantities),
            ..Default::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "config".into(),
            mount_path: CONFIG_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let job = Job {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(a.namespace.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(a.shards as i32),
            parallelism: Some(a.shards as i32),
            // A retried shard would replay its slice at the wrong time: fail, and let
            // `merge` count its requests as lost.
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    containers: vec![container],
                    volumes: Some(vec![Volume {
                        name: "config".into(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: format!("{name}-config"),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    let list = Manifests {
        api_version: "v1",
        kind: "List",
        items: vec![to_value(&config_map)?, to_value(&job)?],
    };
    serde_json::to_writer_pretty(&mut *out, &list).map_err(|e| Failure::Runtime(e.into()))?;
    writeln!(out)?;
    Ok(())
}

fn to_value<T: Serialize>(v: &T) -> Result<serde_json::Value, Failure> {
    serde_json::to_value(v).map_err(|e| Failure::Runtime(e.into()))
}
