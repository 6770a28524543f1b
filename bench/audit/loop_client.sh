#!/usr/bin/env bash
# The audit's prediction against a client whose queue is known, in real time: the example
# client (examples/loop_client.rs: one thread, one request at a time, 500 us of CPU per
# chunk, 40 chunks, 25 requests/s: one loop at utilisation 0.5) audited for several seeds.
# For each: the TTFT excess the client reports over the server's truth, the model's
# prediction, and a second method for the same seed, Lindley's recursion on the client's
# own due times with the per-request CPU the audit measured (which separates the sample
# path's deviation from steady state from the model's error). On an idle machine the
# excess follows the model; a machine whose cores are taken makes the client wait for a
# core as well, which no queue of its own explains (the test suite asserts only what
# holds under any load).
#
#   bash bench/audit/loop_client.sh            # seeds 1 2 3, 12 s each
#   SEEDS="1 2 3 4 5" bash bench/audit/loop_client.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SEEDS=${SEEDS:-1 2 3}
cargo build --release --locked -q --bin heisenbench --example loop_client
HB=target/release/heisenbench
CLIENT=target/release/examples/loop_client
OUT=$(mktemp -d)
echo "| seed | requests | CPU per chunk | utilisation | TTFT excess (mean) | predicted | error | this seed's Lindley mean |"
echo "|---|---|---|---|---|---|---|---|"
for seed in $SEEDS; do
  "$HB" audit --rate 25 --duration 12s --output-tokens 40 --timeout 120s --json -- \
    "$CLIENT" --url '{url}' --model '{model}' --rate '{rate}' --duration '{duration}' \
    --tokens '{output_tokens}' --out '{out}' --cost-us 500 --seed "$seed" \
    > "$OUT/seed-$seed.json"
  python3 - "$OUT/seed-$seed.json" "$seed" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1])); seed = int(sys.argv[2])
p, o = r["prediction"], r["observed"]
row = next(x for x in p["rows"] if x["statistic"] == "mean")
# The client's due times (its generator, as examples/loop_client.rs draws them).
M = (1 << 64) - 1
state = ((seed * 0x9E3779B97F4A7C15) & M) | 1
t, due = 0.0, []
while True:
    state = (state * 6364136223846793005 + 1442695040888963407) & M
    u = ((state >> 11) + 0.5) / float(1 << 53)
    t += -math.log(u) / 25.0
    if t >= 12.0:
        break
    due.append(t)
b, w, total = p["cpu_per_request_s"], 0.0, 0.0
for i in range(len(due)):
    if i:
        w = max(0.0, w + b - (due[i] - due[i - 1]))
    total += w
ms = lambda s: f"{s * 1e3:.2f} ms"
print(f"| {seed} | {o['truth']['completed']} | {p['cpu_per_chunk_s'] * 1e6:.0f} us | {p['rho']:.2f} | "
      f"{ms(row['excess_s'])} | {ms(row['predicted_s'])} | {row['relative_error'] * 100:+.1f} % | {ms(total / len(due))} |")
PY
done
echo "(audit JSON in $OUT)"
