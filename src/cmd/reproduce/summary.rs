//! The summary: Markdown, and a self-contained HTML page with the figures inside it.

use std::fmt::Write as _;
use std::path::Path;

use heisenbench_figures::Figure;
use heisenbench_model::units::format_seconds;

use super::data::Story;
use crate::Failure;

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
        "\nheisenbench's own observer overhead (the kernel's arrival stamp of a chunk minus the mock's send stamp) at 1,000 req/s: \
         p50 {}, p99 {}; its read lag (a read's return after that stamp) p50 {}, p99 {}.\n",
        format_seconds(s.observer_p50_s),
        format_seconds(s.observer_p99_s),
        format_seconds(s.read_lag_p50_s),
        format_seconds(s.read_lag_p99_s)
    );
    if let Some(f) = &s.floor {
        let _ = writeln!(
            m,
            "This machine's loopback floor (write stamp to the kernel's arrival stamp between two runtimes, nothing else): idle p50 {}, p99 {}; at {:.0} messages/s p50 {}, p99 {}. {}; {}.\n",
            format_seconds(f.idle.p50_s),
            format_seconds(f.idle.p99_s),
            f.loaded_rate_per_s,
            format_seconds(f.loaded.p50_s),
            format_seconds(f.loaded.p99_s),
            f.over(s.observer_p50_s, s.observer_p99_s, f.loaded_rate_per_s),
            f.read_lag_over(s.read_lag_p50_s, s.read_lag_p99_s, f.loaded_rate_per_s)
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
    for (i, text) in Figure::ALL
        .iter()
        .map(|f| f.caption(&s.figures))
        .enumerate()
    {
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
    for (i, text) in Figure::ALL
        .iter()
        .map(|f| f.caption(&s.figures))
        .enumerate()
    {
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
            heisenbench_figures::base64(&bytes),
            esc(&text)
        );
    }
    h.push_str("</body></html>\n");
    Ok(h)
}
