//! What a request's prompt says, and how many tokens it is.
//!
//! By default every request's prompt is its own ([`PromptContent::Unique`]): words drawn at
//! random from a vocabulary, from a stream seeded by the run's seed and the request's index
//! in the schedule, so the same run sends the same prompts and no two requests share a
//! prompt or a first block of one (with a vocabulary of thousands of words, two prompts
//! agree on their first 16 words with probability below 1e-50). A server's prefix cache
//! then finds nothing it was not given by the workload itself. [`PromptContent::Repeated`]
//! keeps the old prompts, one word repeated, for measuring what a cache does with them:
//! every prompt of one length is the same, and a shorter one is a prefix of a longer one.
//!
//! Without a tokenizer a prompt of N "tokens" is N words: exact for the embedded mock (it
//! counts whitespace-separated words) and for nothing else, which every report says. The
//! vocabulary is then 4,900 two-syllable pseudo-words.
//!
//! With a Hugging Face `tokenizer.json` ([`Prompts::from_tokenizer`]) the vocabulary is the
//! tokenizer's own whole words that it encodes as one token each, alone and repeated, and
//! the counts are checked by encoding: a prompt of every count from 1 to 64, of every power
//! of two up to the largest count the run can ask for, and of that largest count itself.
//! Each word is its own pre-token (or merges stop at the word boundary), so counts between
//! the checked ones follow; the server's own usage then confirms every request.
//!
//! How counts are meant: N is the tokens of the prompt text alone, as
//! `encode(text, add_special_tokens = false)` gives. A server's usage also counts what it
//! adds around the text: the beginning-of-sequence token a completion gets
//! ([`Prompts::special_tokens`], read from the tokenizer's post-processor) or, for chat, the
//! chat template. Reports show the server's count minus N, per request, and call a request
//! a mismatch when that difference is not the run's usual one.
//!
//! The tokenizer is read once, in the process that plans the run; shards only draw words
//! from the vocabulary it gave, before each request is due, so building a prompt costs no
//! tokenization and nothing on the send path.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

use heisenbench_model::ModelError;
use heisenbench_model::sample::{SimRng, stream};
use rand::RngExt;
use serde::{Deserialize, Serialize};
use tokenizers::Tokenizer;

/// Most words a tokenizer's vocabulary gives unique prompts.
const MAX_VOCABULARY: usize = 4096;
/// The random stream's purpose for prompt words (beside the schedule's in
/// `heisenbench_model::sample::purpose`).
const PROMPT_PURPOSE: u64 = 6;

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
    /// The tokenizer's single-token words do not add up to exact counts in sequence.
    #[error(
        "--tokenizer {path}: a prompt of {tokens} tokens made of its single-token words encodes as {got}; exact unique prompts are not possible with it (--prompts repeated repeats one word instead)"
    )]
    Inexact {
        /// The file.
        path: PathBuf,
        /// The count asked for.
        tokens: u32,
        /// The count the tokenizer gave.
        got: u32,
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

/// What a prompt's words are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptContent {
    /// Seeded random words, a different prompt for every request.
    #[default]
    Unique,
    /// One word repeated: every prompt of a length is the same.
    Repeated,
}

impl FromStr for PromptContent {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "unique" => Ok(Self::Unique),
            "repeated" => Ok(Self::Repeated),
            _ => Err(ModelError::Invalid {
                name: "prompts",
                value: s.into(),
                reason: "expected unique or repeated",
            }),
        }
    }
}

/// How prompts are built: their words and where their counts come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompts {
    /// Unique (the default) or repeated.
    #[serde(default)]
    pub content: PromptContent,
    /// The word a repeated prompt repeats.
    pub unit: String,
    /// The words unique prompts draw from (empty: the built-in pseudo-words).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vocabulary: Vec<String>,
    /// The tokenizer file the counts were checked with; `None`: a prompt of N tokens is N
    /// words, exact only for servers that count words (the mock).
    pub tokenizer: Option<PathBuf>,
    /// Tokens the tokenizer itself adds around a prompt (a BOS), which servers count in a
    /// completion's usage.
    pub special_tokens: u32,
    /// The largest count checked by encoding.
    pub checked_up_to: u32,
    /// A dataset's drawn prompts, in the order requests take them (request i takes
    /// entry i mod their count), when the workload has a dataset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dataset: Vec<DatasetPrompt>,
}

