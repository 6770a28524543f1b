//! What a request's prompt says, and how many tokens it is.
//!
//! A prompt is one word repeated, separated by single spaces: `word word word`. Without a
//! tokenizer the word is `word` and a prompt of N "tokens" is N words: exact for the
//! embedded mock (it counts whitespace-separated words) and for nothing else, which every
//! report says.
//!
//! With a Hugging Face `tokenizer.json` ([`Prompts::from_tokenizer`]) a word is chosen that
//! the tokenizer turns into exactly one token per repetition, checked by encoding: every
//! count from 1 to 64, every power of two up to the largest count the run can ask for, and
//! that largest count itself. A repetition of one word is what tokenizers keep most stable
//! (each copy is its own pre-token, or merges stop at the word boundary), so counts between
//! the checked ones follow; the server's own usage then confirms every request.
//!
//! How counts are meant: N is the tokens of the prompt text alone, as
//! `encode(text, add_special_tokens = false)` gives. A server's usage also counts what it
//! adds around the text: the beginning-of-sequence token a completion gets
//! ([`Prompts::special_tokens`], read from the tokenizer's post-processor) or, for chat, the
//! chat template. Reports show the server's count minus N, per request, and call a request
//! a mismatch when that difference is not the run's usual one.
//!
//! The tokenizer is read once, in the process that plans the run; shards only repeat the
//! chosen word, so building a prompt costs no tokenization on the send path.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokenizers::Tokenizer;

/// Counts checked one by one before the powers of two take over.
const CHECK_ALL_UP_TO: u32 = 64;

/// Vocabulary entries tried as the repeated word when the common words all fail.
const VOCAB_CANDIDATES: usize = 4096;

/// Why no exact prompt can be built with a tokenizer file.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The file could not be read or is not a tokenizer.
    #[error("--tokenizer {path}: {reason}")]
    Load {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// No word of the vocabulary repeats as one token per copy.
    #[error(
        "--tokenizer {path}: found no word that this tokenizer encodes as one token per repetition; exact prompt lengths are not possible with it"
    )]
    NoUnit {
        /// The file.
        path: PathBuf,
    },
}

/// How prompts are built: the repeated word and where its count comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompts {
    /// The word a prompt repeats.
    pub unit: String,
    /// The tokenizer file the counts were checked with; `None`: a prompt of N tokens is N
    /// words, exact only for servers that count words (the mock).
    pub tokenizer: Option<PathBuf>,
    /// Tokens the tokenizer itself adds around a prompt (a BOS), which servers count in a
    /// completion's usage.
    pub special_tokens: u32,
    /// The largest count checked by encoding.
    pub checked_up_to: u32,
}

impl Default for Prompts {
    fn default() -> Self {
        Self::words()
    }
}

impl Prompts {
    /// Prompts of repeated `word`, counted as words.
    pub fn words() -> Self {
        Self {
            unit: "word".into(),
            tokenizer: None,
            special_tokens: 0,
            checked_up_to: 0,
        }
    }

    /// Prompts whose token counts under the tokenizer in `path` are exact for every count up
    /// to `longest` (the largest the run can ask for).
    pub fn from_tokenizer(path: &Path, longest: u32) -> Result<Self, PromptError> {
        let load = |reason: String| PromptError::Load {
            path: path.to_path_buf(),
            reason,
        };
        let tok = Tokenizer::from_file(path).map_err(|e| load(e.to_string()))?;
        let checks = counts_to_check(longest);
        let unit = candidates(&tok)
            .into_iter()
            .find(|w| checks.iter().all(|&n| count(&tok, w, n, false) == Some(n)))
            .ok_or_else(|| PromptError::NoUnit {
                path: path.to_path_buf(),
            })?;
        let with_specials = count(&tok, &unit, 1, true).unwrap_or(1);
        Ok(Self {
            special_tokens: with_specials.saturating_sub(1),
            unit,
            tokenizer: Some(path.to_path_buf()),
            checked_up_to: longest.max(1),
        })
    }

    /// The text of a prompt of `tokens` tokens.
    pub fn text(&self, tokens: u32) -> String {
        let n = tokens as usize;
        let mut s = String::with_capacity(n * (self.unit.len() + 1));
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(&self.unit);
        }
        s
    }

    /// One line for a report: what a prompt's count means.
    pub fn describe(&self) -> String {
        match &self.tokenizer {
            None => "prompt tokens counted as words (exact for the embedded mock only; --tokenizer FILE for a real model)".into(),
            Some(p) => format!(
                "prompt tokens exact for {} (the word {:?} repeated; checked up to {}; the tokenizer adds {} special token(s))",
                p.display(),
                self.unit,
                self.checked_up_to,
                self.special_tokens
            ),
        }
    }
}

