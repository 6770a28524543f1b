//! The engines' metric families in one vocabulary.
//!
//! Each engine names the same few facts its own way: vLLM's
//! `vllm:num_requests_waiting` is SGLang's `sglang:num_queue_reqs`, TGI's `tgi_queue_size`
//! and llama.cpp's `llamacpp:requests_deferred`. A scrape reduces an exposition to a
//! [`Snapshot`] of [`Quantity`]s (summing a family's label sets: several models, finish
//! reasons or data-parallel ranks), and keeps every other family's last value raw.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::exposition::{Exposition, Kind};

/// A fact about the server, whichever engine states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// Requests being generated now (gauge).
    Running,
    /// Requests waiting to be scheduled now (gauge).
    Waiting,
    /// Fraction of the KV cache in use, 0..1 (gauge).
    KvCacheUsage,
    /// Prompt tokens looked up in the prefix cache (counter).
    PrefixQueries,
    /// Prompt tokens the prefix cache held (counter).
    PrefixHits,
    /// Requests preempted or retracted (counter).
    Preemptions,
    /// Prompt tokens processed (counter).
    PromptTokens,
    /// Tokens generated (counter).
    GenerationTokens,
    /// Requests finished (counter).
    Finished,
    /// Seconds spent in prompt processing, all requests together (counter; llama.cpp).
    PrefillBusySeconds,
    /// Time to first token as the server measures it, from its arrival (histogram).
    Ttft,
    /// Time waiting to be scheduled (histogram).
    Queue,
    /// Time from scheduling to the first token (histogram).
    Prefill,
    /// Time from the first token to the last (histogram).
    Decode,
    /// Arrival to the last token (histogram).
    E2e,
    /// Time between tokens (histogram).
    Itl,
}

impl Quantity {
    /// Whether it is a histogram.
    pub fn is_histogram(self) -> bool {
        matches!(
            self,
            Self::Ttft | Self::Queue | Self::Prefill | Self::Decode | Self::E2e | Self::Itl
        )
    }

    /// Whether it is a gauge (else a counter or a histogram).
    pub fn is_gauge(self) -> bool {
        matches!(self, Self::Running | Self::Waiting | Self::KvCacheUsage)
    }
}

/// An engine whose families are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// vLLM (and servers that borrow its names: llm-d-inference-sim, heisenbench's mock).
    Vllm,
    /// SGLang.
    Sglang,
    /// Hugging Face text-generation-inference.
    Tgi,
    /// llama.cpp's `llama-server --metrics`.
    LlamaCpp,
}

impl Engine {
    /// The engine's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Vllm => "vLLM",
            Self::Sglang => "SGLang",
            Self::Tgi => "TGI",
            Self::LlamaCpp => "llama.cpp",
        }
    }
}

