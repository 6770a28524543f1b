//! The command line, run in process through `heisenbench::run`.

use heisenbench::{Failure, run};
use serde_json::Value;

fn ok(args: &[&str]) -> String {
    let mut out = Vec::new();
    let argv = std::iter::once("heisenbench").chain(args.iter().copied());
    if let Err(e) = run(argv, &mut out) {
        panic!("{args:?} failed: {e}");
    }
    String::from_utf8(out).unwrap()
}

fn json(args: &[&str]) -> Value {
    let text = ok(args);
    assert_eq!(
        text.lines().count(),
        1,
        "--json must print one line: {text}"
    );
    serde_json::from_str(&text).unwrap()
}

fn fails(args: &[&str]) -> Failure {
    let mut out = Vec::new();
    let argv = std::iter::once("heisenbench").chain(args.iter().copied());
    let e = run(argv, &mut out).expect_err("should fail");
    assert!(
        out.is_empty(),
        "nothing may be printed on failure: {}",
        String::from_utf8_lossy(&out)
    );
    e
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("missing numeric {key} in {v}"))
}

#[test]
fn queue_json_carries_the_keys() {
    let v = json(&[
        "model",
        "mg1",
        "--rate",
        "40000",
        "--service-mean",
        "20us",
        "--service-scv",
        "1",
        "--json",
    ]);
    for key in [
        "rho",
        "wq_mean_s",
        "lq",
        "w_mean_s",
        "l",
        "p_wait",
        "wq_p50_s",
        "wq_p90_s",
        "wq_p99_s",
        "wq_p999_s",
    ] {
        num(&v, key);
    }
    // Gamma with SCV 1 is exponential: M/M/1 at rho 0.8 with E[S] = 20 us, Wq = 4 E[S].
    assert!((num(&v, "rho") - 0.8).abs() < 1e-12);
    assert!((num(&v, "wq_mean_s") - 80e-6).abs() < 1e-12);
    assert!((num(&v, "wq_p99_s") - 20e-6 * (80f64).ln() / 0.2).abs() < 1e-9);
}

/// Where the model only approximates a pool, `model mgc` answers by simulation as well.
/// M/D/c with more servers than the exact chain takes (128) is such a case whose mean is
/// known exactly (Crommelin's roots): the simulation's interval must cover it. An exact
/// pool (M/D/10) is not simulated.
#[test]
fn approximate_pools_are_answered_by_simulation() {
    let v = json(&[
        "model",
        "mgc",
        "--rate",
        "190",
        "--service-mean",
        "1s",
        "--servers",
        "200",
        "--service-scv",
        "0",
        "--customers",
        "200000",
        "--json",
    ]);
    let mean = &v["simulation"]["simulated"]["wait_mean_s"];
    let (value, ci) = (
        mean["value"].as_f64().unwrap(),
        mean["ci95"].as_f64().unwrap(),
    );
    let exact = heisenbench_model::mmc::md_c_mean_wait(200, 190.0, 1.0);
    assert!(
        exact > 0.0 && (value - exact).abs() <= 3.0 * ci,
        "simulated {value} +- {ci}, exact {exact}"
    );
    let v = json(&[
        "model",
        "mgc",
        "--rate",
        "9",
        "--service-mean",
        "1s",
        "--servers",
        "10",
        "--service-scv",
        "0",
        "--json",
    ]);
    assert!(v.get("simulation").is_none(), "{v}");
}
#[test]
fn every_queue_command_answers() {
    let cases: &[&[&str]] = &[
        &[
            "model",
            "mm1",
            "--rate",
            "0.8",
            "--service-mean",
            "1s",
            "--json",
        ],
        &[
            "model",
            "md1",
            "--rate",
            "0.9",
            "--service-mean",
            "1s",
            "--json",
        ],
        &[
            "model",
            "mxg1",
            "--rate",
            "2000",
            "--service-mean",
            "20us",
            "--service-scv",
            "0",
            "--batch",
            "20",
            "--json",
        ],
        &[
            "model",
            "ekg1",
            "--rate",
            "30000",
            "--service-mean",
            "20us",
            "--k",
            "4",
            "--json",
        ],
        &[
            "model",
            "gg1",
            "--rate",
            "30000",
            "--service-mean",
            "20us",
            "--arrival-scv",
            "0.5",
            "--json",
        ],
        &[
            "model",
            "mmc",
            "--rate",
            "6",
            "--service-mean",
            "1s",
            "--servers",
            "7",
            "--json",
        ],
        &[
            "model",
            "mgc",
            "--rate",
            "6",
            "--service-mean",
            "1s",
            "--servers",
            "7",
            "--service-scv",
            "0.3",
            "--json",
        ],
        &[
            "model",
            "mg1",
            "--rate",
            "0.7",
            "--service-mean",
            "1s",
            "--service-dist",
            "lognormal",
            "--service-scv",
            "2",
            "--json",
        ],
    ];
    for args in cases {
        let v = json(args);
        let rho = num(&v, "rho");
        assert!(rho > 0.0 && rho < 1.0, "{args:?}");
        let qs: Vec<f64> = ["wq_p50_s", "wq_p90_s", "wq_p99_s", "wq_p999_s"]
            .iter()
            .map(|k| num(&v, k))
            .collect();
        assert!(qs.windows(2).all(|w| w[0] <= w[1]), "{args:?}: {qs:?}");
    }
}

#[test]
fn mm3_textbook_through_the_cli() {
    let v = json(&[
        "model",
        "mmc",
        "--rate",
        "6",
        "--service-mean",
        "333.333333333ms",
        "--servers",
        "3",
        "--json",
    ]);
    assert!((num(&v, "wq_mean_s") - 0.1481).abs() < 1e-4);
}

#[test]
fn plan_json_carries_the_keys_and_the_paper_answer() {
    let v = json(&[
        "plan",
        "--qps",
        "5000",
        "--events-per-request",
        "200",
        "--event-cost",
        "20us",
        "--budget",
        "p99=1ms",
        "--json",
    ]);
    assert_eq!(v["workers"], 21);
    assert!((num(&v, "utilization") - 20.0 / 21.0).abs() < 1e-12);
    assert!((num(&v, "predicted_wait_s") - 945e-6).abs() < 1e-6);
    let fewer = &v["at_fewer_workers"];
    assert_eq!(fewer["workers"], 20);
    assert_eq!(fewer["meets_budget"], false);
    assert!((num(fewer, "utilization") - 1.0).abs() < 1e-12);
}

