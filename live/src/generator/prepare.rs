//! What a run config leaves open until the world is asked, resolved in one place: whether
//! the API key can be sent, the prompts a tokenizer or a dataset gives, the model the
//! server serves (its `/v1/models`) and the shard count (this machine's calibration,
//! measured now if there is none). Everything else was settled, and validated once, when
//! the config was made ([`Checked`]).

use std::path::{Path, PathBuf};

use heisenbench_model::ModelError;

use super::calibrate::CalibrateError;
use super::config::Checked;
use super::shards::default_run_shards;
use crate::net::client::{ModelChoiceError, served_model};
use crate::net::secret::{KeyError, api_key};
use crate::openai::dataset::{DatasetError, read_dataset};
use crate::openai::prompt::{PromptError, Prompts};

/// What the config does not say yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    /// A tokenizer (`tokenizer.json` or its directory) that makes the prompts, or counts a
    /// dataset's.
    pub tokenizer: Option<PathBuf>,
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
    /// The tokenizer gives no prompts.
    #[error(transparent)]
    Prompts(#[from] PromptError),
    /// The dataset gives no prompts.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
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
            Self::Prompts(_) | Self::Dataset(_) => true,
            Self::Shards(CalibrateError::Stored(_) | CalibrateError::Model(_)) => true,
            Self::Shards(_) => false,
        }
    }
}

/// Settles what `pending` leaves open in `cfg`, on a machine of `cores` cores. `calibration`
/// is where the cost curve is stored (None: the default place); `tell` hears what takes
/// time before it starts (a calibration measured now). Returns the reasons for the shard
/// count, one a line (empty when it was given). Checks nothing `cfg` was checked for: what
/// it sets is made within bounds (prompts for the longest request, a dataset's pool as
/// long as its entries, a shard count of 1 to `cores`).
pub fn prepare(
    cfg: &mut Checked,
    pending: &Pending,
    calibration: Option<&Path>,
    cores: u32,
    tell: &mut dyn FnMut(&str),
) -> Result<Vec<String>, PrepareError> {
    // Before anything is asked of the server: a key that cannot be sent is the user's to fix.
    if let Some(var) = &cfg.api_key_env {
        api_key(var)?;
    }
    read_prompts(cfg, pending.tokenizer.as_deref())?;
    if pending.model {
        let model = served_model(cfg.server())?;
        cfg.settle().model = model;
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
        cfg.settle().shards = k;
        reasons = why;
    }
    Ok(reasons)
}

/// The prompts a tokenizer makes (up to the longest the run sends) or a dataset gives
/// (drawn by the run's seed, as many as its schedule has requests; a tokenizer only
/// counts them).
fn read_prompts(cfg: &mut Checked, tokenizer: Option<&Path>) -> Result<(), PrepareError> {
    let expected = cfg.workload.expected_requests();
    let seed = cfg.seed;
    let cfg = cfg.settle();
    if let Some(ds) = &mut cfg.workload.dataset {
        if let Some(path) = tokenizer {
            cfg.prompts = Prompts::counted_by(path)?;
        }
        cfg.prompts.dataset = read_dataset(ds, tokenizer, seed, expected)?;
    } else if let Some(path) = tokenizer {
        // A shared prefix is its own text, so counts up to the longer of the two.
        let longest = cfg
            .workload
            .longest_prompt()
            .max(cfg.workload.prefix.map_or(0, |p| p.tokens));
        cfg.prompts = Prompts::from_tokenizer(path, longest, cfg.prompts.content)?;
    }
    Ok(())
}
