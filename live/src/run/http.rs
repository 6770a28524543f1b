//! The HTTP client of a run, built in one place: TLS trust, and the questions a run asks a
//! server before it starts (which model it serves).
//!
//! `https://` targets are verified against this machine's trust store (rustls with the
//! platform verifier), plus a private CA given with `--ca-cert`. `--insecure` turns
//! verification off; reports say so.

use std::time::Duration;

use super::config::{ApiKind, RunConfig};
use crate::stream::{clip, error_text};

/// Why a client or a question to the server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The CA file could not be read or holds no certificate.
    #[error("--ca-cert {path}: {reason}")]
    CaCert {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Build(#[source] reqwest::Error),
    /// The server could not be reached or its answer not read.
    #[error("{url}: {reason}")]
    Request {
        /// Where (credentials redacted).
        url: String,
        /// What happened, with its causes.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{url}: HTTP {status}: {message}")]
    Status {
        /// Where.
        url: String,
        /// The status.
        status: u16,
        /// What that means for the user, with the server's own words.
        message: String,
    },
    /// The model list was not the JSON `/v1/models` promises.
    #[error("{url}: not a model list: {reason}")]
    NotAList {
        /// Where.
        url: String,
        /// Why.
        reason: String,
    },
}

/// An error and its causes on one line, without the URL (which may carry credentials).
pub fn error_chain(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    if parts.is_empty() {
        parts.push("request failed".into());
    }
    clip(&parts.join(": "))
}

/// The client every shard of `cfg` uses.
pub fn client(cfg: &RunConfig) -> Result<reqwest::Client, HttpError> {
    // rustls needs one process-wide crypto provider; a second install is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90));
    if let Some(path) = &cfg.ca_cert {
        let bad = |reason: String| HttpError::CaCert {
            path: path.display().to_string(),
            reason,
        };
        let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(e.to_string()))?;
        if certs.is_empty() {
            return Err(bad("no PEM certificate in it".into()));
        }
        b = b.tls_certs_merge(certs);
    }
    if cfg.insecure {
        b = b.danger_accept_invalid_certs(true);
    }
    b.build().map_err(HttpError::Build)
}

/// The bearer token of `cfg`, read from its environment variable.
pub fn authorization(cfg: &RunConfig) -> Option<String> {
    cfg.api_key_env
        .as_ref()
        .and_then(|var| std::env::var(var).ok())
        .map(|key| format!("Bearer {key}"))
}

/// What an error status from a real server most likely means, for the first line a user
/// reads.
pub fn explain_status(status: u16) -> &'static str {
    match status {
        401 => "the server wants an API key (--api-key-env VAR) or refused the one sent",
        403 => "the key was accepted but is not allowed to do this",
        404 => "no such endpoint or model here (check --url, --api and --model)",
        429 => "rate limited",
        _ => "",
    }
}

/// Why the model field could not be taken from the server's list.
#[derive(Debug, thiserror::Error)]
pub enum ModelChoiceError {
    /// The list could not be had (the reason is in the message, not a source, so a chain
    /// printed whole says it once).
    #[error("cannot ask the server which model it serves (or pass --model): {0}")]
    Unreachable(HttpError),
    /// The list is empty.
    #[error("the server lists no model at /v1/models: pass --model")]
    NoModel,
    /// More than one model: the user chooses.
    #[error("the server serves {} models; choose one with --model: {}", .0.len(), .0.join(", "))]
    Several(Vec<String>),
}

/// The one model the server at `cfg.url` serves, from its `/v1/models`.
pub fn served_model(cfg: &RunConfig) -> Result<String, ModelChoiceError> {
    let mut models = served_models(cfg).map_err(ModelChoiceError::Unreachable)?;
    match models.len() {
        1 => Ok(models.remove(0)),
        0 => Err(ModelChoiceError::NoModel),
        _ => Err(ModelChoiceError::Several(models)),
    }
}

/// The ids of the models `/v1/models` lists (10 s timeout).
pub fn served_models(cfg: &RunConfig) -> Result<Vec<String>, HttpError> {
    let base = cfg.url.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    let url = format!("{base}/v1/models");
    let shown = super::config::redact_url(&url);
    let client = client(cfg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| HttpError::NotAList {
            url: shown.clone(),
            reason: e.to_string(),
        })?;
    let request = |e: reqwest::Error| HttpError::Request {
        url: shown.clone(),
        reason: error_chain(&e),
    };
    let (status, body) = rt.block_on(async {
        let mut req = client.get(&url).timeout(Duration::from_secs(10));
        if let Some(a) = authorization(cfg) {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.map_err(request)?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await.map_err(request)?;
        Ok::<_, HttpError>((status, body))
    })?;
    if !(200..300).contains(&status) {
        let said = error_text(&body);
        let hint = explain_status(status);
        return Err(HttpError::Status {
            url: shown,
            status,
            message: match (hint.is_empty(), said.is_empty()) {
                (true, _) => said,
                (false, true) => hint.to_string(),
                (false, false) => format!("{hint}; the server said: {said}"),
            },
        });
    }
    #[derive(serde::Deserialize)]
    struct List {
        data: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        id: String,
    }
    let list: List = serde_json::from_slice(&body).map_err(|e| HttpError::NotAList {
        url: shown,
        reason: e.to_string(),
    })?;
    Ok(list.data.into_iter().map(|e| e.id).collect())
}

/// The endpoint path of `api`.
pub fn path(api: ApiKind) -> &'static str {
    match api {
        ApiKind::Completions => "/v1/completions",
        ApiKind::Chat => "/v1/chat/completions",
    }
}
