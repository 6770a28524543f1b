//! A benchmark client's own results, read from the files it writes.
//!
//! Every tool writes its latencies differently (seconds or milliseconds, `median` or
//! `p50`, one summary or one file per stage); an adapter turns one format into
//! [`Reported`], so the audit holds every tool against the server's truth the same way.
//! A format is recognised by its content, not its file name: the audit looks at every
//! JSON file the client left in its output directory, and the first adapter that
//! recognises one wins.

use std::path::{Path, PathBuf};

use heisenbench_model::client_loop::{ClockStart, LatencyShape, Pacing};
use heisenbench_model::scenario::Stamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One latency as a tool summarised it, seconds. A tool that does not print a statistic
/// leaves it `None`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Mean.
    pub mean_s: Option<f64>,
    /// Median.
    pub p50_s: Option<f64>,
    /// 90th percentile.
    pub p90_s: Option<f64>,
    /// 99th percentile.
    pub p99_s: Option<f64>,
}

impl Summary {
    fn is_empty(&self) -> bool {
        self.mean_s.is_none()
            && self.p50_s.is_none()
            && self.p90_s.is_none()
            && self.p99_s.is_none()
    }
}

/// What a client said about its run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reported {
    /// The tool whose format this was.
    pub tool: String,
    /// The file read.
    pub file: PathBuf,
    /// Requests the tool counted as successful.
    pub completed: Option<u64>,
    /// The request throughput it reported, per second.
    pub requests_per_s: Option<f64>,
    /// Time to first token.
    pub ttft: Option<Summary>,
    /// Inter-token latency.
    pub itl: Option<Summary>,
    /// Time per output token (after the first).
    pub tpot: Option<Summary>,
    /// End to end.
    pub e2e: Option<Summary>,
    /// The client's own lateness against its schedule, where it reports it
    /// (inference-perf's schedule delay, heisenbench's send lag).
    #[serde(default)]
    pub send_lag: Option<Summary>,
    /// Each request's TTFT (seconds) by what names it to the server too, where the tool
    /// keeps its requests: for pairing with the server's records; not written out.
    #[serde(skip)]
    pub ttft_by_id: Vec<(RequestKey, f64)>,
    /// Each request's TTFT counted from the tool's own send, keyed as `ttft_by_id`, where
    /// the tool counts its TTFT from elsewhere (the intended send) and its records say when
    /// it sent: heisenbench's `requests.csv`. Not written out.
    #[serde(skip)]
    pub ttft_from_own_send_by_id: Vec<(RequestKey, f64)>,
    /// Each request's own send and the tool's stamp of its first token on this machine's
    /// CLOCK_MONOTONIC (nanoseconds), keyed as `ttft_by_id`, where the tool says where its
    /// clock stands (heisenbench's report): on the server's clock too, they split its
    /// excess into the request's way and the response's. Not written out.
    #[serde(skip)]
    pub stamps_by_id: Vec<(RequestKey, ClientStamps)>,
    /// How many requests the tool sent, failed ones too, where its records give each
    /// request's place in the order it sent them (vLLM's and SGLang's benches list them
    /// so; inference-perf's records, by their start): what pairing by that order checks
    /// against the server's arrivals. Not written out.
    #[serde(skip)]
    pub sent: Option<u64>,
}

/// A request as the client stamped it on this machine's CLOCK_MONOTONIC, nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientStamps {
    /// Its send, where the client's TTFT from its own send starts.
    pub sent_ns: u64,
    /// When the write of the request began, where the client says.
    pub write_ns: Option<u64>,
    /// Its first token's arrival.
    pub first_ns: u64,
}

/// What ties a tool's record of a request to the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKey {
    /// The id of the response the tool read (the mock's `cmpl-ID`): GuideLLM.
    Response(u64),
    /// The FNV-1a hash of the `x-request-id` the tool sent: AIPerf.
    RequestId(u64),
    /// The number its `x-request-id` ended with, the request's place in the tool's list:
    /// vLLM's bench.
    RequestIndex(u64),
    /// The request's place in the order the tool sent its requests, where nothing names
    /// it to the server: SGLang's bench and inference-perf. It pairs with the server's
    /// arrivals in order, where the counts agree.
    Sent(u64),
}

impl Reported {
    /// Where the tool starts its TTFT clock, from its source: heisenbench at the intended
    /// send; vLLM's and SGLang's benches when the request's coroutine starts, inference-perf
    /// and GuideLLM at their own dispatch (their lateness reported apart), AIPerf at its
    /// own send: each after its loop's backlog, before the request's own path.
    pub fn clock(&self) -> ClockStart {
        match self.tool.as_str() {
            "heisenbench run" => ClockStart::Intended,
            _ => ClockStart::OwnSend,
        }
    }

    /// How the tool paces its requests, from its source: SGLang's bench_serving sleeps each
    /// gap after the last (`await asyncio.sleep` of a fresh exponential draw); the others
    /// send each request at its time counted from the start.
    pub fn pacing(&self) -> Pacing {
        match self.tool.as_str() {
            "SGLang bench_serving" => Pacing::EachGap,
            _ => Pacing::Schedule,
        }
    }

