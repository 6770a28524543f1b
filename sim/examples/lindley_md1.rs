//! Profiling target: the Lindley fast path on M/D/1, 50 million customers.
use heisenbench_model::service::Service;
use heisenbench_sim::textbook::{Gaps, QueueSpec, lindley};
fn main() {
    let spec = QueueSpec {
        rate_per_s: 0.8,
        gaps: Gaps::Poisson,
        service: Service::deterministic(1.0).unwrap(),
        customers: 50_000_000,
        warmup: 0,
        batches: 32,
        seed: 1,
    };
    println!("{}", lindley(&spec).wait_mean_s.value);
}
