//! A run's report as text and as files.

use std::io::{self, Write};
use std::path::Path;

use heisenbench_model::scenario::Arrivals;
use heisenbench_model::units::format_seconds;

use super::result::{Goodput, RunReport};
use crate::files::write_atomic;

impl RunReport {
    /// Writes `report.json`, the same run in llm-d-benchmark's report format
    /// ([`super::llmd::FILE`]), and `requests.csv` (one row per request, with `csv`) into
    /// `dir`, each file whole or not at all.
    pub fn write_files(&self, dir: &Path, csv: bool) -> io::Result<()> {
        let report = self;
        std::fs::create_dir_all(dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
        let json = serde_json::to_vec_pretty(report)?;
        write_atomic(&dir.join("report.json"), &json)?;
        let llmd = serde_json::to_vec_pretty(&super::llmd::benchmark_report(report))?;
        write_atomic(&dir.join(super::llmd::FILE), &llmd)?;
        if csv {
            let mut rows = report.merged.rows.clone();
            rows.sort_by_key(|r| r.index);
            let mut text = String::from(
                "index,shard,outcome,intended_ns,sent_ns,headers_ns,first_token_ns,end_ns,tokens_stream,tokens_usage,first_token_server_ns,last_token_ns,max_itl_ns,warmup,write_ns\n",
            );
            let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
            for r in rows {
                text += &format!(
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                    r.index,
                    r.shard,
                    r.outcome,
                    r.intended_ns,
                    r.sent_ns,
                    opt(r.headers_ns),
                    opt(r.first_token_ns),
                    opt(r.end_ns),
                    r.tokens_stream,
                    r.tokens_usage.map_or(String::new(), |t| t.to_string()),
                    opt(r.first_token_server_ns),
                    opt(r.last_token_ns),
                    opt(r.max_itl_ns),
                    u8::from(r.warmup),
                    opt(r.write_ns)
                );
            }
            write_atomic(&dir.join("requests.csv"), text.as_bytes())?;
        }
        Ok(())
    }

    /// The report as text for a terminal.
    pub fn write_summary(&self, out: &mut dyn Write) -> io::Result<()> {
        let r = self;
        let a = &r.accounting;
        if r.config.insecure {
            writeln!(
                out,
                "WARNING: TLS certificate verification was OFF (--insecure): the server was not authenticated"
            )?;
        }
        if r.interrupted {
            writeln!(
                out,
                "INTERRUPTED: stopped before the end of the schedule; what follows is what was measured until then"
            )?;
        }
        // Sending and completing are two rates: a slow server completes fewer per second
        // of the run while every request left on time.
        let sent = match r.sending {
            Some(s) => format!(
                "sent {}{}; ",
                s.sent_qps.map_or_else(
                    || format!("{} requests", s.sent),
                    |q| format!("{q:.1} req/s")
                ),
                s.on_time.map_or(String::new(), |f| format!(
                    " ({:.1} % within {} of the intended send)",
                    100.0 * f,
                    format_seconds(super::result::ON_TIME_S)
                ))
            ),
            None => String::new(),
        };
        let completed = if a.completed == 0 {
            "completed none".to_string()
        } else {
            format!(
                "completed {:.1} req/s over {:.2} s (first send to last response)",
                r.achieved_qps, r.duration_s
            )
        };
        writeln!(
            out,
            "{}: {} shard(s) ({:?}), offered {:.1} req/s; {sent}{completed}",
            r.config.name, r.config.shards, r.config.shard_mode, r.offered_qps,
        )?;
        let t = &r.throughput;
        writeln!(
            out,
            "  tokens/s: output {:.0} (peak {:.0} in one second), input {:.0}, total {:.0}; {}{}",
            t.output_tokens_per_s,
            t.peak_output_tokens_per_s,
            t.input_tokens_per_s,
            t.total_tokens_per_s,
            match (
                t.per_request_output_tokens_per_s_p50,
                t.per_request_output_tokens_per_s_p1
            ) {
                (Some(m), Some(slow)) =>
                    format!("per request {m:.1} tok/s median, below {slow:.1} for the slowest 1 %"),
                _ => "per request: no decode rate (tokens arrived at once)".into(),
            },
            match (t.tokens_per_chunk, t.tokens_per_chunk_by) {
                (Some(k), Some(super::result::TokenCounter::Tokenizer)) => format!(
                    "; {k:.2} tokens per chunk (no usage: the tokenizer's count of the streamed text over chunks)"
                ),
                (Some(k), _) => format!("; {k:.2} tokens per chunk (usage over chunks)"),
                (None, _) => "; no usage and no --tokenizer: a chunk counts as one token".into(),
            }
        )?;
        if let Some(w) = &r.warmup {
            writeln!(
                out,
                "  warm-up ({}): {} request(s), {} completed, kept out of the statistics",
                match w.warmup {
                    super::config::Warmup::Seconds { seconds } => format_seconds(seconds),
                    super::config::Warmup::Requests { requests } => format!("first {requests}"),
                },
                w.requests,
                w.completed
            )?;
        }
        let failed: Vec<String> = a
            .failed
            .iter()
            .map(|(k, v)| format!("{} {v}", k.key()))
            .collect();
        writeln!(
            out,
            "  requests: scheduled {}, completed {}, failed {}, timed out {}, not sent {}, lost {} ({})",
            a.scheduled,
            a.completed,
            if failed.is_empty() {
                "0".into()
            } else {
                failed.join(", ")
            },
            a.timed_out,
            a.not_sent,
            a.lost,
            if a.balanced {
                "balanced"
            } else {
                "NOT BALANCED"
            }
        )?;
        if let Some(who) = &r.saturated {
            writeln!(out, "  SATURATED: {who}")?;
        }
        for (message, n) in &r.merged.server_messages {
            writeln!(out, "  error ({n}x): {message}")?;
        }
        if r.merged.zero_token_completions > 0 {
            writeln!(
                out,
                "  {} completed request(s) carried no token (finish reason first): no TTFT for them",
                r.merged.zero_token_completions
            )?;
        }
        for s in r.shards.iter().filter(|s| !s.ok) {
            writeln!(
                out,
                "  shard {} failed: {}",
                s.index,
                s.error.as_deref().unwrap_or("?")
            )?;
        }
        let f = format_seconds;
        let line = |name: &str, d: &heisenbench_model::stats::Dist| {
            if d.count == 0 {
                // A quantile of nothing is not zero.
                return format!("  {name:<28} none measured");
            }
            format!(
                "  {name:<28} p50 {:>9}  p90 {:>9}  p99 {:>9}  p99.9 {:>9}  max {:>9}",
                f(d.p50_s),
                f(d.p90_s),
                f(d.p99_s),
                f(d.p999_s),
                f(d.max_s)
            )
        };
        let mut rows = vec![("send lag", &r.send_lag)];
        if r.send_stages.timer.count > 0 {
            rows.extend([
                ("  due time seen late", &r.send_stages.timer),
                ("  loop late to resume", &r.send_stages.loop_wake),
                ("  send's own start", &r.send_stages.start),
            ]);
        }
        rows.extend([
            ("TTFT from intended", &r.ttft.from_intended),
            ("TTFT from actual send", &r.ttft.from_actual),
        ]);
        if r.config.client_cost_s > 0.0 {
            rows.push(("TTFT stamped after parsing", &r.ttft_after_processing));
        }
        rows.extend([
            ("TPOT", &r.tpot),
            ("ITL", &r.itl),
            ("E2E from intended", &r.e2e.from_intended),
            ("NTPOT from intended", &r.ntpot.from_intended),
        ]);
        for (name, d) in rows {
            writeln!(out, "{}", line(name, d))?;
        }
        // A floor is compared only when it and this run stamp arrivals alike (the kernel's
        // stamps, this build's method).
        let floor = r
            .floor
            .as_ref()
            .filter(|f| f.current() && r.read_lag.count > 0);
        if r.observer_overhead.count > 0 {
            writeln!(
                out,
                "{}",
                line("observer overhead per chunk", &r.observer_overhead)
            )?;
            if let Some(f) = floor {
                writeln!(out, "{}", line("floor, idle", &f.idle))?;
                let loaded = format!("floor at {:.0} msg/s", f.loaded_rate_per_s);
                writeln!(out, "{}", line(&loaded, &f.loaded))?;
                let o = &r.observer_overhead;
                writeln!(out, "  {}", f.over(o.p50_s, o.p99_s, r.chunk_rate()))?;
            }
        }
        if r.read_lag.count > 0 {
            writeln!(out, "{}", line("read lag per chunk", &r.read_lag))?;
            if let Some(f) = floor {
                writeln!(out, "{}", line("floor's read lag, idle", &f.idle_read_lag))?;
                let loaded = format!("floor's read lag at {:.0}/s", f.loaded_rate_per_s);
                writeln!(out, "{}", line(&loaded, &f.loaded_read_lag))?;
                let l = &r.read_lag;
                writeln!(
                    out,
                    "  {}",
                    f.read_lag_over(l.p50_s, l.p99_s, r.chunk_rate())
                )?;
            }
        }
        writeln!(out, "{}", line("processing per chunk", &r.processing))?;
        let utils: Vec<String> = r
            .shards
            .iter()
            .map(|s| format!("{:.2} (max {} in flight)", s.utilization, s.max_in_flight))
            .collect();
        writeln!(
            out,
            "  tokens: {} streamed, {} by usage ({} mismatched); shard utilisation: {}{}",
            r.tokens_stream,
            r.tokens_usage,
            r.token_mismatches,
            utils.join(" "),
            r.config
                .in_flight_bound
                .map_or(String::new(), |b| format!("; in-flight bound {b} a shard"))
        )?;
        if let Some(m) = &r.machine {
            writeln!(
                out,
                "  machine: {} core(s); the shards used {:.2}{}{}",
                m.cores,
                m.generator_cpu_s / m.wall_s.max(1e-9),
                m.server_cpu_s.map_or(String::new(), |s| format!(
                    ", the embedded mock {:.2}",
                    s / m.wall_s.max(1e-9)
                )),
                m.machine_busy.map_or(String::new(), |b| format!(
                    "; the machine {:.0} % busy",
                    100.0 * b
                ))
            )?;
        }
        writeln!(out, "  {}", r.config.prompts.describe())?;
        let p = &r.prompt_tokens;
        match p.usual_overhead {
            Some(d) => writeln!(
                out,
                "  prompt tokens: {} sent; the server's usage counted {} requests at the prompt's length {:+} ({} differ)",
                p.sent, p.checked, d, p.mismatches
            )?,
            None => writeln!(
                out,
                "  prompt tokens: {} sent; the server's usage carried no prompt count to check them",
                p.sent
            )?,
        }
        if let Some(pre) = r.config.workload.prefix {
            let own = r.config.workload.mean_tokens().0;
            let share = f64::from(pre.tokens) / (f64::from(pre.tokens) + own);
            writeln!(
                out,
                "  shared prefixes: {} of {} tokens ({:?}): {:.1} % of prompt tokens shared by design",
                pre.groups,
                pre.tokens,
                pre.popularity,
                100.0 * share
            )?;
        }
        if r.config.workload.turns() > 1 {
            writeln!(
                out,
                "  conversations of {} turns: each turn re-sends the conversation so far, the server's replies in it",
                r.config.workload.turns()
            )?;
            for (i, d) in r.ttft_by_turn.iter().enumerate() {
                writeln!(
                    out,
                    "    turn {:<3} TTFT from intended p50 {:>9}  p99 {:>9}  mean {:>9}  ({} requests)",
                    i + 1,
                    format_seconds(d.p50_s),
                    format_seconds(d.p99_s),
                    format_seconds(d.mean_s),
                    d.count
                )?;
            }
        }
        if let Some(d) = &r.config.workload.dataset
            && let (Some(read), Some((input, output))) = (&d.read, d.mean_lengths())
        {
            writeln!(
                out,
                "  dataset {} ({}): {} entries drawn from {} in a seeded order ({} looked at, {} left out by the length filter or for want of a reply); prompt tokens mean {:.1} ({}); output tokens {}",
                d.path.display(),
                read.format,
                d.entries.len(),
                read.in_file,
                read.looked_at,
                read.left_out,
                input,
                read.counted_by,
                match output {
                    Some(o) => format!("the dataset's, mean {o:.1}"),
                    None => format!("drawn as {}", r.config.workload.output_tokens),
                }
            )?;
        }
        if let Arrivals::Trace {
            blocks: Some(b),
            lengths,
            ..
        } = &r.config.workload.arrivals
        {
            let distinct: std::collections::HashSet<&u64> = b.hash_ids.iter().flatten().collect();
            writeln!(
                out,
                "  trace prefix blocks: {} distinct of {} tokens; {:.1} % of prompt tokens lie in a block an earlier request named (what a cache that never evicts could serve)",
                distinct.len(),
                b.block_tokens,
                100.0 * b.reused_share(lengths)
            )?;
        }
        if let Some(g) = &r.goodput {
            write_goodput(out, g)?;
        }
        if let Some(st) = &r.steady_state {
            match &st.saturated {
                Some(_) => writeln!(
                    out,
                    "  NOT STEADY: {} grew through the run",
                    st.growing.join(" and ")
                )?,
                None if st.settled => writeln!(
                    out,
                    "  steady state: TTFT settled after {} of {} whole second(s)",
                    st.transient_windows, st.windows
                )?,
                None => writeln!(
                    out,
                    "  steady state: TTFT did not settle in {} whole second(s), though nothing grew steadily",
                    st.windows
                )?,
            }
        }
        if let Some(v) = &r.server {
            write_server(out, v)?;
        } else if let Some(note) = &r.server_note {
            writeln!(out, "  server: {note}")?;
        }
        let c = &r.prefix_cache;
        if let Some(rate) = c.hit_rate() {
            writeln!(
                out,
                "  prefix cache (the server's usage): {} of {} prompt tokens served from it ({:.1} %) over {} requests",
                c.cached_tokens,
                c.prompt_tokens,
                100.0 * rate,
                c.requests
            )?;
        }
        Ok(())
    }
}

/// The server's side: what its endpoint answered, its gauges and histograms over the run,
/// and the split of TTFT.
fn write_server(out: &mut dyn Write, v: &crate::scrape::view::ServerView) -> io::Result<()> {
    use crate::scrape::engines::Quantity as Q;
    let f = format_seconds;
    for t in &v.targets {
        if t.scrapes == 0 {
            writeln!(
                out,
                "  server: {} never answered ({} scrape(s) failed; last: {})",
                t.url,
                t.failures,
                t.last_error.as_deref().unwrap_or("no reason")
            )?;
            continue;
        }
        let failed = match (&t.last_error, t.failures) {
            (Some(e), n) if n > 0 => format!(", {n} failed (last: {e})"),
            _ => String::new(),
        };
        writeln!(
            out,
            "  server: {} at {}, {} scrape(s) every {}{}; {} quantities found, {} other families kept raw",
            t.engine.as_deref().unwrap_or("an unknown engine"),
            t.url,
            t.scrapes,
            f(v.interval_s),
            failed,
            t.found.len(),
            t.raw.len()
        )?;
        // heisenbench's mock counts its own lateness: say when it served tokens late enough
        // to share a write, so that its ITL is not read as the network's or the client's.
        let raw = |k: &str| t.raw.get(k).copied().filter(|x| x.is_finite());
        if let (Some(together), Some(timed)) = (
            raw("heisenbench:mock_tokens_due_together_total"),
            raw("heisenbench:mock_token_lateness_seconds_count"),
        ) && together > 0.0
            && timed > 0.0
        {
            writeln!(
                out,
                "    the mock fell behind: {together:.0} of its {timed:.0} timed tokens (since it started) were due before the one ahead of them was out, and may have been written together"
            )?;
        }
    }
    let tot = &v.totals;
    let mut gauges = Vec::new();
    for (q, name) in [
        (Q::Running, "running"),
        (Q::Waiting, "waiting"),
        (Q::KvCacheUsage, "KV cache"),
    ] {
        if let (Some(m), Some(x)) = (tot.gauges_mean.get(&q), tot.gauges_max.get(&q)) {
            gauges.push(if q == Q::KvCacheUsage {
                format!("{name} {:.0} % mean (max {:.0} %)", m * 100.0, x * 100.0)
            } else {
                format!("{name} {m:.1} mean (max {x:.0})")
            });
        }
    }
    if let Some(p) = tot.counters.get(&Q::Preemptions) {
        gauges.push(format!("{p:.0} preempted"));
    }
    if let Some(h) = tot.prefix_hit_rate {
        gauges.push(format!("prefix cache {:.1} % of prompt tokens", h * 100.0));
    }
    if !gauges.is_empty() {
        writeln!(out, "    {}", gauges.join(", "))?;
    }
    let mut hists = Vec::new();
    for (q, name) in [
        (Q::Ttft, "TTFT"),
        (Q::Queue, "queue"),
        (Q::Prefill, "prefill"),
        (Q::Decode, "decode"),
        (Q::E2e, "E2E"),
    ] {
        if let Some(h) = tot.histograms.get(&q) {
            hists.push(format!(
                "{name} mean {} p99 {}",
                f(h.mean_s),
                h.p99_s.map_or("-".into(), f)
            ));
        }
    }
    if !hists.is_empty() {
        writeln!(out, "    its own account: {}", hists.join("; "))?;
    }
    if let Some(a) = &v.attribution {
        writeln!(out, "  TTFT split: {}", a.verdict)?;
    }
    writeln!(
        out,
        "    scraping cost {} of CPU, {} a scrape",
        f(v.cost.cpu_s),
        f(v.cost.mean_scrape_s)
    )
}

/// The goodput block: each origin's good requests and attainment, and the client's share.
fn write_goodput(out: &mut dyn Write, g: &Goodput) -> io::Result<()> {
    writeln!(
        out,
        "  goodput against {} ({} requests judged; failures count against it):",
        g.slo, g.judged
    )?;
    for (name, v) in [
        ("from intended", &g.from_intended),
        ("from actual send", &g.from_actual),
    ] {
        let met: Vec<String> = v
            .attainment
            .iter()
            .map(|(c, a)| format!("{} {:.1} %", c.key(), 100.0 * a))
            .collect();
        writeln!(
            out,
            "    {name:<17} {:.1} req/s, {:.0} tok/s, {:.1} % good ({})",
            v.requests_per_s,
            v.output_tokens_per_s,
            100.0 * v.good_fraction,
            met.join(", ")
        )?;
    }
    writeln!(
        out,
        "    the client's share: {:.1} % of requests missed only because of the client's own delay",
        100.0 * g.client_share
    )
}
