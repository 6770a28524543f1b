#!/usr/bin/env bash
# Ceiling of the mock server with zero latencies: 200-token streamed completions driven by
# wrk (closed loop) from the other core. The mock is pinned to CPU 0 with one runtime
# thread, wrk to CPU 1. Needs wrk (apt-get install wrk) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
port=${PORT:-18123}
taskset -c 0 target/release/heisenbench mock --port "$port" --max-num-seqs 1000000 --max-model-len 100000 >/dev/null &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
sleep 0.5
for c in ${CONNECTIONS:-16 64 256}; do
  echo "== $c connections"
  taskset -c 1 wrk -t1 -c"$c" -d"${DURATION:-10s}" -s bench/mock-stream.lua "http://127.0.0.1:$port/v1/completions" | grep -E "Requests/sec|Transfer/sec|Latency|Non-2xx"
done
