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
    run_json_exit(args, env, 0)
}

/// The JSON report of a command that must exit with `status`.
fn run_json_exit(args: &[&str], env: &[(&str, &str)], status: i32) -> Value {
    let (code, out, err) = heisenbench(args, env);
    assert_eq!(code, status, "{args:?}: {err}");
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
        &[&base[..], &["--shards", "1", "--shard-mode", "thread"]].concat(),
        &[],
    );
    let procs = run_json(
        &[&base[..], &["--shards", "3", "--shard-mode", "process"]].concat(),
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

/// A shard process that dies halfway (the fault is injected through `RunOptions`, and
/// reaches the shard process in its task) is reported, and its slice counted as lost.
#[test]
fn a_killed_shard_is_reported_and_its_requests_lost() {
    use heisenbench_live::mock::MockServer;
    use heisenbench_live::mock::config::MockConfig;

    use heisenbench_live::generator::config::{RunConfig, ShardMode};
    use heisenbench_live::generator::{RunOptions, run};
    use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};

    let mock = MockServer::start(MockConfig {
        port: 0,
        ..MockConfig::default()
    })
    .unwrap();
    let cfg = RunConfig {
        timeout_s: Some(10.0),
        shards: 2,
        shard_mode: ShardMode::Process,
        ..RunConfig::streaming(
            "crash",
            Workload {
                arrivals: Arrivals::Poisson { rate_per_s: 200.0 },
                stop: Stop::Duration { seconds: 1.0 },
                input_tokens: Lengths::Fixed { tokens: 4 },
                output_tokens: Lengths::Fixed { tokens: 5 },
                prefix: None,
                dataset: None,
            },
            &mock.url(),
            &MockConfig::default().model,
        )
    };
    let cfg = cfg.checked().unwrap();
    let r = run(
        &cfg,
        &RunOptions {
            exe: Some(env!("CARGO_BIN_EXE_heisenbench").into()),
            crash_shard: Some(1),
            ..RunOptions::default()
        },
    )
    .unwrap();
    mock.shutdown();
    assert!(r.shards[0].ok);
    assert!(!r.shards[1].ok);
    let error = r.shards[1].error.clone().unwrap_or_default();
    assert!(error.contains("exited"), "{error}");
    let a = &r.accounting;
    assert!(a.balanced);
    assert_eq!(a.lost, r.shards[1].scheduled);
    assert!(a.lost > 50, "{}", a.lost);
    assert_eq!(a.completed, r.shards[0].scheduled);
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
            "--shards",
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
    // Every chunk through the shard's own reader carries the kernel's arrival stamp, and
    // the time its read returned: a read lag for each.
    let events = report["events"].as_u64().unwrap();
    assert!(events > 0);
    assert_eq!(report["read_lag"]["count"].as_u64(), Some(events));
    let csv = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), 41);
    // The mock's stamp of each first token lies between the request's send and the
    // token's arrival (one host, one clock), so a row's overhead can be read off it.
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    // The write of the request begins after its send and before the mock's first token.
    let (sent, write, first, server) = (
        col("sent_ns"),
        col("write_ns"),
        col("first_token_ns"),
        col("first_token_server_ns"),
    );
    for row in csv.lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        let ns = |i: usize| -> u64 { f[i].parse().unwrap() };
        let (s, w, m, a) = (ns(sent), ns(write), ns(server), ns(first));
        assert!(
            s <= w && w <= m && m <= a,
            "sent {s}, write {w}, server stamp {m}, arrival {a}: {row}"
        );
    }
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
            "--shards",
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

/// A server that answers every request 401 and quotes the request's authorization header
/// (and its request line, which holds the URL's query) in its error message, as some
/// gateways do.
fn echoing_server() -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in l.incoming().take(32) {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&got).to_string();
                let quoted: Vec<&str> = head
                    .lines()
                    .filter(|l| l.starts_with("POST") || l.starts_with("authorization"))
                    .collect();
                let body = format!(
                    "{{\"error\":{{\"message\":\"refused {}\"}}}}",
                    quoted.join(" | ")
                );
                let reply = format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes());
            });
        }
    });
    format!("http://{addr}")
}

