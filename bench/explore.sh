#!/usr/bin/env bash
# The explore page's speed on this machine: the API and each chart over loopback (release
# build, curl, 10 requests each: median and range), and the browser test's first
# contentful paint and update time (5 runs). Goals: first paint under 1 s, an update under
# 200 ms, the page's own assets under 300 KB. Needs chromium and chromium-driver.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
PORT=${PORT:-8377}
target/release/heisenbench explore --port "$PORT" > /dev/null &
PID=$!
trap 'kill $PID' EXIT
sleep 1
stats() { sort -n | awk '{v[NR]=$1} END {printf "median %.1f ms, range %.1f-%.1f ms\n", v[int((NR+1)/2)]*1000, v[1]*1000, v[NR]*1000}'; }
for state in "rate=100" "rate=100&sim=0" "rate=1000&loops=8" "rate=1000&loops=8&policy=random" "rate=1000&loops=8&policy=pooled"; do
  for path in /api/state /chart/wait.svg /chart/ttft.svg /chart/rate.svg /chart/loops.svg; do
    printf '%-32s %-16s ' "$state" "$path"
    for _ in $(seq 10); do
      curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$PORT$path?$state"
    done | stats
  done
done
printf 'assets: %s bytes\n' "$(cat figures/src/explore/index.html figures/src/explore/app.js figures/src/explore/style.css | wc -c)"
for _ in $(seq 5); do
  cargo test --release --locked -q --test explore -- --nocapture 2>&1 | grep timings
done