    /// The shape of the latency beyond the tool's CPU, as held out on fresh sittings
    /// (bench/audit/RESULTS.md, r62-r64): vLLM's bench forecast nearer with a share drawn
    /// for each request, inference-perf and AIPerf did not; the tools not held to it keep a
    /// constant.
    pub fn latency_shape(&self) -> LatencyShape {
        match self.tool.as_str() {
            "vllm bench serve" => LatencyShape::Drawn,
            _ => LatencyShape::Constant,
        }
    }

    /// When the tool stamps a chunk: heisenbench at its arrival (the kernel's receive
    /// stamp, before its loop touches it), the Python tools after their loop has read and
    /// parsed it.
    pub fn stamp(&self) -> Stamp {
        match self.tool.as_str() {
            "heisenbench run" => Stamp::NetworkArrival,
            _ => Stamp::AfterProcessing,
        }
    }
}

/// The formats known, by the tool that writes them.
pub const FORMATS: [&str; 6] = [
    "inference-perf (summary_lifecycle_metrics.json)",
    "AIPerf (profile_export_aiperf.json)",
    "GuideLLM (--output kind=json)",
    "SGLang's bench_serving --output-file (a .json name)",
    "vllm bench serve --save-result",
    "heisenbench run --out",
];

/// Reads the first result file under `dir` (or `dir` itself, a file) that an adapter
/// recognises. `None`: nothing recognised.
pub fn find(dir: &Path) -> Option<Reported> {
    let mut files = Vec::new();
    collect_json(dir, 0, &mut files);
    files.sort();
    // inference-perf writes one summary and one file per stage: prefer the summary.
    files.sort_by_key(|f| !f.ends_with("summary_lifecycle_metrics.json"));
    files.into_iter().find_map(|f| read(&f))
}

fn collect_json(p: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if p.is_file() {
        if p.extension().is_some_and(|e| e == "json") {
            out.push(p.to_path_buf());
        }
        return;
    }
    if depth > 3 {
        return;
    }
    if let Ok(dir) = std::fs::read_dir(p) {
        for e in dir.flatten() {
            collect_json(&e.path(), depth + 1, out);
        }
    }
}

/// Reads one file, if its format is known.
pub fn read(file: &Path) -> Option<Reported> {
    let text = crate::files::read_bounded(file, crate::files::FileKind::Report).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    let mut r = inference_perf(&v)
        .or_else(|| aiperf(&v))
        .or_else(|| guidellm(&v))
        .or_else(|| sglang(&v))
        .or_else(|| vllm(&v))
        .or_else(|| heisenbench(&v))?;
    if r.tool == "AIPerf" {
        r.ttft_by_id = aiperf_records(&file.with_file_name("profile_export.jsonl"));
    }
    if r.tool == "heisenbench run" {
        let rows = heisenbench_rows(&file.with_file_name("requests.csv"));
        let seconds = |ns: u64| ns as f64 * 1e-9;
        r.ttft_by_id = rows
            .iter()
            .map(|w| (w.key, seconds(w.first_ns - w.intended_ns)))
            .collect();
        r.ttft_from_own_send_by_id = rows
            .iter()
            .map(|w| (w.key, seconds(w.first_ns - w.sent_ns)))
            .collect();
        if let Some(start) = v.get("start_monotonic_ns").and_then(Value::as_u64) {
            r.stamps_by_id = rows
                .iter()
                .map(|w| {
                    let stamps = ClientStamps {
                        sent_ns: start + w.sent_ns,
                        write_ns: w.write_ns.map(|t| start + t),
                        first_ns: start + w.first_ns,
                    };
                    (w.key, stamps)
                })
                .collect();
        }
    }
    if r.tool == "inference-perf" {
        let per_request = file.with_file_name("per_request_lifecycle_metrics.json");
        if let Some((records, sent)) = inference_perf_records(&per_request) {
            r.ttft_by_id = records;
            r.sent = Some(sent);
        }
    }
    r.file = file.to_path_buf();
    Some(r)
}

/// AIPerf's per-request records beside its summary (`profile_export.jsonl`, one JSON
/// object a line): the profiling phase's requests, each by the hash of the `x-request-id`
/// it sent, with its TTFT (milliseconds in the file). Empty where there is no such file.
fn aiperf_records(file: &Path) -> Vec<(RequestKey, f64)> {
    let Ok(text) = crate::files::read_bounded(file, crate::files::FileKind::Report) else {
        return Vec::new();
    };
    text.split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter_map(|r| {
            let meta = r.get("metadata")?;
            if meta.get("benchmark_phase").and_then(Value::as_str) != Some("profiling") {
                return None;
            }
            let id = meta.get("x_request_id")?.as_str()?;
            let ttft = r.get("metrics")?.get("time_to_first_token")?;
            (ttft.get("unit").and_then(Value::as_str) == Some("ms")).then_some(())?;
            let key = RequestKey::RequestId(crate::mock::RequestTag::of(id).hash);
            Some((key, f(ttft, "value")? * 1e-3))
        })
        .collect()
}

