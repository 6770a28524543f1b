#!/usr/bin/env bash
# Does `run`'s default shard count (the plan from an automatic calibration) match what a
# measured run needs? For each load: the count `run` picks by itself after calibrating
# this machine afresh (a new calibration file, measured automatically on first use), then
# runs at 1..MAX shards, each RUNS times, and the smallest count whose median send lag p99
# stays within BUDGET with at least 99 % of the rate achieved.
#
#   bash bench/plan_vs_run.sh                        # 1000, 2000, 5000 req/s x 200 tokens
#   LOADS="1000:20 5000:200" MAX=4 RUNS=3 bash bench/plan_vs_run.sh
#
# Run it on an otherwise idle machine: the runs and the mock share its cores.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --locked
LOADS=${LOADS:-"1000:200 2000:200 5000:200"}
MAX=${MAX:-3}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5s}
BUDGET_MS=${BUDGET_MS:-1}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export HEISENBENCH_CALIBRATION=$WORK/calibration.json
HB=target/release/heisenbench

for load in $LOADS; do
  IFS=: read -r qps tokens <<< "$load"
  # No --workers: the run plans its own count (calibrating first, the first time).
  "$HB" run --qps "$qps" --output-tokens "$tokens" --duration "$DURATION" \
    --out "$WORK/auto-$qps-$tokens" > "$WORK/auto-$qps-$tokens.txt" 2>&1 || true
  for k in $(seq 1 "$MAX"); do
    for i in $(seq 1 "$RUNS"); do
      "$HB" run --qps "$qps" --output-tokens "$tokens" --duration "$DURATION" \
        --workers "$k" --out "$WORK/$qps-$tokens-$k-$i" > /dev/null 2>&1 || true
    done
  done
done

python3 - "$WORK" "$MAX" "$BUDGET_MS" $LOADS <<'PY'
import glob, json, statistics, sys
work, top, budget = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) * 1e-3
print(f"| load | run's own count | send lag p99 by shards (median of runs) | smallest count within {budget * 1e3:g} ms | within one |")
print("|---|---|---|---|---|")
for load in sys.argv[4:]:
    qps, tokens = load.split(":")
    auto = json.load(open(f"{work}/auto-{qps}-{tokens}/report.json"))["config"]["workers"]
    cells, best = [], None
    for k in range(1, top + 1):
        runs = [json.load(open(f)) for f in sorted(glob.glob(f"{work}/{qps}-{tokens}-{k}-*/report.json"))]
        if not runs:
            cells.append(f"{k}: -")
            continue
        lag = statistics.median(r["send_lag"]["p99_s"] for r in runs)
        ok = statistics.median(r["achieved_qps"] / r["offered_qps"] for r in runs) >= 0.99
        cells.append(f"{k}: {lag * 1e3:.2f} ms" + ("" if ok else " (rate missed)"))
        if best is None and ok and lag <= budget:
            best = k
    close = "-" if best is None else ("yes" if abs(auto - best) <= 1 else "no")
    print(f"| {qps} req/s x {tokens} | {auto} | {'; '.join(cells)} | {best if best else 'none up to ' + str(top)} | {close} |")
print()
for f in sorted(glob.glob(f"{work}/auto-*.txt")):
    print(f"--- {f.split('/')[-1]}")
    print("".join(l for l in open(f) if l.startswith("workers:")))
PY
