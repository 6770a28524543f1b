//! The CPU a client spends, from outside: its whole process tree, read from `/proc`.
//!
//! A benchmark client is often several processes (a launcher, workers, a tokenizer
//! server), started late or re-parented when their parent exits. The sampler makes the
//! auditing process a child subreaper, so orphaned descendants are re-parented to it
//! rather than to init, and follows the tree by parent links at every sample.
//!
//! CPU time is counted where the kernel keeps it. A process's own user + system time is
//! read at every sample; when a descendant ends, its parent's reaped-children time takes
//! it over, so the total is, for every process seen, its own last time, plus the children
//! time of the processes still there, minus the last time of the children those reaped:
//! what a child spent between its last sample and its end is not lost. The root's and each
//! orphan's final figures are read while they are zombies, before they are reaped.
//! Resolution is the kernel's clock tick (10 ms on most systems), per process.

use std::collections::{HashMap, HashSet};
use std::fs;

use super::{Connected, WorkSpread};

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Process id.
    pub pid: i32,
    /// Parent process id.
    pub ppid: i32,
    /// Run state (`R`, `S`, `Z`...).
    pub state: u8,
    /// Own user + system time, clock ticks.
    pub own_ticks: u64,
    /// Reaped children's user + system time, clock ticks.
    pub children_ticks: u64,
    /// Threads.
    pub threads: u64,
    /// Start time since boot, clock ticks: with the pid, the process's identity.
    pub start: u64,
}

/// Parses the text of `/proc/PID/stat`. The command name may hold spaces and
/// parentheses, so the fields are read after its last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        pid,
        ppid: f.get(1)?.parse().ok()?,
        state: *f.first()?.as_bytes().first()?,
        own_ticks: n(11)? + n(12)?,
        children_ticks: n(13)? + n(14)?,
        threads: n(17)?,
        start: n(19)?,
    })
}

fn read_stat(pid: i32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The CPU time of a process's main thread, nanoseconds: the first field of
/// `/proc/PID/schedstat` (the scheduler's own account, not rounded to clock ticks).
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// The time a process's main thread spent waiting for a core while runnable, nanoseconds:
/// the second field of `/proc/PID/schedstat`.
pub fn parse_schedstat_wait(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// The times a process's main thread was put on a core: the third field of
/// `/proc/PID/schedstat`.
pub fn parse_schedstat_turns(text: &str) -> Option<u64> {
    text.split_whitespace().nth(2)?.parse().ok()
}

/// The times a process's main thread lost its core while it could still run (preempted,
/// where a voluntary switch is a sleep): `nonvoluntary_ctxt_switches` in
/// `/proc/PID/status`.
pub fn parse_preemptions(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// The whole machine's CPU as the first lines of `/proc/stat` count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineTicks {
    /// Clock ticks every core spent on anything but idling and waiting for I/O.
    pub busy: u64,
    /// Clock ticks every core spent in all.
    pub total: u64,
    /// The cores counted (`cpuN` lines).
    pub cores: u32,
}

/// Parses `/proc/stat`: the `cpu` line's fields (user, nice, system, idle, iowait, irq,
/// softirq, steal; guest time is inside user) and the `cpuN` lines counted.
pub fn parse_proc_stat(text: &str) -> Option<MachineTicks> {
    let mut lines = text.lines();
    let first = lines.next()?;
    let mut fields = first.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let f: Vec<u64> = fields
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = f[..] else {
        return None;
    };
    let busy = user + nice + system + irq + softirq + steal;
    let cores = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count() as u32;
    Some(MachineTicks {
        busy,
        total: busy + idle + iowait,
        cores: cores.max(1),
    })
}

/// A process's main thread as the scheduler accounts it.
#[derive(Debug, Clone, Copy)]
struct SchedStat {
    /// CPU time, nanoseconds.
    run_ns: u64,
    /// Time runnable but waiting for a core, nanoseconds.
    wait_ns: u64,
    /// Times put on a core.
    turns: u64,
    /// Times it lost its core while runnable (None where `/proc/PID/status` does not say).
    preempted: Option<u64>,
}

fn read_schedstat(pid: i32) -> Option<SchedStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    Some(SchedStat {
        run_ns: parse_schedstat(&text)?,
        wait_ns: parse_schedstat_wait(&text)?,
        turns: parse_schedstat_turns(&text)?,
        preempted: fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .as_deref()
            .and_then(parse_preemptions),
    })
}

/// One process's readings in `history` between `from_ns` and `to_ns`: (when, value).
fn readings_of(history: &[Sample], key: (i32, u64), from_ns: u64, to_ns: u64) -> Vec<(u64, u64)> {
    history
        .iter()
        .filter(|(t, _)| (from_ns..=to_ns).contains(t))
        .filter_map(|(t, v)| Some((*t, v.iter().find(|(k, _)| *k == key)?.1)))
        .collect()
}

/// How much one process's counter in `history` grew between its first and last readings
/// from `from_ns` to `to_ns`; None without a reading there.
fn growth_of(history: &[Sample], key: (i32, u64), from_ns: u64, to_ns: u64) -> Option<u64> {
    let inside = readings_of(history, key, from_ns, to_ns);
    Some(inside.last()?.1.saturating_sub(inside.first()?.1))
}

/// Wait for a core per unit of CPU; None without CPU to divide by.
fn core_wait_ratio(run_ns: u64, wait_ns: u64) -> Option<f64> {
    (run_ns > 0).then(|| wait_ns as f64 / run_ns as f64)
}

/// The inodes of the TCP sockets in a `/proc/net/tcp` or `/proc/net/tcp6` table whose
/// remote end is `port`: on loopback, the client's ends of its connections to a server
/// listening there (the server's own ends have it as their local port).
pub fn parse_tcp_peers(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote = fields.get(2)?;
            let (_, hex_port) = remote.rsplit_once(':')?;
            (u16::from_str_radix(hex_port, 16).ok()? == port).then_some(())?;
            fields
                .get(9)?
                .parse::<u64>()
                .ok()
                .filter(|&inode| inode > 0)
        })
        .collect()
}