/// inference-perf's per-request records beside its summary
/// (`per_request_lifecycle_metrics.json`, with `computed_metrics`): every request it sent,
/// failed ones too, each with its start (`start_time`, seconds of the same monotonic clock
/// as the server's) and, where it succeeded, its TTFT. The records by their start give the
/// order it sent them; the successful ones are returned by that place, with how many it
/// sent. None where there is no such file or a record has no start.
fn inference_perf_records(file: &Path) -> Option<(Vec<(RequestKey, f64)>, u64)> {
    let text = crate::files::read_bounded(file, crate::files::FileKind::Report).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    let mut records: Vec<(f64, Option<f64>)> = v
        .as_array()?
        .iter()
        .map(|r| {
            let ttft = r
                .get("error")
                .is_none_or(Value::is_null)
                .then(|| {
                    r.get("computed_metrics")
                        .and_then(|m| f(m, "time_to_first_token"))
                })
                .flatten();
            Some((f(r, "start_time")?, ttft))
        })
        .collect::<Option<_>>()?;
    records.sort_by(|a, b| a.0.total_cmp(&b.0));
    let sent = records.len() as u64;
    let listed = records
        .into_iter()
        .enumerate()
        .filter_map(|(i, (_, ttft))| Some((RequestKey::Sent(i as u64), ttft?)))
        .collect();
    Some((listed, sent))
}

fn f(v: &Value, key: &str) -> Option<f64> {
    v.get(key)?.as_f64().filter(|x| x.is_finite())
}

/// inference-perf's lifecycle summary: seconds, `median` for p50.
fn inference_perf(v: &Value) -> Option<Reported> {
    let ok = v.get("successes")?;
    let lat = ok.get("latency")?;
    let s = |k: &str| {
        let d = lat.get(k)?;
        let s = Summary {
            mean_s: f(d, "mean"),
            p50_s: f(d, "median").or_else(|| f(d, "p50")),
            p90_s: f(d, "p90"),
            p99_s: f(d, "p99"),
        };
        (!s.is_empty()).then_some(s)
    };
    Some(Reported {
        tool: "inference-perf".into(),
        completed: ok.get("count").and_then(Value::as_u64),
        requests_per_s: ok.get("throughput").and_then(|t| f(t, "requests_per_sec")),
        ttft: s("time_to_first_token"),
        itl: s("inter_token_latency"),
        tpot: s("time_per_output_token"),
        e2e: s("request_latency"),
        send_lag: v
            .get("load_summary")
            .and_then(|l| l.get("schedule_delay"))
            .map(|d| Summary {
                mean_s: f(d, "mean"),
                p50_s: f(d, "median"),
                p90_s: f(d, "p90"),
                p99_s: f(d, "p99"),
            }),
        ..Reported::default()
    })
}

/// AIPerf's `profile_export_aiperf.json`: one object per metric with its `unit`, `avg`
/// and percentiles.
fn aiperf(v: &Value) -> Option<Reported> {
    v.get("aiperf_version")?;
    let s = |k: &str| {
        let d = v.get(k)?;
        let scale = match d.get("unit")?.as_str()? {
            "s" | "sec" => 1.0,
            "ms" => 1e-3,
            "us" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        let x = |stat: &str| f(d, stat).map(|x| x * scale);
        let s = Summary {
            mean_s: x("avg"),
            p50_s: x("p50"),
            p90_s: x("p90"),
            p99_s: x("p99"),
        };
        (!s.is_empty()).then_some(s)
    };
    let avg = |k: &str| v.get(k).and_then(|d| f(d, "avg"));
    Some(Reported {
        tool: "AIPerf".into(),
        completed: avg("request_count").map(|c| c.round() as u64),
        requests_per_s: avg("request_throughput"),
        ttft: s("time_to_first_token"),
        itl: s("inter_token_latency"),
        e2e: s("request_latency"),
        ..Reported::default()
    })
}

/// GuideLLM's JSON report (`guidellm run --output kind=json`): one entry per benchmark in
/// `benchmarks` (an audit runs one), each metric with a `successful` distribution: `mean`,
/// `median` and `percentiles`. TTFT, ITL and TPOT are in milliseconds (their names say
/// `_ms`), the request latency and the dispatch delay in seconds. GuideLLM starts TTFT at
/// its own dispatch of the request and reports how late that dispatch was against the
/// schedule apart (`request_dispatch_delay`), as inference-perf does.
fn guidellm(v: &Value) -> Option<Reported> {
    v.get("metadata")?.get("guidellm_version")?;
    let metrics = v.get("benchmarks")?.get(0)?.get("metrics")?;
    let s = |k: &str, scale: f64| {
        let d = metrics.get(k)?.get("successful")?;
        let p = d.get("percentiles");
        let q = |name: &str| p.and_then(|p| f(p, name)).map(|x| x * scale);
        let s = Summary {
            mean_s: f(d, "mean").map(|x| x * scale),
            p50_s: f(d, "median").map(|x| x * scale).or_else(|| q("p50")),
            p90_s: q("p90"),
            p99_s: q("p99"),
        };
        (!s.is_empty()).then_some(s)
    };
    Some(Reported {
        tool: "GuideLLM".into(),
        completed: metrics
            .get("request_totals")
            .and_then(|t| t.get("successful"))
            .and_then(Value::as_u64),
        requests_per_s: metrics
            .get("requests_per_second")
            .and_then(|r| r.get("successful"))
            .and_then(|r| f(r, "mean")),
        ttft: s("time_to_first_token_ms", 1e-3),
        itl: s("inter_token_latency_ms", 1e-3),
        tpot: s("time_per_output_token_ms", 1e-3),
        e2e: s("request_latency", 1.0),
        send_lag: s("request_dispatch_delay", 1.0),
        ttft_by_id: guidellm_requests(v),
        ..Reported::default()
    })
}

/// GuideLLM's successful requests, each with the id of the response it read
/// (`response_id`) and its TTFT (`time_to_first_token_ms`).
fn guidellm_requests(v: &Value) -> Vec<(RequestKey, f64)> {
    let requests = v
        .get("benchmarks")
        .and_then(|b| b.get(0))
        .and_then(|b| b.get("requests"))
        .and_then(|r| r.get("successful"))
        .and_then(Value::as_array);
    requests
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let id = response_id(r.get("response_id")?.as_str()?)?;
            Some((
                RequestKey::Response(id),
                f(r, "time_to_first_token_ms")? * 1e-3,
            ))
        })
        .collect()
}

