//! Nanoseconds per event of the stream reader on the mock's chunks: SSE framing alone, and
//! framing plus reading each event: whole, and as a shard does, past the stream's repeated
//! head (the work a shard does per chunk besides its stamps).
//!
//! `cargo run --release -p heisenbench-live --example parse_cost [escaped]` (`escaped` puts
//! an escape in every chunk, which sends it to serde_json; `ROUNDS=N` sets the repeats).

use std::time::Instant;

use heisenbench_live::openai::sse::SseParser;
use heisenbench_live::openai::stream::{RepeatedHead, StreamState, interpret, interpret_after};

fn main() {
    let escaped = std::env::args().nth(1).is_some();
    let chunk = if escaped {
        r#"data: {"id":"cmpl-\u0031","object":"text_completion","created":1764500000,"model":"heisenbench-mock","choices":[{"index":0,"text":" word","logprobs":null,"finish_reason":null}],"heisenbench_sent_ns":123456789012}"#
    } else {
        r#"data: {"id":"cmpl-17","object":"text_completion","created":1764500000,"model":"heisenbench-mock","choices":[{"index":0,"text":" word","logprobs":null,"finish_reason":null}],"heisenbench_sent_ns":123456789012}"#
    };
    let mut stream = String::new();
    for _ in 0..200 {
        stream.push_str(chunk);
        stream.push_str("\n\n");
    }
    let bytes = stream.as_bytes();
    let reads: Vec<&[u8]> = bytes.chunks(16 * 1024).collect();
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2_000);
    for (name, read, past_head) in [
        ("framing", false, false),
        ("framing + reading each event whole", true, false),
        ("framing + reading past the stream's head", true, true),
    ] {
        let t0 = Instant::now();
        let mut n = 0u64;
        for _ in 0..rounds {
            let mut p = SseParser::new();
            let (mut state, mut head) = (StreamState::default(), RepeatedHead::default());
            for r in &reads {
                p.feed(r, |ev| {
                    n += 1;
                    if past_head {
                        state.apply(interpret_after(ev, &mut head));
                    } else if read {
                        state.apply(interpret(ev));
                    }
                });
            }
            std::hint::black_box(&state);
        }
        let ns = t0.elapsed().as_nanos() as f64 / n as f64;
        println!("{name}: {ns:.0} ns per event ({n} events)");
    }
}
