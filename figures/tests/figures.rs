//! Every figure is drawn from a fixture, is non-empty, and its SVG carries its axis labels.

use heisenbench_figures::*;

fn fixture() -> FigureData {
    let s = |label: &str, points: Vec<(f64, f64)>| Series {
        label: label.into(),
        points,
    };
    FigureData {
        rate_failure: RateFailure {
            series: vec![
                s(
                    "one loop",
                    vec![(100.0, 100.0), (500.0, 190.0), (1000.0, 192.0)],
                ),
                s(
                    "6 loops",
                    vec![(100.0, 100.0), (500.0, 500.0), (1000.0, 1000.0)],
                ),
            ],
        },
        wait_vs_utilization: WaitVsUtilization {
            curves: vec![s(
                "M/G/1 mean",
                (1..10)
                    .map(|i| (i as f64 / 10.0, i as f64 / (10.0 - i as f64)))
                    .collect(),
            )],
            mean_points: vec![CiPoint {
                x: 0.5,
                y: 0.75,
                ci: 0.02,
            }],
            p99_points: vec![CiPoint {
                x: 0.5,
                y: 5.0,
                ci: 0.3,
            }],
            points_label: None,
        },
        ttft_cdfs: TtftCdfs {
            series: vec![
                s("server", vec![(1e-4, 0.0), (2e-4, 0.5), (3e-4, 1.0)]),
                s("client", vec![(1e-1, 0.0), (1.0, 0.5), (10.0, 1.0)]),
            ],
            title: None,
        },
        ntpot: NtpotDecomposition {
            input_tokens: vec![128, 1024],
            queue_s: vec![1e-6, 1e-6],
            prefill_s: vec![1e-5, 8e-5],
            decode_s: vec![2e-5, 2e-5],
        },
        profile: LatencyProfile {
            p99: vec![(10.0, 0.01), (20.0, 0.02), (40.0, 2.0)],
            achieved: vec![(10.0, 10.0)],
            knee: Some(20.0),
            criterion: "p99 <= 50ms".into(),
        },
        workers_needed: WorkersNeeded {
            series: vec![s(
                "20us",
                vec![(100.0, 1.0), (1000.0, 5.0), (10000.0, 45.0)],
            )],
            budget: "p99 wait <= 1ms".into(),
        },
        predicted_observed: vec![PredictedObserved {
            label: "a".into(),
            source: "sim".into(),
            predicted_s: 1e-3,
            observed_s: 1.1e-3,
        }],
        timeline: Timeline {
            single: vec![Lane {
                label: "one loop".into(),
                chunks: vec![ChunkPassage {
                    request: 0,
                    arrival: 0.0,
                    start: 0.001,
                    end: 0.002,
                }],
            }],
            sharded: vec![Lane {
                label: "loop 1 of 2".into(),
                chunks: vec![ChunkPassage {
                    request: 1,
                    arrival: 0.0,
                    start: 0.0,
                    end: 0.001,
                }],
            }],
        },
        policies: Policies {
            curves: vec![Series {
                label: "round robin".into(),
                points: vec![(1.0, 9e-3), (2.0, 1.5e-3)],
            }],
            points: vec![vec![CiPoint {
                x: 2.0,
                y: 1.6e-3,
                ci: 1e-4,
            }]],
            load: "test load".into(),
        },
    }
}

#[test]
fn every_figure_is_drawn_with_its_labels() {
    let dir = std::env::temp_dir().join(format!("heisenbench-fig-{}", std::process::id()));
    let files = draw_all(&fixture(), &dir).unwrap();
    assert_eq!(files.len(), 2 * Figure::ALL.len());
    for f in &files {
        let len = std::fs::metadata(f).unwrap().len();
        assert!(len > 2000, "{} is only {len} bytes", f.display());
    }
    let svg = |stem: &str| std::fs::read_to_string(dir.join(format!("{stem}.svg"))).unwrap();
    for (stem, labels) in [
        (
            "1-rate-failure",
            &["offered rate (requests/s)", "achieved rate (requests/s)"][..],
        ),
        (
            "2-wait-vs-utilization",
            &["utilisation rho", "wait (units of the mean service time)"],
        ),
        ("3-ttft-cdf", &["TTFT (log scale)", "fraction of requests"]),
        (
            "4-ntpot-decomposition",
            &["prompt tokens", "NTPOT (milliseconds per output token)"],
        ),
        (
            "5-latency-profile",
            &[
                "offered rate (requests/s)",
                "p99 TTFT from the intended send",
                " ms",
            ],
        ),
        (
            "6-workers-needed",
            &["target rate (requests/s)", "loops (one core each)", "1,000"],
        ),
        (
            "7-predicted-vs-observed",
            &[
                "predicted mean wait (log scale)",
                " ms",
                "observed mean wait (log scale)",
            ],
        ),
        ("8-timeline", &["time (milliseconds)"]),
        (
            "9-policies",
            &[
                "client loops",
                "p99 wait per chunk (log scale)",
                "round robin (model)",
                " ms",
            ],
        ),
    ] {
        let text = svg(stem);
        for l in labels {
            assert!(text.contains(l), "{stem}.svg lacks '{l}'");
        }
    }
    // The PNG is a real PNG.
    let png = std::fs::read(dir.join("1-rate-failure.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn empty_data_is_an_error_not_a_blank_picture() {
    let dir = std::env::temp_dir().join(format!("heisenbench-fig-empty-{}", std::process::id()));
    let e = draw_all(&FigureData::default(), &dir).unwrap_err();
    assert!(e.to_string().contains("1-rate-failure"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