/// The number in a response id the mock wrote (`cmpl-7`, `chatcmpl-7`).
fn response_id(id: &str) -> Option<u64> {
    id.strip_prefix("cmpl-")
        .or_else(|| id.strip_prefix("chatcmpl-"))?
        .parse()
        .ok()
}

/// SGLang's `bench_serving --output-file`: one JSON object per line (an audit writes one),
/// milliseconds as in vLLM's, but with `e2e_latency` for vLLM's `e2el`, no p90 of TTFT, and
/// keys of its own (`total_output_tokens_retokenized`), which tell the two apart. Like
/// vLLM's bench it starts TTFT when its request coroutine starts and reports no lateness.
fn sglang(v: &Value) -> Option<Reported> {
    v.get("total_output_tokens_retokenized")?;
    let (ttft_by_id, sent) = listed_requests(v, RequestKey::Sent).unzip();
    Some(Reported {
        ttft_by_id: ttft_by_id.unwrap_or_default(),
        sent,
        ..millisecond_keys(v, "SGLang bench_serving", "e2e_latency")
    })
}

/// `vllm bench serve --save-result`: milliseconds, `{mean,median,p90,p99}_{metric}_ms`.
fn vllm(v: &Value) -> Option<Reported> {
    if v.get("mean_ttft_ms").is_none() && v.get("median_ttft_ms").is_none() {
        return None;
    }
    let (ttft_by_id, sent) = listed_requests(v, RequestKey::RequestIndex).unzip();
    Some(Reported {
        ttft_by_id: ttft_by_id.unwrap_or_default(),
        sent,
        ..millisecond_keys(v, "vllm bench serve", "e2el")
    })
}

/// The per-request lists vLLM's bench keeps with `--save-detailed` and SGLang's with
/// `--output-details`: each request's TTFT (`ttfts`, seconds) and error (`errors`, empty
/// when it succeeded), in the order of the tool's list of requests, which is the order it
/// sent them. The successful ones by their place, named by `key` (vLLM's bench also ends
/// each `x-request-id` with it), and the list's length. None without the lists.
fn listed_requests(v: &Value, key: fn(u64) -> RequestKey) -> Option<(Vec<(RequestKey, f64)>, u64)> {
    let ttfts = v.get("ttfts")?.as_array()?;
    let errors = v.get("errors")?.as_array()?;
    if ttfts.len() != errors.len() {
        return None;
    }
    let listed = ttfts
        .iter()
        .zip(errors)
        .enumerate()
        .filter(|(_, (_, e))| e.as_str().is_some_and(str::is_empty))
        .filter_map(|(i, (t, _))| Some((key(i as u64), t.as_f64()?)))
        .collect();
    Some((listed, ttfts.len() as u64))
}

/// The flat `{mean,median,p90,p99}_{metric}_ms` keys vLLM's bench writes and SGLang's
/// borrowed, their end-to-end latency named `e2e`.
fn millisecond_keys(v: &Value, tool: &str, e2e: &str) -> Reported {
    let s = |m: &str| {
        let ms = |stat: &str| f(v, &format!("{stat}_{m}_ms")).map(|x| x * 1e-3);
        let s = Summary {
            mean_s: ms("mean"),
            p50_s: ms("median").or_else(|| ms("p50")),
            p90_s: ms("p90"),
            p99_s: ms("p99"),
        };
        (!s.is_empty()).then_some(s)
    };
    Reported {
        tool: tool.into(),
        completed: v.get("completed").and_then(Value::as_u64),
        requests_per_s: f(v, "request_throughput"),
        ttft: s("ttft"),
        itl: s("itl"),
        tpot: s("tpot"),
        e2e: s(e2e),
        ..Reported::default()
    }
}

