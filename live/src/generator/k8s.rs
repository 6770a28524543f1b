//! The manifests of a sharded run on Kubernetes, from typed objects.
//!
//! A ConfigMap holds the resolved run; an Indexed Job (completion mode Indexed,
//! completions = parallelism = N) runs one pod per shard. Each pod runs `heisenbench run
//! --config ... --shard $(JOB_COMPLETION_INDEX)/N --start-at T` and prints its result
//! between marker lines in its log; `kubectl logs` collects them and `heisenbench merge`
//! merges them.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec,
    ResourceRequirements, SecretKeySelector, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use super::config::{RunConfig, ShardMode};
use crate::net::client::redact_url;

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

/// Where the run is deployed, beyond the run itself.
#[derive(Debug, Clone)]
pub struct Deployment {
    /// The namespace (an RFC 1123 label).
    pub namespace: String,
    /// The image holding the `heisenbench` binary.
    pub image: String,
    /// CPU request and limit per pod (one single-threaded loop per pod: 1 keeps a loop
    /// from ever sharing a core).
    pub cpu_per_shard: f64,
    /// When every shard starts its schedule, UTC seconds since the epoch.
    pub start_at_s: f64,
    /// The Secret and key holding the API key, if any.
    pub api_key_secret: Option<SecretKey>,
}

/// A key in a Kubernetes Secret, written NAME/KEY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretKey {
    /// The Secret's name.
    pub name: String,
    /// The key inside it.
    pub key: String,
}

impl std::str::FromStr for SecretKey {
    type Err = heisenbench_model::ModelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.split_once('/')
            .filter(|(n, k)| !n.is_empty() && !k.is_empty() && !k.contains('/'))
            .map(|(name, key)| Self {
                name: name.into(),
                key: key.into(),
            })
            .ok_or_else(|| heisenbench_model::ModelError::invalid("secret", s, "expected NAME/KEY"))
    }
}

const CONFIG_DIR: &str = "/etc/heisenbench";

/// Why manifests cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum K8sError {
    /// The namespace is not an RFC 1123 label.
    #[error(
        "--namespace {0:?}: not an RFC 1123 label (1-63 of a-z, 0-9 and '-', starting and ending with a letter or digit)"
    )]
    Namespace(String),
    /// The image reference is empty or has spaces.
    #[error("--image {0:?}: an image reference has no spaces and is not empty")]
    Image(String),
    /// The CPU per shard is not positive.
    #[error("--cpu-per-shard {0} must be > 0")]
    Cpu(f64),
    /// The URL carries credentials, which the ConfigMap would hold in clear.
    #[error(
        "k8s: the --url carries credentials, which would be written into the ConfigMap; keep the key in a Secret (--api-key-secret NAME/KEY)"
    )]
    Credentials,
    /// The run cannot be written.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl Deployment {
    /// Checks what Kubernetes would refuse.
    pub fn validate(&self) -> Result<(), K8sError> {
        let ns = &self.namespace;
        let label_ok = ns.len() <= 63
            && !ns.is_empty()
            && ns
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !ns.starts_with('-')
            && !ns.ends_with('-');
        if !label_ok {
            return Err(K8sError::Namespace(ns.clone()));
        }
        if self.image.trim().is_empty() || self.image.chars().any(char::is_whitespace) {
            return Err(K8sError::Image(self.image.clone()));
        }
        if !(self.cpu_per_shard.is_finite() && self.cpu_per_shard > 0.0) {
            return Err(K8sError::Cpu(self.cpu_per_shard));
        }
        Ok(())
    }
}

/// The ConfigMap and the Indexed Job that run `cfg` as `cfg.shards` pods, one shard
/// each (the run is written with thread shards: each pod is one).
pub fn manifests(cfg: &RunConfig, p: &Deployment) -> Result<Manifests, K8sError> {
    p.validate()?;
    if redact_url(&cfg.url) != cfg.url {
        return Err(K8sError::Credentials);
    }
    let mut cfg = cfg.clone();
    cfg.shard_mode = ShardMode::Thread;
    if p.api_key_secret.is_some() && cfg.api_key_env.is_none() {
        cfg.api_key_env = Some("OPENAI_API_KEY".into());
    }
    let cfg = &cfg;
    let name = format!("heisenbench-{}", cfg.plan_hash());
    let labels = BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "heisenbench".to_string(),
        ),
        ("heisenbench/plan".to_string(), cfg.plan_hash()),
    ]);
    let config_json = serde_json::to_string_pretty(cfg)?;
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-config")),
            namespace: Some(p.namespace.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("run.json".to_string(), config_json)])),
        ..Default::default()
    };
    let mut env = Vec::new();
    if let (
        Some(SecretKey {
            name: secret_name,
            key,
        }),
        Some(var),
    ) = (&p.api_key_secret, &cfg.api_key_env)
    {
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
        ("cpu".to_string(), Quantity(format!("{}", p.cpu_per_shard))),
        ("memory".to_string(), Quantity("512Mi".into())),
    ]);
    let container = Container {
        name: "shard".into(),
        image: Some(p.image.clone()),
        command: Some(vec!["heisenbench".into()]),
        args: Some(vec![
            "run".into(),
            "--config".into(),
            format!("{CONFIG_DIR}/run.json"),
            "--shard".into(),
            format!("$(JOB_COMPLETION_INDEX)/{}", cfg.shards),
            "--start-at".into(),
            format!("{:.3}", p.start_at_s),
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
            namespace: Some(p.namespace.clone()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(cfg.shards as i32),
            parallelism: Some(cfg.shards as i32),
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
    Ok(Manifests {
        api_version: "v1",
        kind: "List",
        items: vec![to_value(&config_map)?, to_value(&job)?],
    })
}

fn to_value<T: Serialize>(v: &T) -> Result<serde_json::Value, K8sError> {
    Ok(serde_json::to_value(v)?)
}
