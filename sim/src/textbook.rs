//! Textbook mode: one FIFO queue, simulated two ways, with confidence intervals.
//!
//! * [`lindley`]: the recursion W_{n+1} = max(0, W_n + S_n - A_{n+1}) in f64 seconds,
//!   the fast path.
//! * [`events`]: arrivals and departures through the same [`EventQueue`] the client
//!   engine uses, in integer nanoseconds.
//! * [`pooled_bursts`]: c servers sharing one FIFO queue (Kiefer and Wolfowitz's
//!   recursion), the pooled loops a plan may assume.
//!
//! Both draw gaps and service times from the same seeded streams in customer order, so
//! on one seed they agree up to nanosecond rounding; each must also agree with the model
//! within its confidence interval. Intervals are batch means: the run after warm-up is cut
//! into `batches` consecutive batches, each batch gives one estimate, and the 95 %
//! half-width is t_{0.975, B-1} s / sqrt(B) over the batch estimates. Batches of many
//! thousand customers are long against the queue's correlation time except very near
//! rho = 1, which makes the batch estimates close to independent.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use heisenbench_model::queue::QueueReport;
use heisenbench_model::service::Service;
use heisenbench_model::units::Quantile;
use rand_distr::{Distribution, Exp1, Gamma};
use serde::{Deserialize, Serialize};

use crate::events::EventQueue;

mod hist;
use crate::time::{SimTime, ns_from_secs};
use heisenbench_model::sample::{Sampler, SimRng, purpose, stream};
use hist::WaitHist;

pub use heisenbench_model::scenario::Gaps;

/// One textbook experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSpec {
    /// Arrivals per second.
    pub rate_per_s: f64,
    /// Gap shape.
    pub gaps: Gaps,
    /// Service distribution.
    pub service: Service,
    /// Customers measured (after warm-up).
    pub customers: u64,
    /// Customers simulated and discarded first (the queue starts empty).
    pub warmup: u64,
    /// Batches for the confidence intervals (>= 2).
    pub batches: u32,
    /// Root seed.
    pub seed: u64,
}

impl QueueSpec {
    /// Refuses a queue that never settles (utilisation at or above one): its waits grow
    /// without bound and no run length gives them a distribution.
    pub fn check_stable(&self) -> Result<(), heisenbench_model::ModelError> {
        let rho = self.rate_per_s * self.service.mean_s();
        if rho >= 1.0 {
            return Err(heisenbench_model::ModelError::unstable(rho, 1));
        }
        Ok(())
    }
}

/// A point estimate with its 95 % confidence half-width.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The estimate over all measured customers.
    pub value: f64,
    /// Half-width of the 95 % batch-means interval.
    pub ci95: f64,
}

impl Estimate {
    /// Whether `truth` lies within `k` half-widths (plus `slack`, for quantities the
    /// histogram rounds).
    pub fn covers(&self, truth: f64, k: f64, slack: f64) -> bool {
        (self.value - truth).abs() <= k * self.ci95 + slack
    }
}

/// What one engine measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueResult {
    /// `lindley` or `events`.
    pub engine: String,
    /// Customers measured.
    pub customers: u64,
    /// Mean wait, seconds.
    pub wait_mean_s: Estimate,
    /// Probability of waiting.
    pub p_wait: Estimate,
    /// Wait quantiles at p50, p90, p99, p99.9, seconds.
    pub wait_quantiles_s: Vec<(Quantile, Estimate)>,
    /// Event engine only: Little's law checked on the whole run, from two independent
    /// tallies (queue length integrated over time, and waits summed per customer).
    pub little: Option<Little>,
}

/// Little's law, L_q = lambda W_q, over a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Little {
    /// Time-average number waiting: integral of the queue length over the run's length.
    pub lq_time_average: f64,
    /// Observed arrival rate times observed mean wait.
    pub lambda_times_wq: f64,
}

fn gap_sampler(spec: &QueueSpec) -> impl FnMut(&mut SimRng) -> f64 {
    let mean = 1.0 / spec.rate_per_s;
    let gamma = match spec.gaps {
        Gaps::Gamma { shape } => Gamma::new(shape, mean / shape).ok(),
        _ => None,
    };
    let gaps = spec.gaps;
    move |rng: &mut SimRng| match gaps {
        Gaps::Poisson => {
            let e: f64 = Exp1.sample(rng);
            e * mean
        }
        Gaps::Constant => mean,
        Gaps::Gamma { .. } => gamma.as_ref().map_or(mean, |g| g.sample(rng)),
    }
}