/// The socket inode a `/proc/PID/fd` link names (`socket:[12345]`), if it names one.
pub fn parse_socket_link(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The inodes of every TCP socket on this machine connected to `port`.
fn sockets_to(port: u16) -> HashSet<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| fs::read_to_string(path).ok())
        .flat_map(|table| parse_tcp_peers(&table, port))
        .collect()
}

/// The socket inodes among `pid`'s open descriptors.
fn sockets_of(pid: i32) -> Vec<u64> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter_map(|link| parse_socket_link(link.to_str()?))
        .collect()
}

/// Whether `pid` has ended and waits to be reaped.
pub fn is_zombie(pid: i32) -> bool {
    read_stat(pid).is_some_and(|s| s.state == b'Z')
}

/// Every process on the machine now.
fn all_processes() -> Vec<Stat> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .collect()
}

/// Whether this machine exposes process accounting the sampler can read.
pub fn available() -> bool {
    cfg!(target_os = "linux") && read_stat(std::process::id() as i32).is_some()
}

/// The kernel's clock ticks per second.
pub fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// Connections are looked for at one tree reading in this many: reading every process's
/// descriptors, and the TCP tables when a new socket appears, costs the audit more than the
/// rest of a reading, and a client's connections live for many requests.
const CONNECTIONS_EVERY: u64 = 10;

/// A process's identity: pid and start time (pids are reused).
type Key = (i32, u64);

/// One reading of the tree: when (CLOCK_MONOTONIC ns), and each live process's own ticks.
type Sample = (u64, Vec<(Key, u64)>);

/// What the sampler knows of one process.
#[derive(Debug, Clone, Copy)]
struct ProcessSample {
    last: Stat,
    gone: bool,
}

