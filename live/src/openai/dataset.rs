//! Prompts from a dataset file: ShareGPT's JSON or a plain JSONL, read, counted and drawn
//! into a run's pool.
//!
//! Formats:
//!
//! * **ShareGPT**: a JSON array of entries, each with `conversations`, a list of turns
//!   with `from` and `value` (`role` and `content` are read too). An entry's prompt is its
//!   first turn from `human` (or `user`); the turn after it is the reply, whose token
//!   count is the output length asked for. Entries without both are left out.
//! * **JSONL**: one JSON object a line with `prompt` (text) or `messages` (turns with
//!   `role` and `content`), and optionally `output_tokens`. Blank lines are skipped; a
//!   line that is not such an object is an error naming the line.
//!
//! Every entry's order is drawn from the run's seed, and entries are looked at in that
//! order until the pool is full ([`Dataset::pool_size`] of the schedule's requests): each
//! one's prompt tokens are counted (by the tokenizer file, or as whitespace-separated
//! words, which the embedded mock counts) and it is kept when the length filter keeps it.
//! So the same file, seed and schedule give the same pool in `sim` and `run`, and a long
//! file is counted only as far as the run needs. Messages are counted as their contents
//! joined by newlines, which is what a completions request sends; a chat request's
//! template adds what the server's usage then shows as the prompt's overhead.

use std::path::Path;

use heisenbench_model::dataset::{Dataset, DatasetFormat, DatasetRead};
use heisenbench_model::sample::{SimRng, stream};
use rand::RngExt;
use serde::Deserialize;

use super::prompt::{ChatMessage, DatasetPrompt, load_tokenizer};

/// The random stream's purpose for the order of a dataset's entries.
const DATASET_PURPOSE: u64 = 7;

/// Why a dataset could not be read.
#[derive(Debug, thiserror::Error)]
#[error("dataset {path}: {reason}")]
pub struct DatasetError {
    /// The file.
    pub path: String,
    /// What is wrong, with the line where there is one.
    pub reason: String,
}

/// One entry as read: its prompt and its output, as text or as a count.
struct Entry {
    prompt: DatasetPrompt,
    output: Option<Output>,
}

enum Output {
    /// A reply whose tokens are counted.
    Text(String),
    /// A count given by the file.
    Tokens(u32),
}

