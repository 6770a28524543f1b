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
  for (const c of ["trace", "wait", "ttft", "rate", "loops"]) $("chart-" + c).src = "/chart/" + c + ".svg?" + q;
  window.exploreLast = v;
  // From the control's change to the numbers on screen (the charts follow as images).
  if (changed) window.exploreUpdateMs = performance.now() - changed;
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

write(fromLocation());
update();
