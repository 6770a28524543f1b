//! The one error type of the model crate.

use thiserror::Error;

/// Why a model could not be evaluated.
///
/// Every variant carries the values that caused it, so its message alone tells the user
/// what to change. None of them is recoverable by retrying: the input has to change.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A parameter is outside its domain (negative rate, SCV below zero, quantile
    /// outside (0, 1), ...).
    #[error("invalid {name}: {value} ({reason})")]
    Invalid {
        /// The parameter's name as the user knows it.
        name: &'static str,
        /// The offending value, as given.
        value: String,
        /// What the value must satisfy.
        reason: &'static str,
    },
    /// The offered load is at or above capacity: waits grow without bound.
    #[error(
        "unstable queue: utilisation {rho:.4} >= 1 (offered load {offered_erlangs:.4} erlangs \
         on {servers} server(s)); at least {servers_needed} server(s) would make it stable"
    )]
    Unstable {
        /// Per-server utilisation, lambda * E\[S\] / servers.
        rho: f64,
        /// lambda * E\[S\], in erlangs.
        offered_erlangs: f64,
        /// Servers (workers) the model was given.
        servers: u32,
        /// The smallest server count with utilisation below one.
        servers_needed: u64,
    },
    /// No worker count meets the budget, because part of the wait does not shrink with
    /// more workers (the wait inside a burst) or because cores run out.
    #[error("budget {budget} cannot be met: {reason}")]
    Unreachable {
        /// The budget as the user gave it.
        budget: String,
        /// Why, with the numbers.
        reason: String,
    },
    /// A search was stopped by its caller before it found its answer (a page whose reader
    /// left).
    #[error("stopped before an answer: nobody waits for it any more")]
    Stopped,
}

impl ModelError {
    /// A bad value of the input `name`: what it was and why it is refused.
    pub fn invalid(name: &'static str, value: impl ToString, reason: &'static str) -> Self {
        Self::Invalid {
            name,
            value: short_number(value.to_string()),
            reason,
        }
    }

    /// The error for a load of `offered_erlangs` on `servers` servers.
    pub fn unstable(offered_erlangs: f64, servers: u32) -> Self {
        Self::Unstable {
            rho: offered_erlangs / f64::from(servers),
            offered_erlangs,
            servers,
            servers_needed: min_stable_servers(offered_erlangs),
        }
    }
}

/// The smallest integer server count c with `offered_erlangs / c < 1`.
pub fn min_stable_servers(offered_erlangs: f64) -> u64 {
    if !(offered_erlangs.is_finite()) || offered_erlangs <= 0.0 {
        return 1;
    }
    // floor(a) + 1 is the smallest integer strictly greater than a.
    (offered_erlangs.floor() as u64).saturating_add(1)
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, ModelError>;

/// A number as a message should show it: `1e300`, not three hundred digits.
fn short_number(text: String) -> String {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && text.len() > 16 => format!("{v:e}"),
        _ => text,
    }
}