/// Follows the descendants of one process (and orphans re-parented to the sampler) and
/// accounts their CPU time.
#[derive(Debug)]
pub struct TreeSampler {
    own_pid: i32,
    seen: HashMap<(i32, u64), ProcessSample>,
    /// Largest number of live processes at one sample.
    pub max_processes: usize,
    /// Largest number of live threads at one sample.
    pub max_threads: u64,
    /// Samples taken.
    pub samples: u64,
    /// Every sample: when (CLOCK_MONOTONIC ns) and each live process's own ticks.
    history: Vec<Sample>,
    /// Every sample: when, and each live process's main thread's CPU time in nanoseconds
    /// (where the kernel keeps scheduler statistics).
    run_history: Vec<Sample>,
    /// The same samples' waits for a core, nanoseconds.
    wait_history: Vec<Sample>,
    /// The same samples' times on a core.
    turn_history: Vec<Sample>,
    /// The same samples' preemptions.
    preempt_history: Vec<Sample>,
    /// Every sample: when, and the whole machine's ticks.
    machine_history: Vec<(u64, MachineTicks)>,
    /// The server's port, whose connections are followed (None: not followed).
    server_port: Option<u16>,
    /// Every tenth sample while a port is followed: when, and each process holding
    /// connections to it with their number.
    connection_history: Vec<(u64, Vec<(Key, u32)>)>,
    /// Each socket inode met in a descriptor, and whether it is connected to the followed
    /// port: the TCP tables, whose reading costs in proportion to every socket on the
    /// machine, are read only when a socket not met before appears. A socket found in
    /// neither table (a Unix socket, an event loop's self-pipe) is remembered as not one.
    socket_class: HashMap<u64, bool>,
    /// Every sample: when, and this process's own ticks (the mock's threads, the sampler
    /// and the rest of the audit).
    self_history: Vec<(u64, u64)>,
}

impl TreeSampler {
    /// A sampler of the children of this process. Makes this process a child subreaper
    /// (Linux), so that descendants whose parent exits stay in view.
    pub fn new() -> Self {
        #[cfg(target_os = "linux")]
        {
            let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
        }
        Self {
            own_pid: std::process::id() as i32,
            seen: HashMap::new(),
            max_processes: 0,
            max_threads: 0,
            samples: 0,
            history: Vec::new(),
            run_history: Vec::new(),
            wait_history: Vec::new(),
            turn_history: Vec::new(),
            preempt_history: Vec::new(),
            machine_history: Vec::new(),
            server_port: None,
            connection_history: Vec::new(),
            socket_class: HashMap::new(),
            self_history: Vec::new(),
        }
    }

    /// Follows which processes hold connections to a server on `port` (every tenth
    /// sample: a client's connections live for many requests).
    pub fn follow_connections_to(&mut self, port: u16) {
        self.server_port = Some(port);
    }

    /// Reads the tree once: every live descendant of this process.
    pub fn sample(&mut self) {
        let all = all_processes();
        let mut children: HashMap<i32, Vec<&Stat>> = HashMap::new();
        for s in &all {
            children.entry(s.ppid).or_default().push(s);
        }
        let now = crate::time::mono_ns();
        let mut live = HashSet::new();
        let mut stack = vec![self.own_pid];
        let (mut processes, mut threads) = (0usize, 0u64);
        while let Some(p) = stack.pop() {
            for s in children.get(&p).map_or(&[][..], Vec::as_slice) {
                let key = (s.pid, s.start);
                if !live.insert(key) {
                    continue;
                }
                processes += 1;
                threads += s.threads;
                self.seen.insert(
                    key,
                    ProcessSample {
                        last: **s,
                        gone: false,
                    },
                );
                stack.push(s.pid);
            }
        }
        for (key, s) in &mut self.seen {
            if !live.contains(key) {
                s.gone = true;
            }
        }
        self.history.push((
            now,
            live.iter()
                .map(|k| (*k, self.seen[k].last.own_ticks))
                .collect(),
        ));
        let stats: Vec<(Key, SchedStat)> = live
            .iter()
            .filter_map(|k| Some((*k, read_schedstat(k.0)?)))
            .collect();
        let field = |f: fn(&SchedStat) -> u64| stats.iter().map(|(k, s)| (*k, f(s))).collect();
        self.run_history.push((now, field(|s| s.run_ns)));
        self.wait_history.push((now, field(|s| s.wait_ns)));
        self.turn_history.push((now, field(|s| s.turns)));
        self.preempt_history.push((
            now,
            stats
                .iter()
                .filter_map(|(k, s)| Some((*k, s.preempted?)))
                .collect(),
        ));
        if let Some(m) = fs::read_to_string("/proc/stat")
            .ok()
            .as_deref()
            .and_then(parse_proc_stat)
        {
            self.machine_history.push((now, m));
        }
        if let Some(port) = self
            .server_port
            .filter(|_| self.samples.is_multiple_of(CONNECTIONS_EVERY))
        {
            let per_process: Vec<(Key, Vec<u64>)> =
                live.iter().map(|k| (*k, sockets_of(k.0))).collect();
            let unknown: Vec<u64> = per_process
                .iter()
                .flat_map(|(_, v)| v)
                .filter(|i| !self.socket_class.contains_key(i))
                .copied()
                .collect();
            if !unknown.is_empty() {
                let connected = sockets_to(port);
                for inode in unknown {
                    self.socket_class.insert(inode, connected.contains(&inode));
                }
            }
            let held: Vec<(Key, u32)> = per_process
                .iter()
                .map(|(k, v)| (*k, v.iter().filter(|i| self.socket_class[i]).count() as u32))
                .filter(|(_, n)| *n > 0)
                .collect();
            self.connection_history.push((now, held));
        }
        if let Some(own) = read_stat(self.own_pid) {
            self.self_history.push((now, own.own_ticks));
        }
        self.samples += 1;
        self.max_processes = self.max_processes.max(processes);
        self.max_threads = self.max_threads.max(threads);
    }