/// Collects waits into batches.
struct Batches {
    per_batch: u64,
    /// Customers until the current batch closes (a countdown: no division per customer).
    left: u64,
    /// Customers in the closed batches.
    closed_at: u64,
    overall: WaitHist,
    current: WaitHist,
    done: Vec<[f64; 6]>,
}

impl Batches {
    fn new(spec: &QueueSpec) -> Self {
        let per_batch = (spec.customers / u64::from(spec.batches.max(2))).max(1);
        Self {
            per_batch,
            left: per_batch,
            closed_at: 0,
            overall: WaitHist::default(),
            current: WaitHist::default(),
            done: Vec::new(),
        }
    }

    /// A wait in integer nanoseconds (the event engine's clock).
    #[inline]
    fn push_ns(&mut self, wait_ns: u64) {
        self.push(wait_ns as f64 * 1e-9);
    }

    #[inline]
    fn push(&mut self, wait_s: f64) {
        // Only positive waits go into the histogram; the zeros (a fraction 1 - rho) are
        // the customers seen less those recorded.
        if wait_s > 0.0 {
            self.current.record(wait_s);
        }
        self.left -= 1;
        if self.left == 0 {
            self.close_batch();
        }
    }

    /// Many waits in order: recorded a batch's share at a time.
    fn push_all(&mut self, mut waits: &[f64]) {
        while !waits.is_empty() {
            let m = (self.left.min(waits.len() as u64)) as usize;
            self.current.record_all(&waits[..m]);
            waits = &waits[m..];
            self.left -= m as u64;
            if self.left == 0 {
                self.close_batch();
            }
        }
    }

    fn close_batch(&mut self) {
        let n = self.per_batch;
        self.left = self.per_batch;
        let zeros = n - self.current.count();
        self.closed_at += n;
        let q = Quantile::STANDARD.map(|q| self.current.quantile_s(q.get(), zeros));
        self.done.push([
            self.current.sum_s() / n as f64,
            self.current.count() as f64 / n as f64,
            q[0],
            q[1],
            q[2],
            q[3],
        ]);
        self.overall.merge(&self.current);
        self.current = WaitHist::default();
    }

    fn finish(mut self, engine: &str) -> QueueResult {
        // A last partial batch still counts towards the overall estimates.
        self.overall.merge(&self.current);
        let n = self.closed_at + (self.per_batch - self.left);
        let zeros = n - self.overall.count();
        let b = self.done.len();
        let ci = |i: usize| -> f64 {
            if b < 2 {
                return f64::INFINITY;
            }
            let mean = self.done.iter().map(|x| x[i]).sum::<f64>() / b as f64;
            let var = self.done.iter().map(|x| (x[i] - mean).powi(2)).sum::<f64>() / (b - 1) as f64;
            heisenbench_model::interval::student_t_975(b - 1) * (var / b as f64).sqrt()
        };
        QueueResult {
            engine: engine.to_string(),
            customers: n,
            wait_mean_s: Estimate {
                value: self.overall.sum_s() / n.max(1) as f64,
                ci95: ci(0),
            },
            p_wait: Estimate {
                value: self.overall.count() as f64 / n.max(1) as f64,
                ci95: ci(1),
            },
            wait_quantiles_s: Quantile::STANDARD
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    (
                        *q,
                        Estimate {
                            value: self.overall.quantile_s(q.get(), zeros),
                            ci95: ci(2 + i),
                        },
                    )
                })
                .collect(),
            little: None,
        }
    }
}

/// The Lindley fast path.
pub fn lindley(spec: &QueueSpec) -> QueueResult {
    lindley_core(spec, 1)
}

/// One client loop fed bursts of events: the queue a plan predicts for each of its loops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstSpec {
    /// Bursts per second.
    pub burst_rate_per_s: f64,
    /// Gaps between bursts.
    pub gaps: Gaps,
    /// Events per burst (all arrive at once).
    pub burst: u32,
    /// Cost of one event.
    pub service: Service,
    /// Bursts measured (after a tenth as many of warm-up).
    pub bursts: u64,
    /// Root seed.
    pub seed: u64,
}

