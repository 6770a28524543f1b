//! `heisenbench explore` in a real browser: headless Chromium driven over WebDriver
//! (Debian's `chromium` and `chromium-driver`, which `.ci/run` installs). Without them the
//! test says so and passes, unless HEISENBENCH_REQUIRE_BROWSER is set (as `.ci/run` sets
//! it), when their absence fails it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const DRIVER: &str = "/usr/bin/chromedriver";

/// Kills a child process when dropped, so a failing assertion leaves nothing running.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 request to loopback, the body as JSON.
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("driver reachable");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The head, then exactly Content-Length bytes (the driver keeps connections open).
    let mut r = BufReader::new(s);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut payload = vec![0u8; length];
    r.read_exact(&mut payload).unwrap();
    serde_json::from_slice(&payload).unwrap_or(Value::Null)
}

struct Browser {
    port: u16,
    session: String,
    _driver: Guard,
}

impl Browser {
    fn start() -> Self {
        let port = free_port();
        let driver = Guard(
            Command::new(DRIVER)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver starts"),
        );
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "chromedriver never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile =
            // One profile a browser: two tests' browsers may run at once.
            std::env::temp_dir().join(format!("heisenbench-chromium-{}-{port}", std::process::id()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                         "--no-first-run", "--disable-background-networking",
                         "--disable-component-update", "--disable-sync",
                         "--window-size=1280,2200",
                         format!("--user-data-dir={}", profile.display())]
            }
        }}});
        let v = http(port, "POST", "/session", Some(&caps));
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Self {
            port,
            session,
            _driver: driver,
        }
    }

    fn call(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        let v = http(
            self.port,
            method,
            &format!("/session/{}/{what}", self.session),
            body.as_ref(),
        );
        assert!(v["value"]["error"].is_null(), "{what}: {v}");
        v["value"].clone()
    }

    fn go(&self, url: &str) {
        self.call("POST", "url", Some(json!({ "url": url })));
    }

    fn script(&self, js: &str) -> Value {
        self.call(
            "POST",
            "execute/sync",
            Some(json!({ "script": js, "args": [] })),
        )
    }

    /// Waits until `js` returns something other than null (a guard against a hang only).
    fn wait_for(&self, js: &str) -> Value {
        let t0 = Instant::now();
        loop {
            let v = self.script(js);
            if !v.is_null() {
                return v;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "timed out waiting for {js}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn text(&self, id: &str) -> String {
        self.script(&format!(
            "return document.getElementById('{id}').textContent;"
        ))
        .as_str()
        .unwrap_or_default()
        .to_string()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
    }
}

/// Whether Chromium and its driver are installed. Without them a test says so and passes,
/// unless HEISENBENCH_REQUIRE_BROWSER is set, when their absence fails it.
fn browser_here() -> bool {
    let have = std::path::Path::new(CHROMIUM).exists() && std::path::Path::new(DRIVER).exists();
    if !have {
        assert!(
            std::env::var_os("HEISENBENCH_REQUIRE_BROWSER").is_none(),
            "HEISENBENCH_REQUIRE_BROWSER is set but {CHROMIUM} or {DRIVER} is missing"
        );
        eprintln!("skipped: no {CHROMIUM} and {DRIVER} (apt-get install chromium chromium-driver)");
    }
    have
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= u32::from(val(*c)) << (18 - 6 * i);
        }
        for i in 0..chunk.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

const STATE: &str = "rate=1000&tokens=200&cost_us=25&scv=0.5&loops=8&policy=round-robin&itl_ms=0&ttft_ms=2&budget_ms=10";

#[test]
fn the_page_teaches_in_a_real_browser() {
    if !browser_here() {
        return;
    }
    let mut server = Guard(
        Command::new(env!("CARGO_BIN_EXE_heisenbench"))
            .args(["explore", "--port", "0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("explore starts"),
    );
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the address line");
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let b = Browser::start();

    // A URL with state reproduces the view; the numbers are plan's.
    b.go(&format!("{base}?{STATE}"));
    b.wait_for("return window.exploreLast ? true : null;");
    let loops_shown = b.text("loops-needed");
    let plan = Command::new(env!("CARGO_BIN_EXE_heisenbench"))
        .args([
            "plan",
            "--qps",
            "1000",
            "--events-per-request",
            "200",
            "--burst",
            "200",
            "--event-cost",
            "25us",
            "--event-cost-scv",
            "0.5",
            "--budget",
            "p99=10ms",
            "--policy",
            "round-robin",
            "--json",
        ])
        .output()
        .expect("plan runs");
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("plan JSON");
    assert_eq!(loops_shown, plan["workers"].to_string(), "{plan}");
    assert_eq!(b.text("utilisation"), "0.625");
    assert_eq!(b.text("model"), "E_k^X/G/1");

    let paint = b.script(
        "const p = performance.getEntriesByName('first-contentful-paint')[0]; return p ? p.startTime : -1;",
    );

    // Moving a control changes the numbers and the address.
    let before = b.text("wait-mean");
    b.script(
        "const r = document.getElementById('loops'); r.value = 16; \
         r.dispatchEvent(new Event('input', {bubbles: true}));",
    );
    b.wait_for(
        "return document.getElementById('utilisation').textContent === '0.313' ? true : null;",
    );
    assert_ne!(b.text("wait-mean"), before);
    // Timings are reported, not asserted (bench/explore.sh records them).
    let update = b.script("return window.exploreUpdateMs || -1;");
    eprintln!("explore timings: first contentful paint {paint} ms, update {update} ms");
    let url = b.script("return window.location.href;");
    assert!(
        url.as_str().is_some_and(|u| u.contains("loops=16")),
        "{url}"
    );

    // The same address in a fresh load shows the same numbers.
    let shown = b.text("wait-mean");
    b.go(url.as_str().expect("url"));
    b.wait_for("return window.exploreLast && window.exploreLast.state.loops === 16 ? true : null;");
    assert_eq!(b.text("wait-mean"), shown);

    // A guided step, and A/B: pin, change, both columns shown.
    b.script("document.querySelector('#tour button[data-step=\"1\"]').click();");
    b.wait_for("return window.exploreLast.state.rate === 180 ? true : null;");
    b.script("document.getElementById('pin').click();");
    b.script(
        "const r = document.getElementById('itl_ms'); r.value = 5; \
         r.dispatchEvent(new Event('input', {bubbles: true}));",
    );
    b.wait_for("return window.exploreLast.state.itl_ms === 5 ? true : null;");
    let a_hidden = b.script("return document.getElementById('col-a').hidden;");
    assert_eq!(a_hidden, Value::Bool(false));

    // The trace is replayed: the playhead moves.
    let a = b.wait_for("return window.exploreAnimT > 0 ? window.exploreAnimT : null;");
    std::thread::sleep(Duration::from_millis(300));
    let a2 = b.script("return window.exploreAnimT;");
    assert_ne!(a, a2, "the animation does not advance");

    // The charts loaded, and nothing went wrong on the page.
    b.wait_for(
        "return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0) ? true : null;",
    );
    assert_eq!(b.script("return window.exploreErrors;"), json!([]));

    let png = base64_decode(b.call("GET", "screenshot", None).as_str().expect("base64"));
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("explore.png");
    std::fs::write(&shot, png).expect("screenshot written");
    eprintln!("screenshot: {}", shot.display());
}

/// `run --out DIR` writes report.html: opened from disk in a real browser, it shows its
/// tables and seven drawn charts (five of the client's, two of the embedded mock's metrics,
/// scraped by default), loads nothing from outside and runs no script.
#[test]
fn the_run_report_page_renders_in_a_real_browser() {
    if !browser_here() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("heisenbench-page-{}", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_heisenbench"))
        .args([
            "run",
            "--qps",
            "200",
            "--duration",
            "3s",
            "--output-tokens",
            "20",
            "--shards",
            "1",
            "--shard-mode",
            "thread",
            "--slo",
            "ttft=5ms,tpot=1ms",
            "--warmup",
            "1s",
            "--out",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run starts");
    assert!(status.success());
    let page = dir.join("report.html");
    let html = std::fs::read_to_string(&page).expect("report.html written");
    assert!(!html.contains("<script") && !html.contains("src=\"http"));
    let b = Browser::start();
    b.go(&format!("file://{}", page.display()));
    b.wait_for("return document.readyState === 'complete' ? true : null;");
    assert_eq!(
        b.script("return document.querySelectorAll('figure svg').length;"),
        json!(7)
    );
    // Every chart drew lines, not only its frame.
    let drawn = b.script(
        "return Array.from(document.querySelectorAll('figure svg')).map(s => s.querySelectorAll('polyline, path').length);",
    );
    assert!(
        drawn
            .as_array()
            .is_some_and(|a| a.iter().all(|n| n.as_u64() > Some(2))),
        "{drawn}"
    );
    let caption = b.script("return Array.from(document.querySelectorAll('caption')).map(c => c.textContent).join(' | ');");
    assert!(
        caption
            .as_str()
            .is_some_and(|c| c.contains("Goodput against ttft=5ms,tpot=1ms")
                && c.contains("TTFT split: TTFT from the intended send")),
        "{caption}"
    );
    let resources = b.script("return performance.getEntriesByType('resource').length;");
    assert_eq!(resources, json!(0), "the page loads nothing");
    let png = base64_decode(b.call("GET", "screenshot", None).as_str().expect("base64"));
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-page.png");
    std::fs::write(&shot, png).expect("screenshot written");
    eprintln!("screenshot: {}", shot.display());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sweep --out DIR` writes sweep.html: opened from disk in a real browser, it shows the
/// stages' table with the knee and its charts, and loads nothing.
#[test]
fn the_sweep_page_renders_in_a_real_browser() {
    if !browser_here() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("heisenbench-sweep-page-{}", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_heisenbench"))
        .args([
            "sweep",
            "--from",
            "20",
            "--to",
            "160",
            "--steps",
            "4",
            "--stage-duration",
            "5s",
            "--out",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("sweep starts");
    assert!(status.success());
    let page = dir.join("sweep.html");
    let b = Browser::start();
    b.go(&format!("file://{}", page.display()));
    b.wait_for("return document.readyState === 'complete' ? true : null;");
    assert_eq!(
        b.script("return document.querySelectorAll('figure svg').length;"),
        json!(2)
    );
    let caption = b.script("return document.querySelector('caption').textContent;");
    assert!(
        caption.as_str().is_some_and(|c| c.starts_with("knee: ")),
        "{caption}"
    );
    let rows = b.script("return document.querySelectorAll('table tr').length;");
    assert!(rows.as_u64().is_some_and(|n| n >= 3), "{rows}");
    assert_eq!(
        b.script("return performance.getEntriesByType('resource').length;"),
        json!(0)
    );
    let png = base64_decode(b.call("GET", "screenshot", None).as_str().expect("base64"));
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("sweep-page.png");
    std::fs::write(&shot, png).expect("screenshot written");
    eprintln!("screenshot: {}", shot.display());
    let _ = std::fs::remove_dir_all(&dir);
}