    /// Reaps orphans re-parented to this process that have ended, after reading their
    /// final figures. The direct child the caller started is left to its `Child`.
    pub fn reap_orphans(&mut self, keep: i32) {
        #[cfg(target_os = "linux")]
        {
            let ended: Vec<Stat> = all_processes()
                .into_iter()
                .filter(|s| s.ppid == self.own_pid && s.pid != keep && s.state == b'Z')
                .collect();
            for s in ended {
                self.seen.insert(
                    (s.pid, s.start),
                    ProcessSample {
                        last: s,
                        gone: true,
                    },
                );
                if let Some(pid) = rustix::process::Pid::from_raw(s.pid) {
                    let _ =
                        rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = keep;
    }

    /// Reads `pid`'s final figures while it is a zombie (before its `Child` reaps it).
    pub fn record_final(&mut self, pid: i32) {
        if let Some(s) = read_stat(pid) {
            self.seen.insert(
                (s.pid, s.start),
                ProcessSample {
                    last: s,
                    gone: true,
                },
            );
        }
    }

    /// Live descendants' pids (to stop what a client left running).
    pub fn live_pids(&self) -> Vec<i32> {
        self.seen
            .values()
            .filter(|s| !s.gone)
            .map(|s| s.last.pid)
            .collect()
    }

    /// Total CPU time of the tree so far, in clock ticks.
    pub fn total_ticks(&self) -> u64 {
        let known: HashSet<i32> = self.seen.values().map(|s| s.last.pid).collect();
        let mut total: i64 = 0;
        for s in self.seen.values() {
            // Own time plus the reaped children's time the process holds.
            total += (s.last.own_ticks + s.last.children_ticks) as i64;
            // An ended process reaped by a parent of the tree is in that parent's children
            // time: count it once, as the parent's (later) figure.
            if s.gone && s.last.ppid != self.own_pid && known.contains(&s.last.ppid) {
                total -= (s.last.own_ticks + s.last.children_ticks) as i64;
            }
        }
        total.max(0) as u64
    }

    /// CPU time spent between two instants (CLOCK_MONOTONIC ns), in clock ticks, per
    /// process (largest first): each process's own time at `to_ns` less its time at
    /// `from_ns`, each interpolated between the samples around it. A process that ended
    /// inside the window counts up to its last sample.
    pub fn window_ticks(&self, from_ns: u64, to_ns: u64) -> Vec<f64> {
        let (start, end) = (self.own_at(from_ns), self.own_at(to_ns));
        let mut v: Vec<f64> = end
            .iter()
            .map(|(k, e)| (e - start.get(k).copied().unwrap_or(0.0)).max(0.0))
            .filter(|d| *d > 0.0)
            .collect();
        v.sort_unstable_by(|a, b| b.total_cmp(a));
        v
    }

    /// The main thread's CPU of the process that spent the most inside the window, from
    /// one sample to the next: (the interval, the CPU in it), nanoseconds, for every pair of
    /// successive samples inside `from_ns..=to_ns` that both read it. Empty where the
    /// kernel keeps no scheduler statistics.
    pub fn busiest_intervals(&self, from_ns: u64, to_ns: u64) -> Vec<(u64, u64)> {
        match self.busiest(from_ns, to_ns) {
            Some(key) => self.intervals_of(key, from_ns, to_ns),
            None => Vec::new(),
        }
    }

    /// One process's main thread's CPU from one sample to the next inside the window.
    fn intervals_of(&self, key: Key, from_ns: u64, to_ns: u64) -> Vec<(u64, u64)> {
        let inside = readings_of(&self.run_history, key, from_ns, to_ns);
        inside
            .windows(2)
            .map(|w| (w[1].0 - w[0].0, w[1].1.saturating_sub(w[0].1)))
            .collect()
    }

    /// How long the busiest process's main thread waited for a core per unit of its CPU
    /// between `from_ns` and `to_ns` (None without scheduler statistics or CPU): 0 on a
    /// machine with a core free whenever it was runnable, 1 where it waited as long as it
    /// ran.
    pub fn busiest_core_wait(&self, from_ns: u64, to_ns: u64) -> Option<f64> {
        let key = self.busiest(from_ns, to_ns)?;
        let spent = |history: &[Sample]| growth_of(history, key, from_ns, to_ns);
        core_wait_ratio(spent(&self.run_history)?, spent(&self.wait_history)?)
    }

    /// How long the busiest process's main thread waited for a core, on average, each time
    /// it was put on one between `from_ns` and `to_ns`, seconds (None without scheduler
    /// statistics or turns): most turns follow a wake-up, so this is mostly the wait of a
    /// loop woken by work.
    pub fn busiest_wait_per_turn(&self, from_ns: u64, to_ns: u64) -> Option<f64> {
        let key = self.busiest(from_ns, to_ns)?;
        let spent = |history: &[Sample]| growth_of(history, key, from_ns, to_ns);
        let turns = spent(&self.turn_history)?;
        (turns > 0).then(|| spent(&self.wait_history).map(|w| w as f64 * 1e-9 / turns as f64))?
    }

    /// The busiest process's main thread's CPU between `from_ns` and `to_ns`, in cores
    /// (its CPU time over the time between its first and last readings there): the part
    /// of the process's CPU its event loop (a Python client's main thread) can have spent.
    /// None with fewer than two readings.
    pub fn busiest_main_cores(&self, from_ns: u64, to_ns: u64) -> Option<f64> {
        let key = self.busiest(from_ns, to_ns)?;
        let inside = readings_of(&self.run_history, key, from_ns, to_ns);
        let (first, last) = (inside.first()?, inside.last()?);
        (last.0 > first.0)
            .then(|| last.1.saturating_sub(first.1) as f64 / (last.0 - first.0) as f64)
    }

    /// The share of the busiest process's main thread's turns on a core between `from_ns`
    /// and `to_ns` that followed a preemption (it lost its core while it could still run)
    /// rather than a sleep: None without the counts or without turns.
    pub fn busiest_preempted_share(&self, from_ns: u64, to_ns: u64) -> Option<f64> {
        let key = self.busiest(from_ns, to_ns)?;
        let spent = |history: &[Sample]| growth_of(history, key, from_ns, to_ns);
        let turns = spent(&self.turn_history)?;
        let preempted = spent(&self.preempt_history)?;
        (turns > 0).then(|| (preempted as f64 / turns as f64).min(1.0))
    }

    /// The whole machine's cores and how many of them were busy on average between the
    /// first and the last sample from `from_ns` to `to_ns` (the client, the server, the
    /// audit and anything else running): None with fewer than two such samples.
    pub fn machine_busy(&self, from_ns: u64, to_ns: u64) -> Option<(u32, f64)> {
        let inside: Vec<&MachineTicks> = self
            .machine_history
            .iter()
            .filter(|(t, _)| (from_ns..=to_ns).contains(t))
            .map(|(_, m)| m)
            .collect();
        let (first, last) = (inside.first()?, inside.last()?);
        let total = last.total.checked_sub(first.total).filter(|&t| t > 0)?;
        let busy = last.busy.saturating_sub(first.busy);
        Some((
            last.cores,
            busy as f64 / total as f64 * f64::from(last.cores),
        ))
    }

    /// This process's own CPU between `from_ns` and `to_ns`, in cores (its ticks from its
    /// first to its last reading there over the time between them): the mock's threads,
    /// the sampler and the rest of the audit. None with fewer than two readings.
    pub fn own_cores(&self, from_ns: u64, to_ns: u64) -> Option<f64> {
        let inside: Vec<&(u64, u64)> = self
            .self_history
            .iter()
            .filter(|(t, _)| (from_ns..=to_ns).contains(t))
            .collect();
        let (first, last) = (inside.first()?, inside.last()?);
        (last.0 > first.0).then(|| {
            let ticks = last.1.saturating_sub(first.1) as f64;
            ticks / ticks_per_second().max(1) as f64 / ((last.0 - first.0) as f64 * 1e-9)
        })
    }

    /// The processes that held connections to the followed server at some reading between
    /// `from_ns` and `to_ns`, and what they spent: the ones that read the server's answers,
    /// and so stamp them. None where no port was followed or no reading there found one.
    pub fn connection_holders(&self, from_ns: u64, to_ns: u64) -> Option<Connected> {
        let mut most: HashMap<Key, u32> = HashMap::new();
        for (_, held) in self
            .connection_history
            .iter()
            .filter(|(t, _)| (from_ns..=to_ns).contains(t))
        {
            for (k, n) in held {
                let m = most.entry(*k).or_default();
                *m = (*m).max(*n);
            }
        }
        if most.is_empty() {
            return None;
        }
        let keys: Vec<Key> = most.keys().copied().collect();
        let (start, end) = (self.own_at(from_ns), self.own_at(to_ns));
        let spent = |k: &Key| {
            (end.get(k).copied().unwrap_or(0.0) - start.get(k).copied().unwrap_or(0.0)).max(0.0)
        };
        let busiest = keys
            .iter()
            .max_by(|a, b| spent(a).total_cmp(&spent(b)))
            .copied();
        let tick_s = 1.0 / ticks_per_second().max(1) as f64;
        let mut window_cpu_per_process_s: Vec<f64> =
            keys.iter().map(|k| spent(k) * tick_s).collect();
        window_cpu_per_process_s.sort_unstable_by(|a, b| b.total_cmp(a));
        let sum = |history: &[Sample]| -> Option<u64> {
            keys.iter()
                .filter_map(|k| growth_of(history, *k, from_ns, to_ns))
                .reduce(|a, b| a + b)
        };
        let turns = sum(&self.turn_history).filter(|&t| t > 0);
        // Each one's growth a nanosecond over its own readings in the window, summed.
        let rate = |history: &[Sample]| {
            keys.iter()
                .filter_map(|k| {
                    let inside = readings_of(history, *k, from_ns, to_ns);
                    let (first, last) = (inside.first()?, inside.last()?);
                    (last.0 > first.0)
                        .then(|| last.1.saturating_sub(first.1) as f64 / (last.0 - first.0) as f64)
                })
                .reduce(|a, b| a + b)
        };
        let main_cores = rate(&self.run_history);
        Some(Connected {
            processes: keys.len() as u32,
            connections: most.values().sum(),
            window_cpu_per_process_s,
            holds_busiest: self
                .busiest(from_ns, to_ns)
                .is_some_and(|b| most.contains_key(&b)),
            main_cores,
            turns_per_s: rate(&self.turn_history).map(|t| t * 1e9),
            wait_per_turn_s: turns
                .and_then(|t| Some(sum(&self.wait_history)? as f64 * 1e-9 / t as f64)),
            preempted_share: turns
                .and_then(|t| Some((sum(&self.preempt_history)? as f64 / t as f64).min(1.0))),
            core_wait: sum(&self.run_history)
                .and_then(|run| core_wait_ratio(run, sum(&self.wait_history)?)),
            spread: busiest.and_then(|k| WorkSpread::of(&self.intervals_of(k, from_ns, to_ns))),
        })
    }

    /// The process with the most ticks of its own between `from_ns` and `to_ns`.
    fn busiest(&self, from_ns: u64, to_ns: u64) -> Option<(i32, u64)> {
        let (start, end) = (self.own_at(from_ns), self.own_at(to_ns));
        end.iter()
            .map(|(k, e)| (*k, e - start.get(k).copied().unwrap_or(0.0)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(k, _)| k)
    }

    /// Every process's own ticks at `t`, interpolated between the samples around it.
    fn own_at(&self, t: u64) -> HashMap<(i32, u64), f64> {
        let mut before: HashMap<(i32, u64), u64> = HashMap::new();
        let mut t0 = 0;
        let mut i = 0;
        while i < self.history.len() && self.history[i].0 <= t {
            t0 = self.history[i].0;
            for (k, v) in &self.history[i].1 {
                before.insert(*k, *v);
            }
            i += 1;
        }
        let mut at: HashMap<(i32, u64), f64> =
            before.iter().map(|(k, v)| (*k, *v as f64)).collect();
        if let Some((t1, next)) = self.history.get(i) {
            let frac = if *t1 > t0 && i > 0 {
                (t - t0) as f64 / (*t1 - t0) as f64
            } else {
                1.0
            };
            for (k, v1) in next {
                let v0 = before.get(k).copied().unwrap_or(0) as f64;
                at.insert(*k, v0 + (*v1 as f64 - v0) * frac);
            }
        }
        at
    }

    /// Per-process own CPU time, clock ticks, largest first.
    pub fn per_process_ticks(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.seen.values().map(|s| s.last.own_ticks).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    }

    /// Processes seen over the whole run.
    pub fn processes_seen(&self) -> usize {
        self.seen.len()
    }
}

impl Default for TreeSampler {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "4242 (my (odd) name) S 17 4242 17 0 -1 4194560 100 0 0 0 250 30 7 3 20 0 5 0 98765 1000 200 18446744073709551615";
        let s = parse_stat(line).expect("parses");
        assert_eq!(
            (
                s.pid,
                s.ppid,
                s.state,
                s.own_ticks,
                s.children_ticks,
                s.threads,
                s.start
            ),
            (4242, 17, b'S', 280, 10, 5, 98765)
        );
        assert!(parse_stat("12 (x) S 1").is_none());
    }

    #[test]
    fn schedstat_lines_parse() {
        assert_eq!(parse_schedstat("123456789 2000 17\n"), Some(123_456_789));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(parse_schedstat_wait("123456789 2000 17\n"), Some(2000));
        assert_eq!(parse_schedstat_wait("123456789"), None);
        assert_eq!(core_wait_ratio(2_000, 500), Some(0.25));
        assert_eq!(core_wait_ratio(0, 500), None);
        assert_eq!(parse_schedstat_turns("1200 340 17\n"), Some(17));
        assert_eq!(parse_schedstat_turns("1200 340"), None);
        let status = "Name:\tpython3\nvoluntary_ctxt_switches:\t1234\n\
                      nonvoluntary_ctxt_switches:\t56\n";
        assert_eq!(parse_preemptions(status), Some(56));
        assert_eq!(parse_preemptions("voluntary_ctxt_switches:\t1234\n"), None);
    }

    #[test]
    fn proc_stat_parses() {
        let text = "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n\
                    cpu1 50 3 25 500 10 2 1 4 0 0\nintr 1 2 3\nctxt 9\n";
        let m = parse_proc_stat(text).expect("parses");
        assert_eq!(m.busy, 100 + 5 + 50 + 3 + 2 + 7);
        assert_eq!(m.total, m.busy + 1000 + 20);
        assert_eq!(m.cores, 2);
        assert_eq!(parse_proc_stat("intr 1 2\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2 3\n"), None);
    }

    /// The machine's busy cores over a window are the busy ticks' share of all ticks times
    /// the cores, between the first and last sample inside it.
    #[test]
    fn the_machine_is_read_between_the_window_s_samples() {
        let mut s = TreeSampler::new();
        let at = |busy, total| MachineTicks {
            busy,
            total,
            cores: 4,
        };
        s.machine_history = vec![
            (10, at(0, 0)),
            (20, at(100, 400)),
            (30, at(400, 800)),
            (40, at(900, 1200)),
        ];
        // 300 of 400 ticks busy from 20 to 30: three cores of four.
        assert_eq!(s.machine_busy(15, 35), Some((4, 3.0)));
        assert_eq!(s.machine_busy(15, 45), Some((4, 4.0 * 800.0 / 800.0)));
        assert_eq!(s.machine_busy(25, 35), None);
    }

    /// A thread that spins is seen in the machine's busy cores (at least its own share of
    /// one core, less a few clock ticks), and no more cores are busy than there are.
    #[test]
    fn a_spinning_thread_keeps_the_machine_busy() {
        if !available() || fs::read_to_string("/proc/stat").is_err() {
            return;
        }
        let mut s = TreeSampler::new();
        let from = crate::time::mono_ns();
        s.sample();
        let spun = std::thread::spawn(|| {
            let cpu = || {
                let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
                t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
            };
            let (start, c0) = (std::time::Instant::now(), cpu());
            while start.elapsed() < std::time::Duration::from_millis(500) {
                std::hint::black_box(0u64);
            }
            (cpu() - c0) / start.elapsed().as_secs_f64()
        })
        .join()
        .expect("the spinner ends");
        s.sample();
        let to = crate::time::mono_ns();
        let (cores, busy) = s.machine_busy(from, to).expect("two samples");
        let tick = 1.0 / ticks_per_second() as f64;
        assert!(
            busy >= spun - 4.0 * tick / 0.5 - 0.05,
            "{busy} busy, the spinner {spun}"
        );
        assert!(busy <= f64::from(cores) + 0.05, "{busy} of {cores}");
    }

    #[test]
    fn tcp_tables_and_socket_links_parse() {
        // The header, a listener on 0x1F90 (8080), a client's end connected to it from
        // port 0x9C40, the server's end of that connection, and an IPv6 client's end.
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1
   3: 00000000000000000000000001000000:9C41 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000     0        0 1004 1 0000000000000000 20 4 30 10 -1
";
        assert_eq!(parse_tcp_peers(table, 8080), vec![1002, 1004]);
        assert!(parse_tcp_peers(table, 8081).is_empty());
        assert_eq!(parse_socket_link("socket:[1002]"), Some(1002));
        assert_eq!(parse_socket_link("pipe:[1002]"), None);
        assert_eq!(parse_socket_link("/dev/null"), None);
    }

    /// Two children, one holding a connection to a listener here and one not: the
    /// sampler finds the one that holds it, and only while it holds it, and counts how
    /// often its thread is put on a core (it wakes from a 10 ms wait on its socket, which
    /// never answers: about a hundred times a second).
    #[test]
    fn the_processes_holding_connections_are_found() {
        if !available() || !std::path::Path::new("/proc/net/tcp").exists() {
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let holder = std::process::Command::new("bash")
            .args([
                "-c",
                &format!(
                    "exec 3<>/dev/tcp/127.0.0.1/{port}; end=$((SECONDS + 2)); \
                     while [ $SECONDS -lt $end ]; do read -t 0.01 -u 3; done"
                ),
            ])
            .spawn()
            .unwrap();
        let idle = std::process::Command::new("sleep")
            .arg("2")
            .spawn()
            .unwrap();
        let _accepted = listener.accept().unwrap();
        let mut sampler = TreeSampler::new();
        sampler.follow_connections_to(port);
        let from = crate::time::mono_ns();
        for _ in 0..6 {
            sampler.sample();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let to = crate::time::mono_ns();
        let h = sampler.connection_holders(from, to).expect("a holder");
        assert_eq!((h.processes, h.connections), (1, 1), "{h:?}");
        assert_eq!(h.window_cpu_per_process_s.len(), 1);
        // Schedstat can be off; where it is on, a count a second, not a nanosecond.
        if let Some(turns) = h.turns_per_s {
            assert!((20.0..2_000.0).contains(&turns), "{turns} turns a second");
        }
        // Nothing was read before the window.
        assert!(
            sampler
                .connection_holders(0, from.saturating_sub(1))
                .is_none()
        );
        for mut c in [holder, idle] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    #[test]
    fn own_process_reads() {
        if !available() {
            return;
        }
        let s = read_stat(std::process::id() as i32).expect("own stat");
        assert_eq!(s.pid, std::process::id() as i32);
        assert!(s.threads >= 1);
        assert!(ticks_per_second() > 0);
    }
}