/// One measured completed request of a heisenbench run, from its `requests.csv`: times in
/// nanoseconds from the run's start, its first token at or after both sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RunRow {
    /// Its index (which its `x-request-id` ends with).
    key: RequestKey,
    intended_ns: u64,
    sent_ns: u64,
    /// When its write began, at or after its send (None: not kept).
    write_ns: Option<u64>,
    first_ns: u64,
}

/// heisenbench's per-request rows beside its report (`requests.csv`, written by `run
/// --csv`): its measured completed requests. Empty where there is no such file or its
/// header lacks a column read.
fn heisenbench_rows(file: &Path) -> Vec<RunRow> {
    let Ok(text) = crate::files::read_bounded(file, crate::files::FileKind::Report) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&text);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (Some(index), Some(outcome), Some(intended), Some(sent), Some(first), Some(warmup)) = (
        column("index"),
        column("outcome"),
        column("intended_ns"),
        column("sent_ns"),
        column("first_token_ns"),
        column("warmup"),
    ) else {
        return Vec::new();
    };
    let write = column("write_ns");
    lines
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            let cell = |i: usize| cells.get(i).and_then(|c| c.parse::<u64>().ok());
            if cells.get(outcome) != Some(&"completed") || cells.get(warmup) != Some(&"0") {
                return None;
            }
            let row = RunRow {
                key: RequestKey::RequestIndex(cell(index)?),
                intended_ns: cell(intended)?,
                sent_ns: cell(sent)?,
                write_ns: write.and_then(cell),
                first_ns: cell(first)?,
            };
            let ordered = row.first_ns >= row.intended_ns.max(row.sent_ns)
                && row.write_ns.is_none_or(|w| w >= row.sent_ns);
            ordered.then_some(row)
        })
        .collect()
}