#[test]
fn plan_max_qps_and_cores() {
    let v = json(&[
        "plan",
        "--max-qps",
        "--loops",
        "4",
        "--events-per-request",
        "200",
        "--event-cost",
        "20us",
        "--budget",
        "mean=100us",
        "--json",
    ]);
    let max = num(&v, "max_qps");
    assert!(max > 0.0 && max < num(&v, "saturation_qps"));
    assert!((num(&v, "predicted_wait_s") - 100e-6).abs() < 1e-9);
    let text = ok(&[
        "plan",
        "--qps",
        "5000",
        "--events-per-request",
        "200",
        "--event-cost",
        "20us",
        "--budget",
        "p99=1ms",
        "--cores",
        "2",
    ]);
    assert!(text.contains("only 2 core(s)"), "{text}");
}

#[test]
fn tables_are_readable() {
    let t = ok(&["model", "md1", "--rate", "0.9", "--service-mean", "1s"]);
    assert!(
        t.contains("M/D/1") && t.contains("wait p99") && t.contains("21.90s"),
        "{t}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let cases: &[&[&str]] = &[
        &["model", "mg1", "--rate", "-5", "--service-mean", "20us"],
        &["model", "mg1", "--rate", "0", "--service-mean", "20us"],
        &["model", "mg1", "--rate", "5", "--service-mean", "20"],
        &["model", "mg1", "--rate", "5", "--service-mean", "-3ms"],
        &[
            "model",
            "mg1",
            "--rate",
            "5",
            "--service-mean",
            "1ms",
            "--service-scv",
            "-1",
        ],
        &["model", "md1", "--rate", "60000", "--service-mean", "20us"],
        &[
            "model",
            "mmc",
            "--rate",
            "10",
            "--service-mean",
            "1s",
            "--servers",
            "3",
        ],
        &[
            "plan",
            "--qps",
            "5",
            "--events-per-request",
            "200",
            "--event-cost",
            "20us",
            "--budget",
            "p100=1ms",
        ],
        &[
            "plan",
            "--qps",
            "5",
            "--events-per-request",
            "200",
            "--event-cost",
            "20us",
            "--budget",
            "p0=1ms",
        ],
        &[
            "plan",
            "--qps",
            "5",
            "--events-per-request",
            "200",
            "--event-cost",
            "20us",
            "--budget",
            "p99=-1ms",
        ],
        &[
            "plan",
            "--qps",
            "100",
            "--events-per-request",
            "200",
            "--burst",
            "200",
            "--event-cost",
            "20us",
            "--budget",
            "p99=1ms",
        ],
        &["model", "nosuch"],
        &[],
        // What one command may be asked to do is bounded by the product of its inputs.
        &[
            "sim",
            "--preset",
            "paper-1000",
            "--qps",
            "1e9",
            "--duration",
            "10s",
        ],
        &["sim", "--preset", "paper-1000", "--requests", "60000000"],
        &[
            "sim",
            "--preset",
            "paper-1000",
            "--requests",
            "40000000",
            "--output-tokens",
            "1000",
        ],
        &["run", "--requests", "18446744073709551615", "--qps", "10"],
        &["run", "--qps", "1e9", "--duration", "2s"],
        &[
            "sim",
            "queue",
            "--rate",
            "1",
            "--service",
            "exponential:mean=0.5s",
            "--customers",
            "18446744073709551615",
        ],
    ];
    for args in cases {
        let e = fails(args);
        assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        let msg = e.to_string();
        assert_eq!(msg.lines().count(), 1, "{args:?}: {msg:?}");
        assert!(!msg.is_empty());
    }
    let unstable =
        fails(&["model", "md1", "--rate", "60000", "--service-mean", "20us"]).to_string();
    assert!(
        unstable.contains("1.2000") && unstable.contains("at least 2 server(s)"),
        "{unstable}"
    );
    let negative = fails(&["model", "mg1", "--rate", "-5", "--service-mean", "20us"]).to_string();
    assert!(negative.contains("rate"), "{negative}");
}

#[test]
fn help_goes_to_stdout_and_succeeds() {
    let h = ok(&["--help"]);
    assert!(h.contains("plan") && h.contains("model"));
}

