//! Prompts from a dataset file, as a workload sees them: which file, which of its entries,
//! and each drawn entry's prompt and output tokens.
//!
//! Reading the file (its formats, counting its tokens) is the live crate's; what is here is
//! enough to schedule, simulate and predict the same requests: the entries are drawn once,
//! in a seeded order, into a pool, and request `i` takes entry `i mod pool`, in `sim` and
//! `run` alike. Until every entry of the pool was sent, no entry is sent twice.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};

/// Most entries one run draws from a dataset (a schedule that needs more cycles through
/// them).
pub const MAX_POOL: u64 = 100_000;

/// Entries drawn when the schedule's length is not known in advance (a closed loop over a
/// duration).
pub const POOL_WITHOUT_COUNT: u64 = 10_000;

/// A dataset file of prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dataset {
    /// The file.
    pub path: PathBuf,
    /// Its format.
    #[serde(default)]
    pub format: DatasetFormat,
    /// Entries whose prompt has fewer tokens are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_prompt_tokens: Option<u32>,
    /// Entries whose prompt has more tokens are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_prompt_tokens: Option<u32>,
    /// Whether a request asks for its entry's output length where the dataset gives one
    /// (true by default); false: the workload's `output_tokens` are drawn instead.
    #[serde(default = "yes")]
    pub outputs_from_dataset: bool,
    /// The drawn entries' prompt tokens and output tokens (0: the entry gives none), in the
    /// order requests take them; filled when the file is read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<[u32; 2]>,
    /// What reading the file found; filled when it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<DatasetRead>,
}

fn yes() -> bool {
    true
}

/// A dataset's file format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetFormat {
    /// Told by the file's first character: `[` ShareGPT, `{` JSONL.
    #[default]
    Auto,
    /// A JSON array of conversations (`conversations`: turns with `from` and `value`): the
    /// first turn is the prompt, the reply after it gives the output length.
    Sharegpt,
    /// One JSON object a line: `prompt` (text) or `messages` (chat turns with `role` and
    /// `content`), and optionally `output_tokens`.
    Jsonl,
}

impl std::str::FromStr for DatasetFormat {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "sharegpt" => Ok(Self::Sharegpt),
            "jsonl" => Ok(Self::Jsonl),
            _ => Err(ModelError::invalid(
                "dataset format",
                s,
                "expected auto, sharegpt or jsonl",
            )),
        }
    }
}

impl std::fmt::Display for DatasetFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Sharegpt => "sharegpt",
            Self::Jsonl => "jsonl",
        })
    }
}

/// What reading a dataset found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetRead {
    /// The format it was read as.
    pub format: DatasetFormat,
    /// Entries in the file.
    pub in_file: u64,
    /// Entries looked at, in the seeded order, to fill the pool.
    pub looked_at: u64,
    /// Of those, left out: no prompt (or, for ShareGPT, no reply), or a prompt outside the
    /// length filter.
    pub left_out: u64,
    /// How tokens were counted: a tokenizer file, or whitespace-separated words.
    pub counted_by: String,
}

impl Dataset {
    /// A dataset read from `path` in `format`, all its entries kept.
    pub fn new(path: PathBuf, format: DatasetFormat) -> Self {
        Self {
            path,
            format,
            min_prompt_tokens: None,
            max_prompt_tokens: None,
            outputs_from_dataset: true,
            entries: Vec::new(),
            read: None,
        }
    }

    /// Whether a prompt of `tokens` passes the length filter.
    pub fn keeps(&self, tokens: u32) -> bool {
        tokens >= self.min_prompt_tokens.unwrap_or(1).max(1)
            && tokens <= self.max_prompt_tokens.unwrap_or(crate::limits::MAX_TOKENS)
    }

    /// How many entries to draw for a schedule of `expected` requests (None: unknown).
    pub fn pool_size(expected: Option<f64>) -> u64 {
        expected
            .map_or(POOL_WITHOUT_COUNT, |n| n.ceil().max(1.0) as u64)
            .min(MAX_POOL)
    }

