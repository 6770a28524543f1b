//! What every queue model answers, and the report it fills.

use serde::{Deserialize, Serialize};

use crate::service::Service;
use crate::tail::quantile_by_bisection;
use crate::units::Quantile;

/// How a model's waiting-time tail (and so its quantiles) was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TailMethod {
    /// A closed form that is exact (M/M/1, M/M/c).
    Exact,
    /// The Erlang series of M/D/1, exact where its cancellation bound allows.
    ErlangSeries,
    /// The M/D/1 series where trusted, Cramer-Lundberg beyond.
    ErlangSeriesThenCramerLundberg,
    /// Cramer-Lundberg C e^{-theta t}.
    CramerLundberg,
    /// The discretised renewal equation with upper and lower bounds (heavy tails).
    RenewalGrid,
    /// An exponential tail with P(W > 0) and the mean matched (G/G/1, M/G/c).
    ExponentialFit,
    /// The heavy-traffic limit: an exponential with P(wait) and the mean exact.
    HeavyTraffic,
    /// Lindley's equation solved on a lattice (Wiener-Hopf ladder heights), with a
    /// lattice-error estimate.
    LindleyLattice,
    /// M/D/c's queue as a chain at steps of one service time, solved exactly, and Franx's
    /// waiting-time formula over it.
    EmbeddedChain,
    /// Pooled loops as one loop as fast as all of them (M^X/G/c): an approximation whose
    /// error the simulation check measures.
    FastServer,
}

impl TailMethod {
    /// A short human description.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Exact => "exact closed form",
            Self::ErlangSeries => "exact Erlang series",
            Self::ErlangSeriesThenCramerLundberg => {
                "exact Erlang series, Cramer-Lundberg where the series loses precision"
            }
            Self::CramerLundberg => "Cramer-Lundberg asymptote C exp(-theta t)",
            Self::RenewalGrid => "discretised renewal equation (bounded above and below)",
            Self::HeavyTraffic => {
                "heavy-traffic limit (exponential with P(wait) and the mean exact)"
            }
            Self::LindleyLattice => "Lindley's equation on a lattice (Wiener-Hopf ladder heights)",
            Self::ExponentialFit => "exponential tail fitted to P(wait) and the mean",
            Self::EmbeddedChain => "exact: the queue as a chain at steps of one service (Franx)",
            Self::FastServer => "pooled loops as one loop c times as fast (approximate)",
        }
    }
}

/// A stable queue's waiting time. All times in seconds, rates per second.
///
/// Implementors guarantee rho < 1 (constructors refuse the rest), so every method returns
/// a finite number.
pub trait WaitModel {
    /// Kendall notation of the model, e.g. `M/G/1`.
    fn name(&self) -> &'static str;
    /// One line on when the model holds.
    fn assumptions(&self) -> &'static str;
    /// Arrival rate of customers (events), per second.
    fn arrival_rate_per_s(&self) -> f64;
    /// Number of servers.
    fn servers(&self) -> u32 {
        1
    }
    /// The service-time distribution of one customer.
    fn service(&self) -> &Service;
    /// Per-server utilisation, lambda E\[S\] / c.
    fn rho(&self) -> f64 {
        self.arrival_rate_per_s() * self.service().mean_s() / f64::from(self.servers())
    }
    /// E\[Wq\], the mean time a customer waits before service starts.
    fn wait_mean_s(&self) -> f64;
    /// E\[Wq^2\], where the model knows it.
    fn wait_m2(&self) -> Option<f64> {
        None
    }
    /// P(Wq > 0).
    fn p_wait(&self) -> f64;
    /// The estimated numerical error of [`WaitModel::wait_mean_s`], when it is computed
    /// numerically (None: closed form, or an approximation whose error is stated at its
    /// type).
    fn wait_mean_error_s(&self) -> Option<f64> {
        None
    }
    /// P(Wq > t).
    fn wait_tail(&self, t_s: f64) -> f64;
    /// How [`WaitModel::wait_tail`] is computed.
    fn tail_method(&self) -> TailMethod;
    /// The q-quantile of Wq; by default by bisection on the tail.
    fn wait_quantile_s(&self, q: Quantile) -> f64 {
        let scale = self.wait_mean_s().max(self.service().mean_s());
        quantile_by_bisection(|t| self.wait_tail(t), q, scale)
    }
    /// Everything at once, with Little's law for the counts.
    fn report(&self) -> QueueReport {
        QueueReport::of(self)
    }
}

