//! The event engine: a benchmark client of k single-threaded loops in front of a server.
//!
//! Each loop is a FIFO server of jobs (send a request, process a chunk, finish a
//! response). Jobs reach a loop in time order, so a loop is advanced by the Lindley
//! recursion at the moment a job arrives (start = max(arrival, loop free), done = start +
//! cost; a job that finds its loop idle may first wait for it to wake, a setup time) and
//! only the consequences that others must see (a request reaching the server, a response
//! finished) go through the event heap. Streams whose tokens leave together
//! are emitted in one step. The result is exact for the model described in
//! [`crate::scenario`] and needs heap operations per request, not per token.

use std::collections::VecDeque;

use heisenbench_model::layout::{Conversation, PromptLayout};
use heisenbench_model::metrics::{Convention, Marks, Origin};
use heisenbench_model::prefix_cache::PrefixCache;
use heisenbench_model::scenario::{Arrivals, Policy, Stamp, Stop};
use heisenbench_model::schedule::{Planned, Schedule, UserShapes, user_shapes};
use heisenbench_model::service::Service;
use heisenbench_model::slo::Judged;
use heisenbench_model::stats::Recorder;
use rand::RngExt;

use crate::events::EventQueue;
use crate::report::{Counts, SimReport, Tally};
use crate::scenario::SimScenario;
use crate::time::{SimTime, ns_from_secs};
use heisenbench_model::sample::{Sampler, SimRng, purpose, standard_normal, stream};

/// A request: its slab slot and its serial number. Slots are reused; serials are not, so
/// an event for a request that has left (a timeout, a cancelled stream's next token)
/// can never act on the slot's next occupant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReqId {
    slot: u32,
    serial: u64,
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    /// The next scheduled request (open loop), or user `u`'s next request (closed loop).
    Arrive { user: u32 },
    /// A request reaches the server.
    AtServer(ReqId),
    /// The server emits the next token of a stream.
    Emit(ReqId),
    /// The client has processed a response's end: the request leaves the client.
    Done(ReqId),
    /// The request's timeout fires.
    Timeout(ReqId),
    /// The next slice of a request's send job reaches its loop.
    SendRest(ReqId),
    /// The next slice of a request's finish job reaches its loop.
    FinishRest(ReqId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Held back by the loop's in-flight cap.
    Pending,
    /// Written; on its way to or waiting at the server.
    Sent,
    /// In a server slot, streaming.
    Running,
    /// The whole response is on the loop's queue.
    Finished,
    /// Answered 429.
    Rejected,
    /// Abandoned at its timeout.
    TimedOut,
}

#[derive(Debug, Clone)]
struct Req {
    /// Its turn in a closed-loop user's conversation, from 1 (0: not in one).
    turn: u32,
    intended_ns: u64,
    /// When its send job began (the client's own start of the request).
    send_start_ns: u64,
    actual_ns: u64,
    server_recv_ns: u64,
    worker: u32,
    user: u32,
    input: u32,
    output: u32,
    emitted: u32,
    first_emit_ns: u64,
    prev_emit_ns: u64,
    first_stamp_ns: u64,
    prev_stamp_ns: u64,
    /// The longest gap between two of its emissions, and between two of their stamps.
    max_gap_emit_ns: u64,
    max_gap_stamp_ns: u64,
    end_stamp_ns: u64,
    done_ns: u64,
    /// What is left of its send or finish job when the loop sliced it.
    left_ns: u64,
    serial: u64,
    /// The request's index, as the live generator numbers it (the schedule's index; in a
    /// closed loop user + k x users for the user's k-th request).
    index: u64,
    state: Phase,
    /// In the server's waiting line (its slab entry must outlive a timeout).
    at_server_queue: bool,
}

#[derive(Debug, Default, Clone)]
struct Loop {
    free_at_ns: u64,
    busy_ns: u64,
    jobs: u64,
    wait_sum_ns: u128,
    in_flight: u32,
    max_in_flight: u32,
    pending: VecDeque<u32>,
}

#[derive(Debug, Default)]
struct Server {
    running: u32,
    waiting: VecDeque<u32>,
}