/// Reads `ds`'s file, draws the pool for a schedule of `expected` requests (None: not
/// known) under `seed`, counting tokens with the tokenizer at `tokenizer` (None: words),
/// and fills `ds.entries` and `ds.read`; returns the pool's prompts, in the same order.
pub fn read_dataset(
    ds: &mut Dataset,
    tokenizer: Option<&Path>,
    seed: u64,
    expected: Option<f64>,
) -> Result<Vec<DatasetPrompt>, DatasetError> {
    let fail = |reason: String| DatasetError {
        path: ds.path.display().to_string(),
        reason,
    };
    let tok = tokenizer
        .map(load_tokenizer)
        .transpose()
        .map_err(|e| fail(e.to_string()))?;
    let bytes = crate::files::read_bounded(&ds.path, crate::files::FileKind::Dataset)
        .map_err(|e| fail(e.reason))?;
    let format = match ds.format {
        DatasetFormat::Auto => match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[') => DatasetFormat::Sharegpt,
            Some(b'{') => DatasetFormat::Jsonl,
            _ => {
                return Err(fail(
                    "neither ShareGPT's JSON array nor JSONL objects (give --dataset-format)"
                        .into(),
                ));
            }
        },
        f => f,
    };
    let entries = match format {
        DatasetFormat::Sharegpt => sharegpt(&bytes),
        _ => jsonl(&bytes),
    }
    .map_err(fail)?;

    let mut order: Vec<usize> = (0..entries.len()).collect();
    let mut rng: SimRng = stream(seed, DATASET_PURPOSE);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let want = Dataset::pool_size(expected) as usize;
    let count = |text: &str| -> u32 {
        let n = match &tok {
            Some(t) => t.encode(text, false).map_or(0, |e| e.len()),
            None => text.split_whitespace().count(),
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    let (mut lengths, mut prompts) = (Vec::new(), Vec::new());
    let (mut looked_at, mut left_out) = (0u64, 0u64);
    for i in order {
        if prompts.len() == want {
            break;
        }
        looked_at += 1;
        let e = &entries[i];
        let input = count(&e.prompt.text());
        let output = match &e.output {
            Some(Output::Text(t)) => Some(count(t)),
            Some(Output::Tokens(n)) => Some(*n),
            None => None,
        };
        let has_reply = format != DatasetFormat::Sharegpt || output.is_some_and(|o| o > 0);
        if !ds.keeps(input) || !has_reply {
            left_out += 1;
            continue;
        }
        let output = output
            .unwrap_or(0)
            .min(heisenbench_model::limits::MAX_TOKENS);
        lengths.push([input, output]);
        prompts.push(e.prompt.clone());
    }
    if prompts.is_empty() {
        return Err(fail(format!(
            "none of its {} entries has a prompt of {}..{} tokens{}",
            entries.len(),
            ds.min_prompt_tokens.unwrap_or(1),
            ds.max_prompt_tokens
                .unwrap_or(heisenbench_model::limits::MAX_TOKENS),
            if format == DatasetFormat::Sharegpt {
                " and a reply"
            } else {
                ""
            }
        )));
    }
    ds.entries = lengths;
    ds.read = Some(DatasetRead {
        format,
        in_file: entries.len() as u64,
        looked_at,
        left_out,
        counted_by: match tokenizer {
            Some(p) => format!("tokenizer {}", p.display()),
            None => "words".into(),
        },
    });
    Ok(prompts)
}

fn sharegpt(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    #[derive(Deserialize)]
    struct Conversation {
        #[serde(default)]
        conversations: Vec<Turn>,
    }
    #[derive(Deserialize)]
    struct Turn {
        #[serde(alias = "role")]
        from: String,
        #[serde(alias = "content")]
        value: String,
    }
    let all: Vec<Conversation> = serde_json::from_slice(bytes).map_err(|e| {
        format!("not ShareGPT's JSON (an array of entries with conversations): {e}")
    })?;
    Ok(all
        .into_iter()
        .map(|c| {
            let first = c
                .conversations
                .iter()
                .position(|t| matches!(t.from.as_str(), "human" | "user"));
            let mut turns = c
                .conversations
                .into_iter()
                .skip(first.unwrap_or(usize::MAX));
            let prompt = turns.next().map(|t| t.value).unwrap_or_default();
            Entry {
                prompt: DatasetPrompt::Text(prompt),
                output: turns.next().map(|t| Output::Text(t.value)),
            }
        })
        .collect())
}

fn jsonl(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    #[derive(Deserialize)]
    struct Line {
        prompt: Option<String>,
        messages: Option<Vec<ChatMessage>>,
        output_tokens: Option<u32>,
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("not UTF-8 text (byte {})", e.valid_up_to()))?;
    let mut out = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = |why: String| format!("line {}: {why}", no + 1);
        let l: Line = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        let prompt = match (l.prompt, l.messages) {
            (Some(p), None) => DatasetPrompt::Text(p),
            (None, Some(m)) => DatasetPrompt::Messages(m),
            _ => return Err(at("needs either prompt or messages".into())),
        };
        if l.output_tokens == Some(0) {
            return Err(at("output_tokens must be at least 1".into()));
        }
        out.push(Entry {
            prompt,
            output: l.output_tokens.map(Output::Tokens),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("hb-dataset-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    const SHAREGPT: &str = r#"[
        {"id": "a", "conversations": [{"from": "human", "value": "one two three"}, {"from": "gpt", "value": "four five"}]},
        {"id": "b", "conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "six"}, {"from": "gpt", "value": "seven eight nine ten"}]},
        {"id": "c", "conversations": [{"from": "human", "value": "no reply here"}]},
        {"id": "d", "conversations": []}
    ]"#;

    #[test]
    fn sharegpt_gives_the_first_human_turn_and_its_replys_length() {
        let mut ds = Dataset::new(file("s.json", SHAREGPT), DatasetFormat::Auto);
        let prompts = read_dataset(&mut ds, None, 1, Some(10.0)).unwrap();
        let mut got: Vec<(String, [u32; 2])> = prompts
            .iter()
            .map(|p| p.text().into_owned())
            .zip(ds.entries.iter().copied())
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![("one two three".into(), [3, 2]), ("six".into(), [1, 4])]
        );
        let read = ds.read.unwrap();
        assert_eq!(read.format, DatasetFormat::Sharegpt);
        assert_eq!((read.in_file, read.looked_at, read.left_out), (4, 4, 2));
    }

    #[test]
    fn the_pool_is_drawn_by_the_seed_and_filtered_by_length() {
        let text: String = (1..=50)
            .map(|n| {
                let words = vec!["w"; n].join(" ");
                format!("{{\"prompt\": \"{words}\", \"output_tokens\": {n}}}\n")
            })
            .collect();
        let path = file("l.jsonl", &text);
        let draw = |seed, min, max, want: f64| {
            let mut ds = Dataset::new(path.clone(), DatasetFormat::Auto);
            ds.min_prompt_tokens = min;
            ds.max_prompt_tokens = max;
            read_dataset(&mut ds, None, seed, Some(want)).unwrap();
            ds
        };
        let a = draw(3, None, None, 20.0);
        assert_eq!(a.entries.len(), 20);
        assert_eq!(
            a.entries,
            draw(3, None, None, 20.0).entries,
            "same seed, same pool"
        );
        assert_ne!(a.entries, draw(4, None, None, 20.0).entries);
        // Each line's prompt has n words and asks for n tokens.
        assert!(a.entries.iter().all(|[i, o]| i == o));
        let f = draw(3, Some(10), Some(19), 100.0);
        assert_eq!(f.entries.len(), 10, "only ten entries pass the filter");
        assert!(f.entries.iter().all(|[i, _]| (10..=19).contains(i)));
        assert_eq!(f.read.unwrap().left_out, 40);
    }

    #[test]
    fn messages_and_bad_lines() {
        let path = file(
            "m.jsonl",
            "{\"messages\": [{\"role\": \"system\", \"content\": \"a b\"}, {\"role\": \"user\", \"content\": \"c\"}]}\n\n",
        );
        let mut ds = Dataset::new(path, DatasetFormat::Jsonl);
        let p = read_dataset(&mut ds, None, 1, Some(1.0)).unwrap();
        assert_eq!(p[0].text(), "a b\nc");
        assert_eq!(ds.entries, vec![[3, 0]]);

        for (text, says) in [
            ("{\"prompt\": \"x\"}\n{\"prompt\": 3}\n", "line 2"),
            ("{\"output_tokens\": 3}\n", "either prompt or messages"),
            ("{\"prompt\": \"x\", \"output_tokens\": 0}\n", "at least 1"),
            ("hello\n", "neither ShareGPT"),
            ("[{\"conversations\": 3}]", "not ShareGPT"),
            ("[]", "none of its 0 entries"),
        ] {
            let mut ds = Dataset::new(file("bad", text), DatasetFormat::Auto);
            let e = read_dataset(&mut ds, None, 1, None)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{text}: {e}");
            assert!(e.starts_with("dataset "), "{e}");
            assert!(ds.entries.is_empty());
        }
        let mut missing = Dataset::new("/nonexistent/d.json".into(), DatasetFormat::Auto);
        assert!(read_dataset(&mut missing, None, 1, None).is_err());
    }
}
