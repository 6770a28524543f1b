//! Secrets: the API key is read from its variable once, checked before it can be written
//! into a request head, and remembered so that every text heisenbench prints or saves can
//! be scrubbed of it, including a server's error message that echoes it back.
//!
//! Every text that comes from outside (a server's error body, a transport error's chain,
//! a line of a metrics page) passes through [`crate::openai::stream::clip`] before it is
//! kept, and `clip` calls [`redact`]: the scrub lives in that one path, not beside each
//! message. Command lines echoed into reports (the audited client's) go through
//! [`redact_args`].

use std::borrow::Cow;
use std::sync::RwLock;

/// What replaces a secret in any output.
pub const REDACTED: &str = "***";

/// Every key read so far in this process.
static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Why the key in `--api-key-env`'s variable cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--api-key-env {var}: {reason}")]
pub struct KeyError {
    /// The variable.
    pub var: String,
    /// What is wrong with its value (never the value itself).
    pub reason: String,
}

/// The API key held by the environment variable `var`: refused when the variable is unset,
/// empty, or holds a byte a header value cannot carry (a control character such as CR or
/// LF, which would end the header and start another, or a non-ASCII byte). The key is
/// remembered for [`redact`].
pub fn api_key(var: &str) -> Result<String, KeyError> {
    let key = checked(var, std::env::var(var))?;
    remember(&key);
    Ok(key)
}

/// The key `value` read from `var`, checked as [`api_key`] says.
fn checked(var: &str, value: Result<String, std::env::VarError>) -> Result<String, KeyError> {
    let fail = |reason: String| KeyError {
        var: var.to_string(),
        reason,
    };
    let key = match value {
        Ok(k) => k,
        Err(std::env::VarError::NotPresent) => {
            return Err(fail(
                "the variable is not set, so no key would be sent".into(),
            ));
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(fail("the variable's value is not UTF-8".into()));
        }
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(fail(
            "the variable is empty, so no key would be sent".into(),
        ));
    }
    if let Some((at, b)) = key
        .bytes()
        .enumerate()
        .find(|(_, b)| !(b.is_ascii_graphic() || *b == b' ' || *b == b'\t'))
    {
        let what = match b {
            b'\r' => "a carriage return".to_string(),
            b'\n' => "a line feed".to_string(),
            b if b.is_ascii_control() => format!("the control byte 0x{b:02x}"),
            _ => "a non-ASCII byte".to_string(),
        };
        return Err(fail(format!(
            "the key holds {what} at byte {at}, which an HTTP header cannot carry: refused"
        )));
    }
    Ok(key.to_string())
}

/// Adds `secret` to what [`redact`] scrubs.
pub fn remember(secret: &str) {
    if secret.is_empty() {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    if !known.iter().any(|k| k == secret) {
        known.push(secret.to_string());
        // Longest first, so a key that contains another is replaced whole.
        known.sort_by_key(|k| std::cmp::Reverse(k.len()));
    }
}

/// Remembers the secrets a URL carries: the user and password before its `@`, and the
/// value of every query parameter whose name says it is a credential (`api-key`, `token`,
/// `sig`, ...), so that a server quoting its request line back is scrubbed too.
pub fn remember_url(url: &str) {
    let Ok(u) = reqwest::Url::parse(url) else {
        return;
    };
    for raw in [u.username(), u.password().unwrap_or("")] {
        remember(raw);
    }
    for (name, value) in u.query_pairs() {
        if names_a_secret(&name) || name.eq_ignore_ascii_case("sig") {
            remember(&value);
        }
    }
    // The query as sent (percent-encoded) as well as decoded.
    for pair in u.query().unwrap_or("").split('&') {
        if let Some((name, value)) = pair.split_once('=')
            && (names_a_secret(name) || name.eq_ignore_ascii_case("sig"))
        {
            remember(value);
        }
    }
}

/// `text` with every remembered secret replaced by [`REDACTED`].
pub fn redact(text: &str) -> Cow<'_, str> {
    let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
    let mut out = Cow::Borrowed(text);
    for k in known.iter() {
        if out.contains(k.as_str()) {
            out = Cow::Owned(out.replace(k.as_str(), REDACTED));
        }
    }
    out
}

