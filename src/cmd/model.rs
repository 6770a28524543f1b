//! `heisenbench model <queue>`.

use std::io::Write;

use crate::flags::model::{ModelCmd, PrefixCacheFlags, QueueCmd};
use heisenbench_model::prefix_cache::{PrefixCacheLaw, predict};
use heisenbench_model::queue::TailMethod;
use heisenbench_model::scenario::SharedPrefix;
use heisenbench_model::units::{Seconds, format_seconds};
use heisenbench_sim::plancheck::PoolCheck;

use super::write_json;
use crate::Failure;
use heisenbench_model::table::{queue_rows, write_pairs};

pub fn run(cmd: ModelCmd, out: &mut dyn Write) -> Result<(), Failure> {
    match cmd {
        ModelCmd::Queue(q) => queue(q, out),
        ModelCmd::PrefixCache(p) => prefix_cache(&p, out),
    }
}

/// `heisenbench model prefix-cache`: Che's prediction.
fn prefix_cache(f: &PrefixCacheFlags, out: &mut dyn Write) -> Result<(), Failure> {
    let shape = SharedPrefix {
        groups: f.groups,
        tokens: f.prefix_tokens,
        popularity: f.popularity,
    };
    shape.validate()?;
    let law = PrefixCacheLaw {
        block_tokens: f.block_size,
        capacity_blocks: f.capacity,
    };
    let p = predict(law, &shape.probabilities(), f.prefix_tokens, f.own_tokens)?;
    let prompt = f64::from(f.prefix_tokens + f.own_tokens);
    let shared = f64::from(f.prefix_tokens) / prompt;
    // The TTFT the hit rate implies, and without the cache, when a prefill law is given.
    let ttft = (f.prefill_overhead.is_some() || f.prefill_time_per_token.is_some()).then(|| {
        let (o, t) = (
            f.prefill_overhead.map_or(0.0, Seconds::get),
            f.prefill_time_per_token.map_or(0.0, Seconds::get),
        );
        let tokens = f.prefix_tokens + f.own_tokens;
        (
            p.prefill_ttft_mean_s(tokens, o, t),
            o + t * f64::from(tokens),
        )
    });
    if f.json {
        return write_json(
            out,
            &serde_json::json!({
                "model": "Che's approximation for LRU, independent requests",
                "characteristic_requests": if p.characteristic_requests.is_finite() { Some(p.characteristic_requests) } else { None },
                "token_hit_rate": p.token_hit_rate,
                "cached_tokens_per_request": p.cached_tokens,
                "shared_share": shared,
                "prefix_hit_rate": p.group_hit.iter().zip(shape.probabilities()).map(|(h, q)| h * q).sum::<f64>(),
                "prefill_ttft_mean_s": ttft.map(|t| t.0),
                "prefill_ttft_without_cache_s": ttft.map(|t| t.1),
            }),
        );
    }
    writeln!(
        out,
        "prefix cache (Che's approximation for LRU, independent requests)"
    )?;
    let t = if p.characteristic_requests.is_finite() {
        format!("{:.1} requests", p.characteristic_requests)
    } else {
        "infinite (every prefix fits, nothing else is kept)".into()
    };
    let rows = [
        (
            "prompt",
            format!(
                "{} shared + {} own tokens ({:.1} % shared by design)",
                f.prefix_tokens,
                f.own_tokens,
                100.0 * shared
            ),
        ),
        (
            "cache",
            format!("{} blocks of {} tokens", f.capacity, f.block_size),
        ),
        ("characteristic time", t),
        (
            "cached per request",
            format!("{:.1} tokens", p.cached_tokens),
        ),
        ("token hit rate", format!("{:.4}", p.token_hit_rate)),
    ];
    for (k, v) in rows {
        writeln!(out, "  {k:<20} {v}")?;
    }
    if let Some((with, without)) = ttft {
        writeln!(
            out,
            "  {:<20} {} mean, against {} with every token prefilled (a slot free, no slow-down under load)",
            "TTFT (prefill)",
            format_seconds(with),
            format_seconds(without)
        )?;
    }
    Ok(())
}

fn queue(cmd: QueueCmd, out: &mut dyn Write) -> Result<(), Failure> {
    let queue = cmd.build()?;
    let json = cmd.json();
    let report = queue.report();
    // A pool the model only approximates is answered by simulation as well.
    let check = match &cmd {
        QueueCmd::Mgc {
            customers,
            seed,
            no_check: false,
            ..
        } if report.tail_method == TailMethod::ExponentialFit => PoolCheck::run(
            report.arrival_rate_per_s,
            report.servers,
            queue.service(),
            *customers,
            *seed,
        ),
        _ => None,
    };
    if json {
        let mut v = serde_json::to_value(&report).map_err(|e| Failure::Runtime(e.into()))?;
        if let (Some(c), Some(o)) = (&check, v.as_object_mut()) {
            let c = serde_json::to_value(c).map_err(|e| Failure::Runtime(e.into()))?;
            o.insert("simulation".into(), c);
        }
        return write_json(out, &v);
    }
    writeln!(out, "{}", report.model)?;
    write_pairs(out, &queue_rows(&report))?;
    if let Some(c) = &check {
        c.write_summary(&report, out)?;
    }
    Ok(())
}
