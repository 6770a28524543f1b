#!/usr/bin/env bash
# How late each gap came to SGLang's bench_serving, net of its own draws. The bench sleeps
# each gap after the last (a fresh exponential draw from numpy's state seeded with --seed),
# so an audit's mean gap is the draws' mean plus the lateness; at a few thousand requests
# the draws' mean alone strays from the one asked for by a few per cent, and with a fixed
# seed it strays the same way in every sitting. This replays the bench with the same
# arguments as `bench/audit/run.sh` gives it (the sleeps cut to zero, against a throwaway
# `heisenbench mock`), records every gap it draws, and prints for each SGLang audit in the
# files given: the rate asked, the requests, the rate the server saw, the lateness as
# `audit --from` reads it (mean gap less the one asked for), the draws' stray, and the
# lateness net of it.
#
#   bash bench/audit/sglang-gaps.sh /tmp/runs/r24/sglang-split.json /tmp/runs/r24/sglang-knee-*.json
#
# Opt-in, after run.sh installed SGLang: CACHE (default ~/.cache/heisenbench/peers),
# HEISENBENCH (default target/release/heisenbench), SEED (the bench's --seed for an audit
# whose recorded command does not give one; default 1), DRAWN (a file to write each audit's draws to, as `audit --drawn` reads
# them: its rate, its requests and the mean of the gaps drawn).
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE=${CACHE:-$HOME/.cache/heisenbench/peers}
HB=${HEISENBENCH:-target/release/heisenbench}
PY=$CACHE/sglang/bin/python
[ -x "$PY" ] || { echo "sglang-gaps: no SGLang venv at $CACHE/sglang (run bench/audit/run.sh with TOOLS=sglang first)" >&2; exit 2; }
[ "$#" -gt 0 ] || { echo "usage: sglang-gaps.sh AUDIT.json..." >&2; exit 2; }
WORK=$(mktemp -d)
PORT_FILE=$WORK/port
"$HB" mock --port 0 --max-num-seqs 100000 --max-waiting-queue-length 100000 > "$WORK/mock.log" 2>&1 &
MOCK=$!
trap 'kill $MOCK 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do
  port=$(grep -o '127.0.0.1:[0-9]*' "$WORK/mock.log" | head -1 | cut -d: -f2 || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "${port:-}" ] || { echo "sglang-gaps: the mock did not start: $(cat "$WORK/mock.log")" >&2; exit 1; }
echo "$port" > "$PORT_FILE"

# The bench run as itself, numpy's exponential recorded and asyncio's sleep cut to zero.
cat > "$WORK/draws.py" <<'EOF'
import asyncio, json, runpy, sys
import numpy as np
drawn, exponential, sleep = [], np.random.exponential, asyncio.sleep
def recorded(scale=1.0, size=None):
    x = exponential(scale, size)
    drawn.append(float(x))
    return x
async def at_once(delay, result=None):
    return await sleep(0, result)
np.random.exponential, asyncio.sleep = recorded, at_once
out = sys.argv.pop(1)
sys.argv[0] = "bench_serving"
try:
    runpy.run_module("sglang.bench_serving", run_name="__main__")
finally:
    with open(out, "w") as f:
        json.dump(drawn, f)
EOF

python3 - "$WORK" "$PY" "$CACHE/tok" "$port" "${SEED:-1}" "${DRAWN:-}" "$@" <<'EOF'
import glob, json, os, subprocess, sys
work, py, tok, port, seed, drawn_out = sys.argv[1:7]
files = sys.argv[7:]
replayed = []
# The lateness the first series given read from its calibration audits (`audit --from`):
# with the draws replayed, what it says each audit sent, and whether that held 95 %.
fitted = next((p["simulated"]["prediction"]["gap_lateness"]["late_s"]
               for path in files for p in json.load(open(path)).get("points", [])
               if ((p.get("simulated") or {}).get("prediction") or {}).get("gap_lateness")), None)
if fitted is not None:
    print(f"the series' calibration audits read {fitted * 1e3:.2f} ms a gap\n")
print("| audit | asked req/s | requests | seen req/s | late a gap, read ms | the draws' stray ms | late a gap, net ms | sent at the series' lateness, req/s | held (95 %): predicted / seen |")
print("|---|---|---|---|---|---|---|---|---|")
for path in files:
    j = json.load(open(path))
    for p in j.get("calibration", []) + j.get("points", [j]):
        o = p["observed"]
        if ((o.get("reported") or {}).get("tool")) != "SGLang bench_serving":
            continue
        rate, t = o["offered"]["rate_per_s"], o["truth"]
        n, seen = t["requests"], t["achieved_rate_per_s"]
        # The seed the audit's own command gave the bench (a series copied from another
        # run keeps the seed it ran with).
        command = o["client"].get("command") or []
        run_seed = command[command.index("--seed") + 1] if "--seed" in command[:-1] else seed
        out = os.path.join(work, f"d-{rate:g}-{n}-{run_seed}.json")
        if not os.path.exists(out):
            subprocess.run([py, os.path.join(work, "draws.py"), out, "--backend", "sglang-oai",
                            "--base-url", f"http://127.0.0.1:{port}", "--model", "heisenbench-mock",
                            "--tokenizer", tok, "--dataset-name", "random-ids", "--random-input-len", "16",
                            "--random-output-len", str(o["offered"]["output_tokens"]), "--random-range-ratio", "1",
                            "--num-prompts", str(n), "--request-rate", f"{rate:g}", "--seed", run_seed,
                            "--disable-tqdm", "--warmup-requests", "0",
                            "--output-file", os.path.join(work, "bench-result.jsonl")],
                           env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        drawn = json.load(open(out))
        # The server's rate is over the n - 1 gaps between its first and last arrival.
        mean = sum(drawn[:n - 1]) / (n - 1)
        replayed.append({"rate_per_s": rate, "requests": n, "mean_gap_s": mean})
        read, stray = 1 / seen - 1 / rate, mean - 1 / rate
        sent, held = "-", "-"
        if fitted is not None:
            sent_rate = 1 / (mean + fitted)
            sent = f"{sent_rate:.1f} ({(sent_rate / seen - 1) * 100:+.1f} %)"
            yes = lambda r: "yes" if r >= 0.95 * rate else "no"
            held = f"{yes(sent_rate)} / {yes(seen)}"
        print(f"| {os.path.basename(path)} | {rate:g} | {n} | {seen:.1f} | {read * 1e3:.2f} | {stray * 1e3:+.2f} | {(read - stray) * 1e3:.2f} | {sent} | {held} |")
if drawn_out:
    with open(drawn_out, "w") as f:
        json.dump(replayed, f, indent=1)
EOF