/// Whether a command-line flag's name says its value is a credential (`--api-key`,
/// `--token`, `--hf-token`, `--password`, `--secret`, `--auth`, a header flag).
fn names_a_secret(flag: &str) -> bool {
    let name = flag.trim_start_matches('-').to_ascii_lowercase();
    let name = name.replace('_', "-");
    // A token is a credential as a word of its own (`--token`, `--hf-token`), not in a count
    // of tokens or a tokenizer (`--output-tokens`, `--tokenizer`).
    name.split('-').any(|w| w == "token")
        || [
            "key",
            "secret",
            "password",
            "passwd",
            "auth",
            "header",
            "credential",
        ]
        .iter()
        .any(|w| name.contains(w))
        || name == "h"
}

/// A command line as reports show it: the value after (or `=`-joined to) a flag that names
/// a credential, and any argument holding `Bearer ` or an `Authorization:` header, become
/// [`REDACTED`]; remembered secrets are scrubbed from the rest.
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        let lower = a.to_ascii_lowercase();
        if hide_next && !a.starts_with('-') {
            out.push(REDACTED.to_string());
            hide_next = false;
            continue;
        }
        hide_next = false;
        if lower.contains("bearer ") || lower.contains("authorization:") {
            out.push(REDACTED.to_string());
        } else if a.starts_with('-') && names_a_secret(a.split('=').next().unwrap_or(a)) {
            match a.split_once('=') {
                Some((flag, _)) => out.push(format!("{flag}={REDACTED}")),
                None => {
                    out.push(a.clone());
                    hide_next = true;
                }
            }
        } else {
            out.push(redact(a).into_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_secret_never_survives_redaction() {
        remember("sk-test-remembered-0123");
        remember("sk-test-remembered-0123-longer");
        assert_eq!(
            redact("bad key sk-test-remembered-0123-longer, and sk-test-remembered-0123"),
            "bad key ***, and ***"
        );
        assert!(matches!(redact("nothing secret"), Cow::Borrowed(_)));
    }

    #[test]
    fn credentials_in_a_command_line_are_hidden() {
        let args: Vec<String> = [
            "vllm",
            "bench",
            "--api-key",
            "sk-1",
            "--hf-token=hf_2",
            "-H",
            "Authorization: Bearer x",
            "--header",
            "X-Api-Key: 3",
            "--model",
            "m",
            "--output-tokens",
            "200",
            "--tokenizer",
            "/tok",
            "--api_key",
            "--next",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let shown = redact_args(&args);
        assert_eq!(
            shown,
            [
                "vllm",
                "bench",
                "--api-key",
                "***",
                "--hf-token=***",
                "-H",
                "***",
                "--header",
                "***",
                "--model",
                "m",
                "--output-tokens",
                "200",
                "--tokenizer",
                "/tok",
                "--api_key",
                "--next"
            ]
        );
    }

    #[test]
    fn a_key_that_would_inject_a_header_is_refused() {
        let read = |v: &str| checked("KEY", Ok(v.to_string()));
        let e = read("abc\r\nx-injected: 1").unwrap_err();
        assert!(e.to_string().contains("carriage return at byte 3"), "{e}");
        assert!(!e.to_string().contains("injected"), "{e}");
        assert!(read("a\u{1}b").unwrap_err().to_string().contains("0x01"));
        assert!(read("kéy").unwrap_err().to_string().contains("non-ASCII"));
        assert!(read("  ").unwrap_err().to_string().contains("empty"));
        let unset = checked("KEY", Err(std::env::VarError::NotPresent)).unwrap_err();
        assert_eq!(
            unset.to_string(),
            "--api-key-env KEY: the variable is not set, so no key would be sent"
        );
        assert_eq!(read(" sk-good key\t42 ").unwrap(), "sk-good key\t42");
    }
}