/// A key the server echoes back, and a key in the URL's query, reach neither stdout,
/// stderr nor any file of the report; a key that would inject a header, and a variable
/// that is not set, are refused before anything is sent.
#[test]
fn an_echoed_key_is_redacted_and_a_bad_key_is_refused() {
    let url = format!("{}/v1?api-key=sk-query-secret-77", echoing_server());
    let dir = std::env::temp_dir().join(format!("hb-secret-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_s = dir.display().to_string();
    let args = [
        "run",
        "--url",
        &url,
        "--model",
        "m",
        "--qps",
        "50",
        "--requests",
        "3",
        "--shards",
        "1",
        "--server-metrics",
        "off",
        "--api-key-env",
        "HB_ECHO_KEY",
        "--out",
        &dir_s,
    ];
    let (code, out, err) = heisenbench(&args, &[("HB_ECHO_KEY", "sk-echoed-secret-42")]);
    assert_eq!(code, 0, "failed requests are accounted for: {out}{err}");
    assert!(out.contains("failed http_401 3"), "{out}");
    // Nothing completed: no rate over a zero span, no quantile of nothing printed as 0 s.
    assert!(out.contains("; completed none\n"), "{out}");
    assert!(
        out.contains("TTFT from intended           none measured"),
        "{out}"
    );
    assert!(
        out.contains("refused POST"),
        "the server's words are kept: {out}"
    );
    let mut texts = vec![out.clone(), err];
    for entry in std::fs::read_dir(&dir).unwrap() {
        texts.push(std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    assert!(texts.len() > 3, "the report's files were written");
    for t in &texts {
        for secret in ["sk-echoed-secret-42", "sk-query-secret-77"] {
            assert!(!t.contains(secret), "{secret} leaked: {t}");
        }
    }
    assert!(out.contains("Bearer ***"), "{out}");
    assert!(
        out.contains("POST /v1/completions?api-key=*** HTTP/1.1"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    let mut bad = args.to_vec();
    bad.truncate(bad.len() - 2);
    let (code, out, err) = heisenbench(&bad, &[("HB_ECHO_KEY", "k\r\nx-injected: yes")]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("carriage return") && !err.contains("injected"),
        "{err}"
    );
    let (code, _, err) = heisenbench(&bad, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("HB_ECHO_KEY: the variable is not set"),
        "{err}"
    );
}

mod distributed {
    use super::*;
    use heisenbench_live::mock::MockServer;
    use heisenbench_live::mock::config::MockConfig;

    fn mock() -> MockServer {
        MockServer::start(MockConfig {
            port: 0,
            max_num_seqs: 1000,
            ..MockConfig::default()
        })
        .unwrap()
    }

    fn plan_args(url: &str, seed: &str) -> Vec<String> {
        [
            "run",
            "--url",
            url,
            "--qps",
            "300",
            "--requests",
            "150",
            "--output-tokens",
            "uniform:1,30",
            "--prompt-tokens",
            "16",
            "--seed",
            seed,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn shard_files(url: &str, seed: &str, shards: &[u32], of: u32, dir: &std::path::Path) {
        let start = format!(
            "{:.3}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
                // Time for every shard process to start on a loaded machine: a shard that
                // starts after its --start-at keeps the plan, and its slip shows it.
                + 2.0
        );
        let children: Vec<_> = shards
            .iter()
            .map(|i| {
                let mut args = plan_args(url, seed);
                args.extend([
                    "--shard".into(),
                    format!("{i}/{of}"),
                    "--start-at".into(),
                    start.clone(),
                    "--out".into(),
                    dir.display().to_string(),
                ]);
                // Started together (each waits for the common start), then waited for.
                Command::new(env!("CARGO_BIN_EXE_heisenbench"))
                    .args(&args)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map(|child| (child, args))
            })
            .collect();
        for c in children {
            let (child, args) = c.unwrap();
            let o = child.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }

    #[test]
    fn shards_run_separately_then_merged_equal_one_sharded_run() {
        let m = mock();
        let dir = std::env::temp_dir().join(format!("heisenbench-shards-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        shard_files(&m.url(), "3", &[0, 1, 2], 3, &dir);
        let files: Vec<String> = (0..3)
            .map(|i| dir.join(format!("shard-{i}.json")).display().to_string())
            .collect();
        let mut margs = vec!["merge".to_string()];
        margs.extend(files.clone());
        margs.push("--json".into());
        let margs: Vec<&str> = margs.iter().map(String::as_str).collect();
        let merged = run_json(&margs, &[]);
        let mut rargs = plan_args(&m.url(), "3");
        rargs.extend([
            "--shards".into(),
            "3".into(),
            "--shard-mode".into(),
            "process".into(),
            "--json".into(),
        ]);
        let rargs: Vec<&str> = rargs.iter().map(String::as_str).collect();
        let local = run_json(&rargs, &[]);
        assert_eq!(merged["plan_hash"], local["plan_hash"]);
        for key in ["scheduled", "completed", "lost", "balanced"] {
            assert_eq!(merged["accounting"][key], local["accounting"][key], "{key}");
        }
        assert_eq!(merged["accounting"]["completed"], 150);
        assert_eq!(merged["tokens_stream"], local["tokens_stream"]);
        assert_eq!(merged["events"], local["events"]);
        // Every histogram holds every request exactly once.
        assert_eq!(merged["ttft"]["from_intended"]["count"], 150);
        assert_eq!(merged["merged"]["recorders"]["send_lag"]["count"], 150);
        for s in merged["shards"].as_array().unwrap() {
            assert_eq!(s["ok"], true);
            assert!(s["start_slip_s"].as_f64().unwrap().abs() < 0.5, "{s}");
            assert!(
                s["clock_offset_estimate_s"].as_f64().unwrap().abs() <= 1.5,
                "same host: {s}"
            );
        }

        // A missing shard is named and its slice counted as lost.
        let partial = run_json_exit(&["merge", &files[0], &files[2], "--json"], &[], 3);
        assert_eq!(partial["merge_notes"]["missing"], serde_json::json!([1]));
        assert_eq!(partial["accounting"]["lost"], 50);
        assert_eq!(partial["accounting"]["balanced"], true);
        // A duplicate is named, not counted twice.
        let dup = run_json(
            &[
                "merge", &files[0], &files[0], &files[1], &files[2], "--json",
            ],
            &[],
        );
        assert_eq!(dup["merge_notes"]["duplicated"], serde_json::json!([0]));
        assert_eq!(dup["accounting"]["completed"], 150);

        // Results of another plan are refused.
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        shard_files(&m.url(), "4", &[1], 3, &other);
        let (code, _, err) = heisenbench(
            &[
                "merge",
                &files[0],
                other.join("shard-1.json").to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(code, 2);
        assert!(err.contains("different plans"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pod_logs_with_markers_merge() {
        let m = mock();
        let dir = std::env::temp_dir().join(format!("heisenbench-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut logs = String::from("some pod noise\n");
        for i in 0..2 {
            let mut args = plan_args(&m.url(), "5");
            args.extend(["--shard".into(), format!("{i}/2")]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, out, err) = heisenbench(&args, &[]);
            assert_eq!(code, 0, "{err}");
            logs += &out;
        }
        let log = dir.join("pods.log");
        std::fs::write(&log, logs).unwrap();
        let merged = run_json(&["merge", log.to_str().unwrap(), "--json"], &[]);
        assert_eq!(merged["accounting"]["completed"], 150);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The text of a merge is the run's own summary: shards whose every request failed
    /// show the failures and their cause, not "completed 0 (balanced)".
    #[test]
    fn a_merge_of_failed_requests_says_so() {
        let dir = std::env::temp_dir().join(format!("heisenbench-failed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", refused.local_addr().unwrap());
        drop(refused);
        let mut args = plan_args(&url, "5");
        args.extend([
            "--model".into(),
            "m".into(),
            "--server-metrics".into(),
            "off".into(),
            "--shard".into(),
            "0/1".into(),
            "--out".into(),
            dir.display().to_string(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = heisenbench(&args, &[]);
        assert_eq!(code, 0, "{err}");
        let file = dir.join("shard-0.json");
        let (code, out, err) = heisenbench(&["merge", file.to_str().unwrap()], &[]);
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("merged 1 of 1 shard(s) of plan "), "{out}");
        assert!(
            out.contains("completed 0, failed connect_failed 150"),
            "{out}"
        );
        assert!(out.contains("error (150x): connect_failed: "), "{out}");
        assert!(out.contains("completed none"), "{out}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn manifests_are_typed_kubernetes_objects() {
        use k8s_openapi::api::batch::v1::Job;
        use k8s_openapi::api::core::v1::ConfigMap;
        let (code, out, err) = heisenbench(
            &[
                "k8s",
                "--shards",
                "4",
                "--url",
                "http://vllm:8000",
                "--qps",
                "5000",
                "--duration",
                "60s",
                "--api-key-env",
                "OPENAI_API_KEY",
                "--api-key-secret",
                "llm/api-key",
                "--image",
                "registry/heisenbench:1",
                "--model",
                "served-model",
            ],
            &[("OPENAI_API_KEY", "sk-must-not-leak")],
        );
        assert_eq!(code, 0, "{err}");
        assert!(!out.contains("sk-must-not-leak"));
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(list["kind"], "List");
        let cm: ConfigMap = serde_json::from_value(list["items"][0].clone()).expect("a ConfigMap");
        let job: Job = serde_json::from_value(list["items"][1].clone()).expect("a Job");
        // Round trip: the typed objects serialise back to what was printed.
        assert_eq!(serde_json::to_value(&job).unwrap(), list["items"][1]);
        let run: serde_json::Value =
            serde_json::from_str(&cm.data.as_ref().unwrap()["run.json"]).unwrap();
        assert_eq!(run["shards"], 4);
        assert_eq!(run["url"], "http://vllm:8000");
        let spec = job.spec.unwrap();
        assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!((spec.completions, spec.parallelism), (Some(4), Some(4)));
        let pod = spec.template.spec.unwrap();
        let c = &pod.containers[0];
        let args = c.args.as_ref().unwrap();
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--shard" && w[1] == "$(JOB_COMPLETION_INDEX)/4"),
            "{args:?}"
        );
        assert!(args.iter().any(|a| a == "--start-at"));
        let env = &c.env.as_ref().unwrap()[0];
        assert_eq!(env.name, "OPENAI_API_KEY");
        assert!(env.value.is_none());
        let secret = env
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (secret.name.as_str(), secret.key.as_str()),
            ("llm", "api-key")
        );
        let requests = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests["cpu"].0, "1");
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        // Without a URL there is nothing a pod could reach.
        let (code, _, _) = heisenbench(&["k8s", "--shards", "2"], &[]);
        assert_eq!(code, 2);
    }
}

mod signals {
    //! Ctrl-C, SIGTERM, a killed parent and a stopped shard: nothing measured is lost,
    //! nothing keeps sending, nothing waits forever. Guards are generous (seconds): they
    //! catch a hang, they do not measure speed.

    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    fn start(args: &[&str]) -> Child {
        Command::new(env!("CARGO_BIN_EXE_heisenbench"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts")
    }

    fn signal(pid: u32, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {pid}");
    }

    /// The shard processes of `parent` (its children running `__shard`).
    fn shard_pids(parent: u32) -> Vec<u32> {
        let mut pids = Vec::new();
        for task in std::fs::read_dir(format!("/proc/{parent}/task")).unwrap() {
            let children =
                std::fs::read_to_string(task.unwrap().path().join("children")).unwrap_or_default();
            pids.extend(
                children
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
        pids
    }

    /// Whether `pid` still runs (a zombie waiting for its reaper does not).
    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()))
            .is_some_and(|r| !r.starts_with('Z') && !r.starts_with('X'))
    }

    fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        ok()
    }

    /// Waits for the shards to be up (and the run to be sending).
    fn shards_up(parent: u32, n: usize) -> Vec<u32> {
        let mut pids = Vec::new();
        assert!(
            wait_until(Duration::from_secs(20), || {
                pids = shard_pids(parent);
                pids.len() >= n
            }),
            "no shards"
        );
        std::thread::sleep(Duration::from_millis(700));
        pids
    }

    #[test]
    fn ctrl_c_mid_run_writes_an_interrupted_balanced_report() {
        let dir = std::env::temp_dir().join(format!("heisenbench-sigint-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sig in ["-INT", "-TERM"] {
            let child = start(&[
                "run",
                "--qps",
                "200",
                "--duration",
                "30s",
                "--shards",
                "2",
                "--shard-mode",
                "process",
                "--output-tokens",
                "5",
                "--out",
                dir.to_str().unwrap(),
                "--csv",
            ]);
            shards_up(child.id(), 2);
            // To the parent alone: it must stop its shards itself.
            signal(child.id(), sig);
            let out = child.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(130),
                "{sig}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("INTERRUPTED"), "{text}");
            let report: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
            assert_eq!(report["interrupted"], true);
            let a = &report["accounting"];
            assert_eq!(a["balanced"], true, "{a}");
            assert_eq!(a["lost"], 0, "{a}");
            // 30 s at 200 req/s: about 6,000 planned, most never sent.
            assert!(a["not_sent"].as_u64().unwrap() > 3_000, "{a}");
            assert!(a["completed"].as_u64().unwrap() > 50, "{a}");
            let rows = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
            assert!(rows.lines().count() > 50);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_killed_parent_takes_its_shards_with_it() {
        let child = start(&[
            "run",
            "--qps",
            "200",
            "--duration",
            "60s",
            "--shards",
            "2",
            "--shard-mode",
            "process",
            "--output-tokens",
            "5",
        ]);
        let shards = shards_up(child.id(), 2);
        signal(child.id(), "-KILL");
        // The shards get SIGTERM from the kernel, stop sending and end within the grace.
        assert!(
            wait_until(Duration::from_secs(15), || shards
                .iter()
                .all(|p| !alive(*p))),
            "shards still running: {shards:?}"
        );
        let mut child = child;
        let _ = child.wait();
    }

    #[test]
    fn a_stopped_shard_is_declared_lost_at_the_deadline() {
        let child = start(&[
            "run",
            "--qps",
            "100",
            "--duration",
            "1s",
            "--timeout",
            "1s",
            "--shards",
            "2",
            "--shard-mode",
            "process",
            "--output-tokens",
            "5",
            "--json",
        ]);
        let shards = shards_up(child.id(), 2);
        signal(shards[1], "-STOP");
        let t0 = Instant::now();
        let out = child.wait_with_output().unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "waited {:?}",
            t0.elapsed()
        );
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let lost: Vec<_> = r["shards"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["ok"] == false)
            .collect();
        assert_eq!(lost.len(), 1, "{}", r["shards"]);
        assert!(lost[0]["error"].as_str().unwrap().contains("deadline"));
        assert_eq!(r["accounting"]["balanced"], true);
        assert!(!alive(shards[1]), "the stopped shard was killed");
    }
}

/// The real-engine harness: llama.cpp's server on a generated model, every check of
/// bench/llamacpp/run.sh. Opt-in (it compiles llama.cpp the first time):
/// `cargo test --release --test binary -- --ignored llamacpp`.
#[test]
#[ignore = "opt-in: installs and runs llama.cpp's server (bench/llamacpp/run.sh)"]
fn llamacpp_server_harness() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/llamacpp/run.sh");
    let status = Command::new("bash")
        .arg(root)
        .env("HEISENBENCH", env!("CARGO_BIN_EXE_heisenbench"))
        .status()
        .expect("bash runs");
    assert!(status.success(), "bench/llamacpp/run.sh: {status}");
}

/// Out of descriptors, the mock's accept loop waits instead of spinning: started with a
/// limit of 64 open files and held at 150 connections (those past the limit queued in the
/// listener's backlog of 128, never accepted), it uses well under a core. A spinning loop would use all of one (about
/// 1 s of CPU a second); the bound, a quarter of that, only catches the spin.
#[test]
fn the_mock_does_not_spin_out_of_descriptors() {
    use std::io::{BufRead, BufReader};
    use std::net::TcpStream;
    use std::process::Stdio;
    use std::time::Duration;
    let exe = env!("CARGO_BIN_EXE_heisenbench");
    let mut child = Command::new("bash")
        .args(["-c", &format!("ulimit -n 64 && exec '{exe}' mock --port 0")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash starts the mock");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let to: std::net::SocketAddr = addr.parse().unwrap();
    let held: Vec<TcpStream> = (0..150)
        .filter_map(|_| TcpStream::connect_timeout(&to, Duration::from_secs(1)).ok())
        .collect();
    // The mock must still be serving: it once set up its Ctrl-C listener after announcing
    // its address, and a client this quick took the descriptors that listener needed.
    assert!(
        child.try_wait().unwrap().is_none(),
        "the mock stopped under the connections"
    );
    assert!(held.len() > 64, "only {} connections", held.len());
    let cpu = |pid: u32| -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = stat.rsplit(')').next().unwrap();
        let f: Vec<u64> = after
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|x| x.parse().unwrap())
            .collect();
        (f[0] + f[1]) as f64 / 100.0
    };
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu(child.id());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu(child.id()) - before;
    drop(held);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        used < 0.5,
        "the mock used {used:.2} s of CPU in 2 s out of descriptors"
    );
}

/// Under a low descriptor limit (soft and hard: nothing to raise) and a server slow enough
/// that the schedule's requests pile up past it, `run` drops the excess at its due time
/// and fails no connection; the report states the bound.
#[test]
fn a_run_under_a_low_descriptor_limit_drops_instead_of_failing_connections() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let exe = env!("CARGO_BIN_EXE_heisenbench");
    let mut mock = Command::new(exe)
        .args(["mock", "--port", "0", "--time-to-first-token", "200ms"])
        .args(["--max-num-seqs", "10000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the mock starts");
    let mut line = String::new();
    BufReader::new(mock.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = format!(
        "http://{}",
        line.split("http://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
    );
    // 2,000 req/s for 1 s, each held 200 ms: about 400 in flight against 256 descriptors.
    let out = Command::new("bash")
        .args([
            "-c",
            &format!(
                "ulimit -n 256 && exec '{exe}' run --url {url} --qps 2000 --duration 1s \
                 --output-tokens 2 --shards 1 --shard-mode thread --json"
            ),
        ])
        .output()
        .expect("bash starts the run");
    let _ = mock.kill();
    let _ = mock.wait();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let failed = &v["accounting"]["failed"];
    assert!(failed.get("connect_failed").is_none(), "{failed}");
    assert!(failed["dropped"].as_u64().unwrap_or(0) > 0, "{failed}");
    assert_eq!(v["accounting"]["balanced"], true);
    assert_eq!(v["config"]["in_flight_bound"], 192, "{}", v["config"]);
    assert!(v["merged"].is_null());
    assert!(
        v["saturated"]
            .as_str()
            .is_some_and(|s| s.contains("dropped")),
        "{}",
        v["saturated"]
    );
}
