#!/usr/bin/env bash
# The load generator against the embedded mock, several runs a point, with this machine's
# loopback floor measured after each run (`run --floor`, at the run's chunk rate). Prints
# every run and, per point, the median and range of: achieved rate, send lag p99, observer
# overhead p50 and p99 (the kernel's arrival stamp minus the mock's send stamp) over the idle
# and the loaded floor, and the read lag (a read's return after that stamp) over the floor's
# reader's.
#
#   bash bench/generator.sh                 # 3 runs of 10 s at each point
#   RUNS=5 DURATION=20s bash bench/generator.sh
#   POINTS="1000:20:1 5000:200:2" bash bench/generator.sh   # qps:tokens:shards
#
# Run it on an otherwise idle machine: the runs and the mock share its cores.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --locked
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
POINTS=${POINTS:-"1000:20:1 5000:200:2"}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PYTHON=${PYTHON:-python3}

for point in $POINTS; do
  IFS=: read -r qps tokens shards <<< "$point"
  for i in $(seq 1 "$RUNS"); do
    out=$WORK/$qps-$tokens-$i
    target/release/heisenbench run --qps "$qps" --output-tokens "$tokens" --workers "$shards" \
      --duration "$DURATION" --floor --out "$out" > /dev/null || true
  done
done

"$PYTHON" - "$WORK" $POINTS <<'EOF'
import glob, json, statistics, sys
work, points = sys.argv[1], sys.argv[2:]
def us(s): return f"{s * 1e6:.1f} us" if s < 1e-4 else f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"
for point in points:
    qps, tokens, shards = point.split(":")
    rows = []
    for f in sorted(glob.glob(f"{work}/{qps}-{tokens}-*/report.json")):
        r = json.load(open(f))
        o, fl, rl = r["observer_overhead"], r["floor"], r["read_lag"]
        rows.append({
            "achieved": r["achieved_qps"],
            "lag p99": r["send_lag"]["p99_s"],
            "overhead p50": o["p50_s"],
            "overhead p99": o["p99_s"],
            "floor idle p50": fl["idle"]["p50_s"],
            "floor idle p99": fl["idle"]["p99_s"],
            "floor loaded p50": fl["loaded"]["p50_s"],
            "floor loaded p99": fl["loaded"]["p99_s"],
            "p50 / idle floor": o["p50_s"] / fl["idle"]["p50_s"],
            "p99 / idle floor": o["p99_s"] / fl["idle"]["p99_s"],
            "p99 / loaded floor": o["p99_s"] / fl["loaded"]["p99_s"],
            "read lag p50": rl["p50_s"],
            "read lag p99": rl["p99_s"],
            "floor's lag idle p50": fl["idle_read_lag"]["p50_s"],
            "floor's lag idle p99": fl["idle_read_lag"]["p99_s"],
            "lag p50 / idle floor": rl["p50_s"] / fl["idle_read_lag"]["p50_s"],
            "lag p99 / idle floor": rl["p99_s"] / fl["idle_read_lag"]["p99_s"],
            "lag p99 / loaded": rl["p99_s"] / fl["loaded_read_lag"]["p99_s"],
        })
    print(f"== {qps} req/s x {tokens} tokens, {shards} shard(s), {len(rows)} runs")
    for k in rows[0] if rows else []:
        v = [r[k] for r in rows]
        fmt = (lambda x: f"{x:.0f}") if k == "achieved" else (lambda x: f"{x:.2f}x") if "/" in k else us
        print(f"  {k:<20} median {fmt(statistics.median(v)):>10}   range {fmt(min(v))} .. {fmt(max(v))}   runs: {', '.join(fmt(x) for x in v)}")
EOF
