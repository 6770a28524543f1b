//! A request's body, made before its send is due: the prompt (the run's words, its
//! shared prefix) and the JSON around it.

use heisenbench_model::layout::{PromptLayout, PromptPart};
use heisenbench_model::schedule::Planned;

use super::super::config::{ApiKind, RunConfig};
use crate::openai::prompt::PromptContent;
use crate::openai::prompt::{ChatMessage, DatasetPrompt};

/// How a shard makes its requests' prompts: the run's prompts laid out by the workload
/// (a shared prefix, a trace's prefix blocks, each request's own words).
pub(super) struct PromptMaker {
    layout: PromptLayout,
}

impl PromptMaker {
    pub(super) fn new(cfg: &RunConfig) -> Self {
        Self {
            layout: PromptLayout::new(&cfg.workload),
        }
    }

    /// The prompt tokens of request `p`: its shared prefix's and its own.
    pub(super) fn tokens(&self, p: &Planned) -> u32 {
        self.layout.total(p.input_tokens)
    }

    /// The prompt of request `p`: each shared part the same words for every request that
    /// shares it (drawn from the part's key), then its own words.
    pub(super) fn prompt(&self, cfg: &RunConfig, p: &Planned) -> String {
        if self.layout.is_plain() || cfg.prompts.content == PromptContent::Repeated {
            return cfg.prompts.text(self.tokens(p), cfg.seed, p.index);
        }
        let mut text = String::new();
        for part in self.layout.parts(cfg.seed, p.index, p.input_tokens) {
            let words = match part {
                PromptPart::Shared { key, tokens } => {
                    cfg.prompts.text(tokens, cfg.seed ^ PREFIX_SEED, key)
                }
                PromptPart::Own { tokens } => cfg.prompts.text(tokens, cfg.seed, p.index),
            };
            if !text.is_empty() && !words.is_empty() {
                text.push(' ');
            }
            text.push_str(&words);
        }
        text
    }

    /// The request body of turn `p` of a conversation whose turns so far are `turns` (the
    /// last one the new message): a chat request's messages, or for completions their
    /// contents joined by spaces.
    pub(super) fn conversation_body(
        &self,
        cfg: &RunConfig,
        p: &Planned,
        turns: &[ChatMessage],
    ) -> Vec<u8> {
        match cfg.api {
            ApiKind::Chat => {
                let mut json = Vec::with_capacity(256);
                let _ = serde_json::to_writer(&mut json, turns);
                body_with(cfg, p, Content::Messages(&json))
            }
            ApiKind::Completions => {
                let text: Vec<&str> = turns
                    .iter()
                    .map(|t| t.content.trim())
                    .filter(|t| !t.is_empty())
                    .collect();
                body(cfg, p, &text.join(" "))
            }
        }
    }

    /// The request body of `p`: a dataset entry's prompt as written (its chat turns as
    /// messages for a chat request), else the prompt made for it.
    pub(super) fn body(&self, cfg: &RunConfig, p: &Planned) -> Vec<u8> {
        let pool = &cfg.prompts.dataset;
        if !pool.is_empty() {
            let entry = &pool[(p.index % pool.len() as u64) as usize];
            return match (entry, cfg.api) {
                (DatasetPrompt::Messages(m), ApiKind::Chat) => {
                    let mut turns = Vec::with_capacity(256);
                    let _ = serde_json::to_writer(&mut turns, m);
                    body_with(cfg, p, Content::Messages(&turns))
                }
                _ => body(cfg, p, &entry.text()),
            };
        }
        body(cfg, p, &self.prompt(cfg, p))
    }
}

/// Mixed into the seed of shared prefixes' words, so a prefix is not a request's prompt.
const PREFIX_SEED: u64 = 0x7072_6566_6978_0001;

/// The JSON body of request `p` with `prompt`, written directly (no value tree: a body is
/// made for every request, and a prompt's words are most of it).
pub(super) fn body(cfg: &RunConfig, p: &Planned, prompt: &str) -> Vec<u8> {
    body_with(cfg, p, Content::Text(prompt))
}

/// What a request asks about.
enum Content<'a> {
    /// A prompt (a chat request's one user turn).
    Text(&'a str),
    /// A chat request's turns, already written as a JSON array.
    Messages(&'a [u8]),
}

fn body_with(cfg: &RunConfig, p: &Planned, content: Content<'_>) -> Vec<u8> {
    let len = match content {
        Content::Text(t) => t.len(),
        Content::Messages(m) => m.len(),
    };
    let mut out = Vec::with_capacity(len + 192);
    // Writing JSON strings into a Vec cannot fail.
    out.extend_from_slice(b"{\"model\":");
    let _ = serde_json::to_writer(&mut out, &cfg.model);
    match (cfg.api, content) {
        (ApiKind::Completions, Content::Text(prompt)) => {
            out.extend_from_slice(b",\"prompt\":");
            let _ = serde_json::to_writer(&mut out, prompt);
        }
        (ApiKind::Chat, Content::Text(prompt)) => {
            out.extend_from_slice(b",\"messages\":[{\"role\":\"user\",\"content\":");
            let _ = serde_json::to_writer(&mut out, prompt);
            out.extend_from_slice(b"}]");
        }
        (_, Content::Messages(turns)) => {
            out.extend_from_slice(b",\"messages\":");
            out.extend_from_slice(turns);
        }
    }
    out.extend_from_slice(b",\"max_tokens\":");
    out.extend_from_slice(itoa::Buffer::new().format(p.output_tokens).as_bytes());
    out.extend_from_slice(b",\"ignore_eos\":true,\"stream\":");
    out.extend_from_slice(if cfg.stream { b"true" } else { b"false" });
    if cfg.stream {
        out.extend_from_slice(b",\"stream_options\":{\"include_usage\":true}");
    }
    out.push(b'}');
    out
}
