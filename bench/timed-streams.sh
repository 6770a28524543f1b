#!/usr/bin/env bash
# Timed streams: the mock in its own process serving every token at its due time
# (--inter-token-latency), the generator reading every chunk one by one. Per run: the ITL
# the generator saw (p50, p90, p99), its send lag p99, and the mock's own lateness (its
# /metrics histogram: the share of tokens written within 0.1, 0.5 and 1 ms of their due
# time; and the share it counted as due together with the token before them, which the
# connection may write in one piece). Binaries are taken in turns, so that two builds see the same stretch of a noisy
# machine.
#
#   bash bench/timed-streams.sh                                  # this tree's release build
#   BINS="/tmp/hb-before /tmp/hb-after" RUNS=3 bash bench/timed-streams.sh
#   POINTS="250:2 500:2 1000:2" ITL=10ms TOKENS=200 bash bench/timed-streams.sh  # qps:shards
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BINS:-}" ]; then
  cargo build --release -q --locked
  BINS=target/release/heisenbench
fi
RUNS=${RUNS:-3}
DURATION=${DURATION:-5s}
POINTS=${POINTS:-"1000:2"}
ITL=${ITL:-10ms}
TOKENS=${TOKENS:-200}
PORT=${PORT:-18191}
WORK=$(mktemp -d)
MOCK=
trap '[ -n "$MOCK" ] && kill "$MOCK" 2>/dev/null; rm -rf "$WORK"' EXIT

for point in $POINTS; do
  IFS=: read -r qps shards <<< "$point"
  for i in $(seq 1 "$RUNS"); do
    for bin in $BINS; do
      "$bin" mock --port "$PORT" --inter-token-latency "$ITL" --max-num-seqs 100000 \
        --max-waiting-queue-length 100000 > /dev/null 2>&1 &
      MOCK=$!
      for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.1; done
      tag=$(basename "$bin")
      "$bin" run --url "http://127.0.0.1:$PORT" --qps "$qps" --output-tokens "$TOKENS" \
        --shards "$shards" --duration "$DURATION" --server-metrics off --json \
        > "$WORK/$qps-$shards-$tag-$i.json" 2> /dev/null || true
      curl -sf "http://127.0.0.1:$PORT/metrics" > "$WORK/$qps-$shards-$tag-$i.metrics" || true
      kill "$MOCK"; wait "$MOCK" 2>/dev/null || true; MOCK=
    done
  done
done

python3 - "$WORK" <<'EOF'
import glob, json, os, re, sys
work = sys.argv[1]
def ms(s): return f"{s * 1e3:.2f}"
print("| run | achieved req/s | ITL p50 ms | p90 | p99 | send lag p99 ms | mock late <=0.1 ms | <=0.5 ms | <=1 ms | due together |")
print("|---|---|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(f"{work}/*.json")):
    name = os.path.basename(f)[:-5]
    try:
        r = json.load(open(f))
    except ValueError:
        print(f"| {name} | no report |"); continue
    buckets, count, together = {}, 0, None
    for line in open(f[:-5] + ".metrics", errors="replace"):
        m = re.match(r'heisenbench:mock_token_lateness_seconds_bucket\{.*le="([^"]+)"\} (\S+)', line)
        if m: buckets[m.group(1)] = float(m.group(2))
        m = re.match(r'heisenbench:mock_token_lateness_seconds_count\{.*\} (\S+)', line)
        if m: count = float(m.group(1))
        m = re.match(r'heisenbench:mock_tokens_due_together_total\{.*\} (\S+)', line)
        if m: together = float(m.group(1))
    share = lambda le: f"{100 * buckets.get(le, 0) / count:.2f} %" if count else "-"
    i = r["itl"]
    print(f"| {name} | {r['achieved_qps']:.0f} | {ms(i['p50_s'])} | {ms(i['p90_s'])} | {ms(i['p99_s'])} "
          f"| {ms(r['send_lag']['p99_s'])} | {share('0.0001')} | {share('0.0005')} | {share('0.001')} "
          f"| {'-' if together is None or not count else f'{100 * together / count:.2f} %'} |")
EOF