/// One job's passage through a loop, for timelines (nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobTrace {
    /// The loop.
    pub worker: u32,
    /// The request's serial number.
    pub request: u64,
    /// `send`, `chunk` or `finish`.
    pub kind: &'static str,
    /// When the job reached the loop.
    pub arrive_ns: u64,
    /// When the loop started it.
    pub start_ns: u64,
    /// When it was done.
    pub done_ns: u64,
}

/// A running simulation. Advance it with [`Simulation::step`] or [`Simulation::run`].
pub struct Simulation {
    sc: SimScenario,
    q: EventQueue<Ev>,
    /// Each closed-loop user's request shapes (empty for an open loop, whose shapes come
    /// with its schedule).
    user_shapes: Vec<UserShapes>,
    /// Requests each closed-loop user has sent.
    user_sent: Vec<u64>,
    /// Each closed-loop user's conversation, when users hold conversations of turns.
    conversations: Vec<Conversation>,
    /// The server's prefix cache, when its law has one, and the draw of a request's
    /// shared prefix.
    prefix_cache: Option<PrefixCache>,
    layout: PromptLayout,
    rng_server: SimRng,
    rng_client: SimRng,
    rng_policy: SimRng,
    /// Per-event costs; `None`: the event is free and never queues on the loop.
    send_cost: Option<Sampler>,
    chunk_cost: Option<Sampler>,
    finish_cost: Option<Sampler>,
    /// A loop's wait to wake, drawn for a job that finds it idle; `None`: at once.
    wake_cost: Option<Sampler>,
    /// The CPU a job runs between two preemptions (exponential), each followed by a wait
    /// drawn as the wait to wake; `None`: never preempted.
    preempt_every: Option<Sampler>,
    /// The longest slice of a send or finish job (`u64::MAX`: whole).
    slice_ns: u64,
    /// The open-loop schedule and its next entry (None for closed loops).
    schedule: Option<Schedule>,
    upcoming: Option<Planned>,
    stop_ns: Option<u64>,
    stop_count: Option<u64>,
    last_intended_ns: u64,
    rr_next: u32,
    next_serial: u64,
    /// The serial of the request whose event is being handled (for traces).
    current_serial: u64,
    /// When the event being handled was due: its arrival, or for an instant server the
    /// request's intended time (the moment the whole response would be there).
    current_due_ns: u64,
    /// When the latest job began (its arrival for a free event).
    last_job_start_ns: u64,
    loops: Vec<Loop>,
    reqs: Vec<Req>,
    free: Vec<u32>,
    server: Server,
    counts: Counts,
    tally: Tally,
    /// Jobs traced so far, up to `trace_limit`.
    trace: Vec<JobTrace>,
    trace_limit: usize,
}

impl Simulation {
    /// A simulation of `sc`, which must be valid ([`SimScenario::validate`]).
    pub fn new(sc: SimScenario) -> Self {
        let seed = sc.seed;
        let costs = &sc.client.costs;
        let (stop_ns, stop_count) = match sc.workload.stop {
            Stop::Duration { seconds } => (Some(ns_from_secs(seconds)), None),
            Stop::Count { requests } => (None, Some(requests)),
        };
        let mut sim = Self {
            q: EventQueue::new(),
            user_shapes: match sc.workload.arrivals {
                Arrivals::Closed { users, .. } => (0..users)
                    .map(|u| user_shapes(&sc.workload, seed, u))
                    .collect(),
                _ => Vec::new(),
            },
            conversations: match sc.workload.arrivals {
                Arrivals::Closed { users, turns, .. } if turns > 1 => {
                    vec![Conversation::new(turns); users as usize]
                }
                _ => Vec::new(),
            },
            user_sent: match sc.workload.arrivals {
                Arrivals::Closed { users, .. } => vec![0; users as usize],
                _ => Vec::new(),
            },
            prefix_cache: sc.server.prefix_cache.map(PrefixCache::new),
            layout: PromptLayout::new(&sc.workload),
            rng_server: stream(seed, purpose::SERVER),
            rng_client: stream(seed, purpose::CLIENT),
            rng_policy: stream(seed, purpose::POLICY),
            send_cost: costs
                .send
                .as_ref()
                .filter(|_| sc.client.send_shares_loop)
                .map(Sampler::new),
            chunk_cost: costs.chunk.as_ref().map(Sampler::new),
            finish_cost: costs.finish.as_ref().map(Sampler::new),
            wake_cost: costs.wake.as_ref().map(Sampler::new),
            preempt_every: costs
                .preempt_per_cpu_s
                .filter(|r| *r > 0.0 && costs.wake.is_some())
                .map(|r| Sampler::new(&Service::Exponential { mean_s: 1.0 / r })),
            slice_ns: costs.slice_s.map_or(u64::MAX, |s| ns_from_secs(s).max(1)),
            schedule: Schedule::new(&sc.workload, seed),
            upcoming: None,
            stop_ns,
            stop_count,
            last_intended_ns: 0,
            rr_next: 0,
            next_serial: 0,
            current_serial: 0,
            current_due_ns: 0,
            last_job_start_ns: 0,
            loops: vec![Loop::default(); sc.client.workers as usize],
            reqs: Vec::new(),
            free: Vec::new(),
            server: Server::default(),
            counts: Counts::default(),
            tally: Tally::default(),
            trace: Vec::new(),
            trace_limit: 0,
            sc,
        };
        sim.schedule_first();
        sim
    }