/// Where each quantity is found: engine, family, quantity. Later entries of the same
/// engine and quantity are older names, used only when the newer is absent.
const FAMILIES: &[(Engine, &str, Quantity)] = &[
    (Engine::Vllm, "vllm:num_requests_running", Quantity::Running),
    (Engine::Vllm, "vllm:num_requests_waiting", Quantity::Waiting),
    (
        Engine::Vllm,
        "vllm:kv_cache_usage_perc",
        Quantity::KvCacheUsage,
    ),
    (
        Engine::Vllm,
        "vllm:gpu_cache_usage_perc",
        Quantity::KvCacheUsage,
    ),
    (
        Engine::Vllm,
        "vllm:prefix_cache_queries",
        Quantity::PrefixQueries,
    ),
    (
        Engine::Vllm,
        "vllm:gpu_prefix_cache_queries",
        Quantity::PrefixQueries,
    ),
    (Engine::Vllm, "vllm:prefix_cache_hits", Quantity::PrefixHits),
    (
        Engine::Vllm,
        "vllm:gpu_prefix_cache_hits",
        Quantity::PrefixHits,
    ),
    (Engine::Vllm, "vllm:num_preemptions", Quantity::Preemptions),
    (Engine::Vllm, "vllm:prompt_tokens", Quantity::PromptTokens),
    (
        Engine::Vllm,
        "vllm:generation_tokens",
        Quantity::GenerationTokens,
    ),
    (Engine::Vllm, "vllm:request_success", Quantity::Finished),
    (
        Engine::Vllm,
        "vllm:time_to_first_token_seconds",
        Quantity::Ttft,
    ),
    (
        Engine::Vllm,
        "vllm:request_queue_time_seconds",
        Quantity::Queue,
    ),
    (
        Engine::Vllm,
        "vllm:request_prefill_time_seconds",
        Quantity::Prefill,
    ),
    (
        Engine::Vllm,
        "vllm:request_decode_time_seconds",
        Quantity::Decode,
    ),
    (
        Engine::Vllm,
        "vllm:e2e_request_latency_seconds",
        Quantity::E2e,
    ),
    (
        Engine::Vllm,
        "vllm:inter_token_latency_seconds",
        Quantity::Itl,
    ),
    (
        Engine::Vllm,
        "vllm:time_per_output_token_seconds",
        Quantity::Itl,
    ),
    (Engine::Sglang, "sglang:num_running_reqs", Quantity::Running),
    (Engine::Sglang, "sglang:num_queue_reqs", Quantity::Waiting),
    (Engine::Sglang, "sglang:token_usage", Quantity::KvCacheUsage),
    (
        Engine::Sglang,
        "sglang:num_retracted_reqs",
        Quantity::Preemptions,
    ),
    (
        Engine::Sglang,
        "sglang:prompt_tokens",
        Quantity::PromptTokens,
    ),
    (
        Engine::Sglang,
        "sglang:generation_tokens",
        Quantity::GenerationTokens,
    ),
    (Engine::Sglang, "sglang:num_requests", Quantity::Finished),
    (
        Engine::Sglang,
        "sglang:time_to_first_token_seconds",
        Quantity::Ttft,
    ),
    (Engine::Sglang, "sglang:queue_time_seconds", Quantity::Queue),
    (
        Engine::Sglang,
        "sglang:e2e_request_latency_seconds",
        Quantity::E2e,
    ),
    (
        Engine::Sglang,
        "sglang:inter_token_latency_seconds",
        Quantity::Itl,
    ),
    (
        Engine::Sglang,
        "sglang:time_per_output_token_seconds",
        Quantity::Itl,
    ),
    (Engine::Tgi, "tgi_batch_current_size", Quantity::Running),
    (Engine::Tgi, "tgi_queue_size", Quantity::Waiting),
    (
        Engine::Tgi,
        "tgi_request_input_count",
        Quantity::PromptTokens,
    ),
    (Engine::Tgi, "tgi_request_success", Quantity::Finished),
    (Engine::Tgi, "tgi_request_queue_duration", Quantity::Queue),
    (Engine::Tgi, "tgi_request_duration", Quantity::E2e),
    (
        Engine::Tgi,
        "tgi_request_mean_time_per_token_duration",
        Quantity::Itl,
    ),
    (
        Engine::LlamaCpp,
        "llamacpp:requests_processing",
        Quantity::Running,
    ),
    (
        Engine::LlamaCpp,
        "llamacpp:requests_deferred",
        Quantity::Waiting,
    ),
    (
        Engine::LlamaCpp,
        "llamacpp:kv_cache_usage_ratio",
        Quantity::KvCacheUsage,
    ),
    (
        Engine::LlamaCpp,
        "llamacpp:prompt_tokens",
        Quantity::PromptTokens,
    ),
    (
        Engine::LlamaCpp,
        "llamacpp:tokens_predicted",
        Quantity::GenerationTokens,
    ),
    (
        Engine::LlamaCpp,
        "llamacpp:prompt_tokens_cached",
        Quantity::PrefixHits,
    ),
    (
        Engine::LlamaCpp,
        "llamacpp:prompt_seconds",
        Quantity::PrefillBusySeconds,
    ),
];

/// Families a quantity may be read from, for the documentation and reports.
pub fn families() -> impl Iterator<Item = (Engine, &'static str, Quantity)> {
    FAMILIES.iter().copied()
}

