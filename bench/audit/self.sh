#!/usr/bin/env bash
# heisenbench audited by itself: `heisenbench audit --wire` of `heisenbench run` (two
# shards, read as two loops) against the embedded zero-latency mock, at RATES x 200
# tokens, its loop read with `--cost-split 20` and fitted on the first FIT_ON rates.
# Prints a Markdown table of the mean TTFT excess taken apart: the wire both ways (lone
# messages over loopback at the audit's request rate, measured after each audit), the
# run's own lateness against its schedule (inside its TTFT, which counts from the
# intended send), and what is left; beside it the simulated loop's mean. The run writes
# its rows (`--csv`), so each request pairs with the server's by its `x-request-id`: the
# rest is also read request by request from the run's own send, with the 95 % interval of
# its mean (the run's own sampling noise), and taken apart on the clock the run shares
# with the mock: its own path from its send to the start of its write, the write to the
# mock's having the request, and the mock's first token to the run's stamp of it (the last
# two beyond the wire one way).
#
#   bash bench/audit/self.sh
#   RATES="100 1000" FIT_ON=1 DURATION=5s bash bench/audit/self.sh
#
# Environment: HEISENBENCH (default target/release/heisenbench, built if missing), OUT
# (default: a fresh temporary directory), RATES (default "100 300 1000"), FIT_ON
# (default 2), DURATION (default 10s).
set -euo pipefail
cd "$(dirname "$0")/../.."
HB=${HEISENBENCH:-target/release/heisenbench}
[ -x "$HB" ] || cargo build --release --locked
OUT=${OUT:-$(mktemp -d)}
RATES=${RATES:-"100 300 1000"}
FIT_ON=${FIT_ON:-2}
DURATION=${DURATION:-10s}
mkdir -p "$OUT"
"$HB" audit --rates "${RATES// /,}" --duration "$DURATION" --output-tokens 200 \
  --cost-split 20 --fit-on "$FIT_ON" --loops 2 --wire --out "$OUT/self.json" -- \
  "$HB" run --url {url} --model {model} --qps {rate} --duration {duration}s \
  --output-tokens {output_tokens} --shards 2 --server-metrics off --csv --out {out} \
  > "$OUT/self.txt"
echo "audit: $OUT/self.json, printout: $OUT/self.txt" >&2
python3 - "$OUT/self.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
us = lambda s: "-" if s is None else f"{s * 1e6:.1f}"
print("| audit | achieved | mean excess (us) | its lateness | wire both ways (one way x 2) | the rest | the rest, paired from its own send (95 %) | of it: its path to its write | its write to the mock, beyond the wire | the mock's first token to its stamp, beyond the wire | simulated mean (us) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for a in r.get("calibration", []) + r["points"]:
    o = a["observed"]
    rep, truth, wire = o.get("reported") or {}, o["truth"], o.get("wire")
    mean = (rep.get("ttft") or {}).get("mean_s")
    excess = None if mean is None else mean - truth["ttft"]["mean_s"]
    late = (rep.get("send_lag") or {}).get("mean_s")
    both = None if wire is None else 2 * wire["one_way"]["mean_s"]
    rest = None if None in (excess, late, both) else excess - late - both
    pe = o.get("paired_excess") or {}
    def beyond(figure, shift):
        if not figure or shift is None:
            return "-"
        text = us(figure["mean_s"] - shift)
        if figure.get("interval"):
            low, high = (x - shift for x in figure["interval"]["mean"])
            text += f" ({us(low)} to {us(high)})"
        return text
    legs = pe.get("legs") or {}
    paired = beyond(pe.get("from_own_send"), both)
    one = None if both is None else both / 2
    ways = " | ".join([beyond(legs.get("before_write"), 0.0), beyond(legs.get("after_write"), one),
                       beyond(legs.get("response"), one)])
    sim, fitted = a.get("simulated"), ""
    if sim:
        fitted = " (fitted on)" if sim.get("fitted_here") else " (held out)"
    simulated = us(sim["prediction"]["reported_s"][0]) + fitted if sim else "-"
    off = o["offered"]
    print(f"| {off['rate_per_s']:g} req/s x {off['output_tokens']} | {truth['achieved_rate_per_s']:.0f}"
          f" | {us(excess)} | {us(late)} | {us(both)} | {us(rest)} | {paired} | {ways} | {simulated} |")
PY