    /// Keeps the passage of the first `limit` jobs through the loops (for timelines).
    pub fn with_trace(mut self, limit: usize) -> Self {
        self.trace_limit = limit;
        self
    }

    /// The traced jobs.
    pub fn trace(&self) -> &[JobTrace] {
        &self.trace
    }

    /// The scenario.
    pub fn scenario(&self) -> &SimScenario {
        &self.sc
    }

    /// Simulated time of the last event.
    pub fn now(&self) -> SimTime {
        self.q.now()
    }

    /// Fraction of the schedule issued so far, for progress displays.
    pub fn progress(&self) -> f64 {
        match (self.stop_ns, self.stop_count) {
            (Some(ns), _) => (self.last_intended_ns as f64 / ns as f64).min(1.0),
            (_, Some(n)) => (self.counts.scheduled as f64 / n as f64).min(1.0),
            _ => 0.0,
        }
    }

    /// Processes one event; `false` when nothing is left.
    pub fn step(&mut self) -> bool {
        let Some((t, ev)) = self.q.pop() else {
            return false;
        };
        let now = t.ns();
        match ev {
            Ev::Arrive { user } => self.on_arrive(now, user),
            Ev::AtServer(r) if self.live(r) => self.on_at_server(now, r.slot),
            Ev::Emit(r) if self.live(r) => self.on_emit(now, r.slot),
            Ev::Done(r) if self.live(r) => self.on_done(now, r.slot),
            Ev::Timeout(r) if self.live(r) => self.on_timeout(now, r.slot),
            Ev::SendRest(r) if self.live(r) => self.on_send_rest(now, r.slot),
            Ev::FinishRest(r) if self.live(r) => self.on_finish_rest(now, r.slot),
            // An event for a request that has already left.
            _ => {}
        }
        true
    }

    /// Runs to completion and reports.
    pub fn run(mut self) -> SimReport {
        while self.step() {}
        self.report()
    }

    /// As [`Simulation::run`], with every TTFT the run recorded handed back as well: from
    /// the intended send, and from the start of each request's send job.
    pub fn run_keeping_ttfts(mut self) -> (SimReport, [Recorder; 2]) {
        while self.step() {}
        let report = self.report();
        let t = std::mem::take(&mut self.tally);
        (report, [t.ttft_intended, t.ttft_send_start])
    }

    /// The report of the run so far (complete once [`Simulation::step`] returned false).
    pub fn report(&self) -> SimReport {
        let makespan_ns = self.q.now().ns();
        let workers = self
            .loops
            .iter()
            .map(|l| crate::report::WorkerReport {
                jobs: l.jobs,
                utilization: if makespan_ns == 0 {
                    0.0
                } else {
                    l.busy_ns as f64 / makespan_ns as f64
                },
                mean_wait_s: if l.jobs == 0 {
                    0.0
                } else {
                    l.wait_sum_ns as f64 / l.jobs as f64 * 1e-9
                },
                max_in_flight: l.max_in_flight,
            })
            .collect();
        let mut counts = self.counts;
        counts.in_system_at_end = (self.reqs.len() - self.free.len()) as u64;
        counts.heap_events = self.q.popped();
        SimReport::build(
            &self.sc,
            counts,
            &self.tally,
            workers,
            makespan_ns,
            self.last_intended_ns,
        )
    }

