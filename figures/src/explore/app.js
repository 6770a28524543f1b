// heisenbench explore: the controls, the state in the address bar, and the views.
"use strict";
window.exploreErrors = [];
window.addEventListener("error", (e) => window.exploreErrors.push(String(e.message)));
window.addEventListener("unhandledrejection", (e) => window.exploreErrors.push(String(e.reason)));

const DEFAULTS = { rate: 100, tokens: 200, cost_us: 25, scv: 0.5, loops: 1, policy: "round-robin",
  itl_ms: 0, ttft_ms: 2, budget_ms: 10, sim: 1 };
const KEYS = Object.keys(DEFAULTS);
const STEPS = [
  { rate: 100, tokens: 200, cost_us: 25, scv: 0.5, loops: 1, policy: "round-robin", itl_ms: 0, ttft_ms: 2, budget_ms: 10, sim: 1 },
  { rate: 180, tokens: 200, cost_us: 25, scv: 0.5, loops: 1, policy: "round-robin", itl_ms: 0, ttft_ms: 2, budget_ms: 10, sim: 1 },
  { rate: 180, tokens: 200, cost_us: 25, scv: 0.5, loops: 1, policy: "round-robin", itl_ms: 5, ttft_ms: 2, budget_ms: 10, sim: 1 },
  { rate: 1000, tokens: 200, cost_us: 25, scv: 0.5, loops: 8, policy: "round-robin", itl_ms: 0, ttft_ms: 2, budget_ms: 10, sim: 1 },
];
const $ = (id) => document.getElementById(id);
let pinned = null;
// The rate as set by the address, a preset or the slider: the slider's steps are
// logarithmic, so a preset's rate is kept exact rather than read back from it.
let rate = DEFAULTS.rate;
let pending = null;
let changed = 0;
let generation = 0;

function fmtSeconds(s) {
  if (s === null || s === undefined) return "-";
  if (s >= 1) return s.toPrecision(3) + " s";
  if (s >= 1e-3) return (s * 1e3).toPrecision(3) + " ms";
  return (s * 1e6).toPrecision(3) + " us";
}

function rateFromSlider(v) { return Number(Math.pow(10, v / 100).toPrecision(3)); }
function sliderFromRate(r) { return Math.round(100 * Math.log10(r)); }

function read() {
  const s = {};
  for (const k of KEYS) {
    const el = $(k);
    s[k] = k === "rate" ? rate : (k === "policy" ? el.value : (k === "sim" ? (el.checked ? 1 : 0) : Number(el.value)));
  }
  return s;
}

function write(s) {
  rate = s.rate;
  for (const k of KEYS) {
    if (k === "sim") $(k).checked = Number(s[k]) !== 0;
    else $(k).value = k === "rate" ? sliderFromRate(s[k]) : s[k];
  }
  outputs();
}

function outputs() {
  $("rate-out").textContent = rate + " req/s";
  $("loops-out").textContent = $("loops").value;
}

function query(s) {
  return KEYS.map((k) => k + "=" + encodeURIComponent(s[k])).join("&");
}

function fromLocation() {
  const p = new URLSearchParams(window.location.search);
  const s = Object.assign({}, DEFAULTS);
  for (const k of KEYS) {
    if (p.has(k)) s[k] = k === "policy" ? p.get(k) : Number(p.get(k));
  }
  return s;
}

function cells(v) {
  const w = v.wait;
  return {
    "utilisation": v.utilisation.toFixed(3),
    "model": v.model,
    "achieved": v.achieved_per_s.toPrecision(4) + " / " + v.state.rate.toPrecision(4),
    "wait-mean": w ? fmtSeconds(w.mean_s) : "saturated: grows without bound",
    "wait-tail": w ? fmtSeconds(w.p50_s) + " / " + fmtSeconds(w.p99_s) : "-",
    "ttft": fmtSeconds(v.true_ttft_s) + " / " + fmtSeconds(v.reported_ttft_mean_s) + " / " + fmtSeconds(v.reported_ttft_p99_s),
    "loops-needed": v.loops_needed === null ? "none reaches it" : String(v.loops_needed),
  };
}

function render(v) {
  const c = cells(v);
  for (const k in c) $(k).textContent = c[k];
  const ul = $("reasoning");
  ul.replaceChildren(...v.plan_reasoning.map((line) => {
    const li = document.createElement("li");
    li.textContent = line;
    return li;
  }));
  document.querySelectorAll("td.a").forEach((td) => {
    td.hidden = pinned === null;
    if (pinned) td.textContent = cells(pinned)[td.dataset.k];
  });
  $("col-a").hidden = pinned === null;
  $("unpin").hidden = pinned === null;
}

