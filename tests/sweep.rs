//! `heisenbench sweep` against a server whose knee is known: the mock with four slots and
//! a deterministic latency law. Up to four closed-loop users never wait for a slot, so
//! TTFT is the mock's 20 ms; a fifth waits for a whole response (20 ms + 19 x 2 ms), so
//! the p99 TTFT jumps past the 40 ms bound. The knee is four users, exactly.

use std::process::Command;
use std::time::Duration;

use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use serde_json::Value;

#[test]
fn a_users_search_finds_the_mocks_slots() {
    let m = MockServer::start(MockConfig {
        port: 0,
        max_num_seqs: 4,
        time_to_first_token: Duration::from_millis(20),
        inter_token_latency: Duration::from_millis(2),
        ..MockConfig::default()
    })
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_heisenbench"))
        .args(["sweep", "--url", &m.url(), "--users", "1..16", "--search"])
        .args(["--stage-duration", "1500ms", "--max-p99", "40ms"])
        .args(["--slo", "ttft=40ms", "--min-goodput", "99%"])
        .args([
            "--output-tokens",
            "20",
            "--prompt-tokens",
            "8",
            "--shards",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(p["knee_users"], 4, "{p}");
    assert_eq!(p["search"]["missed"], 5.0, "{p}");
    assert_eq!(p["goodput_knee_load"], 4.0, "{p}");
    let stages = p["stages"].as_array().unwrap();
    // 1 and 16, then the bisection of the bracket down to neighbours: at most 2 + 4.
    assert!(stages.len() <= 6, "{} stages", stages.len());
    for s in stages {
        // Little's law per stage: a closed loop of n users keeps n requests in flight
        // (less the gaps between a response and the next send): within 10 %.
        let (l, lw) = (
            s["in_flight_mean"].as_f64().unwrap(),
            s["little_in_flight"].as_f64().unwrap(),
        );
        let users = s["users"].as_f64().unwrap();
        assert!((l - lw).abs() <= 0.1 * lw, "{s}");
        assert!(l <= users + 1e-9 && l >= 0.8 * users, "{s}");
        let good = s["good_fraction"].as_f64().unwrap();
        assert_eq!(good >= 0.99, users <= 4.0, "{s}");
    }
    m.shutdown();
}

/// A flag the simulator's sweep would ignore is refused before anything runs: status 2,
/// one line naming the flag and the one it needs, and no --out folder made.
#[test]
fn a_live_flag_without_a_server_is_refused_before_anything_is_written() {
    let dir = std::env::temp_dir().join(format!("heisenbench-idle-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_heisenbench"))
        .args([
            "sweep", "--from", "10", "--to", "20", "--shards", "4", "--out",
        ])
        .arg(&dir)
        .output()
        .expect("the binary runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("heisenbench: --shards does nothing without --url: "),
        "{err}"
    );
    assert!(out.stdout.is_empty() && !dir.exists());
}