    // ----- arrivals ---------------------------------------------------------------

    fn may_schedule(&self, intended_ns: u64) -> bool {
        match (self.stop_ns, self.stop_count) {
            (Some(stop), _) => intended_ns < stop,
            (_, Some(n)) => self.counts.scheduled < n,
            _ => false,
        }
    }

    fn schedule_first(&mut self) {
        if let Arrivals::Closed { users, .. } = self.sc.workload.arrivals {
            for u in 0..users {
                if self.may_schedule(0) {
                    // Reserve the slot now so the count stop holds for simultaneous users.
                    self.counts.scheduled += 1;
                    self.q.push(SimTime::ZERO, Ev::Arrive { user: u });
                }
            }
        } else {
            self.schedule_next();
        }
    }

    /// Takes the next entry of the open-loop schedule and books its arrival.
    fn schedule_next(&mut self) {
        if let Some(p) = self.schedule.as_mut().and_then(Iterator::next) {
            self.counts.scheduled += 1;
            self.upcoming = Some(p);
            self.q.push(SimTime(p.at_ns), Ev::Arrive { user: 0 });
        }
    }

    fn on_arrive(&mut self, now: u64, user: u32) {
        self.last_intended_ns = now;
        let mut turn = 0;
        let (input, output, index) = match self.upcoming.take() {
            Some(p) => {
                self.schedule_next();
                (p.input_tokens, p.output_tokens, p.index)
            }
            None => {
                let (i, o) = self.user_shapes[user as usize]
                    .next()
                    .expect("a user's shapes never end");
                let users = self.user_shapes.len() as u64;
                let k = &mut self.user_sent[user as usize];
                let index = u64::from(user) + *k * users;
                *k += 1;
                let (i, o) = self.sc.workload.lengths_of(index, (i, o));
                match self.conversations.get_mut(user as usize) {
                    Some(c) => {
                        let t = c.next((i, o));
                        turn = t.turn;
                        (t.input, t.output, index)
                    }
                    None => (i, o, index),
                }
            }
        };
        // A shared prefix is part of the prompt the server prefills.
        let input = self.layout.total(input);
        let worker = self.assign();
        self.next_serial += 1;
        let r = self.alloc(Req {
            turn,
            intended_ns: now,
            send_start_ns: 0,
            actual_ns: 0,
            server_recv_ns: 0,
            worker,
            user,
            input,
            output,
            emitted: 0,
            first_emit_ns: 0,
            prev_emit_ns: 0,
            first_stamp_ns: 0,
            prev_stamp_ns: 0,
            max_gap_emit_ns: 0,
            max_gap_stamp_ns: 0,
            end_stamp_ns: 0,
            done_ns: 0,
            left_ns: 0,
            serial: self.next_serial,
            index,
            state: Phase::Pending,
            at_server_queue: false,
        });
        let l = &mut self.loops[worker as usize];
        let capped = self
            .sc
            .client
            .max_in_flight_per_worker
            .is_some_and(|cap| l.in_flight >= cap);
        if capped {
            l.pending.push_back(r);
        } else {
            self.send(now, r);
        }
    }

    fn assign(&mut self) -> u32 {
        let k = self.sc.client.workers;
        match self.sc.client.policy {
            Policy::RoundRobin => {
                let w = self.rr_next;
                self.rr_next = (self.rr_next + 1) % k;
                w
            }
            Policy::Random => self.rng_policy.random_range(0..k),
            Policy::LeastLoaded => {
                let mut best = 0;
                for (i, l) in self.loops.iter().enumerate() {
                    if l.in_flight < self.loops[best].in_flight {
                        best = i;
                    }
                }
                best as u32
            }
        }
    }

    /// Whether `r` still names the request in its slot.
    fn live(&self, r: ReqId) -> bool {
        self.reqs[r.slot as usize].serial == r.serial
    }

    fn id(&self, slot: u32) -> ReqId {
        ReqId {
            slot,
            serial: self.reqs[slot as usize].serial,
        }
    }