/// A cumulative histogram as scraped: upper bounds (the last is +Inf), cumulative counts,
/// the sum and the count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Buckets {
    /// Upper bounds, ascending, the last `+Inf`.
    pub bounds: Vec<f64>,
    /// Observations at or below each bound.
    pub cumulative: Vec<f64>,
    /// The sum of every observation.
    pub sum: f64,
    /// The number of observations.
    pub count: f64,
}

impl Buckets {
    /// What was observed between `earlier` and this (a counter reset, or bounds that
    /// changed, gives this whole: the server restarted).
    pub fn since(&self, earlier: &Buckets) -> Buckets {
        let reset = earlier.bounds != self.bounds
            || earlier.count > self.count
            || earlier
                .cumulative
                .iter()
                .zip(&self.cumulative)
                .any(|(a, b)| a > b);
        if reset {
            return self.clone();
        }
        Buckets {
            bounds: self.bounds.clone(),
            cumulative: self
                .cumulative
                .iter()
                .zip(&earlier.cumulative)
                .map(|(a, b)| a - b)
                .collect(),
            sum: self.sum - earlier.sum,
            count: self.count - earlier.count,
        }
    }

    /// Adds another histogram with the same bounds (a second label set or server); one
    /// with other bounds is left out and `false` returned.
    pub fn add(&mut self, o: &Buckets) -> bool {
        if self.bounds.is_empty() && self.count == 0.0 {
            *self = o.clone();
            return true;
        }
        if self.bounds != o.bounds {
            return false;
        }
        for (a, b) in self.cumulative.iter_mut().zip(&o.cumulative) {
            *a += b;
        }
        self.sum += o.sum;
        self.count += o.count;
        true
    }

    /// The mean observation, seconds (none without observations).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The `q` quantile, linear within its bucket as Prometheus' `histogram_quantile`
    /// does (the lowest bucket starts at 0; a quantile in the `+Inf` bucket is the
    /// highest finite bound, a lower bound of the truth).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = *self.cumulative.last()?;
        if total <= 0.0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total;
        let i = self.cumulative.iter().position(|c| *c >= rank)?;
        let hi = self.bounds[i];
        if hi.is_infinite() {
            return self.bounds.iter().rev().find(|b| b.is_finite()).copied();
        }
        let (lo, below) = if i == 0 {
            (0.0_f64.min(hi), 0.0)
        } else {
            (self.bounds[i - 1], self.cumulative[i - 1])
        };
        let inside = self.cumulative[i] - below;
        if inside <= 0.0 {
            return Some(hi);
        }
        Some(lo + (hi - lo) * (rank - below) / inside)
    }
}

/// A value of one quantity at one scrape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// A gauge or a counter.
    Scalar(f64),
    /// A histogram.
    Histogram(Buckets),
}

/// One scrape reduced to the vocabulary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The engine whose names were found (the one with the most families).
    pub engine: Option<Engine>,
    /// Every quantity found.
    pub values: BTreeMap<Quantity, Value>,
    /// The family each quantity was read from.
    pub sources: BTreeMap<Quantity, &'static str>,
    /// Families outside the vocabulary: the last scalar value of each (summed over label
    /// sets), histograms and summaries by their count.
    pub raw: BTreeMap<String, f64>,
}