impl BurstSpec {
    /// The same experiment counted in events (customers), its warm-up in whole bursts.
    fn events(&self) -> QueueSpec {
        let n = u64::from(self.burst.max(1));
        QueueSpec {
            rate_per_s: self.burst_rate_per_s,
            gaps: self.gaps,
            service: self.service.clone(),
            customers: self.bursts * n,
            warmup: self.bursts / 10 * n,
            batches: 32,
            seed: self.seed,
        }
    }
}

/// The per-event wait of a loop fed bursts: the burst's wait by Lindley's recursion over
/// bursts, plus, for the j-th event of a burst, the costs of the j - 1 before it.
pub fn lindley_bursts(spec: &BurstSpec) -> QueueResult {
    lindley_core(&spec.events(), spec.burst.max(1))
}

/// Lindley's recursion over bursts of `burst` customers arriving together (1: the textbook
/// queue): the burst waits W, its j-th customer W plus the services of the j - 1 before it,
/// and W' = max(0, W + (the burst's services) - gap). `spec` counts customers; its warm-up
/// is taken in whole bursts.
fn lindley_core(spec: &QueueSpec, burst: u32) -> QueueResult {
    let n = u64::from(burst);
    let mut arrivals = stream(spec.seed, purpose::ARRIVALS);
    let mut services = stream(spec.seed, purpose::CLIENT);
    let service = Sampler::new(&spec.service);
    let mut gap = gap_sampler(spec);
    let mut batches = Batches::new(spec);
    let warmup = spec.warmup / n;
    let mut w = 0.0f64;
    if n == 1 {
        // The textbook queue: waits into a block, then the block into the histogram, so
        // the recursion's loop carries only w (w + (S - A): one add and a max on its
        // chain). Poisson gaps get their own copy of the loop, without the gap sampler's
        // dispatch.
        let total = warmup + spec.customers;
        match (spec.gaps, &service) {
            (Gaps::Poisson, Sampler::Exp(s_mean)) => {
                let (a_mean, s_mean) = (1.0 / spec.rate_per_s, *s_mean);
                textbook_blocks(total, warmup, &mut batches, || {
                    let s: f64 = Exp1.sample(&mut services);
                    let a: f64 = Exp1.sample(&mut arrivals);
                    s * s_mean - a * a_mean
                });
            }
            (Gaps::Poisson, _) => {
                let mean = 1.0 / spec.rate_per_s;
                textbook_blocks(total, warmup, &mut batches, || {
                    let e: f64 = Exp1.sample(&mut arrivals);
                    service.sample_s(&mut services) - e * mean
                });
            }
            _ => {
                textbook_blocks(total, warmup, &mut batches, || {
                    service.sample_s(&mut services) - gap(&mut arrivals)
                });
            }
        }
        return batches.finish("lindley");
    }
    for b in 0..warmup + spec.customers / n {
        let mut ahead = 0.0f64;
        for _ in 0..n {
            if b >= warmup {
                batches.push(w + ahead);
            }
            ahead += service.sample_s(&mut services);
        }
        w = (w + ahead - gap(&mut arrivals)).max(0.0);
    }
    batches.finish("lindley")
}

/// Lindley's recursion over `total` customers whose S - A `next` draws (the service first,
/// as one customer at a time does), a block of waits at a time into `batches`, the first
/// `warmup` left out.
fn textbook_blocks(total: u64, warmup: u64, batches: &mut Batches, mut next: impl FnMut() -> f64) {
    const BLOCK: usize = 1024;
    let mut block = [0.0f64; BLOCK];
    let mut w = 0.0f64;
    let mut done = 0u64;
    while done < total {
        let m = (total - done).min(BLOCK as u64) as usize;
        for slot in &mut block[..m] {
            *slot = w;
            w = (w + next()).max(0.0);
        }
        let skip = warmup.saturating_sub(done).min(m as u64) as usize;
        batches.push_all(&block[skip..m]);
        done += m as u64;
    }
}