/// One chat turn of a prompt (a dataset's, or a conversation's so far).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`...
    pub role: String,
    /// Its text.
    pub content: String,
}

/// A drawn entry's prompt, as it is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetPrompt {
    /// Text (a completions request's `prompt`, a chat request's one user turn).
    Text(String),
    /// Chat turns (a chat request's `messages`; joined by newlines for completions).
    Messages(Vec<ChatMessage>),
}

impl DatasetPrompt {
    /// The text a completions request sends: the prompt, or the turns' contents joined by
    /// newlines.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Self::Text(t) => t.as_str().into(),
            Self::Messages(m) => m
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n")
                .into(),
        }
    }
}

/// The tokenizer in `path` (a Hugging Face tokenizer.json), read within its file limit.
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer, PromptError> {
    let load = |reason: String| PromptError::Load {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = crate::files::read_bounded(path, crate::files::FileKind::Tokenizer)
        .map_err(|e| load(e.reason))?;
    Tokenizer::from_bytes(bytes).map_err(|e| load(e.to_string()))
}

impl Default for Prompts {
    fn default() -> Self {
        Self::words()
    }
}

impl Prompts {
    /// Unique prompts of the built-in pseudo-words, counted as words.
    pub fn words() -> Self {
        Self {
            content: PromptContent::Unique,
            unit: "word".into(),
            vocabulary: Vec::new(),
            tokenizer: None,
            special_tokens: 0,
            checked_up_to: 0,
            dataset: Vec::new(),
        }
    }

    /// These prompts with `content`.
    pub fn with_content(self, content: PromptContent) -> Self {
        Self { content, ..self }
    }

    /// Prompts of `content` whose token counts under the tokenizer in `path` are exact for
    /// every count up to `longest` (the largest the run can ask for).
    pub fn from_tokenizer(
        path: &Path,
        longest: u32,
        content: PromptContent,
    ) -> Result<Self, PromptError> {
        let tok = load_tokenizer(path)?;
        let checks = counts_to_check(longest);
        let candidates = candidates(&tok);
        let unit = candidates
            .iter()
            .find(|w| checks.iter().all(|&n| count(&tok, w, n, false) == Some(n)))
            .ok_or_else(|| PromptError::NoUnit {
                path: path.to_path_buf(),
            })?
            .clone();
        let with_specials = count(&tok, &unit, 1, true).unwrap_or(1);
        let mut prompts = Self {
            content,
            special_tokens: with_specials.saturating_sub(1),
            unit,
            vocabulary: Vec::new(),
            tokenizer: Some(path.to_path_buf()),
            checked_up_to: longest.max(1),
            dataset: Vec::new(),
        };
        if content == PromptContent::Unique {
            let mut vocabulary: Vec<String> = candidates
                .into_iter()
                .filter(|w| (1..=3).all(|n| count(&tok, w, n, false) == Some(n)))
                .collect();
            vocabulary.sort();
            vocabulary.dedup();
            vocabulary.truncate(MAX_VOCABULARY);
            prompts.vocabulary = vocabulary;
            for &n in &checks {
                // Checked at indices no run starts with, so the check is not one request's.
                let text = prompts.text(n, 0, u64::MAX - u64::from(n));
                let got = tok
                    .encode(text, false)
                    .map_or(0, |e| u32::try_from(e.len()).unwrap_or(u32::MAX));
                if got != n {
                    return Err(PromptError::Inexact {
                        path: path.to_path_buf(),
                        tokens: n,
                        got,
                    });
                }
            }
        }
        Ok(prompts)
    }

    /// Prompts that are given (a dataset's), counted by the tokenizer in `path`: its
    /// special tokens read from it, nothing else built.
    pub fn counted_by(path: &Path) -> Result<Self, PromptError> {
        let tok = load_tokenizer(path)?;
        let len = |special| tok.encode("a", special).map_or(0, |e| e.len());
        Ok(Self {
            tokenizer: Some(path.to_path_buf()),
            special_tokens: u32::try_from(len(true).saturating_sub(len(false))).unwrap_or(0),
            ..Self::words()
        })
    }

    /// The words unique prompts are drawn from.
    fn words_to_draw(&self) -> &[String] {
        if self.vocabulary.is_empty() {
            builtin_vocabulary()
        } else {
            &self.vocabulary
        }
    }

    /// The text of the prompt of `tokens` tokens for request `index` of a run seeded with
    /// `seed`: the same for the same three, and, unique, different for every index.
    pub fn text(&self, tokens: u32, seed: u64, index: u64) -> String {
        let n = tokens as usize;
        match self.content {
            PromptContent::Repeated => {
                let mut s = String::with_capacity(n * (self.unit.len() + 1));
                for i in 0..n {
                    if i > 0 {
                        s.push(' ');
                    }
                    s.push_str(&self.unit);
                }
                s
            }
            PromptContent::Unique => {
                let words = self.words_to_draw();
                let mut rng: SimRng = stream(
                    seed ^ index.wrapping_mul(0xD6E8_FEB8_6659_FD93),
                    PROMPT_PURPOSE,
                );
                let mut s = String::with_capacity(n * 6);
                for i in 0..n {
                    if i > 0 {
                        s.push(' ');
                    }
                    s.push_str(&words[rng.random_range(0..words.len())]);
                }
                s
            }
        }
    }

    /// One line for a report: what the prompts are and what a prompt's count means.
    pub fn describe(&self) -> String {
        if !self.dataset.is_empty() {
            let counted = match &self.tokenizer {
                Some(p) => format!("counted by {}", p.display()),
                None => "counted as words (exact for the embedded mock only; --tokenizer FILE for a real model)".into(),
            };
            return format!(
                "prompts from a dataset ({} entries drawn in a seeded order, sent as written); prompt tokens {counted}",
                self.dataset.len()
            );
        }
        let what = match self.content {
            PromptContent::Unique => format!(
                "unique prompts (seeded random words of a {}-word vocabulary, a different prompt for every request)",
                self.words_to_draw().len()
            ),
            PromptContent::Repeated => format!(
                "repeated prompts (the word {:?} repeated: every prompt of a length is the same, and a prefix cache serves them)",
                self.unit
            ),
        };
        match &self.tokenizer {
            None => format!(
                "{what}; prompt tokens counted as words (exact for the embedded mock only; --tokenizer FILE for a real model)"
            ),
            Some(p) => format!(
                "{what}; prompt tokens exact for {} (checked up to {}; the tokenizer adds {} special token(s))",
                p.display(),
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

/// The built-in vocabulary: every two-syllable pseudo-word of 14 consonants and 5 vowels
/// (`baba` .. `zuzu`), 4,900 words of four letters, in a fixed order.
fn builtin_vocabulary() -> &'static [String] {
    static WORDS: OnceLock<Vec<String>> = OnceLock::new();
    WORDS.get_or_init(|| {
        let syllables: Vec<String> = "bdfgklmnprstvz"
            .chars()
            .flat_map(|c| "aeiou".chars().map(move |v| format!("{c}{v}")))
            .collect();
        syllables
            .iter()
            .flat_map(|a| syllables.iter().map(move |b| format!("{a}{b}")))
            .collect()
    })
}

/// Tokens in `word` repeated `n` times; `None` if it does not encode.
fn count(tok: &Tokenizer, word: &str, n: u32, specials: bool) -> Option<u32> {
    let text = Prompts {
        unit: word.to_string(),
        content: PromptContent::Repeated,
        ..Prompts::words()
    }
    .text(n, 0, 0);
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
    fn repeated_words_with_single_spaces() {
        let p = Prompts::words().with_content(PromptContent::Repeated);
        assert_eq!(p.text(3, 1, 0), "word word word");
        assert_eq!(
            p.text(3, 1, 9),
            "word word word",
            "the same for every request"
        );
        assert_eq!(p.text(1, 1, 0), "word");
        assert_eq!(p.text(0, 1, 0), "");
    }

    /// Unique prompts: N words each, the same for the same seed and index, and over a run's
    /// worth of requests no two share their first 16 words (a cache block), so none is
    /// another's prefix either.
    #[test]
    fn unique_prompts_differ_from_the_first_words_and_repeat_by_seed() {
        let p = Prompts::words();
        assert_eq!(builtin_vocabulary().len(), 4900);
        let a = p.text(40, 7, 3);
        assert_eq!(a.split(' ').count(), 40);
        assert_eq!(a, p.text(40, 7, 3));
        assert_ne!(a, p.text(40, 8, 3), "another seed, another prompt");
        let heads: std::collections::HashSet<String> = (0..20_000)
            .map(|i| {
                let t = p.text(16, 1, i);
                assert_eq!(t.split(' ').count(), 16);
                t
            })
            .collect();
        assert_eq!(heads.len(), 20_000);
        let short = p.text(5, 1, 11);
        assert!(!p.text(30, 1, 12).starts_with(&short));
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
        let p = Prompts::from_tokenizer(&fixture(), 1000, PromptContent::Repeated).unwrap();
        assert_eq!(p.special_tokens, 1, "the post-processor adds <s>");
        assert_eq!(p.checked_up_to, 1000);
        // "word" is not in this vocabulary as one piece; the first common word that is wins.
        assert_eq!(p.unit, "the");
        let tok = Tokenizer::from_file(fixture()).unwrap();
        for n in [65, 97, 129, 300, 333, 777, 999] {
            let enc = tok.encode(p.text(n, 1, 0), false).unwrap();
            assert_eq!(enc.len(), n as usize, "{n}");
            let with_bos = tok.encode(p.text(n, 1, 0), true).unwrap();
            assert_eq!(with_bos.len(), n as usize + 1, "{n}");
        }
    }

    /// Unique prompts under the fixture's tokenizer: a vocabulary of its single-token
    /// words, every prompt exactly the count asked for (lengths not among the checked ones
    /// too), and different prompts for different requests.
    #[test]
    fn unique_tokenizer_prompts_are_exact_and_distinct() {
        let p = Prompts::from_tokenizer(&fixture(), 1000, PromptContent::Unique).unwrap();
        assert!(p.vocabulary.len() > 50, "{}", p.vocabulary.len());
        let tok = Tokenizer::from_file(fixture()).unwrap();
        for (i, n) in [65u32, 97, 129, 300, 333, 777, 999].into_iter().enumerate() {
            let text = p.text(n, 5, i as u64);
            assert_eq!(
                tok.encode(text.clone(), false).unwrap().len(),
                n as usize,
                "{n}"
            );
            assert_ne!(text, p.text(n, 5, i as u64 + 100));
        }
        assert!(
            p.describe().starts_with("unique prompts"),
            "{}",
            p.describe()
        );
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
        let err = Prompts::from_tokenizer(&path, 10, PromptContent::Unique).unwrap_err();
        assert!(matches!(err, PromptError::NoUnit { .. }), "{err}");
        std::fs::write(&path, "{ not json").unwrap();
        let err = Prompts::from_tokenizer(&path, 10, PromptContent::Unique).unwrap_err();
        assert!(matches!(err, PromptError::Load { .. }), "{err}");
        let err = Prompts::from_tokenizer(&dir.join("missing.json"), 10, PromptContent::Unique)
            .unwrap_err();
        assert!(err.to_string().contains("missing.json"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