    /// Request `index`'s entry in the pool.
    pub fn entry_of(&self, index: u64) -> Option<u64> {
        let n = self.entries.len() as u64;
        (n > 0).then(|| index % n)
    }

    /// Request `index`'s prompt tokens and, when it is to be asked for, its entry's output
    /// tokens.
    pub fn lengths_of(&self, index: u64) -> Option<(u32, Option<u32>)> {
        let [input, output] = self.entries[self.entry_of(index)? as usize];
        Some((
            input,
            (self.outputs_from_dataset && output > 0).then_some(output),
        ))
    }

    /// The drawn entries' mean prompt tokens, and their mean output tokens when every one
    /// gives it and they are asked for.
    pub fn mean_lengths(&self) -> Option<(f64, Option<f64>)> {
        if self.entries.is_empty() {
            return None;
        }
        let n = self.entries.len() as f64;
        let input = self.entries.iter().map(|e| f64::from(e[0])).sum::<f64>() / n;
        let outputs = self.outputs_from_dataset && self.entries.iter().all(|e| e[1] > 0);
        let output = outputs.then(|| self.entries.iter().map(|e| f64::from(e[1])).sum::<f64>() / n);
        Some((input, output))
    }

    /// Checks the filter and the drawn entries.
    pub fn validate(&self) -> Result<()> {
        if let (Some(lo), Some(hi)) = (self.min_prompt_tokens, self.max_prompt_tokens)
            && lo > hi
        {
            return Err(ModelError::invalid(
                "workload.dataset",
                format!("{lo}..{hi} prompt tokens"),
                "the least prompt length is above the most",
            ));
        }
        if self.entries.len() as u64 > MAX_POOL {
            return Err(ModelError::invalid(
                "workload.dataset.entries",
                self.entries.len(),
                "more than 100,000 drawn entries",
            ));
        }
        if let Some(bad) = self.entries.iter().find(|[i, o]| {
            *i == 0 || *i > crate::limits::MAX_TOKENS || *o > crate::limits::MAX_TOKENS
        }) {
            return Err(ModelError::invalid(
                "workload.dataset.entries",
                format!("{bad:?}"),
                "each prompt must be between 1 and 10,000,000 tokens",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_take_the_pool_in_turn() {
        let mut d = Dataset::new("d.jsonl".into(), DatasetFormat::Jsonl);
        d.entries = vec![[10, 3], [20, 0], [30, 5]];
        assert_eq!(d.lengths_of(0), Some((10, Some(3))));
        assert_eq!(d.lengths_of(1), Some((20, None)), "no output given");
        assert_eq!(
            d.lengths_of(5),
            Some((30, Some(5))),
            "cycles after the pool"
        );
        assert_eq!(d.mean_lengths(), Some((20.0, None)));
        d.outputs_from_dataset = false;
        assert_eq!(d.lengths_of(0), Some((10, None)));
        assert_eq!(
            Dataset::new("x".into(), DatasetFormat::Auto).lengths_of(0),
            None
        );
    }

    #[test]
    fn the_filter_and_the_pool() {
        let mut d = Dataset::new("d".into(), DatasetFormat::Auto);
        d.min_prompt_tokens = Some(4);
        d.max_prompt_tokens = Some(8);
        assert!(!d.keeps(3) && d.keeps(4) && d.keeps(8) && !d.keeps(9));
        assert!(d.validate().is_ok());
        d.min_prompt_tokens = Some(9);
        assert!(d.validate().is_err());
        assert_eq!(Dataset::pool_size(Some(12.2)), 13);
        assert_eq!(Dataset::pool_size(None), POOL_WITHOUT_COUNT);
        assert_eq!(Dataset::pool_size(Some(1e9)), MAX_POOL);
        assert_eq!(
            "sharegpt".parse::<DatasetFormat>().unwrap(),
            DatasetFormat::Sharegpt
        );
        assert!("csv".parse::<DatasetFormat>().is_err());
    }
}