/// heisenbench's own `run --out` report: TTFT and E2E from the intended send.
fn heisenbench(v: &Value) -> Option<Reported> {
    if v.get("kind")?.as_str()? != "live" {
        return None;
    }
    let d = |x: &Value| {
        Some(Summary {
            mean_s: f(x, "mean_s"),
            p50_s: f(x, "p50_s"),
            p90_s: f(x, "p90_s"),
            p99_s: f(x, "p99_s"),
        })
    };
    Some(Reported {
        tool: "heisenbench run".into(),
        completed: v
            .get("accounting")?
            .get("completed")
            .and_then(Value::as_u64),
        requests_per_s: f(v, "achieved_qps"),
        ttft: d(v.get("ttft")?.get("from_intended")?),
        itl: v.get("itl").and_then(d),
        tpot: v.get("tpot").and_then(d),
        e2e: d(v.get("e2e")?.get("from_intended")?),
        send_lag: v.get("send_lag").and_then(d),
        ..Reported::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by inference-perf 0.7.0 (`summary_lifecycle_metrics.json`), auditing it at
    /// 100 req/s with 200-token streams: see fixtures/README.md.
    const INFERENCE_PERF: &str = include_str!("fixtures/inference-perf-0.7.0-summary.json");

    #[test]
    fn inference_perf_summary_reads() {
        let v: Value = serde_json::from_str(INFERENCE_PERF).expect("fixture is JSON");
        let r = inference_perf(&v).expect("recognised");
        assert!(vllm(&v).is_none() && heisenbench(&v).is_none());
        assert_eq!(r.tool, "inference-perf");
        assert_eq!(r.completed, Some(998));
        let t = r.ttft.expect("ttft");
        let (mean, p50, p99) = (t.mean_s.unwrap(), t.p50_s.unwrap(), t.p99_s.unwrap());
        // Seconds, ordered, and of the size a loaded Python loop adds (milliseconds).
        assert!(
            1e-4 < p50 && p50 <= p99 && p99 < 1.0 && mean > 1e-4,
            "{t:?}"
        );
        assert!(r.e2e.and_then(|e| e.p50_s) >= Some(p50));
        assert!((r.requests_per_s.unwrap() - 100.0).abs() < 10.0);
        assert!(r.send_lag.and_then(|s| s.mean_s).is_some());
    }

    /// Written by `vllm bench serve --save-result` (vllm 0.33.0) at 100 req/s with
    /// 200-token streams: see fixtures/README.md.
    const VLLM: &str = include_str!("fixtures/vllm-0.33.0-result.json");

    #[test]
    fn vllm_result_reads() {
        let v: Value = serde_json::from_str(VLLM).expect("fixture is JSON");
        let r = vllm(&v).expect("recognised");
        assert!(inference_perf(&v).is_none() && heisenbench(&v).is_none());
        assert_eq!(r.completed, Some(1000));
        // Its requests keep a schedule from the start; SGLang's, read from the same keys,
        // sleep each gap.
        assert_eq!(r.pacing(), Pacing::Schedule);
        let t = r.ttft.expect("ttft");
        // The file says 3.577 ms mean and 14.32 ms p99, in milliseconds.
        assert!((t.mean_s.unwrap() - 3.5768583690951345e-3).abs() < 1e-12);
        assert!((t.p99_s.unwrap() - 14.315383489301889e-3).abs() < 1e-12);
        assert!(t.p50_s.is_some() && t.p90_s.is_some());
        for s in [r.itl, r.tpot, r.e2e] {
            assert!(s.and_then(|s| s.mean_s).is_some());
        }
        assert!((r.requests_per_s.unwrap() - 99.9).abs() < 0.01);
    }

    /// Written by AIPerf 0.13.0 (`profile_export_aiperf.json`) at 100 req/s with 200-token
    /// streams: see fixtures/README.md.
    const AIPERF: &str = include_str!("fixtures/aiperf-0.13.0-profile_export_aiperf.json");

    #[test]
    fn aiperf_export_reads() {
        let v: Value = serde_json::from_str(AIPERF).expect("fixture is JSON");
        let r = aiperf(&v).expect("recognised");
        assert!(inference_perf(&v).is_none() && vllm(&v).is_none() && heisenbench(&v).is_none());
        assert_eq!(r.completed, Some(1000));
        let t = r.ttft.expect("ttft");
        // The file says avg 5.063 ms and p99 41.89 ms, in milliseconds.
        assert!((t.mean_s.unwrap() - 5.063301348e-3).abs() < 1e-12);
        assert!((t.p99_s.unwrap() - 41.88923044999997e-3).abs() < 1e-12);
        assert!((r.requests_per_s.unwrap() - 101.36).abs() < 0.01);
    }

    /// Written by GuideLLM 0.8.1 (`--output kind=json`) auditing it at 10 req/s for 1 s
    /// (its report keeps every request's statistics, 3.4 MB at the others' 100 req/s for
    /// 10 s): see fixtures/README.md.
    const GUIDELLM: &str = include_str!("fixtures/guidellm-0.8.1-benchmarks.json");

    #[test]
    fn guidellm_report_reads() {
        let v: Value = serde_json::from_str(GUIDELLM).expect("fixture is JSON");
        let r = guidellm(&v).expect("recognised");
        assert!(inference_perf(&v).is_none() && aiperf(&v).is_none() && vllm(&v).is_none());
        assert!(sglang(&v).is_none() && heisenbench(&v).is_none());
        assert_eq!((r.tool.as_str(), r.completed), ("GuideLLM", Some(21)));
        let t = r.ttft.expect("ttft");
        // The file says a mean of 18.368 ms, a median of 19.853 ms and a p99 of 49.090 ms.
        assert!((t.mean_s.unwrap() - 18.36809657868885e-3).abs() < 1e-12);
        assert!((t.p50_s.unwrap() - 19.85311508178711e-3).abs() < 1e-12);
        assert!((t.p99_s.unwrap() - 49.09038543701172e-3).abs() < 1e-12);
        // Its request latency is in seconds already, and at least the TTFT.
        assert!(r.e2e.and_then(|e| e.p50_s) >= t.p50_s);
        assert!(r.e2e.and_then(|e| e.p99_s) < Some(1.0));
        // The dispatch delay, seconds: 12.27 ms in the mean.
        let lag = r.send_lag.and_then(|s| s.mean_s).expect("dispatch delay");
        assert!((lag - 0.012270075934273856).abs() < 1e-12);
        assert_eq!(r.requests_per_s, Some(15.0));
        // Its requests, each with the mock's response id: 22 in the file, cmpl-0 first.
        assert_eq!(r.ttft_by_id.len(), 22);
        assert_eq!(
            r.ttft_by_id[0],
            (RequestKey::Response(0), 1.9373893737792969e-3)
        );
        let mut ids: Vec<u64> = (r.ttft_by_id.iter())
            .filter_map(|x| match x.0 {
                RequestKey::Response(n) => Some(n),
                _ => None,
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 22);
        assert_eq!(response_id("chatcmpl-7"), Some(7));
        assert_eq!(response_id("cmpl-"), None);
        assert_eq!(response_id("resp-7"), None);
    }

    /// vLLM's bench with `--save-detailed`: its requests in order, the failed one left out;
    /// without the lists, none.
    #[test]
    fn vllm_detailed_requests_read_by_their_place() {
        let v: Value = serde_json::json!({
            "mean_ttft_ms": 2.0,
            "ttfts": [0.001, 0.0, 0.003],
            "errors": ["", "connection reset", ""],
        });
        let r = vllm(&v).expect("recognised");
        assert_eq!(
            r.ttft_by_id,
            [
                (RequestKey::RequestIndex(0), 0.001),
                (RequestKey::RequestIndex(2), 0.003)
            ]
        );
        let plain: Value = serde_json::from_str(VLLM).expect("fixture is JSON");
        assert!(vllm(&plain).expect("recognised").ttft_by_id.is_empty());
    }

    /// AIPerf's records beside its summary: the profiling phase's, by the hash of the
    /// request id each sent, TTFT in seconds; a warm-up record and a line that is not JSON
    /// are left out.
    #[test]
    fn aiperf_records_pair_by_request_id() {
        let dir = std::env::temp_dir().join(format!("hb-aiperf-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("profile_export_aiperf.json"), AIPERF).unwrap();
        let record = |id: &str, phase: &str, ms: f64| {
            serde_json::json!({
                "metadata": {"x_request_id": id, "benchmark_phase": phase},
                "metrics": {"time_to_first_token": {"value": ms, "unit": "ms"}},
            })
            .to_string()
        };
        let lines = [
            record("3ff53315-15e9", "profiling", 10.5),
            record("a1", "warmup", 1.0),
            "{not json".into(),
            record("b2", "profiling", 2.0),
        ];
        std::fs::write(dir.join("profile_export.jsonl"), lines.join("\n")).unwrap();
        let r = find(&dir).expect("recognised");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(r.tool, "AIPerf");
        let tag = |id: &str| RequestKey::RequestId(crate::mock::RequestTag::of(id).hash);
        assert_eq!(
            r.ttft_by_id,
            [(tag("3ff53315-15e9"), 10.5 * 1e-3), (tag("b2"), 2.0 * 1e-3)]
        );
    }

    /// Written by SGLang 0.5.6's `bench_serving --output-file` at 100 req/s with 200-token
    /// streams: see fixtures/README.md.
    const SGLANG: &str = include_str!("fixtures/sglang-0.5.6-result.json");

    #[test]
    fn sglang_result_reads_and_is_not_taken_for_vllms() {
        let v: Value = serde_json::from_str(SGLANG).expect("fixture is JSON");
        // vLLM's adapter would read it too (the same millisecond keys), under vLLM's name;
        // `read` asks SGLang's first.
        assert!(vllm(&v).is_some());
        let r = sglang(&v).expect("recognised");
        assert!(guidellm(&v).is_none() && inference_perf(&v).is_none() && aiperf(&v).is_none());
        assert_eq!(
            (r.tool.as_str(), r.completed),
            ("SGLang bench_serving", Some(1000))
        );
        assert_eq!(r.pacing(), Pacing::EachGap);
        assert_eq!(vllm(&v).map(|r| r.pacing()), Some(Pacing::Schedule));
        // The same keys read as vLLM's draw a share of the latency; SGLang's keep it constant.
        assert_eq!(r.latency_shape(), LatencyShape::Constant);
        assert_eq!(
            vllm(&v).map(|r| r.latency_shape()),
            Some(LatencyShape::Drawn)
        );
        let t = r.ttft.expect("ttft");
        // The file says 4.765 ms mean and 16.955 ms p99, and has no p90 of TTFT.
        assert!((t.mean_s.unwrap() - 4.76492365096783e-3).abs() < 1e-12);
        assert!((t.p99_s.unwrap() - 16.955177979943983e-3).abs() < 1e-12);
        assert!(t.p50_s.is_some() && t.p90_s.is_none());
        let e2e = r.e2e.expect("its e2e_latency keys");
        assert!(e2e.p50_s >= t.p50_s);
        assert!((r.requests_per_s.unwrap() - 75.95).abs() < 0.01);
        let dir = std::env::temp_dir().join(format!("hb-sglang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("sglang-result.json"), SGLANG).unwrap();
        let found = find(&dir).map(|r| r.tool);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.as_deref(), Some("SGLang bench_serving"));
    }

    /// Written by SGLang 0.5.6's `bench_serving --output-details` at 10 req/s for 1 s with
    /// 4-token streams: see fixtures/README.md.
    const SGLANG_DETAILS: &str = include_str!("fixtures/sglang-0.5.6-details.json");

    /// SGLang's details list its requests in the order it sent them: each by that place,
    /// with how many it sent; a failed one keeps its place and is left out.
    #[test]
    fn sglang_details_list_requests_in_the_order_sent() {
        let mut v: Value = serde_json::from_str(SGLANG_DETAILS).expect("fixture is JSON");
        let r = sglang(&v).expect("recognised");
        assert_eq!((r.sent, r.ttft_by_id.len()), (Some(10), 10));
        // The file's first and last TTFTs, seconds.
        assert_eq!(
            r.ttft_by_id[0],
            (RequestKey::Sent(0), 0.0023983089995454066)
        );
        assert_eq!(
            r.ttft_by_id[9],
            (RequestKey::Sent(9), 0.0011492059984448133)
        );
        v["errors"][4] = "timed out".into();
        let r = sglang(&v).expect("recognised");
        assert_eq!(r.sent, Some(10));
        let places: Vec<RequestKey> = r.ttft_by_id.iter().map(|(k, _)| *k).collect();
        assert_eq!(places.len(), 9);
        assert!(!places.contains(&RequestKey::Sent(4)) && places.contains(&RequestKey::Sent(5)));
        // Lists that disagree in length are no order to pair by.
        v["errors"].as_array_mut().unwrap().pop();
        assert_eq!(sglang(&v).map(|r| r.sent), Some(None));
        let plain: Value = serde_json::from_str(SGLANG).expect("fixture is JSON");
        assert_eq!(sglang(&plain).map(|r| r.sent), Some(None));
    }

    /// Written by inference-perf 0.7.0 with `per_request` and `computed_metrics` (the
    /// template in bench/audit) at 10 req/s for 1 s with 4-token streams: see
    /// fixtures/README.md.
    const INFERENCE_PERF_REQUESTS: &str =
        include_str!("fixtures/inference-perf-0.7.0-per_request_lifecycle_metrics.json");

    /// inference-perf's per-request records beside its summary, in whatever order the file
    /// holds them, come back by the order of their starts; a failed one keeps its place.
    #[test]
    fn inference_perf_records_pair_by_the_order_of_their_starts() {
        let mut records: Vec<Value> =
            serde_json::from_str(INFERENCE_PERF_REQUESTS).expect("fixture is JSON");
        assert_eq!(records.len(), 10);
        let first_ttft = records[0]["computed_metrics"]["time_to_first_token"]
            .as_f64()
            .unwrap();
        records.reverse();
        records[2]["error"] = serde_json::json!({"error_type": "ClientError"});
        let dir = std::env::temp_dir().join(format!("hb-ip-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("summary_lifecycle_metrics.json"), INFERENCE_PERF).unwrap();
        let file = dir.join("per_request_lifecycle_metrics.json");
        std::fs::write(&file, serde_json::to_vec(&records).unwrap()).unwrap();
        let r = find(&dir).expect("recognised");
        // A record without its start gives no order at all.
        records[0].as_object_mut().unwrap().remove("start_time");
        std::fs::write(&file, serde_json::to_vec(&records).unwrap()).unwrap();
        let no_order = find(&dir).expect("recognised");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((r.tool.as_str(), r.sent), ("inference-perf", Some(10)));
        assert_eq!(r.ttft_by_id.len(), 9);
        assert_eq!(r.ttft_by_id[0], (RequestKey::Sent(0), first_ttft));
        // The third from the end of the reversed file is the eighth sent.
        assert!(!r.ttft_by_id.iter().any(|(k, _)| *k == RequestKey::Sent(7)));
        assert_eq!((no_order.sent, no_order.ttft_by_id.len()), (None, 0));
    }

    #[test]
    fn unknown_json_is_not_a_result() {
        assert!(inference_perf(&serde_json::json!({"a": 1})).is_none());
        assert!(vllm(&serde_json::json!({"completed": 3})).is_none());
        assert!(heisenbench(&serde_json::json!({"kind": "sim"})).is_none());
    }

    #[test]
    fn vllm_milliseconds_become_seconds() {
        let v = serde_json::json!({
            "completed": 10, "request_throughput": 9.5,
            "mean_ttft_ms": 12.0, "median_ttft_ms": 10.0, "p99_ttft_ms": 40.0,
            "mean_itl_ms": 1.5
        });
        let r = vllm(&v).expect("recognised");
        let t = r.ttft.expect("ttft");
        assert_eq!(
            (t.mean_s, t.p50_s, t.p90_s, t.p99_s),
            (Some(0.012), Some(0.010), None, Some(0.040))
        );
        assert_eq!(r.itl.and_then(|s| s.mean_s), Some(0.0015));
        assert!(r.tpot.is_none() && r.e2e.is_none());
        assert_eq!((r.completed, r.requests_per_s), (Some(10), Some(9.5)));
    }

    #[test]
    fn heisenbench_rows_read_completed_measured_requests_by_their_index() {
        let dir = std::env::temp_dir().join(format!("hb-run-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let file = dir.join("requests.csv");
        // Columns in another order than `run` writes them: they are found by name.
        std::fs::write(
            &file,
            "warmup,index,outcome,sent_ns,intended_ns,first_token_ns,write_ns\n\
             0,0,completed,1500,1000,4000,1600\n\
             1,1,completed,2500,2000,5000,2600\n\
             0,2,http_500,3000,3000,,\n\
             0,3,completed,7000,6000,6500,7100\n\
             0,4,completed,9000,8000,10000,\n\
             0,5,completed,9000,8000,10000,8999\n",
        )
        .expect("written");
        let rows = heisenbench_rows(&file);
        let row = |i, intended_ns, sent_ns, write_ns, first_ns| RunRow {
            key: RequestKey::RequestIndex(i),
            intended_ns,
            sent_ns,
            write_ns,
            first_ns,
        };
        // The warm-up row, the failed one and those whose first token precedes their send,
        // or their write their send, are left out; a write not kept reads as None.
        assert_eq!(
            rows,
            [
                row(0, 1000, 1500, Some(1600), 4000),
                row(4, 8000, 9000, None, 10000)
            ]
        );
        std::fs::write(&file, "index,outcome\n0,completed\n").expect("written");
        assert!(heisenbench_rows(&file).is_empty());
        assert!(heisenbench_rows(&dir.join("none.csv")).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