#[test]
fn sim_preset_json_and_out_file() {
    let dir = std::env::temp_dir().join(format!("heisenbench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sim.json");
    let p = path.to_str().unwrap();
    let v = json(&[
        "sim",
        "--preset",
        "paper-1000",
        "--duration",
        "1s",
        "--seed",
        "7",
        "--json",
        "--out",
        p,
    ]);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["scenario"]["seed"], 7);
    let single = num(&runs[0], "achieved_qps");
    let sharded = num(&runs[1], "achieved_qps");
    assert!(single < 300.0 && sharded > 950.0, "{single} {sharded}");
    // The file holds the same report, and a second run gives the same bytes.
    let file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(file, v);
    let again = ok(&[
        "sim",
        "--preset",
        "paper-1000",
        "--duration",
        "1s",
        "--seed",
        "7",
        "--json",
    ]);
    assert_eq!(serde_json::from_str::<Value>(&again).unwrap(), v);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_scenario_file_round_trip_and_bad_fields() {
    let dir = std::env::temp_dir().join(format!("heisenbench-scn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let v = json(&[
        "sim",
        "--preset",
        "paper-1000",
        "--duration",
        "200ms",
        "--json",
    ]);
    let scenario = &v["runs"][1]["scenario"];
    let good = dir.join("good.json");
    std::fs::write(&good, scenario.to_string()).unwrap();
    let again = json(&["sim", good.to_str().unwrap(), "--json"]);
    assert_eq!(
        again["runs"][0], v["runs"][1],
        "a report's scenario reproduces the report"
    );
    let bad = dir.join("bad.json");
    let mut broken = scenario.clone();
    broken["client"]["workers"] = serde_json::json!(0);
    std::fs::write(&bad, broken.to_string()).unwrap();
    let e = fails(&["sim", bad.to_str().unwrap()]);
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("client.workers"), "{e}");
    let e = fails(&["sim", dir.join("missing.json").to_str().unwrap()]);
    assert_eq!(e.exit_code(), 2);
    let e = fails(&["sim", "--preset", "paper-9"]);
    assert_eq!(e.exit_code(), 2);
    // A loop's slice must be a positive duration; a good one runs.
    let mut sliced = scenario.clone();
    sliced["client"]["costs"]["slice_s"] = serde_json::json!(0.0);
    std::fs::write(&bad, sliced.to_string()).unwrap();
    let e = fails(&["sim", bad.to_str().unwrap()]);
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("client.costs.slice_s"), "{e}");
    sliced["client"]["costs"]["slice_s"] = serde_json::json!(1e-5);
    std::fs::write(&bad, sliced.to_string()).unwrap();
    let ran = json(&["sim", bad.to_str().unwrap(), "--json"]);
    assert_eq!(
        ran["runs"][0]["scenario"]["client"]["costs"]["slice_s"],
        1e-5
    );
    // A loop's wait to wake is a service law like the costs, checked as one.
    let mut woken = scenario.clone();
    woken["client"]["costs"]["wake"] = serde_json::json!({"kind": "exponential", "mean_s": -1.0});
    std::fs::write(&bad, woken.to_string()).unwrap();
    let e = fails(&["sim", bad.to_str().unwrap()]);
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("client.costs.wake"), "{e}");
    // Each cost within its bound, their sum over a request past it.
    let mut costly = scenario.clone();
    costly["workload"]["output_tokens"] =
        serde_json::json!({"kind": "fixed", "tokens": 10_000_000});
    costly["workload"]["stop"] = serde_json::json!({"kind": "count", "requests": 3});
    costly["client"]["costs"]["chunk"] =
        serde_json::json!({"kind": "gamma", "mean_s": 1000.0, "scv": 0.5});
    std::fs::write(&bad, costly.to_string()).unwrap();
    let e = fails(&["sim", bad.to_str().unwrap()]);
    assert!(e.to_string().contains("client.costs"), "{e}");
    // A closed loop whose requests take no simulated time would never end.
    let mut timeless = scenario.clone();
    timeless["workload"]["arrivals"] =
        serde_json::json!({"kind": "closed", "users": 4, "think_s": 0.0});
    timeless["client"]["costs"] = serde_json::json!({});
    timeless["server"] = serde_json::json!({"max_num_seqs": 8});
    std::fs::write(&bad, timeless.to_string()).unwrap();
    let e = fails(&["sim", bad.to_str().unwrap()]);
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("never end"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every file is read within its kind's stated limit: an endless device is refused with
/// the limit named (after reading no more than it), and a byte-order mark is no error.
#[test]
fn files_are_read_within_their_limits() {
    for args in [
        vec!["merge", "/dev/zero"],
        vec!["sim", "/dev/zero"],
        vec!["compare", "/dev/zero"],
        vec!["run", "--config", "/dev/zero"],
        vec!["sim", "--preset", "paper-1000", "--trace", "/dev/zero"],
        vec!["figures", "/dev/zero", "--out", "/tmp"],
    ] {
        let e = fails(&args);
        assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        let msg = e.to_string();
        assert_eq!(msg.lines().count(), 1, "{args:?}: {msg}");
        assert!(
            msg.contains("cannot read") && msg.contains("MiB such a file may be"),
            "{args:?}: {msg}"
        );
    }
    let dir = tmpdir("bom");
    let v = json(&[
        "sim",
        "--preset",
        "paper-1000",
        "--duration",
        "100ms",
        "--json",
    ]);
    let path = dir.join("bom.json");
    let mut text = b"\xEF\xBB\xBF".to_vec();
    text.extend(v["runs"][0]["scenario"].to_string().bytes());
    std::fs::write(&path, text).unwrap();
    ok(&["sim", path.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_queue_textbook_json() {
    let v = json(&[
        "sim",
        "queue",
        "--rate",
        "0.5",
        "--service",
        "deterministic:mean=1s",
        "--customers",
        "200000",
        "--json",
    ]);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    // M/D/1 at rho 0.5: Wq = 0.5; the estimate is within a few of its half-widths.
    let mean = &results[0]["wait_mean_s"];
    assert!(
        (num(mean, "value") - 0.5).abs() < 3.0 * num(mean, "ci95"),
        "{mean}"
    );
    assert!((num(&v["model"], "wq_mean_s") - 0.5).abs() < 1e-12);
    for bad in [
        vec![
            "sim",
            "queue",
            "--rate",
            "2",
            "--service",
            "deterministic:mean=1s",
        ],
        vec![
            "sim",
            "queue",
            "--rate",
            "0.5",
            "--service",
            "weibull:mean=1s",
        ],
        vec![
            "sim",
            "queue",
            "--rate",
            "0.5",
            "--service",
            "gamma:mean=1s",
        ],
        vec![
            "sim",
            "queue",
            "--rate",
            "0.5",
            "--service",
            "gamma:mean=1s,scv=1",
            "--arrival",
            "gamma:shape=-1",
        ],
    ] {
        assert_eq!(fails(&bad).exit_code(), 2, "{bad:?}");
    }
}

#[test]
fn mock_bad_flags_exit_2() {
    for args in [
        vec!["mock", "--time-to-first-token", "-5ms"],
        vec!["mock", "--inter-token-latency", "-1"],
        vec!["mock", "--inter-token-latency", "fast"],
        vec!["mock", "--failure-types", "teapot"],
        vec!["mock", "--failure-injection-rate", "150"],
        vec!["mock", "--max-num-seqs", "0"],
        vec!["mock", "--time-factor-under-load", "0.5"],
        vec!["mock", "--time-factor-under-load", "1e308"],
        vec!["mock", "--max-num-seqs", "0"],
        vec!["mock", "--mode", "poetry"],
    ] {
        let e = fails(&args);
        assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{args:?}");
    }
}

/// Limits and messages agree: an open range says "at least", a bounded one its real
/// limit, an OS error is said once, and a rate far below any run is refused.
#[test]
fn messages_state_the_real_limits_once() {
    let e = fails(&[
        "model",
        "mxg1",
        "--rate",
        "1",
        "--service-mean",
        "1ms",
        "--batch",
        "0",
    ])
    .to_string();
    assert!(e.ends_with("'--batch <BATCH>': must be at least 1"), "{e}");
    let e = fails(&["run", "--shards", "2000"]).to_string();
    assert!(e.contains("1..=1024"), "{e}");
    let e = fails(&["model", "mm1", "--rate", "1e-320", "--service-mean", "1s"]).to_string();
    assert!(e.contains("between 1e-9 and 1e9 per second"), "{e}");
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    // The same fault, the same status, whichever command serves.
    let e = fails(&["mock", "--port", &port]);
    assert_eq!(e.exit_code(), 2);
    assert_eq!(fails(&["explore", "--port", &port]).exit_code(), 2);
    let msg = e.to_string();
    assert_eq!(msg.matches("in use").count(), 1, "{msg}");
    let e = fails(&["run", "--output-tokens", "20000000"]).to_string();
    assert!(e.contains("more than 10,000,000 tokens per request"), "{e}");
}

#[test]
fn run_bad_flags_exit_2() {
    for args in [
        vec!["run", "--qps", "0"],
        vec!["run", "--qps", "-3"],
        vec!["run", "--api", "soap"],
        vec!["run", "--trace", "/nonexistent/trace.txt"],
        vec!["run", "--shard-mode", "fork"],
        vec!["run", "--output-tokens", "many"],
        vec!["run", "--url", "ftp://x"],
        vec!["run", "--arrival", "bursty"],
        vec!["run", "--timeout", "-1s"],
        vec!["run", "/nonexistent/scenario.json"],
        vec!["run", "--tokenizer", "/nonexistent/tokenizer.json"],
        vec!["run", "--dataset", "/nonexistent/sharegpt.json"],
        vec!["run", "--dataset-min-tokens", "4"],
        vec!["run", "--turns", "3"],
        vec!["run", "--users", "2", "--turns", "0"],
        vec!["run", "--users", "2", "--turns", "3", "--no-stream"],
        vec!["run", "--users", "2", "--think-time", "-1s"],
        // Flags that would do nothing where they are given.
        vec!["run", "--users", "2", "--qps", "5"],
        vec!["run", "--users", "2", "--arrival", "constant"],
        vec!["sweep", "--from", "1", "--to", "2", "--shards", "3"],
        vec!["sweep", "--users", "1,2", "--steps", "3"],
        vec![
            "plan",
            "--qps",
            "10",
            "--events-per-request",
            "2",
            "--event-cost",
            "1us",
            "--budget",
            "p99=1ms",
            "--loops",
            "3",
        ],
        vec!["audit", "--rate", "7", "--drawn", "d.json", "--", "c"],
        vec![
            "sim",
            "--preset",
            "paper-1000",
            "--dataset",
            "/nonexistent/d.jsonl",
        ],
    ] {
        let e = fails(&args);
        assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{args:?}");
    }
    // A dataset that exists, with flags it cannot meet, and one with nothing in it.
    let dir = std::env::temp_dir().join(format!("heisenbench-cli-dataset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("d.jsonl");
    std::fs::write(&data, "{\"prompt\": \"a b c\"}\n").unwrap();
    let empty = dir.join("e.jsonl");
    std::fs::write(&empty, "{\"prompt\": \"\"}\n").unwrap();
    let (data, empty) = (data.to_str().unwrap(), empty.to_str().unwrap());
    for (args, says) in [
        (
            vec!["run", "--dataset", data, "--prompt-tokens", "5"],
            "gives each request's prompt",
        ),
        (
            vec![
                "run",
                "--dataset",
                data,
                "--prefix-groups",
                "2",
                "--prefix-tokens",
                "4",
            ],
            "no shared prefixes",
        ),
        (
            vec!["run", "--dataset", data, "--prompts", "repeated"],
            "a dataset gives them",
        ),
        (
            vec!["run", "--dataset", data, "--dataset-min-tokens", "4"],
            "none of its 1 entries",
        ),
        (vec!["run", "--dataset", empty], "none of its 1 entries"),
    ] {
        let e = fails(&args);
        assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        assert!(e.to_string().contains(says), "{args:?}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{args:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// With a tokenizer file, every prompt's length is the tokenizer's count, and the report
/// holds the server's usage against it. The embedded mock counts words and adds no BOS, so
/// every request must differ by exactly 0; without the file, by 0 as well (words are its
/// tokens), while the report says which of the two the counts mean.
#[test]
fn exact_prompts_are_checked_against_the_servers_usage() {
    let tokenizer = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../live/tests/fixtures/tokenizer/tiny-llama.json"
    );
    let dir = std::env::temp_dir().join(format!("heisenbench-prompts-{}", std::process::id()));
    let out = dir.join("run");
    let base = [
        "run",
        "--qps",
        "200",
        "--requests",
        "40",
        "--prompt-tokens",
        "uniform:1,300",
        "--output-tokens",
        "2",
        "--shard-mode",
        "thread",
        "--workers",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    let mut args = base.to_vec();
    args.extend(["--tokenizer", tokenizer]);
    let text = ok(&args);
    assert!(text.contains("prompt tokens exact for"), "{text}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let p = &r["prompt_tokens"];
    assert_eq!(p["checked"], 40, "{p}");
    assert_eq!(p["usual_overhead"], 0, "{p}");
    assert_eq!(p["mismatches"], 0, "{p}");
    assert_eq!(r["config"]["prompts"]["unit"], "the");
    assert_eq!(r["config"]["prompts"]["special_tokens"], 1);
    // The same seed without the tokenizer: the same lengths, said to be words.
    let text = ok(&base);
    assert!(text.contains("counted as words"), "{text}");
    let r2: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r2["prompt_tokens"]["sent"], p["sent"]);
    assert!(r2["config"]["prompts"]["tokenizer"].is_null());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn calibrate_then_plan_uses_the_measurement() {
    let dir = std::env::temp_dir().join(format!("heisenbench-cal-{}", std::process::id()));
    let file = dir.join("calibration.json");
    let f = file.to_str().unwrap();
    let c = json(&[
        "calibrate",
        "--duration",
        "500ms",
        "--qps",
        "100",
        "--out",
        f,
        "--json",
    ]);
    let mean = num(&c, "event_cost_mean_s");
    // A generator that spends more than a millisecond per event would be broken; less
    // than 10 ns is below what one HTTP chunk costs.
    assert!(mean > 1e-8 && mean < 1e-3, "{mean}");
    assert!(num(&c, "events") > 1000.0);
    let p = json(&[
        "plan",
        "--qps",
        "1000",
        "--events-per-request",
        "202",
        "--budget",
        "p99=1ms",
        "--calibration",
        f,
        "--json",
    ]);
    assert!(
        p["reasoning"][0]
            .as_str()
            .unwrap()
            .contains("measured by `heisenbench calibrate`")
    );
    assert!(p["workers"].as_u64().unwrap() >= 1);
    let missing = dir.join("none.json");
    let e = fails(&[
        "plan",
        "--qps",
        "1000",
        "--events-per-request",
        "202",
        "--budget",
        "p99=1ms",
        "--calibration",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("no calibration"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("heisenbench-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn compare_explains_a_textbook_client_and_flags_bursts() {
    let dir = tmpdir("compare");
    // One chunk per request at Poisson times, 20 us each, no send or finish work: M/G/1.
    let scenario = |tokens: u32, rate: f64| {
        serde_json::json!({
            "name": format!("{tokens} tokens"), "seed": 4,
            "workload": {
                "arrivals": {"kind": "poisson", "rate_per_s": rate},
                "stop": {"kind": "count", "requests": 200000 / tokens},
                "input_tokens": {"kind": "fixed", "tokens": 10},
                "output_tokens": {"kind": "fixed", "tokens": tokens}
            },
            "client": {"workers": 1, "policy": "random", "send_shares_loop": false,
                       "costs": {"chunk": {"kind": "gamma", "mean_s": 20e-6, "scv": 0.5}}},
            "server": {"max_num_seqs": 100000}
        })
    };
    for (tokens, rate, verdict) in [(1u32, 35_000.0, "client_bias"), (50, 500.0, "client_bias")] {
        let sc = dir.join(format!("s{tokens}.json"));
        std::fs::write(&sc, scenario(tokens, rate).to_string()).unwrap();
        let rep = dir.join(format!("r{tokens}.json"));
        ok(&["sim", sc.to_str().unwrap(), "--out", rep.to_str().unwrap()]);
        let v = json(&["compare", rep.to_str().unwrap(), "--json"]);
        let c = &v[0]["comparison"];
        assert_eq!(c["verdict"], verdict, "{c}");
        let err = c["rows"][0]["relative_error"].as_f64().unwrap();
        assert!(err.abs() <= 0.1, "{tokens} tokens: {err}");
        if tokens > 1 {
            // Bursts of 50: the batch model explains it, plain M/G/1 misses most of it.
            assert_eq!(c["model"], "M^X/G/1");
            let plain = c["plain_mg1"]["wq_mean_s"].as_f64().unwrap();
            let observed = c["rows"][0]["observed_s"].as_f64().unwrap();
            assert!(plain < observed / 5.0, "{plain} vs {observed}");
        } else {
            assert_eq!(c["model"], "M/G/1");
        }
    }
    // A foreign client's measurements.
    let foreign = dir.join("foreign.json");
    std::fs::write(&foreign, r#"{"requests_per_s": 2000, "events_per_request": 20, "event_cost_mean_s": 20e-6, "event_cost_scv": 1, "observed": {"mean_s": 0.0003}}"#).unwrap();
    let v = json(&["compare", foreign.to_str().unwrap(), "--json"]);
    assert_eq!(v[0]["comparison"]["verdict"], "beyond_client", "{v}");
    // The same load as events per second is the same comparison.
    std::fs::write(&foreign, r#"{"events_per_s": 40000, "event_cost_mean_s": 20e-6, "event_cost_scv": 1, "observed": {"mean_s": 0.0003}}"#).unwrap();
    let e = json(&["compare", foreign.to_str().unwrap(), "--json"]);
    assert_eq!(e[0]["comparison"]["rho"], v[0]["comparison"]["rho"]);
    // A rate that does not say what it counts is refused.
    for ambiguous in [
        r#"{"arrival_rate_per_s": 2000, "event_cost_mean_s": 20e-6, "observed": {"mean_s": 0.0003}}"#,
        r#"{"requests_per_s": 2000, "event_cost_mean_s": 20e-6, "observed": {"mean_s": 0.0003}}"#,
        r#"{"requests_per_s": 2000, "events_per_request": 20, "events_per_s": 40000, "event_cost_mean_s": 20e-6, "observed": {"mean_s": 0.0003}}"#,
    ] {
        std::fs::write(&foreign, ambiguous).unwrap();
        assert_eq!(
            fails(&["compare", foreign.to_str().unwrap()]).exit_code(),
            2,
            "{ambiguous}"
        );
    }
    std::fs::write(&foreign, "{}").unwrap();
    assert_eq!(
        fails(&["compare", foreign.to_str().unwrap()]).exit_code(),
        2
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sweep_finds_the_knee_of_the_builtin_server() {
    // 8 slots x 69 ms per request: the server saturates at 116 req/s. With a p99 budget of
    // 100 ms the knee sits below saturation; it must not be above it, nor far below.
    let v = json(&[
        "sweep",
        "--from",
        "40",
        "--to",
        "160",
        "--steps",
        "7",
        "--stage-duration",
        "10s",
        "--json",
    ]);
    let knee = v["knee_qps"].as_f64().expect("a knee");
    assert!((60.0..116.0).contains(&knee), "{knee}");
    assert!(v["stages"].as_array().unwrap().len() >= 4);
}

#[test]
fn live_sweep_against_a_configured_mock() {
    use heisenbench_live::mock::{MockServer, config::MockConfig};
    // 2 slots, 50 ms per one-token request: saturation at 40 req/s.
    let m = MockServer::start(MockConfig {
        port: 0,
        max_num_seqs: 2,
        time_to_first_token: std::time::Duration::from_millis(50),
        ..MockConfig::default()
    })
    .unwrap();
    let v = json(&[
        "sweep",
        "--url",
        &m.url(),
        "--from",
        "10",
        "--to",
        "70",
        "--steps",
        "3",
        "--stage-duration",
        "1500ms",
        "--output-tokens",
        "1",
        "--max-p99",
        "400ms",
        "--workers",
        "1",
        "--json",
    ]);
    assert_eq!(v["knee_qps"].as_f64(), Some(10.0), "{v}");
}

#[test]
fn reproduce_smoke_writes_every_file() {
    let dir = tmpdir("reproduce");
    let text = ok(&["reproduce", "--smoke", "--out", dir.to_str().unwrap()]);
    assert!(text.contains("single-process clients collapse"), "{text}");
    for stem in heisenbench_figures::Figure::ALL.map(heisenbench_figures::Figure::stem) {
        for ext in ["png", "svg"] {
            let f = dir.join(format!("{stem}.{ext}"));
            assert!(
                std::fs::metadata(&f)
                    .map(|m| m.len() > 1000)
                    .unwrap_or(false),
                "{} missing or empty",
                f.display()
            );
        }
    }
    for f in [
        "figure-data.json",
        "reports.json",
        "summary.md",
        "summary.html",
    ] {
        assert!(
            std::fs::metadata(dir.join(f))
                .map(|m| m.len() > 100)
                .unwrap_or(false),
            "{f}"
        );
    }
    let html = std::fs::read_to_string(dir.join("summary.html")).unwrap();
    assert_eq!(
        html.matches("data:image/png;base64,").count(),
        heisenbench_figures::Figure::ALL.len()
    );
    // The figures redraw from the data file alone.
    let again = tmpdir("redraw");
    ok(&[
        "figures",
        dir.join("figure-data.json").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(again.join("9-policies.svg").exists());
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&again).unwrap();
}

mod hostile {
    //! Any number, however absurd, in any numeric input: a result or one clear error line,
    //! never a panic, a hang or an output on failure. The guard (60 s a case) only catches
    //! a computation that does not return; it measures nothing.

    use proptest::prelude::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Numbers a hostile user would try, as the command line spells them.
    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("NaN".to_string()),
            Just("inf".to_string()),
            Just("-inf".to_string()),
            Just("0".to_string()),
            Just("-1".to_string()),
            Just("5e-324".to_string()),
            Just("1e-30".to_string()),
            Just("1e308".to_string()),
            Just("0.9999999999".to_string()),
            Just("18446744073709551615".to_string()),
            Just("4294967295".to_string()),
            any::<f64>().prop_map(|v| v.to_string()),
            (0.0f64..2.0).prop_map(|v| v.to_string()),
            (1u64..1_000_000).prop_map(|v| v.to_string()),
        ]
    }

    /// Runs `args` in process on its own thread; returns whether it succeeded, or panics
    /// with what went wrong (a panic inside, a hang, output on failure, a multi-line error).
    fn survives(args: Vec<String>) -> bool {
        let (tx, rx) = mpsc::channel();
        let shown = args.clone();
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let argv = std::iter::once("heisenbench".to_string()).chain(args);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                heisenbench::run(argv, &mut out)
            }));
            let _ = tx.send(r.map(|r| (r.map_err(|e| (e.exit_code(), e.to_string())), out)));
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Err(_) => panic!("{shown:?} did not return within 60 s"),
            Ok(Err(_)) => panic!("{shown:?} panicked"),
            Ok(Ok((Ok(()), _))) => true,
            Ok(Ok((Err((code, msg)), out))) => {
                assert!(out.is_empty(), "{shown:?} printed before failing");
                assert_eq!(code, 2, "{shown:?}: bad input is exit 2: {msg}");
                assert_eq!(msg.lines().count(), 1, "{shown:?}: {msg}");
                assert!(msg.len() < 400, "{shown:?}: {msg}");
                false
            }
        }
    }

    fn s(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|p| p.to_string()).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn queue_models_take_any_number(
            model in prop::sample::select(vec!["mm1", "md1", "mg1", "mxg1", "ekg1", "gg1", "mmc", "mgc"]),
            rate in number(), mean in number(), scv in number(), count in number(),
            unit in prop::sample::select(vec!["s", "us", "ns"]),
        ) {
            let mut args = s(&["model", model, "--rate", &rate, "--service-mean", &format!("{mean}{unit}")]);
            match model {
                "mg1" | "gg1" => args.extend(s(&["--service-scv", &scv])),
                "mxg1" => args.extend(s(&["--batch", &count])),
                "ekg1" => args.extend(s(&["--k", &count])),
                "mmc" => args.extend(s(&["--servers", &count])),
                "mgc" => args.extend(s(&["--servers", &count, "--service-scv", &scv])),
                _ => {}
            }
            if model == "gg1" {
                args.extend(s(&["--arrival-scv", &scv]));
            }
            survives(args);
        }

        #[test]
        fn plan_takes_any_number(
            qps in number(), events in number(), cost in number(), budget in number(),
        ) {
            survives(s(&[
                "plan", "--qps", &qps, "--events-per-request", &events,
                "--event-cost", &format!("{cost}us"), "--budget", &format!("p99={budget}ms"),
            ]));
        }

        #[test]
        fn scenario_files_take_any_number(
            rate in number(), tokens in number(), cost in number(), itl in number(), workers in number(),
        ) {
            let text = format!(
                r#"{{"name":"h","seed":1,"workload":{{"arrivals":{{"kind":"poisson","rate_per_s":{rate}}},
                "stop":{{"kind":"count","requests":3}},"input_tokens":{{"kind":"fixed","tokens":{tokens}}},
                "output_tokens":{{"kind":"fixed","tokens":2}}}},"client":{{"workers":{workers},
                "costs":{{"chunk":{{"kind":"deterministic","mean_s":{cost}}}}}}},
                "server":{{"inter_token_latency_s":{itl}}}}}"#
            );
            // Whatever JSON accepts must validate or be refused, without a panic.
            if let Ok(sc) = heisenbench_sim::scenario::SimScenario::from_json(&text) {
                let _ = sc.validate();
            }
        }
    }

    #[test]
    fn regression_absurd_values_are_refused_not_clamped_or_run() {
        // Class 1 and 5: a per-chunk cost of 1e300 s, a sub-nanosecond mean, a 343 GB sim.
        for args in [
            s(&["model", "mg1", "--rate", "1", "--service-mean", "1e-30s"]),
            s(&["sim", "--preset", "paper-1000", "--workers", "4294967295"]),
            s(&[
                "model",
                "mxg1",
                "--rate",
                "1",
                "--service-mean",
                "1ms",
                "--batch",
                "1000000000",
            ]),
            s(&[
                "model",
                "mmc",
                "--rate",
                "1",
                "--service-mean",
                "1s",
                "--servers",
                "4000000000",
            ]),
            s(&[
                "model",
                "mg1",
                "--rate",
                "1",
                "--service-mean",
                "1ms",
                "--service-scv",
                "1e-300",
            ]),
            s(&["run", "--prompt-tokens", "4000000000", "--qps", "1"]),
            s(&["run", "--workers", "100000", "--qps", "1"]),
            s(&["sweep", "--from", "1e300", "--to", "1e301"]),
            s(&["sweep", "--from", "1", "--to", "2", "--min-achieved", "1.5"]),
            s(&["sweep", "--from", "1", "--to", "2", "--min-achieved", "NaN"]),
            s(&["run", "--seed", "-1"]),
        ] {
            assert!(!survives(args.clone()), "{args:?} was accepted");
        }
    }

    #[test]
    fn regression_near_critical_load_returns() {
        // Class 2: M/D/1 at rho 1 - 1e-10 used to run for minutes.
        for rho in ["0.999999", "0.9999999999"] {
            assert!(survives(s(&[
                "model",
                "md1",
                "--rate",
                rho,
                "--service-mean",
                "1s"
            ])));
        }
        assert!(survives(s(&[
            "model",
            "mxg1",
            "--rate",
            "0.001",
            "--service-mean",
            "1us",
            "--batch",
            "1000000",
        ])));
    }
}

mod lattice_vs_simulation {
    //! The GI/G/1 lattice solution against the simulator's Lindley recursion (an
    //! independent method: sampled gaps and services, batch-means intervals), on a
    //! representative dozen of the exact-models grid. `bench/lindley-grid.sh` runs all of it.
    //!
    //! Tolerance: 3 half-widths of the 95 % interval (the estimate lands inside with
    //! probability far above 0.99 if the model is right), plus the lattice's own error
    //! estimate, plus 0.2 % for the simulator's HDR histogram rounding of quantiles.

    use heisenbench_model::gig1::Gig1;
    use heisenbench_model::queue::WaitModel;
    use heisenbench_model::service::Service;
    use heisenbench_sim::textbook::{Gaps, QueueSpec, lindley};

    fn check(k: u32, rho: f64, service: Service) {
        let model = Gig1::erlang(k, rho / service.mean_s(), 1, service.clone()).unwrap();
        let spec = QueueSpec {
            rate_per_s: rho / service.mean_s(),
            gaps: Gaps::Gamma {
                shape: f64::from(k),
            },
            service: service.clone(),
            customers: 2_000_000,
            warmup: 200_000,
            batches: 32,
            seed: 11,
        };
        let sim = lindley(&spec);
        let err = model.wait_mean_error_s().unwrap_or(0.0);
        let label = format!("E_{k}/{service:?}/1 rho {rho}");
        assert!(
            sim.wait_mean_s.covers(model.wait_mean_s(), 3.0, err),
            "{label}: mean {} vs simulated {:?}",
            model.wait_mean_s(),
            sim.wait_mean_s
        );
        assert!(
            sim.p_wait.covers(model.p_wait(), 3.0, 0.002),
            "{label}: P(wait) {} vs simulated {:?}",
            model.p_wait(),
            sim.p_wait
        );
        for (q, est) in &sim.wait_quantiles_s {
            let m = model.wait_quantile_s(*q);
            assert!(
                est.covers(m, 3.0, 0.002 * m + err),
                "{label}: {q:?} {m} vs simulated {est:?}"
            );
        }
    }

    #[test]
    fn a_dozen_of_the_grid() {
        let d = Service::deterministic(1.0).unwrap();
        let m = Service::exponential(1.0).unwrap();
        let g05 = Service::gamma(1.0, 0.5).unwrap();
        let g4 = Service::gamma(1.0, 4.0).unwrap();
        let ln1 = Service::lognormal(1.0, 1.0).unwrap();
        let ln4 = Service::lognormal(1.0, 4.0).unwrap();
        for (k, rho, s) in [
            (2, 0.5, &d),
            (21, 0.952, &d),
            (100, 0.9, &d),
            (4, 0.8, &m),
            (21, 0.95, &m),
            (2, 0.9, &g05),
            (21, 0.8, &g05),
            (4, 0.5, &g4),
            (2, 0.8, &g4),
            (4, 0.9, &ln1),
            (100, 0.5, &ln1),
            (2, 0.8, &ln4),
        ] {
            check(k, rho, s.clone());
        }
    }
}

mod hardening_classes {
    //! One regression test per class of the hardening review that the property tests and
    //! the binary tests (signals, lost shards) do not already cover by name.

    use super::{fails, ok};

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("heisenbench-hc-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn class_5_merge_sums_never_wrap_and_impossible_shards_are_refused() {
        let dir = tmp("merge");
        let out = dir.join("s");
        ok(&[
            "run",
            "--qps",
            "200",
            "--requests",
            "20",
            "--output-tokens",
            "2",
            "--workers",
            "1",
            "--shard-mode",
            "thread",
            "--shard",
            "0/2",
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--timeout",
            "1s",
            "--out",
            out.to_str().unwrap(),
        ]);
        let text = std::fs::read_to_string(out.join("shard-0.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        // A counter at u64::MAX plus the other shards must not wrap into a small number.
        v["result"]["outcomes"]["connect_failed"] = serde_json::json!(u64::MAX);
        let wrapped = dir.join("wrapped.json");
        std::fs::write(&wrapped, v.to_string()).unwrap();
        let mut printed = Vec::new();
        let e = heisenbench::run(
            ["heisenbench", "merge", wrapped.to_str().unwrap()],
            &mut printed,
        )
        .expect_err("a sum that cannot be held does not balance");
        assert_eq!(e.exit_code(), 3, "{e}");
        assert!(
            e.to_string().contains("the accounting does not balance"),
            "{e}"
        );
        assert!(String::from_utf8_lossy(&printed).contains("NOT BALANCED"));
        // Index 7 of 2, and a shard count of 0.
        for (key, value) in [("shard", 7), ("shards", 0)] {
            let mut bad: serde_json::Value = serde_json::from_str(&text).unwrap();
            bad[key] = serde_json::json!(value);
            let f = dir.join(format!("bad-{key}.json"));
            std::fs::write(&f, bad.to_string()).unwrap();
            let e = fails(&["merge", f.to_str().unwrap()]);
            assert_eq!(e.exit_code(), 2, "{key}: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn class_6_bad_data_is_refused_with_its_name() {
        let dir = tmp("data");
        let foreign = |extra: &str| {
            format!(
                r#"{{"events_per_s": 1000, "event_cost_mean_s": 0.0002, {extra} "observed": {{"mean_s": 0.001}}}}"#
            )
        };
        for (name, text, needle) in [
            ("burst0", foreign(r#""burst": 0,"#), "burst"),
            ("rr0", foreign(r#""round_robin_k": 0,"#), "round_robin_k"),
            ("typo", foreign(r#""brust": 4,"#), "brust"),
            (
                "negative",
                r#"{"events_per_s": 1000, "event_cost_mean_s": 0.0002, "observed": {"mean_s": -1}}"#.into(),
                "observed wait",
            ),
            ("empty", r#"{"kind": "sim", "runs": []}"#.into(), "no runs"),
        ] {
            let f = dir.join(format!("{name}.json"));
            std::fs::write(&f, text).unwrap();
            let e = fails(&["compare", f.to_str().unwrap()]);
            assert_eq!(e.exit_code(), 2, "{name}: {e}");
            assert!(e.to_string().contains(needle), "{name}: {e}");
        }
        // A scenario with a misspelt field is refused with the field's name.
        let f = dir.join("scenario.json");
        std::fs::write(
            &f,
            r#"{"workload":{"arrivals":{"kind":"poisson","rate_per_s":10},"stop":{"kind":"count","requests":3},
               "input_tokens":{"kind":"fixed","tokens":2},"output_tokens":{"kind":"fixed","tokens":2}},
               "client":{"workers":1,"polcy":"random"}}"#,
        )
        .unwrap();
        let e = fails(&["sim", f.to_str().unwrap()]);
        assert!(e.to_string().contains("polcy"), "{e}");
        // k8s: an invalid namespace, an empty image, a flag the pods would never see.
        for extra in [
            &["--namespace", "Bad_NS"][..],
            &["--image", ""],
            &["--out", "/tmp/x"],
        ] {
            let mut args = vec![
                "k8s",
                "--shards",
                "2",
                "--url",
                "http://s:1",
                "--model",
                "m",
                "--qps",
                "5",
            ];
            args.extend_from_slice(extra);
            assert_eq!(fails(&args).exit_code(), 2, "{extra:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn class_7_errors_name_what_is_missing() {
        let e = fails(&["model", "md1"]);
        assert!(e.to_string().contains("--rate"), "{e}");
        assert!(e.to_string().contains("--service-mean"), "{e}");
        let e = fails(&["run", "--seed", "-1"]);
        assert!(e.to_string().contains("must not be negative"), "{e}");
        let long = format!("1{}", "0".repeat(300));
        let e = fails(&["model", "mm1", "--rate", &long, "--service-mean", "1s"]);
        assert!(e.to_string().len() < 200, "{e}");
    }

    #[test]
    fn class_8_outputs_are_checked_before_the_work() {
        let dir = tmp("files");
        // A directory where a file is wanted: refused, and nothing left behind.
        let e = fails(&[
            "sim",
            "--preset",
            "paper-1000",
            "--duration",
            "100ms",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(e.exit_code(), 2, "{e}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        // reproduce into an existing file: refused at once, before minutes of runs.
        let file = dir.join("a-file");
        std::fs::write(&file, "x").unwrap();
        let t0 = std::time::Instant::now();
        let e = fails(&["reproduce", "--out", file.to_str().unwrap()]);
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "it started working first"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn plan_check_simulates_the_chosen_count_and_one_fewer() {
    // Round robin over single-burst requests: the lattice E_k^X/D/1 against the simulator.
    let v = json(&[
        "plan",
        "--qps",
        "300",
        "--events-per-request",
        "50",
        "--burst",
        "50",
        "--event-cost",
        "20us",
        "--budget",
        "p99=2ms",
        "--assignment",
        "round-robin",
        "--check",
        "--json",
    ]);
    let checks = v["checks"].as_array().unwrap();
    assert!(!checks.is_empty() && checks.len() <= 2, "{v}");
    assert_eq!(checks[0]["workers"], v["workers"]);
    for c in checks {
        assert_eq!(c["agrees"], true, "{c}");
        assert!(c["events"].as_u64().unwrap() >= 1_000_000);
    }
}

/// Pooled loops are sized by simulating the pool: the count chosen meets the budget in the
/// simulation and one fewer does not, whatever the approximate model said.
#[test]
fn pooled_plans_are_sized_by_simulating_the_pool() {
    for burst in ["1", "20"] {
        let v = json(&[
            "plan",
            "--qps",
            "1000",
            "--events-per-request",
            "20",
            "--burst",
            burst,
            "--event-cost",
            "100us",
            "--event-cost-scv",
            "4",
            "--budget",
            "p99=1ms",
            "--policy",
            "pooled",
            "--json",
        ]);
        let checks = v["checks"].as_array().unwrap();
        assert_eq!(checks[0]["workers"], v["workers"], "{v}");
        let sim = |c: &Value| c["simulated_s"].as_f64().unwrap();
        assert!(sim(&checks[0]) <= 1e-3, "{v}");
        if let Some(fewer) = checks.get(1) {
            assert!(sim(fewer) > 1e-3, "{v}");
        }
        assert!(
            v["reasoning"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l.as_str().unwrap().contains("sized by simulating")),
            "{v}"
        );
    }
}

/// `run --floor` measures this machine's loopback floor after the run, at the run's chunk
/// rate, stores it in the report and prints the overhead as multiples of it.
#[test]
fn run_floor_is_measured_and_reported() {
    let dir = tmpdir("floor");
    let text = ok(&[
        "run",
        "--qps",
        "200",
        "--requests",
        "40",
        "--output-tokens",
        "20",
        "--shard-mode",
        "thread",
        "--workers",
        "1",
        "--floor",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        text.contains("over this machine's loopback floor"),
        "{text}"
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let f = &r["floor"];
    // 2 s at 1,000 messages/s less the 0.1 s warm-up: about 1,900 idle samples.
    let idle = f["idle"]["count"].as_u64().unwrap();
    assert!((1_800..=2_000).contains(&idle), "{f}");
    assert!(f["loaded_rate_per_s"].as_f64().unwrap() >= 1_000.0, "{f}");
    assert!(f["idle"]["p50_s"].as_f64().unwrap() > 0.0, "{f}");
    // Measured by this build's method (kernel arrival stamps), with its reader's lag for
    // every message, and compared with the run's own read lag.
    assert_eq!(f["revision"], 2, "{f}");
    assert_eq!(f["idle_read_lag"]["count"].as_u64(), Some(idle), "{f}");
    assert!(text.contains("read lag over the floor's reader"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `model prefix-cache`: every prefix fits and nothing else comes, so every request after
/// the first finds all of its prefix but the block holding its last token (7 of 8 blocks);
/// with one-use blocks and a small cache, Che's rate is below it.
#[test]
fn model_prefix_cache_predicts_che() {
    let fits = json(&[
        "model",
        "prefix-cache",
        "--groups",
        "8",
        "--prefix-tokens",
        "128",
        "--capacity",
        "100000",
        "--json",
    ]);
    assert_eq!(fits["token_hit_rate"], 0.875);
    assert!(fits["characteristic_requests"].is_null());
    let tight = json(&[
        "model",
        "prefix-cache",
        "--groups",
        "100",
        "--prefix-tokens",
        "128",
        "--own-tokens",
        "32",
        "--popularity",
        "zipf:1",
        "--capacity",
        "400",
        "--json",
    ]);
    let rate = tight["token_hit_rate"].as_f64().unwrap();
    assert!((rate - 0.5569).abs() < 5e-4, "{rate}");
}

/// Conversations through the command line: the report's JSON carries TTFT by turn, and the
/// report page a table of it, one row a turn.
#[test]
fn conversations_are_reported_by_turn() {
    let dir = std::env::temp_dir().join(format!("heisenbench-turns-{}", std::process::id()));
    let out = dir.join("run");
    ok(&[
        "run",
        "--users",
        "2",
        "--turns",
        "3",
        "--requests",
        "12",
        "--prompt-tokens",
        "6",
        "--output-tokens",
        "3",
        "--shard-mode",
        "thread",
        "--workers",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let turns = report["ttft_by_turn"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    assert!(turns.iter().all(|d| d["count"] == 4), "{turns:?}");
    // Two conversations a user; turn t re-sends 6 + 3 tokens a turn before it.
    assert_eq!(report["throughput"]["input_tokens"], 4 * (6 + 15 + 24));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("by conversation turn"),
        "the page's turn table"
    );
    assert!(html.contains("in conversations of 3 turns"));
    std::fs::remove_dir_all(&dir).ok();
}
