#!/usr/bin/env bash
# Does pinning the mock and the shards to cores move the tail at the headline rate?
# 5,000 req/s x 200 tokens, two process shards, 10 s, RUNS runs per arrangement:
#   embedded   the mock inside `run` (the default), nothing pinned
#   external   `heisenbench mock` as its own process, nothing pinned
#   pinned     that mock on CPU 0, `run` and its shard processes on CPU 1
# Prints achieved rate, send lag p99 and observer overhead p50/p99 of every run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --locked
HB=target/release/heisenbench
RUNS=${RUNS:-3}
PORT=${PORT:-18411}
WORK=$(mktemp -d)
MOCK=
stop_mock() { if [ -n "$MOCK" ]; then kill -INT "$MOCK" 2>/dev/null || true; wait "$MOCK" 2>/dev/null || true; MOCK=; fi; }
trap 'stop_mock; rm -rf "$WORK"' EXIT
start_mock() { # taskset prefix...
  "$@" "$HB" mock --port "$PORT" --max-num-seqs 1000000 --max-model-len 10000000 > /dev/null &
  MOCK=$!
  sleep 0.5
}
row() { # name, report
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
o, l = r["observer_overhead"], r["send_lag"]
print(f"{sys.argv[1]:<9} achieved {r['achieved_qps']:7.1f}  send lag p99 {l['p99_s']*1e3:7.2f} ms  overhead p50 {o['p50_s']*1e3:6.2f} ms  p99 {o['p99_s']*1e3:7.2f} ms")
PY
}
LOAD=(--qps 5000 --output-tokens 200 --workers 2 --duration 10s)
for i in $(seq 1 "$RUNS"); do
  "$HB" run "${LOAD[@]}" --out "$WORK/e$i" > /dev/null || true
  row embedded "$WORK/e$i/report.json"
  start_mock
  "$HB" run "${LOAD[@]}" --url "http://127.0.0.1:$PORT" --model heisenbench-mock --out "$WORK/x$i" > /dev/null || true
  stop_mock
  row external "$WORK/x$i/report.json"
  start_mock taskset -c 0
  taskset -c 1 "$HB" run "${LOAD[@]}" --url "http://127.0.0.1:$PORT" --model heisenbench-mock --out "$WORK/p$i" > /dev/null || true
  stop_mock
  row pinned "$WORK/p$i/report.json"
done