impl Snapshot {
    /// Reduces `e` to the vocabulary.
    pub fn of(e: &Exposition) -> Snapshot {
        // Every sample's value summed by (family, le) for histograms, by family otherwise.
        // (sum, label sets) by family.
        let mut scalars: BTreeMap<&str, (f64, u32)> = BTreeMap::new();
        let mut hists: BTreeMap<&str, HistParts> = BTreeMap::new();
        for s in &e.samples {
            let (family, kind) = e.family_of(&s.name);
            if kind == Kind::Histogram {
                let h = hists.entry(family).or_default();
                if s.name.ends_with("_bucket") {
                    // Rust reads "+Inf" as infinity; a NaN bound is no bound.
                    let le = s.label("le").and_then(|v| v.parse::<f64>().ok());
                    if let Some(le) = le.filter(|b| !b.is_nan()) {
                        *h.buckets.entry(OrdF64(le)).or_default() += s.value;
                    }
                } else if s.name.ends_with("_sum") {
                    h.sum += s.value;
                } else if s.name.ends_with("_count") {
                    h.count += s.value;
                }
                continue;
            }
            if s.name.ends_with("_created") && kind == Kind::Counter {
                continue;
            }
            if kind == Kind::Summary && !s.name.ends_with("_count") {
                continue;
            }
            let e = scalars.entry(family).or_default();
            e.0 += s.value;
            e.1 += 1;
        }
        // A ratio gauge over several label sets (models, ranks) is their mean; counts
        // and counters are sums.
        let counted = |family: &str, q: Quantity| -> Option<Value> {
            if let Some(h) = hists.get(family) {
                return Some(Value::Histogram(h.finish()));
            }
            let (sum, n) = scalars
                .get(family)
                .or_else(|| scalars.get(format!("{family}_total").as_str()))?;
            Some(Value::Scalar(if q == Quantity::KvCacheUsage {
                sum / f64::from((*n).max(1))
            } else {
                *sum
            }))
        };
        let mut by_engine: BTreeMap<u8, Snapshot> = BTreeMap::new();
        let mut used: std::collections::BTreeSet<String> = Default::default();
        for &(engine, family, q) in FAMILIES {
            let snap = by_engine.entry(engine as u8).or_default();
            if snap.values.contains_key(&q) {
                continue;
            }
            let Some(v) = counted(family, q) else {
                continue;
            };
            if matches!(v, Value::Histogram(_)) != q.is_histogram() {
                continue;
            }
            snap.engine = Some(engine);
            snap.values.insert(q, v);
            snap.sources.insert(q, family);
            used.insert(family.to_string());
            used.insert(format!("{family}_total"));
        }
        let mut best = by_engine
            .into_values()
            .max_by_key(|s| s.values.len())
            .unwrap_or_default();
        for (family, (v, _)) in &scalars {
            if !used.contains(*family) {
                best.raw.insert((*family).to_string(), *v);
            }
        }
        for (family, h) in &hists {
            if !used.contains(*family) {
                best.raw.insert(format!("{family}_count"), h.count);
            }
        }
        best
    }
}

#[derive(Default)]
struct HistParts {
    buckets: BTreeMap<OrdF64, f64>,
    sum: f64,
    count: f64,
}

impl HistParts {
    fn finish(&self) -> Buckets {
        let (bounds, cumulative) = self.buckets.iter().map(|(b, c)| (b.0, *c)).unzip();
        Buckets {
            bounds,
            cumulative,
            sum: self.sum,
            count: self.count,
        }
    }
}

