#!/usr/bin/env bash
# What a scrape at 100 ms costs the headline's send lag, measured within each run: with
# HEISENBENCH_SCRAPE_ODD_SECONDS_ONLY=1 the scraper skips the run's even seconds, so every
# run holds one-second windows with the scrape (odd) beside windows without it (even), on
# the same stretch of a noisy machine. Windows 2 to 9 of each run, the odd ones against the
# even, pooled (p99, p90, p50, mean, the share over 1 ms); the control runs do the same
# with the scrape off (an A/A test: the ratio the method finds when nothing differs).
#
#   bash bench/scrape-interleaved.sh                # 8 runs with the scrape, 4 without
#   RUNS=12 CONTROLS=6 bash bench/scrape-interleaved.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/heisenbench}
[ -x "$BIN" ] || cargo build --release -q --locked
RUNS=${RUNS:-8}
CONTROLS=${CONTROLS:-4}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
headline=(run --qps 5000 --duration 10s --output-tokens 200 --shards 2)
# Alternate the two kinds, so that neither has the quieter stretch.
i=0
while [ "$i" -lt $((RUNS > CONTROLS ? RUNS : CONTROLS)) ]; do
  if [ "$i" -lt "$RUNS" ]; then
    HEISENBENCH_SCRAPE_ODD_SECONDS_ONLY=1 "$BIN" "${headline[@]}" --scrape-interval 100ms \
      --out "$WORK/scrape-$i" --csv > /dev/null
  fi
  if [ "$i" -lt "$CONTROLS" ]; then
    HEISENBENCH_SCRAPE_ODD_SECONDS_ONLY=1 "$BIN" "${headline[@]}" --server-metrics off \
      --out "$WORK/control-$i" --csv > /dev/null
  fi
  i=$((i + 1))
done
python3 - "$WORK" <<'PY'
import csv, glob, json, math, random, statistics, sys
work = sys.argv[1]
random.seed(1)

def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]

def runs(kind):
    """Per run: the send lags of windows 2..9 by parity (window 1 holds the start's transient), and the achieved rate."""
    out = []
    for d in sorted(glob.glob(f"{work}/{kind}-*")):
        achieved = json.load(open(f"{d}/report.json"))["achieved_qps"]
        by = {}
        with open(f"{d}/requests.csv") as f:
            for row in csv.DictReader(f):
                w = int(row["intended_ns"]) // 1_000_000_000
                if 2 <= w <= 9:
                    by.setdefault(w, []).append(int(row["sent_ns"]) - int(row["intended_ns"]))
        out.append((by, achieved))
    return out

def summary(name, rs):
    odd = [x for by, _ in rs for w, v in by.items() if w % 2 for x in v]
    even = [x for by, _ in rs for w, v in by.items() if not w % 2 for x in v]
    per_run = [p99([x for w, v in by.items() if w % 2 for x in v])
               / p99([x for w, v in by.items() if not w % 2 for x in v]) for by, _ in rs]
    windows = [(by, w) for by, _ in rs for w in by]
    boot = []
    for _ in range(1000):
        pick = random.choices(windows, k=len(windows))
        o = [x for by, w in pick if w % 2 for x in by[w]]
        e = [x for by, w in pick if not w % 2 for x in by[w]]
        if o and e:
            boot.append(p99(o) / p99(e))
    boot.sort()
    lo, hi = boot[int(0.025 * len(boot))], boot[int(0.975 * len(boot)) - 1]
    achieved = [a for _, a in rs]
    print(f"{name}: {len(rs)} runs, achieved {min(achieved):.1f}-{max(achieved):.1f} req/s")
    print(f"  send lag p99 pooled: odd seconds {p99(odd) / 1e3:.0f} us ({len(odd)} requests), "
          f"even {p99(even) / 1e3:.0f} us ({len(even)}); ratio {p99(odd) / p99(even):.3f} "
          f"(95 % bootstrap over windows {lo:.3f}-{hi:.3f}); per run "
          + ", ".join(f"{r:.2f}" for r in per_run))
    q = lambda xs, f: sorted(xs)[int(f * len(xs))]
    print(f"  odd over even: p50 {q(odd, .5) / q(even, .5):.3f}, p90 {q(odd, .9) / q(even, .9):.3f}, "
          f"mean {statistics.fmean(odd) / statistics.fmean(even):.3f}; over 1 ms: "
          f"{100 * sum(x > 1_000_000 for x in odd) / len(odd):.2f} % against "
          f"{100 * sum(x > 1_000_000 for x in even) / len(even):.2f} %")

for kind, name in (("scrape", "scrape at 100 ms in odd seconds"), ("control", "no scrape (A/A)")):
    summary(name, runs(kind))
PY