/// `servers` loops sharing one FIFO queue, fed the bursts of `spec`: the per-event wait by
/// Kiefer and Wolfowitz's recursion. The servers' next free times sit in a min-heap; each
/// event, in arrival order (a burst in its own order), starts on the one free first and
/// waits max(0, free - now). With one server it is [`lindley_bursts`] exactly: the same
/// streams are drawn in the same order.
pub fn pooled_bursts(spec: &BurstSpec, servers: u32) -> QueueResult {
    let n = u64::from(spec.burst.max(1));
    let q = spec.events();
    let mut arrivals = stream(q.seed, purpose::ARRIVALS);
    let mut services = stream(q.seed, purpose::CLIENT);
    let service = Sampler::new(&q.service);
    let mut gap = gap_sampler(&q);
    let mut batches = Batches::new(&q);
    let warmup = q.warmup / n;
    let mut free: BinaryHeap<Reverse<FreeAt>> =
        (0..servers.max(1)).map(|_| Reverse(FreeAt(0.0))).collect();
    let mut now = 0.0f64;
    for b in 0..warmup + q.customers / n {
        for _ in 0..n {
            let Some(Reverse(FreeAt(at))) = free.pop() else {
                unreachable!("the heap holds one entry per server")
            };
            let w = (at - now).max(0.0);
            if b >= warmup {
                batches.push(w);
            }
            free.push(Reverse(FreeAt(now + w + service.sample_s(&mut services))));
        }
        now += gap(&mut arrivals);
    }
    batches.finish("kiefer-wolfowitz")
}

/// A server's next free time, ordered as a number.
#[derive(Debug, Clone, Copy, PartialEq)]
struct FreeAt(f64);

impl Eq for FreeAt {}

impl PartialOrd for FreeAt {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FreeAt {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[derive(Debug, Clone, Copy)]
enum QEvent {
    Arrival,
    Departure,
}

/// The explicit event engine: arrival and departure events through the heap.
pub fn events(spec: &QueueSpec) -> QueueResult {
    let mut arrivals = stream(spec.seed, purpose::ARRIVALS);
    let mut services = stream(spec.seed, purpose::CLIENT);
    let service = Sampler::new(&spec.service);
    let mut gap = gap_sampler(spec);
    let mut batches = Batches::new(spec);
    let total = spec.warmup + spec.customers;
    let mut q = EventQueue::new();
    let mut line: VecDeque<u64> = VecDeque::new();
    let mut busy = false;
    let (mut arrived, mut started) = (0u64, 0u64);
    // Arrival times accumulate in f64 seconds, as in the recursion, then round once.
    let mut t_arrival = 0.0f64;
    q.push(SimTime::ZERO, QEvent::Arrival);
    // Little's law tallies over the whole run (warm-up included).
    let (mut area_ns2, mut last_ns, mut wait_sum_ns) = (0u128, 0u64, 0u128);
    let mut serve = |now: u64,
                     arrived_at: u64,
                     started: &mut u64,
                     q: &mut EventQueue<QEvent>,
                     wait_sum: &mut u128| {
        *wait_sum += u128::from(now - arrived_at);
        if *started >= spec.warmup {
            batches.push_ns(now - arrived_at);
        }
        *started += 1;
        let s = service.sample_s(&mut services);
        q.push(SimTime(now + ns_from_secs(s)), QEvent::Departure);
    };
    while let Some((t, ev)) = q.pop() {
        let now = t.ns();
        area_ns2 += line.len() as u128 * u128::from(now - last_ns);
        last_ns = now;
        match ev {
            QEvent::Arrival => {
                arrived += 1;
                if arrived < total {
                    t_arrival += gap(&mut arrivals);
                    q.push(SimTime(ns_from_secs(t_arrival).max(now)), QEvent::Arrival);
                }
                if busy {
                    line.push_back(now);
                } else {
                    busy = true;
                    serve(now, now, &mut started, &mut q, &mut wait_sum_ns);
                }
            }
            QEvent::Departure => match line.pop_front() {
                Some(a) => serve(now, a, &mut started, &mut q, &mut wait_sum_ns),
                None => busy = false,
            },
        }
    }
    let mut result = batches.finish("events");
    let span = last_ns as f64;
    result.little = (span > 0.0).then(|| Little {
        lq_time_average: area_ns2 as f64 / span,
        lambda_times_wq: (arrived as f64 / span) * (wait_sum_ns as f64 / arrived as f64),
    });
    result
}

/// Both engines and the model side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextbookReport {
    /// The experiment, seed included.
    pub spec: QueueSpec,
    /// The model's report, where a model covers these gaps (M: M/G/1; Erlang: E_k/G/1).
    pub model: Option<QueueReport>,
    /// One result per engine run.
    pub results: Vec<QueueResult>,
}

// ----- the command's experiment and its text --------------------------------------------

/// Which engines a textbook experiment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engines {
    /// The Lindley recursion.
    Lindley,
    /// The event engine.
    Events,
    /// Both, Lindley first.
    Both,
}

