//! Tests that need the built `heisenbench` binary: shard processes re-invoke it.
//! (They belong to the binary package, which is why they sit beside the `tests` crate.)

use std::process::Command;

use serde_json::Value;

fn heisenbench(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_heisenbench"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn run_json(args: &[&str], env: &[(&str, &str)]) -> Value {
    let (code, out, err) = heisenbench(args, env);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn process_shards_match_thread_shards_and_one_shard() {
    let base = [
        "run",
        "--qps",
        "300",
        "--requests",
        "150",
        "--output-tokens",
        "uniform:1,30",
        "--prompt-tokens",
        "16",
        "--seed",
        "3",
        "--json",
    ];
    let one = run_json(
        &[&base[..], &["--workers", "1", "--shard-mode", "thread"]].concat(),
        &[],
    );
    let procs = run_json(
        &[&base[..], &["--workers", "3", "--shard-mode", "process"]].concat(),
        &[],
    );
    for r in [&one, &procs] {
        assert_eq!(r["accounting"]["scheduled"], 150);
        assert_eq!(r["accounting"]["completed"], 150);
        assert_eq!(r["accounting"]["balanced"], true);
    }
    assert_eq!(one["tokens_stream"], procs["tokens_stream"]);
    assert_eq!(one["events"], procs["events"]);
    assert_eq!(procs["shards"].as_array().unwrap().len(), 3);
}

#[test]
fn a_killed_shard_is_reported_and_its_requests_lost() {
    let r = run_json(
        &[
            "run",
            "--qps",
            "200",
            "--duration",
            "1s",
            "--workers",
            "2",
            "--shard-mode",
            "process",
            "--output-tokens",
            "5",
            "--json",
        ],
        &[("HEISENBENCH_TEST_CRASH_SHARD", "1")],
    );
    let shards = r["shards"].as_array().unwrap();
    assert_eq!(shards[0]["ok"], true);
    assert_eq!(shards[1]["ok"], false);
    assert!(
        shards[1]["error"].as_str().unwrap().contains("exited"),
        "{}",
        shards[1]
    );
    let a = &r["accounting"];
    assert_eq!(a["balanced"], true);
    assert_eq!(a["lost"], shards[1]["scheduled"]);
    assert!(a["lost"].as_u64().unwrap() > 50);
    assert_eq!(a["completed"], shards[0]["scheduled"]);
}

#[test]
fn run_writes_report_and_csv_atomically() {
    let dir = std::env::temp_dir().join(format!("heisenbench-run-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let (code, _, err) = heisenbench(
        &[
            "run",
            "--qps",
            "200",
            "--requests",
            "40",
            "--workers",
            "1",
            "--out",
            d,
            "--csv",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["config"]["seed"], 1);
    let csv = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), 41);
    assert!(
        std::fs::read_dir(&dir).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')),
        "no temp files left"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_api_key_is_sent_but_never_written() {
    let (code, out, err) = heisenbench(
        &[
            "run",
            "--qps",
            "100",
            "--requests",
            "5",
            "--workers",
            "1",
            "--api-key-env",
            "HB_TEST_KEY",
            "--json",
        ],
        &[("HB_TEST_KEY", "sk-very-secret-value")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("sk-very-secret-value") && !err.contains("sk-very-secret-value"));
    assert!(out.contains("HB_TEST_KEY"));
}