/// A bound usable as a map key (bounds are never NaN: NaN `le` labels are skipped).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(bounds: &[f64], cum: &[f64]) -> Buckets {
        Buckets {
            bounds: bounds.to_vec(),
            cumulative: cum.to_vec(),
            sum: 0.0,
            count: *cum.last().unwrap(),
        }
    }

    #[test]
    fn quantiles_interpolate_within_a_bucket_as_prometheus_does() {
        // 10 at or below 1, 30 in (1, 2], 0 above: the median is rank 20, 10 of 30
        // into the second bucket.
        let h = hist(&[1.0, 2.0, f64::INFINITY], &[10.0, 40.0, 40.0]);
        assert!((h.quantile(0.5).unwrap() - (1.0 + 10.0 / 30.0)).abs() < 1e-12);
        assert!((h.quantile(0.25).unwrap() - 1.0).abs() < 1e-12);
        assert!((h.quantile(0.1).unwrap() - 0.4).abs() < 1e-12);
        // In the +Inf bucket: the highest finite bound.
        let h = hist(&[1.0, f64::INFINITY], &[1.0, 4.0]);
        assert_eq!(h.quantile(0.9), Some(1.0));
        assert_eq!(hist(&[1.0, f64::INFINITY], &[0.0, 0.0]).quantile(0.5), None);
    }

    fn fixture(name: &str) -> Snapshot {
        let path = format!("{}/src/scrape/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        Snapshot::of(&super::super::exposition::parse(&text).unwrap())
    }

    fn scalar(s: &Snapshot, q: Quantity) -> f64 {
        match s.values.get(&q) {
            Some(Value::Scalar(x)) => *x,
            other => panic!("{q:?}: {other:?}"),
        }
    }

    fn mean(s: &Snapshot, q: Quantity) -> f64 {
        match s.values.get(&q) {
            Some(Value::Histogram(h)) => h.mean().unwrap(),
            other => panic!("{q:?}: {other:?}"),
        }
    }

    /// Each engine's exposition reduces to the same facts: 3 running, 5 waiting, a mean
    /// queue time of 0.15 s over 10 requests (the fixtures state one situation).
    #[test]
    fn every_engines_fixture_speaks_the_vocabulary() {
        for (file, engine) in [
            ("vllm.txt", Engine::Vllm),
            ("sglang.txt", Engine::Sglang),
            ("tgi.txt", Engine::Tgi),
        ] {
            let s = fixture(file);
            assert_eq!(s.engine, Some(engine), "{file}");
            assert_eq!(scalar(&s, Quantity::Running), 3.0, "{file}");
            assert_eq!(scalar(&s, Quantity::Waiting), 5.0, "{file}");
            assert!((mean(&s, Quantity::Queue) - 0.15).abs() < 1e-12, "{file}");
            assert!((mean(&s, Quantity::E2e) - 2.25).abs() < 1e-12, "{file}");
        }
        let v = fixture("vllm.txt");
        assert_eq!(scalar(&v, Quantity::KvCacheUsage), 0.25);
        assert_eq!(scalar(&v, Quantity::PrefixHits), 400.0);
        assert_eq!(scalar(&v, Quantity::PrefixQueries), 1000.0);
        assert_eq!(scalar(&v, Quantity::Preemptions), 2.0);
        // Finish reasons are label sets of one family: summed.
        assert_eq!(scalar(&v, Quantity::Finished), 10.0);
        assert!((mean(&v, Quantity::Prefill) - 0.09).abs() < 1e-12);
        assert_eq!(
            v.sources[&Quantity::Ttft],
            "vllm:time_to_first_token_seconds"
        );
        assert!(v.raw.contains_key("vllm:cache_config_info"));
        assert!(!v.raw.keys().any(|k| k.contains("_created")));
        let g = fixture("sglang.txt");
        assert_eq!(scalar(&g, Quantity::KvCacheUsage), 0.25);
        assert_eq!(g.raw.get("sglang:cache_hit_rate"), Some(&0.4));
        // Recorded from a real llama-server: its counters as it wrote them.
        let l = fixture("llamacpp.txt");
        assert_eq!(l.engine, Some(Engine::LlamaCpp));
        assert_eq!(scalar(&l, Quantity::PromptTokens), 20370.0);
        assert_eq!(scalar(&l, Quantity::PrefixHits), 1405.0);
        assert_eq!(scalar(&l, Quantity::PrefillBusySeconds), 0.261451);
        assert_eq!(scalar(&l, Quantity::Waiting), 0.0);
    }

    /// The mock speaks vLLM's names, including the prefill and decode histograms.
    #[test]
    fn the_mocks_exposition_is_vllms() {
        let m = crate::mock::metrics::Metrics::default();
        m.queue.observe_ns(2_000_000);
        m.prefill.observe_ns(20_000_000);
        let s = Snapshot::of(&super::super::exposition::parse(&m.render("m")).unwrap());
        assert_eq!(s.engine, Some(Engine::Vllm));
        for q in [
            Quantity::Running,
            Quantity::Waiting,
            Quantity::Ttft,
            Quantity::Queue,
            Quantity::Prefill,
            Quantity::Decode,
            Quantity::E2e,
            Quantity::Itl,
        ] {
            assert!(s.values.contains_key(&q), "{q:?}");
        }
        assert!((mean(&s, Quantity::Prefill) - 0.02).abs() < 1e-12);
    }

    #[test]
    fn a_delta_is_a_difference_and_a_reset_is_a_restart() {
        let a = hist(&[1.0, f64::INFINITY], &[1.0, 2.0]);
        let b = hist(&[1.0, f64::INFINITY], &[4.0, 7.0]);
        assert_eq!(b.since(&a).cumulative, vec![3.0, 5.0]);
        assert_eq!(b.since(&a).count, 5.0);
        assert_eq!(a.since(&b), a);
    }
}
