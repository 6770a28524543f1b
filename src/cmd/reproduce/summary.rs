//! The summary: Markdown, and a self-contained HTML page with the figures inside it.

use std::fmt::Write as _;
use std::path::Path;

use heisenbench_figures::Figure;
use heisenbench_model::units::format_seconds;

use super::data::Story;
use crate::Failure;

/// The explanation of each figure (its title is [`Figure::title`]), for a reader learning
/// queueing theory from it.
fn captions(s: &Story) -> [String; 9] {
    let knee = s
        .figures
        .profile
        .knee
        .map_or("none".to_string(), |k| format!("{k:.0} requests/s"));
    [
        "A client loop is a server of events: at 200 chunks per request and 25 us per chunk it can do at most \
         1 / (200 x 25 us), about 200 requests per second, whatever the server does. Past that point the achieved \
         rate stays flat and the backlog grows without bound; the sharded client follows the diagonal."
            .into(),
        "Pollaczek-Khinchine: Wq = rho (1 + Cs^2) E[S] / (2 (1 - rho)). The wait grows like 1 / (1 - rho); \
         constant service (M/D/1) waits half as long as exponential (M/M/1), and bursts of N events (M^X/G/1) \
         add (N - 1) E[S] / 2 at any load. Dots are simulated means and p99s with 95% batch-means intervals."
            .into(),
        "The server's own TTFT is 2 ms. One Python-like loop at 1,000 requests/s reports seconds, because every \
         request waits behind the loop's backlog before it is even sent (latency measured from the intended send \
         time includes that wait); the planned number of loops reports close to the truth."
            .into(),
        "NTPOT = (queue + prefill + decode) / N_out. With a prefill cost per prompt token, long prompts (RAG) \
         raise NTPOT through prefill while decode per token stays put; queue is the client's send lag."
            .into(),
        format!(
            "Stages of increasing rate against a server with 8 slots and 69 ms per request, which saturates at \
             8 / 0.069 = 116 requests/s. The knee ({knee}) is the highest rate at which every stage up to it met \
             the criterion: {}.",
            s.figures.profile.criterion
        ),
        "The smallest k with the p99 wait of an event under 1 ms when k loops share the load: k grows linearly with \
         the rate once the per-loop utilisation is pinned by the budget; cheaper events need fewer loops, bursts \
         need more because the wait inside a burst does not shrink with k."
            .into(),
        "Each dot is one run: the model's mean client wait (M/G/1, M^X/G/1 or E_k/G/1, chosen by the run's \
         arrival pattern) against the simulated or measured one, both counted from when each event was due \
         (with a zero-latency server: its request's intended time). Points on y = x are explained by \
         queueing alone; the E_k model is Lindley's equation solved on a lattice, exact to its stated lattice error."
            .into(),
        "Each bar is a chunk: the thin part is its wait for the loop after it arrived (the tick), the thick part \
         its processing. A client that stamps after processing reports the end of the thick part; on one loop \
         the waits pile up, on two they vanish."
            .into(),
        "The same client work spread over k loops three ways: round robin (each loop gets every k-th request, \
         as heisenbench's shards do: Erlang-k gaps, E_k^X/G/1 solved on a lattice), random assignment (Poisson \
         at each loop, M^X/G/1) and one queue shared by all loops (any idle loop takes the next chunk, M^X/G/c \
         approximated as one loop k times as fast). Lines are the models, dots simulations with 95 % intervals. \
         Round robin beats random because its gaps are regular; the pool beats both because a burst's chunks \
         are processed side by side, and its model overstates the pool's wait at light load, which is why \
         `plan --policy pooled` sizes pools by simulating them."
            .into(),
    ]
}

/// The Markdown summary.
pub fn markdown(s: &Story) -> String {
    let mut m = String::new();
    let r = &s.reports;
    let _ = writeln!(m, "# heisenbench reproduction\n");
    let _ = writeln!(
        m,
        "Scale: {} (simulations of {} s of schedule, live runs of {} s, {} customers per textbook point). \
         Simulations are deterministic (seed 1 and up); live numbers depend on the machine.\n",
        r.scale.name, r.scale.sim_s, r.scale.live_s, r.scale.customers
    );
    let _ = writeln!(
        m,
        "## The paper's claims\n\n| claim | paper | this machine |\n|---|---|---|"
    );
    for c in &s.claims {
        let _ = writeln!(m, "| {} | {} | {} |", c.claim, c.paper, c.here);
    }
    let _ = writeln!(
        m,
        "\nheisenbench's own observer overhead (chunk arrival stamp minus the mock's send stamp) at 1,000 req/s: \
         p50 {}, p99 {}.\n",
        format_seconds(s.observer_p50_s),
        format_seconds(s.observer_p99_s)
    );
    if let Some(f) = &s.floor {
        let _ = writeln!(
            m,
            "This machine's loopback floor (write stamp to read stamp between two runtimes, nothing else): idle p50 {}, p99 {}; at {:.0} messages/s p50 {}, p99 {}. {}.\n",
            format_seconds(f.idle.p50_s),
            format_seconds(f.idle.p99_s),
            f.loaded_rate_per_s,
            format_seconds(f.loaded.p50_s),
            format_seconds(f.loaded.p99_s),
            f.over(s.observer_p50_s, s.observer_p99_s, f.loaded_rate_per_s)
        );
    }
    if !s.agreement.is_empty() {
        let _ = writeln!(
            m,
            "Live single loop with emulated cost, M^X/D/1 vs measurement (relative error of the mean time an event spends in the client):\n"
        );
        for (name, e) in &s.agreement {
            let _ = writeln!(m, "- {name}: {:+.1}%", e * 100.0);
        }
        let _ = writeln!(m);
    }
    for (i, text) in captions(s).iter().enumerate() {
        let title = Figure::ALL[i].title();
        let _ = writeln!(
            m,
            "## {}. {title}\n\n![{title}]({}.png)\n\n{text}\n",
            i + 1,
            Figure::ALL[i].stem()
        );
    }
    m
}

/// The HTML page: the Markdown's content with the PNGs inlined.
pub fn html(s: &Story, _md: &str, dir: &Path) -> Result<String, Failure> {
    let esc = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>heisenbench reproduction</title>\
         <style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;line-height:1.45}\
         table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:4px 8px;vertical-align:top}\
         img{max-width:100%}</style></head><body><h1>heisenbench reproduction</h1>",
    );
    let r = &s.reports;
    let _ = write!(
        h,
        "<p>Scale: {} (simulations of {} s, live runs of {} s).</p>",
        r.scale.name, r.scale.sim_s, r.scale.live_s
    );
    h.push_str("<h2>The paper's claims</h2><table><tr><th>claim</th><th>paper</th><th>this machine</th></tr>");
    for c in &s.claims {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.claim),
            esc(&c.paper),
            esc(&c.here)
        );
    }
    h.push_str("</table>");
    for (i, text) in captions(s).iter().enumerate() {
        let title = Figure::ALL[i].title();
        let path = dir.join(format!("{}.png", Figure::ALL[i].stem()));
        let bytes = std::fs::read(&path)
            .map_err(|e| Failure::Runtime(anyhow::anyhow!("reading {}: {e}", path.display())))?;
        let _ = write!(
            h,
            "<h2>{}. {}</h2><img alt=\"{}\" src=\"data:image/png;base64,{}\"><p>{}</p>",
            i + 1,
            esc(title),
            esc(title),
            base64(&bytes),
            esc(text)
        );
    }
    h.push_str("</body></html>\n");
    Ok(h)
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_known_values() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
    }
}
