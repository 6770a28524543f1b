//! What a run config leaves open until the world is asked, resolved in one place: whether
//! the API key can be sent, the model the server serves (its `/v1/models`) and the shard
//! count (this machine's calibration, measured now if there is none). Everything else was
//! settled, and validated, when the config was made.

use std::path::Path;

use heisenbench_model::ModelError;

use super::calibrate::CalibrateError;
use super::config::RunConfig;
use super::shards::default_run_shards;
use crate::net::client::{ModelChoiceError, served_model};
use crate::net::secret::{KeyError, api_key};

/// What the config does not say yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// The model: ask the server which one it serves.
    pub model: bool,
    /// The shard count: plan it from the calibration.
    pub shards: bool,
    /// The run goes to the embedded mock (whose responses arrive whole), not a server of
    /// the user's.
    pub embedded_mock: bool,
}

/// Why a run could not be prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrepareError {
    /// The server could not say which model it serves, or serves several.
    #[error(transparent)]
    Model(#[from] ModelChoiceError),
    /// The shard count could not be planned.
    #[error(transparent)]
    Shards(#[from] CalibrateError),
    /// The resolved run is not valid.
    #[error(transparent)]
    Invalid(#[from] ModelError),
    /// The API key the run was told to send cannot be sent.
    #[error(transparent)]
    Key(#[from] KeyError),
}

impl PrepareError {
    /// Whether the user can fix it with other input (a flag, a file), rather than it
    /// being the machine's or the network's failure.
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Model(ModelChoiceError::Unreachable(_)) => false,
            Self::Model(_) | Self::Invalid(_) | Self::Key(_) => true,
            Self::Shards(CalibrateError::Stored(_) | CalibrateError::Model(_)) => true,
            Self::Shards(_) => false,
        }
    }
}

/// Settles what `pending` leaves open in `cfg`, on a machine of `cores` cores, and
/// validates the result. `calibration` is where the cost curve is stored (None: the
/// default place); `tell` hears what takes time before it starts (a calibration measured
/// now). Returns the reasons for the shard count, one a line (empty when it was given).
pub fn prepare(
    cfg: &mut RunConfig,
    pending: Pending,
    calibration: Option<&Path>,
    cores: u32,
    tell: &mut dyn FnMut(&str),
) -> Result<Vec<String>, PrepareError> {
    // Before anything is asked of the server: a key that cannot be sent is the user's to fix.
    if let Some(var) = &cfg.api_key_env {
        api_key(var)?;
    }
    if pending.model {
        cfg.model = served_model(cfg.server())?;
    }
    let mut reasons = Vec::new();
    if pending.shards {
        let (k, why) = default_run_shards(
            &cfg.workload,
            pending.embedded_mock,
            calibration,
            cores,
            tell,
        )?;
        cfg.shards = k;
        reasons = why;
    }
    cfg.validate()?;
    cfg.check_read()?;
    Ok(reasons)
}
