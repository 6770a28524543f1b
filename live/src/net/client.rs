//! The reqwest client, built in one place: TLS trust, the bearer token, and the questions
//! asked of a server before a run starts (which model it serves). `https://` targets and
//! URLs with credentials go through it; plain `http://` goes through the shard's own
//! HTTP/1.1 client (`http1`).
//!
//! `https://` targets are verified against this machine's trust store (rustls with the
//! platform verifier), plus a private CA given with `--ca-cert`. `--insecure` turns
//! verification off; reports say so.

use std::path::Path;
use std::time::Duration;

use heisenbench_model::limits::MAX_MODEL_LIST_BYTES;

use crate::openai::stream::{clip, error_text};

/// A server as a client sees it: where it is and how to trust and address it.
#[derive(Debug, Clone, Copy)]
pub struct Server<'a> {
    /// Base URL, e.g. `http://127.0.0.1:8000` (a trailing `/v1` is accepted).
    pub url: &'a str,
    /// A PEM file of extra trusted certificates (a private CA).
    pub ca_cert: Option<&'a Path>,
    /// Skip TLS certificate verification.
    pub insecure: bool,
    /// Environment variable holding the API key (sent as a bearer token).
    pub api_key_env: Option<&'a str>,
}

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
    /// The API key cannot be used (unset, empty, or not a header value).
    #[error(transparent)]
    ApiKey(#[from] crate::net::secret::KeyError),
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

/// A client for `server` (its TLS trust; one per shard). Fails when `--api-key-env` names
/// a key that cannot be sent, so no run starts without the key it was told to send.
pub fn client(server: Server<'_>) -> Result<reqwest::Client, HttpError> {
    crate::net::secret::remember_url(server.url);
    if let Some(var) = server.api_key_env {
        crate::net::secret::api_key(var)?;
    }
    // rustls needs one process-wide crypto provider; a second install is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90));
    if let Some(path) = server.ca_cert {
        let bad = |reason: String| HttpError::CaCert {
            path: path.display().to_string(),
            reason,
        };
        let pem = crate::files::read_bounded(path, crate::files::FileKind::Certificates)
            .map_err(|e| bad(e.reason))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(e.to_string()))?;
        if certs.is_empty() {
            return Err(bad("no PEM certificate in it".into()));
        }
        b = b.tls_certs_merge(certs);
    }
    if server.insecure {
        b = b.danger_accept_invalid_certs(true);
    }
    b.build().map_err(HttpError::Build)
}

/// The bearer token for `server`, read from its environment variable (checked by
/// [`client`], which every run builds first; a key that fails the check is never sent).
pub fn authorization(server: Server<'_>) -> Option<String> {
    crate::net::secret::remember_url(server.url);
    server
        .api_key_env
        .and_then(|var| crate::net::secret::api_key(var).ok())
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

/// The one model `server` serves, from its `/v1/models`.
pub fn served_model(server: Server<'_>) -> Result<String, ModelChoiceError> {
    let mut models = served_models(server).map_err(ModelChoiceError::Unreachable)?;
    match models.len() {
        1 => Ok(models.remove(0)),
        0 => Err(ModelChoiceError::NoModel),
        _ => Err(ModelChoiceError::Several(models)),
    }
}

/// The ids of the models `/v1/models` lists (10 s timeout).
pub fn served_models(server: Server<'_>) -> Result<Vec<String>, HttpError> {
    let url = at_path(server.url, "/v1/models");
    let shown = redact_url(&url);
    let client = client(server)?;
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
        if let Some(a) = authorization(server) {
            req = req.header("authorization", a);
        }
        let mut resp = req.send().await.map_err(request)?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(request)? {
            if body.len() + chunk.len() > MAX_MODEL_LIST_BYTES {
                return Err(HttpError::NotAList {
                    url: shown.clone(),
                    reason: format!("longer than {} MiB", MAX_MODEL_LIST_BYTES >> 20),
                });
            }
            body.extend_from_slice(&chunk);
        }
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

/// The URL of `path` (which starts with `/`) on the server whose base URL is `base`: a
/// trailing `/` or `/v1` of the base is dropped (a base given with its `/v1` is accepted),
/// and the base's query string, if any (`?api-version=...`), stays at the end.
pub fn at_path(base: &str, path: &str) -> String {
    let (base, query) = match base.find(['?', '#']) {
        Some(i) => base.split_at(i),
        None => (base, ""),
    };
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}{path}{query}")
}

/// `url` as reports and logs show it: any `user:password@` becomes `***@`, and the value
/// of every query parameter `***` (a query may carry a key, `?api-key=...`; the names stay,
/// so `?api-version=***` still says which parameter was given).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("***{}", &authority[at..]),
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let (query, fragment) = match query.split_once('#') {
                Some((q, f)) => (q, format!("#{f}")),
                None => (query, String::new()),
            };
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((name, _)) => format!("{name}=***"),
                    None if p.is_empty() => String::new(),
                    None => "***".to_string(),
                })
                .collect();
            format!("{path}?{}{fragment}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{}{authority}{tail}", &url[..scheme_end])
}