impl std::str::FromStr for Engines {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lindley" => Ok(Self::Lindley),
            "events" => Ok(Self::Events),
            "both" => Ok(Self::Both),
            other => Err(format!(
                "unknown engine '{other}': use lindley, events or both"
            )),
        }
    }
}

impl TextbookReport {
    /// Runs `engines` on `spec` with the model beside them: M/G/1 (bursts of one) for
    /// Poisson gaps, exact theory; the lattice solution of GI/G/1 for constant and gamma
    /// gaps. None when the queue is unstable or the model refuses it.
    pub fn run(spec: QueueSpec, engines: Engines) -> Self {
        use heisenbench_model::batch::BatchMg1;
        use heisenbench_model::gig1::Gig1;
        use heisenbench_model::queue::WaitModel;
        let (rate, service) = (spec.rate_per_s, spec.service.clone());
        let model = match spec.gaps {
            Gaps::Poisson => BatchMg1::new(rate, 1, service).ok().map(|q| q.report()),
            Gaps::Constant => Gig1::new(rate, 0.0, 1, service).ok().map(|q| q.report()),
            Gaps::Gamma { shape } => Gig1::new(rate, 1.0 / shape, 1, service)
                .ok()
                .map(|q| q.report()),
        };
        let results = match engines {
            Engines::Lindley => vec![lindley(&spec)],
            Engines::Events => vec![events(&spec)],
            Engines::Both => vec![lindley(&spec), events(&spec)],
        };
        Self {
            spec,
            model,
            results,
        }
    }

    /// Customers simulated, warm-up included, over every engine.
    pub fn customers_simulated(&self) -> u64 {
        self.results
            .iter()
            .map(|r| r.customers + r.customers / 10)
            .sum()
    }

    /// The report as text: the model's and each engine's mean wait, P(wait) and wait
    /// quantiles, the engines' with their 95 % intervals.
    pub fn write_summary(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        use heisenbench_model::table::write_pairs;
        let spec = &self.spec;
        writeln!(
            out,
            "textbook queue: {} arrivals at {} /s, service {}, rho {:.4}, seed {}",
            spec.gaps,
            spec.rate_per_s,
            spec.service,
            spec.rate_per_s * spec.service.mean_s(),
            spec.seed
        )?;
        let m = self.model.as_ref();
        let model_of =
            |f: &dyn Fn(&QueueReport) -> f64| m.map_or("-".into(), |r| format!("{:.6}", f(r)));
        let mut rows = vec![("".to_string(), {
            let mut h = format!("{:>12}", "model");
            for r in &self.results {
                h += &format!("  {:>24}", format!("{} (95% CI)", r.engine));
            }
            h
        })];
        let cell = |v: f64, ci: f64| format!("{:.6} +- {:.6}", v, ci);
        let mut line = |label: &str, model: String, pick: &dyn Fn(&QueueResult) -> (f64, f64)| {
            let mut s = format!("{model:>12}");
            for r in &self.results {
                let (v, ci) = pick(r);
                s += &format!("  {:>24}", cell(v, ci));
            }
            rows.push((label.to_string(), s));
        };
        line("mean wait (s)", model_of(&|r| r.wq_mean_s), &|r| {
            (r.wait_mean_s.value, r.wait_mean_s.ci95)
        });
        line("P(wait)", model_of(&|r| r.p_wait), &|r| {
            (r.p_wait.value, r.p_wait.ci95)
        });
        for (i, q) in Quantile::STANDARD.iter().enumerate() {
            let mv = m
                .and_then(|r| r.wq_quantile_s(*q))
                .map_or("-".into(), |v| format!("{v:.6}"));
            line(&format!("wait {q} (s)"), mv, &|r| {
                (r.wait_quantiles_s[i].1.value, r.wait_quantiles_s[i].1.ci95)
            });
        }
        write_pairs(out, &rows)?;
        if let Some(m) = m {
            writeln!(out, "model: {} ({})", m.model, m.tail_method.describe())?;
        }
        Ok(())
    }
}