async function update() {
  outputs();
  const s = read();
  const q = query(s);
  window.history.replaceState(null, "", "?" + q);
  const mine = ++generation;
  const r = await fetch("/api/state?" + q);
  const v = await r.json();
  if (mine !== generation) return;
  if (!r.ok) {
    $("error").hidden = false;
    $("error").textContent = v.error;
    return;
  }
  $("error").hidden = true;
  render(v);
  loadTrace(q);
  for (const c of ["trace", "wait", "ttft", "rate", "loops"]) $("chart-" + c).src = "/chart/" + c + ".svg?" + q;
  window.exploreLast = v;
  // From the control's change to the numbers on screen (the charts follow as images).
  if (changed) window.exploreUpdateMs = performance.now() - changed;
}

// The trace, replayed: a playhead sweeps the simulated run in six seconds; each chunk
// appears when its bytes arrive, waits (faint), is processed (solid) and is stamped (tick).
const PALETTE = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"];
let trace = null;
let playing = true;
let clock = 0;
let last = null;

async function loadTrace(q) {
  const r = await fetch("/api/trace?" + q);
  if (!r.ok) return;
  const t = await r.json();
  const lanes = t.single.concat(t.sharded);
  const all = lanes.flatMap((l) => l.chunks);
  if (all.length === 0) return;
  const t0 = Math.min(...all.map((c) => c.arrival));
  const t1 = Math.max(...all.map((c) => c.end));
  trace = { lanes, t0, t1 };
  clock = 0;
  $("anim-note").textContent = "replayed " + Math.max(1, Math.round(6 / Math.max(t1 - t0, 1e-9))) + " times slower than real time";
}

function frame(now) {
  if (last !== null && playing) clock = (clock + (now - last) / 6000) % 1;
  last = now;
  const cv = $("anim");
  const g = cv.getContext("2d");
  g.clearRect(0, 0, cv.width, cv.height);
  if (trace) {
    const { lanes, t0, t1 } = trace;
    const t = t0 + clock * (t1 - t0);
    const left = 110, width = cv.width - left - 10;
    const x = (v) => left + ((v - t0) / (t1 - t0)) * width;
    const h = cv.height / lanes.length;
    g.font = "13px sans-serif";
    lanes.forEach((lane, i) => {
      const y = i * h + h / 2;
      g.fillStyle = "#111";
      g.fillText(lane.label, 4, y + 4);
      let waiting = 0;
      for (const c of lane.chunks) {
        if (c.arrival > t) continue;
        const col = PALETTE[c.request % PALETTE.length];
        g.globalAlpha = 0.25;
        g.fillStyle = col;
        g.fillRect(x(c.arrival), y - 4, Math.max(1, x(Math.min(c.start, t)) - x(c.arrival)), 8);
        g.globalAlpha = 1;
        if (t > c.start) g.fillRect(x(c.start), y - 10, Math.max(1, x(Math.min(c.end, t)) - x(c.start)), 20);
        else waiting += 1;
        if (t >= c.end) { g.fillStyle = "#000"; g.fillRect(x(c.end) - 0.5, y - 14, 1.5, 6); }
      }
      g.fillStyle = "#a00";
      g.fillText(waiting + " waiting", cv.width - 90, y - 14);
    });
    g.strokeStyle = "#444";
    g.beginPath(); g.moveTo(x(t), 0); g.lineTo(x(t), cv.height); g.stroke();
  }
  window.exploreAnimT = clock;
  requestAnimationFrame(frame);
}

function schedule() {
  changed = performance.now();
  clearTimeout(pending);
  pending = setTimeout(update, 40);
}

$("rate").addEventListener("input", () => { rate = rateFromSlider(Number($("rate").value)); });
for (const k of KEYS) {
  $(k).addEventListener("input", schedule);
  $(k).addEventListener("change", schedule);
}
document.querySelectorAll("#tour button").forEach((b) => b.addEventListener("click", () => {
  write(STEPS[Number(b.dataset.step)]);
  update();
}));
$("pin").addEventListener("click", () => { pinned = window.exploreLast || null; update(); });
$("unpin").addEventListener("click", () => { pinned = null; update(); });
$("reset").addEventListener("click", () => { write(DEFAULTS); update(); });

$("play").addEventListener("click", () => {
  playing = !playing;
  $("play").textContent = playing ? "Pause" : "Play";
});
write(fromLocation());
update();
requestAnimationFrame(frame);