/// 1..=64, the powers of two above, and `longest`.
fn counts_to_check(longest: u32) -> Vec<u32> {
    let longest = longest.max(1);
    let mut v: Vec<u32> = (1..=CHECK_ALL_UP_TO.min(longest)).collect();
    let mut p = CHECK_ALL_UP_TO.saturating_mul(2);
    while p < longest {
        v.push(p);
        p = p.saturating_mul(2);
    }
    if longest > CHECK_ALL_UP_TO {
        v.push(longest);
    }
    v
}

/// Tokens in `word` repeated `n` times; `None` if it does not encode.
fn count(tok: &Tokenizer, word: &str, n: u32, specials: bool) -> Option<u32> {
    let text = Prompts {
        unit: word.to_string(),
        ..Prompts::words()
    }
    .text(n);
    let enc = tok.encode(text, specials).ok()?;
    u32::try_from(enc.len()).ok()
}

/// Words to try, common English first, then the vocabulary's own whole-word entries.
fn candidates(tok: &Tokenizer) -> Vec<String> {
    let mut v: Vec<String> = ["word", "the", "hello", "token", "a", "test", "data"]
        .map(String::from)
        .to_vec();
    let vocab = tok.get_vocab(false);
    let mut ids: Vec<u32> = vocab.values().copied().collect();
    ids.sort_unstable();
    for id in ids.into_iter().take(VOCAB_CANDIDATES) {
        if let Ok(text) = tok.decode(&[id], true) {
            let w = text.trim();
            if w.len() >= 2 && w.chars().all(|c| c.is_ascii_alphabetic()) {
                v.push(w.to_string());
            }
        }
    }
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_repeat_with_single_spaces() {
        let p = Prompts::words();
        assert_eq!(p.text(3), "word word word");
        assert_eq!(p.text(1), "word");
        assert_eq!(p.text(0), "");
    }

    #[test]
    fn checked_counts_cover_the_small_ones_and_the_longest() {
        assert_eq!(counts_to_check(3), vec![1, 2, 3]);
        let c = counts_to_check(1000);
        assert_eq!(c.len(), 64 + 3 + 1);
        assert_eq!(&c[64..], &[128, 256, 512, 1000]);
        assert_eq!(counts_to_check(0), vec![1]);
    }

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer/tiny-llama.json")
    }

    /// The fixture is the tokenizer of the llama.cpp harness's model (SentencePiece style:
    /// a space marker, whole-word pieces, BOS added): its prompts hold exactly the count
    /// asked for, for lengths that were not among the checked ones too.
    #[test]
    fn tokenizer_prompts_are_exact_between_the_checked_counts() {
        let p = Prompts::from_tokenizer(&fixture(), 1000).unwrap();
        assert_eq!(p.special_tokens, 1, "the post-processor adds <s>");
        assert_eq!(p.checked_up_to, 1000);
        // "word" is not in this vocabulary as one piece; the first common word that is wins.
        assert_eq!(p.unit, "the");
        let tok = Tokenizer::from_file(fixture()).unwrap();
        for n in [65, 97, 129, 300, 333, 777, 999] {
            let enc = tok.encode(p.text(n), false).unwrap();
            assert_eq!(enc.len(), n as usize, "{n}");
            let with_bos = tok.encode(p.text(n), true).unwrap();
            assert_eq!(with_bos.len(), n as usize + 1, "{n}");
        }
    }

    #[test]
    fn a_tokenizer_without_whole_words_is_refused() {
        // Characters only, no merges: every word is several tokens.
        let dir = std::env::temp_dir().join(format!("hb-prompt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chars.json");
        let vocab: serde_json::Map<String, serde_json::Value> = "abcdefghijklmnopqrstuvwxyz "
            .chars()
            .enumerate()
            .map(|(i, c)| (c.to_string(), serde_json::json!(i)))
            .collect();
        let doc = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
            "model": { "type": "BPE", "vocab": vocab, "merges": [] }
        });
        std::fs::write(&path, doc.to_string()).unwrap();
        let err = Prompts::from_tokenizer(&path, 10).unwrap_err();
        assert!(matches!(err, PromptError::NoUnit { .. }), "{err}");
        std::fs::write(&path, "{ not json").unwrap();
        let err = Prompts::from_tokenizer(&path, 10).unwrap_err();
        assert!(matches!(err, PromptError::Load { .. }), "{err}");
        let err = Prompts::from_tokenizer(&dir.join("missing.json"), 10).unwrap_err();
        assert!(err.to_string().contains("missing.json"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
