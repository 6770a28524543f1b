#!/bin/bash
# N audits of SGLang's bench_serving at 100 req/s x 200 tokens, 20 s each, with gauge.c
# timing a fixed unit of work on its own CPU clock every 50 ms beside each one; then each
# run's client CPU a request and mean excess against the gauge (analyse.py).
# Environment: N (default 10), OUT (default: a fresh temporary directory).
set -euo pipefail
cd "$(dirname "$0")/../../.."
N=${N:-10}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
cc -O2 -o "$OUT/gauge" bench/audit/gauge/gauge.c
# The gauge stamps CLOCK_MONOTONIC; the client's files carry wall-clock times.
python3 -c 'import time; print(time.time_ns() - time.monotonic_ns())' > "$OUT/offset"
for i in $(seq 1 "$N"); do
  "$OUT/gauge" > "$OUT/g$i.txt" &
  g=$!
  TOOLS=sglang RATES=100 DURATION=20s SEED=$i OUT="$OUT/o$i" bash bench/audit/run.sh > "$OUT/r$i.log" 2>&1
  kill -TERM "$g"; wait "$g" 2>/dev/null || true
  echo "[gauge] run $i of $N done"
done
python3 bench/audit/gauge/analyse.py "$OUT"