/// The numbers a queue model gives, for tables and `--json`.
///
/// Little's law ties them: lq = lambda wq_mean_s, w_mean_s = wq_mean_s + E\[S\],
/// l = lambda w_mean_s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueReport {
    /// Kendall notation.
    pub model: String,
    /// When the model holds.
    pub assumptions: String,
    /// Customers (events) per second.
    pub arrival_rate_per_s: f64,
    /// Servers.
    pub servers: u32,
    /// The service distribution.
    pub service: Service,
    /// E\[S\], seconds.
    pub service_mean_s: f64,
    /// SCV of S.
    pub service_scv: f64,
    /// Per-server utilisation.
    pub rho: f64,
    /// Mean wait in queue, seconds.
    pub wq_mean_s: f64,
    /// Standard deviation of the wait, where known (M/G/1: Takacs).
    pub wq_sd_s: Option<f64>,
    /// The estimated numerical error of the mean wait, where it is computed numerically
    /// (the lattice solution of GI/G/1), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wq_mean_error_s: Option<f64>,
    /// Mean number waiting.
    pub lq: f64,
    /// Mean time in system, seconds.
    pub w_mean_s: f64,
    /// Mean number in system.
    pub l: f64,
    /// Probability that a customer waits at all.
    pub p_wait: f64,
    /// Median wait, seconds.
    pub wq_p50_s: f64,
    /// 90th percentile wait, seconds.
    pub wq_p90_s: f64,
    /// 99th percentile wait, seconds.
    pub wq_p99_s: f64,
    /// 99.9th percentile wait, seconds.
    pub wq_p999_s: f64,
    /// How the quantiles were computed.
    pub tail_method: TailMethod,
}

impl QueueReport {
    /// Evaluates every statistic of `m`.
    pub fn of<M: WaitModel + ?Sized>(m: &M) -> Self {
        let lambda = m.arrival_rate_per_s();
        let wq = m.wait_mean_s();
        let es = m.service().mean_s();
        let sd = m.wait_m2().map(|m2| (m2 - wq * wq).max(0.0).sqrt());
        let [p50, p90, p99, p999] = Quantile::STANDARD.map(|q| m.wait_quantile_s(q));
        Self {
            model: m.name().to_string(),
            assumptions: m.assumptions().to_string(),
            arrival_rate_per_s: lambda,
            servers: m.servers(),
            service: m.service().clone(),
            service_mean_s: es,
            service_scv: m.service().scv(),
            rho: m.rho(),
            wq_mean_s: wq,
            wq_sd_s: sd,
            wq_mean_error_s: m.wait_mean_error_s(),
            lq: lambda * wq,
            w_mean_s: wq + es,
            l: lambda * (wq + es),
            p_wait: m.p_wait(),
            wq_p50_s: p50,
            wq_p90_s: p90,
            wq_p99_s: p99,
            wq_p999_s: p999,
            tail_method: m.tail_method(),
        }
    }

    /// The wait quantile at one of the four standard levels.
    pub fn wq_quantile_s(&self, q: Quantile) -> Option<f64> {
        match q.key().as_str() {
            "p50" => Some(self.wq_p50_s),
            "p90" => Some(self.wq_p90_s),
            "p99" => Some(self.wq_p99_s),
            "p999" => Some(self.wq_p999_s),
            _ => None,
        }
    }
}
