#!/usr/bin/env bash
# Where the observer overhead's tail comes from: each request's first-chunk overhead (its
# arrival at the shard minus the embedded mock's stamp, both in requests.csv) split by what
# the same shard was doing meanwhile:
#   send      another request of the shard was sent between WINDOW_US before the mock's
#             stamp and the arrival (the shard, or the mock it woke, was busy with it)
#   response  the shard's previous response arrived within WINDOW_US before the stamp
#   neither   the rest: what the machine's wake-ups alone cost
# Prints, per run, each class's share of all requests and of the slowest 1 %, and the p99
# of the overhead with and without the first two classes.
#
#   bash bench/collisions.sh                       # 3 runs, 1,000 req/s x 20 tokens, 1 shard
#   POINT=5000:200:2 RUNS=2 bash bench/collisions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --locked
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
POINT=${POINT:-1000:20:1}
WINDOW_US=${WINDOW_US:-60}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
IFS=: read -r qps tokens shards <<< "$POINT"
for i in $(seq 1 "$RUNS"); do
  target/release/heisenbench run --qps "$qps" --output-tokens "$tokens" --workers "$shards" \
    --duration "$DURATION" --csv --out "$WORK/$i" > /dev/null
done
python3 - "$WORK" "$WINDOW_US" "$POINT" <<'PY'
import bisect, csv, glob, sys
work, window, point = sys.argv[1], float(sys.argv[2]) * 1e3, sys.argv[3]
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")
print(f"== {point} (qps:tokens:shards), window {window / 1e3:.0f} us")
for f in sorted(glob.glob(f"{work}/*/requests.csv")):
    rows = [r for r in csv.DictReader(open(f)) if r["first_token_server_ns"] and r["first_token_ns"]]
    by_shard = {}
    for r in rows:
        by_shard.setdefault(r["shard"], []).append(r)
    reqs = []
    for rs in by_shard.values():
        sends = sorted(int(r["sent_ns"]) for r in rs)
        arrivals = sorted(int(r["first_token_ns"]) for r in rs)
        for r in rs:
            stamp, arrival, own = int(r["first_token_server_ns"]), int(r["first_token_ns"]), int(r["sent_ns"])
            i = bisect.bisect_left(sends, stamp - window)
            send = any(s != own for s in sends[i:bisect.bisect_right(sends, arrival)])
            j = bisect.bisect_left(arrivals, stamp - window)
            response = any(a < stamp for a in arrivals[j:bisect.bisect_left(arrivals, arrival)])
            cls = "send" if send else "response" if response else "neither"
            reqs.append((arrival - stamp, cls))
    ov = [o for o, _ in reqs]
    cut = q(ov, 0.99)
    tail = [c for o, c in reqs if o >= cut]
    share = lambda cs, k: f"{100 * sum(1 for c in cs if c == k) / max(1, len(cs)):4.1f} %"
    alone = [o for o, c in reqs if c == "neither"]
    print(f"run {f.split('/')[-2]}: {len(reqs)} requests, overhead p50 {q(ov, .5) / 1e3:.1f} us, p99 {cut / 1e3:.1f} us; "
          f"p99 of 'neither' {q(alone, .99) / 1e3:.1f} us")
    for k in ("send", "response", "neither"):
        print(f"  {k:<9} all {share([c for _, c in reqs], k)}   slowest 1 % {share(tail, k)}")
PY