    fn alloc(&mut self, req: Req) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.reqs[slot as usize] = req;
                slot
            }
            None => {
                self.reqs.push(req);
                u32::try_from(self.reqs.len() - 1).expect("fewer than 2^32 requests in flight")
            }
        }
    }

    /// Marks a slot free; its serial is retired so stale events miss it.
    fn release(&mut self, slot: u32) {
        self.reqs[slot as usize].serial = u64::MAX;
        self.free.push(slot);
    }

    // ----- the client's loops -------------------------------------------------------

    /// Runs one job on loop `w`, arriving at `arrive_ns`; returns when it is done. A free
    /// event (no cost configured) is not a job: it is done on arrival.
    #[inline]
    fn job(&mut self, w: u32, arrive_ns: u64, kind: JobKind) -> u64 {
        match self.draw(kind) {
            Some(cost_ns) => self.run_job(w, arrive_ns, kind, cost_ns),
            None => {
                self.last_job_start_ns = arrive_ns;
                arrive_ns
            }
        }
    }

    /// The cost of one job of `kind`; `None` when the event is free.
    #[inline]
    fn draw(&mut self, kind: JobKind) -> Option<u64> {
        let sampler = match kind {
            JobKind::Send => &self.send_cost,
            JobKind::Chunk => &self.chunk_cost,
            JobKind::Finish => &self.finish_cost,
        };
        sampler.as_ref().map(|s| s.sample_ns(&mut self.rng_client))
    }

    /// Runs the first slice of a send or finish job of request `r` on loop `w`, arriving
    /// at `arrive_ns`: at most the slice of its cost runs now, and what is left waits in
    /// the request for its next turn ([`Self::slice_rest`]). Returns when the slice is
    /// done and whether work is left.
    fn sliced_job(&mut self, w: u32, arrive_ns: u64, kind: JobKind, r: u32) -> (u64, bool) {
        if self.slice_ns == u64::MAX {
            return (self.job(w, arrive_ns, kind), false);
        }
        match self.draw(kind) {
            Some(cost_ns) => self.slice_of(w, arrive_ns, kind, r, cost_ns),
            None => {
                self.last_job_start_ns = arrive_ns;
                (arrive_ns, false)
            }
        }
    }

    /// The next slice of request `r`'s job of `kind`, reaching loop `w` at `now` behind
    /// the jobs that arrived while its previous slice ran.
    fn slice_rest(&mut self, now: u64, r: u32, kind: JobKind) -> (u64, bool) {
        self.current_serial = self.reqs[r as usize].serial;
        self.current_due_ns = now;
        let w = self.reqs[r as usize].worker;
        let left = self.reqs[r as usize].left_ns;
        self.slice_of(w, now, kind, r, left)
    }

    fn slice_of(
        &mut self,
        w: u32,
        arrive_ns: u64,
        kind: JobKind,
        r: u32,
        cost_ns: u64,
    ) -> (u64, bool) {
        let now_ns = cost_ns.min(self.slice_ns);
        let done = self.run_job(w, arrive_ns, kind, now_ns);
        self.reqs[r as usize].left_ns = cost_ns - now_ns;
        if now_ns < cost_ns {
            let id = self.id(r);
            let ev = match kind {
                JobKind::Send => Ev::SendRest(id),
                _ => Ev::FinishRest(id),
            };
            self.q.push(SimTime(done), ev);
        }
        (done, now_ns < cost_ns)
    }

    /// Runs one job of `cost_ns` on loop `w`, arriving at `arrive_ns` (Lindley: it starts
    /// when both it and the loop are there); returns when it is done.
    #[inline(always)]
    fn run_job(&mut self, w: u32, arrive_ns: u64, kind: JobKind, cost_ns: u64) -> u64 {
        let preempted_ns = self.preempted_ns(cost_ns);
        let l = &mut self.loops[w as usize];
        let start = if arrive_ns <= l.free_at_ns {
            l.free_at_ns
        } else {
            // The loop was idle: it wakes, and may wait for a core first.
            match &self.wake_cost {
                Some(s) => arrive_ns.saturating_add(s.sample_ns(&mut self.rng_client)),
                None => arrive_ns,
            }
        };
        self.last_job_start_ns = start;
        let done = start.saturating_add(cost_ns).saturating_add(preempted_ns);
        l.free_at_ns = done;
        l.busy_ns += cost_ns;
        l.jobs += 1;
        l.wait_sum_ns += u128::from(start - arrive_ns);
        self.counts.client_events += 1;
        self.tally.client_wait.record(start - arrive_ns);
        self.tally
            .due_wait
            .record(start.saturating_sub(self.current_due_ns.min(arrive_ns)));
        if self.trace.len() < self.trace_limit {
            let kind = match kind {
                JobKind::Send => "send",
                JobKind::Chunk => "chunk",
                JobKind::Finish => "finish",
            };
            self.trace.push(JobTrace {
                worker: w,
                request: self.current_serial,
                kind,
                arrive_ns,
                start_ns: start,
                done_ns: done,
            });
        }
        done
    }

    /// The waits for a core of a job running `cost_ns` of CPU: a wait each time it loses its
    /// core meanwhile (0 without preemptions).
    fn preempted_ns(&mut self, cost_ns: u64) -> u64 {
        let (Some(every), Some(wait)) = (&self.preempt_every, &self.wake_cost) else {
            return 0;
        };
        let mut waited = 0u64;
        let mut ran = every.sample_ns(&mut self.rng_client);
        while ran < cost_ns {
            waited = waited.saturating_add(wait.sample_ns(&mut self.rng_client));
            ran = ran.saturating_add(every.sample_ns(&mut self.rng_client).max(1));
        }
        waited
    }

    fn stamp(&self, arrive_ns: u64, done_ns: u64) -> u64 {
        match self.sc.client.stamp {
            Stamp::NetworkArrival => arrive_ns,
            Stamp::AfterProcessing => done_ns,
        }
    }

    fn send(&mut self, now: u64, r: u32) {
        self.current_serial = self.reqs[r as usize].serial;
        self.current_due_ns = self.reqs[r as usize].intended_ns;
        let w = self.reqs[r as usize].worker;
        let (actual, more) = self.sliced_job(w, now, JobKind::Send, r);
        self.reqs[r as usize].send_start_ns = self.last_job_start_ns;
        let l = &mut self.loops[w as usize];
        l.in_flight += 1;
        l.max_in_flight = l.max_in_flight.max(l.in_flight);
        if !more {
            self.sent(actual, r);
        }
    }

    fn on_send_rest(&mut self, now: u64, r: u32) {
        let (actual, more) = self.slice_rest(now, r, JobKind::Send);
        if !more {
            self.sent(actual, r);
        }
    }

    /// Request `r`'s send job is done at `actual`: it leaves for the server.
    fn sent(&mut self, actual: u64, r: u32) {
        let req = &mut self.reqs[r as usize];
        req.actual_ns = actual;
        req.state = Phase::Sent;
        self.tally.send_lag.record(actual - req.intended_ns);
        let id = self.id(r);
        self.q.push(SimTime(actual), Ev::AtServer(id));
        if let Some(t) = self.sc.client.timeout_s {
            self.q.push(
                SimTime(actual.saturating_add(ns_from_secs(t))),
                Ev::Timeout(id),
            );
        }
    }

    // ----- the server ---------------------------------------------------------------

    /// The server's law (`heisenbench_model::server`) at the current batch size: the
    /// first-token latency of a request of `input` tokens, or (None) one inter-token latency.
    fn server_latency_ns(&mut self, first_of: Option<u32>) -> u64 {
        let (law, rng, running) = (&self.sc.server, &mut self.rng_server, self.server.running);
        let normal = || standard_normal(rng);
        ns_from_secs(match first_of {
            Some(input) => law.ttft_s(input, running, normal),
            None => law.itl_s(running, normal),
        })
    }

    fn on_at_server(&mut self, now: u64, r: u32) {
        self.current_serial = self.reqs[r as usize].serial;
        self.current_due_ns = now;
        let req = &mut self.reqs[r as usize];
        if req.state != Phase::Sent {
            return;
        }
        req.server_recv_ns = now;
        if self.server.running < self.sc.server.max_num_seqs {
            self.start_stream(now, r);
        } else if (self.server.waiting.len() as u64)
            < u64::from(self.sc.server.max_waiting_queue_length)
        {
            req.at_server_queue = true;
            self.server.waiting.push_back(r);
        } else {
            // 429: one small error response for the loop to process.
            self.counts.rejected += 1;
            let w = req.worker;
            req.state = Phase::Rejected;
            let done = self.job(w, now, JobKind::Finish);
            self.reqs[r as usize].done_ns = done;
            let id = self.id(r);
            self.q.push(SimTime(done), Ev::Done(id));
        }
    }

    fn start_stream(&mut self, now: u64, r: u32) {
        self.server.running += 1;
        let input = self.reqs[r as usize].input;
        let cached = self.cached_tokens(r);
        let ttft = self.server_latency_ns(Some(input - cached));
        let req = &mut self.reqs[r as usize];
        req.state = Phase::Running;
        self.tally.server_queue.record(now - req.server_recv_ns);
        let id = self.id(r);
        self.q.push(SimTime(now + ttft), Ev::Emit(id));
    }

    /// The prompt tokens of request `r` the server's prefix cache serves (0 without one):
    /// its tokens named by the workload's prompt layout, as the live generator's words are
    /// drawn from it, so requests share tokens here exactly when they share words there.
    fn cached_tokens(&mut self, r: u32) -> u32 {
        let Some(cache) = &mut self.prefix_cache else {
            return 0;
        };
        let req = &self.reqs[r as usize];
        let own = req.input - (self.layout.total(0));
        let tokens = self.layout.token_names(self.sc.seed, req.index, own);
        let blocks = cache.law().block_hashes(tokens);
        let found = cache.admit(req.input, &blocks);
        self.counts.prefix_cache_queried_tokens += u64::from(req.input);
        self.counts.prefix_cache_cached_tokens += u64::from(found.cached_tokens);
        found.cached_tokens
    }

    fn release_slot(&mut self, now: u64) {
        self.server.running -= 1;
        while let Some(next) = self.server.waiting.pop_front() {
            let req = &mut self.reqs[next as usize];
            req.at_server_queue = false;
            if req.state == Phase::Sent {
                self.start_stream(now, next);
                break;
            }
            // Timed out while waiting: it already left the client; recycle it now.
            self.release(next);
        }
    }

    fn on_emit(&mut self, now: u64, r: u32) {
        self.current_serial = self.reqs[r as usize].serial;
        self.current_due_ns = if self.sc.server.is_instant() {
            self.reqs[r as usize].intended_ns
        } else {
            now
        };
        if self.reqs[r as usize].state != Phase::Running {
            return;
        }
        let w = self.reqs[r as usize].worker;
        loop {
            let done = self.job(w, now, JobKind::Chunk);
            let last_chunk_done = done;
            let stamp = self.stamp(now, done);
            let req = &mut self.reqs[r as usize];
            req.emitted += 1;
            if req.emitted == 1 {
                req.first_emit_ns = now;
                req.first_stamp_ns = stamp;
                self.tally.first_chunk_delay.record(stamp - now);
            } else {
                self.tally.itl_true.record(now - req.prev_emit_ns);
                self.tally.itl_measured.record(stamp - req.prev_stamp_ns);
                req.max_gap_emit_ns = req.max_gap_emit_ns.max(now - req.prev_emit_ns);
                req.max_gap_stamp_ns = req.max_gap_stamp_ns.max(stamp - req.prev_stamp_ns);
            }
            req.prev_emit_ns = now;
            req.prev_stamp_ns = stamp;
            if req.emitted == req.output {
                req.state = Phase::Finished;
                self.release_slot(now);
                // The end is processed after the last chunk, even when it costs nothing.
                let (end_done, more) = self.sliced_job(w, now, JobKind::Finish, r);
                if more {
                    // Not done before its last slice: a timeout meanwhile gives up on it.
                    self.reqs[r as usize].done_ns = u64::MAX;
                } else {
                    self.finished(end_done.max(last_chunk_done), r);
                }
                return;
            }
            let itl = self.server_latency_ns(None);
            if itl > 0 {
                let id = self.id(r);
                self.q.push(SimTime(now + itl), Ev::Emit(id));
                return;
            }
        }
    }

    fn on_finish_rest(&mut self, now: u64, r: u32) {
        let (end_done, more) = self.slice_rest(now, r, JobKind::Finish);
        if !more {
            self.finished(end_done, r);
        }
    }

    /// Request `r`'s finish job is done at `end_done`: its end is stamped (on arrival, the
    /// last token's emission) and it leaves the client.
    fn finished(&mut self, end_done: u64, r: u32) {
        let end_stamp = self.stamp(self.reqs[r as usize].prev_emit_ns, end_done);
        let req = &mut self.reqs[r as usize];
        req.end_stamp_ns = end_stamp;
        req.done_ns = end_done;
        let id = self.id(r);
        self.q.push(SimTime(end_done), Ev::Done(id));
    }

    // ----- completion ---------------------------------------------------------------

    fn on_done(&mut self, now: u64, r: u32) {
        let req = self.reqs[r as usize].clone();
        match req.state {
            Phase::Finished => {
                self.counts.completed += 1;
                self.record_request(&req);
            }
            Phase::Rejected | Phase::TimedOut => {}
            // A Done event is only pushed for the three states above.
            _ => return,
        }
        self.leave(now, r);
    }

    fn on_timeout(&mut self, now: u64, r: u32) {
        let state = self.reqs[r as usize].state;
        match state {
            Phase::Finished if self.reqs[r as usize].done_ns <= now => {}
            Phase::Finished => {
                // The response is in the loop's queue but not processed in time: the client
                // gives up; its Done event releases it.
                self.counts.timed_out += 1;
                self.reqs[r as usize].state = Phase::TimedOut;
            }
            Phase::Sent | Phase::Running => {
                self.counts.timed_out += 1;
                self.reqs[r as usize].state = Phase::TimedOut;
                if state == Phase::Running {
                    self.release_slot(now);
                }
                // A request still in the server's waiting line is skipped when reached.
                self.leave(now, r);
            }
            Phase::Pending | Phase::Rejected | Phase::TimedOut => {}
        }
    }

    /// The request leaves the client: free its in-flight slot, start a held-back send,
    /// and in a closed loop schedule the user's next request.
    fn leave(&mut self, now: u64, r: u32) {
        let (w, user) = {
            let req = &self.reqs[r as usize];
            (req.worker as usize, req.user)
        };
        let l = &mut self.loops[w];
        l.in_flight -= 1;
        let next = l.pending.pop_front();
        // A timed-out request still in the server's line keeps its slab entry until the
        // server reaches and skips it.
        if !self.reqs[r as usize].at_server_queue {
            self.release(r);
        }
        if let Some(p) = next {
            self.send(now, p);
        }
        if let Arrivals::Closed { think_s, .. } = self.sc.workload.arrivals {
            let at = now.saturating_add(ns_from_secs(think_s));
            if self.may_schedule(at) {
                self.counts.scheduled += 1;
                self.q.push(SimTime(at), Ev::Arrive { user });
            }
        }
    }

    fn record_request(&mut self, req: &Req) {
        let marks = Marks {
            intended_send_ns: req.intended_ns,
            actual_send_ns: req.actual_ns,
            first_token_ns: req.first_stamp_ns,
            last_token_ns: req.prev_stamp_ns,
            end_ns: req.end_stamp_ns,
            output_tokens: req.output,
        };
        // The server's view: from receipt to its own emissions, no client in between.
        let truth = Marks {
            intended_send_ns: req.server_recv_ns,
            actual_send_ns: req.server_recv_ns,
            first_token_ns: req.first_emit_ns,
            last_token_ns: req.prev_emit_ns,
            end_ns: req.prev_emit_ns,
            output_tokens: req.output,
        };
        let intended = marks.scalars(Origin::Intended, Convention::Heisenbench);
        let actual = marks.scalars(Origin::Actual, Convention::Heisenbench);
        let server = truth.scalars(Origin::Actual, Convention::Heisenbench);
        self.tally.record(&intended, &actual, &server);
        if req.first_stamp_ns > 0 {
            self.tally
                .ttft_send_start
                .record(req.first_stamp_ns.saturating_sub(req.send_start_ns));
        }
        if req.turn > 0 {
            self.tally.record_turn(req.turn, &intended, &server);
        }
        if let Some(slo) = &self.sc.slo {
            // One chunk has no gap to bound.
            let gap = |ns: u64| (req.output > 1).then_some(ns as f64 * 1e-9);
            let measured = gap(req.max_gap_stamp_ns);
            let tokens = u64::from(req.output);
            self.tally.slo.note(
                slo,
                slo.judge(&Judged::new(&intended, measured)),
                slo.judge(&Judged::new(&actual, measured)),
                tokens,
            );
            let truth = slo.judge(&Judged::new(&server, gap(req.max_gap_emit_ns)));
            self.tally.slo_server.note(slo, truth, tokens);
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum JobKind {
    Send,
    Chunk,
    Finish,
}
