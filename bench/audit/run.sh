#!/usr/bin/env bash
# `heisenbench audit` of real benchmark clients from PyPI against the embedded
# zero-latency mock: inference-perf, `vllm bench serve` (which runs without a GPU), AIPerf,
# GuideLLM and SGLang's bench_serving, at several rates with 200-token streams. Writes one audit JSON per point and a Markdown
# table (bench/audit/RESULTS.md is where the recorded one lives).
#
# Opt-in: it installs the tools into venvs under $CACHE (vllm is about 9 GB), so it is
# never part of `cargo test` or .ci/run.
#
#   bash bench/audit/run.sh                 # every tool, rates 50 100 200 400 1000
#   RATES="100 300" TOOLS=vllm bash bench/audit/run.sh
#   SPLIT=20 RATES="50 100" TOOLS=sglang bash bench/audit/run.sh
#   SPLIT=20 FIT_ON=2 RATES="50 100 150" bash bench/audit/run.sh
#   SPLIT=20 FIT_ON=2 RATES="30 60" HOLD_AT="0.4 0.7" bash bench/audit/run.sh
#   REPEAT=5 RATES=100 TOOLS=vllm bash bench/audit/run.sh
#   SPLIT=20 FIT_ON=2 RATES="50 100" HOLD_AT="0.4 0.7" REPEAT=3 bash bench/audit/run.sh
#   SPLIT=20 FIT_ON=2 FIT_AT=0.55 RATES="50 100" HOLD_AT="0.4 0.7" TOOLS=vllm bash bench/audit/run.sh
#
# Without SPLIT, the table ends with the highest rate each tool held (the server saw 95 % of
# the offered rate or more, and its true TTFT median stayed within 50 ms of the quietest): RATES="150 200 250 300 350 400 500 600" DURATION=10s reads the
# tools' knees.
#
# With SPLIT=N each tool is audited in one series (`audit --rates` over RATES, with
# `--cost-split N`): a first audit at the first rate with N output tokens splits its CPU
# into a part per request and a part per chunk, the share before the send is fitted on the
# first rate's audit, and every other audit is predicted by simulating the tool's loop; the
# table then holds those predictions against what the tool reported. FIT_ON=N fits the
# loop on the first N rates at once (`--fit-on N`) and holds it against the rest;
# HOLD_AT="0.4 0.7" then audits each tool again at those fractions of the saturation its
# fitted loop predicts (`--hold-at`), held out like the rest. FIT_AT=0.55 (with FIT_ON as
# many as RATES) first audits each tool at that fraction of the saturation its fitted loop
# predicts and fits the loop again with it (`--fit-at`): a calibration that reaches the
# held-out loads. BATCHED=1s adds an audit at twice the
# first rate whose server releases the responses together every second (`--batched`):
# the CPU a request with the loop's work met in batches, and the throughput that bounds.
#
# REPEAT=N (without SPLIT) audits each tool N times at each rate, one after the other, and
# ends with each rate's median and range of the excess and of the CPU a request: the
# run-to-run noise any prediction held against one audit carries. With SPLIT, REPEAT=N
# audits each of the series' held-out rates N-1 times more and holds the series' loop
# against all N (`audit --from --held-out`): the medians of what was measured and of
# what was simulated at each audit's load.
#
# SERIES=N (with SPLIT) runs each tool's series N times, one after the other, reads them as
# one calibration (`audit --from A,B,...`) and holds each series' audits against the others
# read together (left out one at a time); the table ends with each held-out audit's error
# forecast from its own series, from all of them, and from the others. REPEAT and KNEE
# read the first series.
#
# KNEE="0.8 0.9 1 1.1 1.2 1.35 1.5" (with SPLIT) then audits each tool at those fractions of
# the saturation its series predicted (for a tool that sleeps each gap, the lower of that and
# the highest rate its pacing holds), KNEE_DURATION (default 10s) each, up the list until
# two steps in a row are not held (95 % of the rate delivered, the server's true TTFT
# median within 50 ms of the quietest step's), and ends with the knee's
# bracket (the highest step held, the next one not) against the prediction, and each step's
# CPU a request: the knee read in the same sitting, on the same machine, as the series that
# predicted it. For a tool that sleeps each gap, each step also gets the chance its own
# draws gave it of holding (`audit --from` the series `--held-out` the steps): near the
# limit a ten-second step holds or not about as often as a coin lands heads. The steps read
# together as a walk then give the chance of each reading the walk could have made, and
# where the one made lies among them; and, over the lateness's own error as well, the chance
# a walk reads within 15 % of the limit at these steps' lengths and at 10 and 100 times them.
#
# Environment: PYTHON (Python 3.12; default: pyenv's 3.12), HEISENBENCH (the binary;
# default target/release/heisenbench, built if missing), CACHE (default
# ~/.cache/heisenbench/peers), OUT (default: a fresh temporary directory), DURATION
# (default 10s), TOKENS (output tokens, default 200), SEED (SGLang's --seed, which fixes
# its gaps' draws; default 1), SERIES_FROM (a directory of an earlier run: each tool's
# series is copied from it rather than run, so that KNEE walks again, say at another SEED),
# MOCK (flags of the embedded mock for
# every audit, e.g. MOCK="--release-every 200ms --max-num-seqs 100000": responses leave
# together on a 200 ms period).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

CACHE=${CACHE:-$HOME/.cache/heisenbench/peers}
PYTHON=${PYTHON:-$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python 2>/dev/null | tail -1)}
PYTHON=${PYTHON:-python3}
HB=${HEISENBENCH:-target/release/heisenbench}
RATES=${RATES:-50 100 200 400 1000}
TOOLS=${TOOLS:-inference-perf vllm aiperf}
DURATION=${DURATION:-10s}
TOKENS=${TOKENS:-200}
FIT_ON=${FIT_ON:-1}
REPEAT=${REPEAT:-1}
SERIES=${SERIES:-1}
KNEE_DURATION=${KNEE_DURATION:-10s}
SEED=${SEED:-1}
OUT=${OUT:-$(mktemp -d)}
IP_VERSION=0.7.0
VLLM_VERSION=0.33.0
AIPERF_VERSION=0.13.0
GUIDELLM_VERSION=0.8.1
# SGLang's later releases route bench_serving through the server's own modules, which need
# torch and CUDA packages; 0.5.6's bench_serving needs only the client libraries below.
SGLANG_VERSION=0.5.6
mkdir -p "$CACHE" "$OUT"

if [ ! -x "$HB" ]; then
  cargo build --release --locked
fi

venv() { # venv DIR PACKAGE
  if [ ! -x "$1/bin/python" ]; then
    "$PYTHON" -m venv "$1"
  fi
  if ! "$1/bin/pip" show "${2%%==*}" >/dev/null 2>&1; then
    echo "[audit] installing $2 into $1"
    "$1/bin/pip" install --quiet "$2"
  fi
}

# A tokenizer both tools can load offline: the llama.cpp harness's vocabulary (whole
# words), as a Hugging Face tokenizer directory.
TOK=$CACHE/tok
if [ ! -f "$TOK/tokenizer.json" ]; then
  venv "$CACHE/tokvenv" "gguf"
  "$CACHE/tokvenv/bin/pip" install --quiet numpy
  mkdir -p "$TOK"
  "$CACHE/tokvenv/bin/python" bench/llamacpp/make_model.py "$TOK/unused.gguf" --tokenizer "$TOK/tokenizer.json"
  rm -f "$TOK/unused.gguf"
  echo '{"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096}' > "$TOK/tokenizer_config.json"
fi

# inference-perf takes a YAML file: the template's @FIELDS@ are filled from the audit's
# placeholders by this wrapper, which the audit runs as the client.
IP_WRAP=$OUT/inference-perf.sh
cat > "$IP_WRAP" <<EOF
#!/bin/sh
# URL RATE DURATION PROMPT OUTPUT MODEL OUT
set -e
sed -e "s#@URL@#\$1#; s#@RATE@#\$2#; s#@DURATION@#\$3#; s#@PROMPT@#\$4#g; s#@OUTPUT@#\$5#g; s#@MODEL@#\$6#; s#@OUT@#\$7#; s#@WORKERS@#1#; s#@TOKENIZER@#$TOK#" \
  "$ROOT/bench/audit/inference-perf.yaml" > "\$7/config.yaml"
HF_HUB_OFFLINE=1 exec "$CACHE/ip/bin/inference-perf" --config_file "\$7/config.yaml"
EOF
chmod +x "$IP_WRAP"

for tool in $TOOLS; do
  case $tool in
    inference-perf)
      venv "$CACHE/ip" "inference-perf==$IP_VERSION"
      CMD=("$IP_WRAP" {url} {rate} {duration} {prompt_tokens} {output_tokens} {model} {out})
      EXTRA=(--label inference-perf --timeout 300s) ;;
    vllm)
      venv "$CACHE/vllm" "vllm==$VLLM_VERSION"
      CMD=(env HF_HUB_OFFLINE=1 "$CACHE/vllm/bin/vllm" bench serve --backend openai
        --base-url {url} --model {model} --tokenizer "$TOK" --dataset-name random
        --random-input-len {prompt_tokens} --random-output-len {output_tokens}
        --num-prompts {requests} --request-rate {rate} --ignore-eos --seed 1 --disable-tqdm
        --num-warmups 0 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99
        --save-result --save-detailed --result-dir {out})
      EXTRA=(--label "vllm bench serve" --timeout 300s) ;;
    aiperf)
      venv "$CACHE/aiperf" "aiperf==$AIPERF_VERSION"
      # Not HF_HUB_OFFLINE: AIPerf then looks for the tokenizer in the hub's cache only.
      # One loop: AIPerf sends every request from its workers, max(1, int(cores x 0.75) - 1)
      # of them (one on two cores); its record processor, as busy, parses what a worker
      # already stamped and is not in a TTFT's path.
      CMD=("$CACHE/aiperf/bin/aiperf" profile --model {model} --url {url}
        --endpoint-type completions --streaming --tokenizer "$TOK" --request-rate {rate}
        --request-count {requests} --prompt-input-tokens-mean {prompt_tokens}
        --prompt-input-tokens-stddev 0 --prompt-output-tokens-mean {output_tokens}
        --prompt-output-tokens-stddev 0 --extra-inputs ignore_eos:true --random-seed 1
        --ui-type none --artifact-dir {out})
      EXTRA=(--label AIPerf --timeout 300s) ;;
    guidellm)
      venv "$CACHE/guidellm" "guidellm==$GUIDELLM_VERSION"
      CMD=(env HF_HUB_OFFLINE=1 "$CACHE/guidellm/bin/guidellm" run
        --backend "kind=openai_http,target={url},model={model},request_format=/v1/completions"
        --profile "kind=poisson,rate={rate}" --constraint "kind=max_duration,seconds={duration}"
        --data "kind=synthetic_text,prompt_tokens={prompt_tokens},output_tokens={output_tokens}"
        --tokenizer "kind=huggingface_auto,model=$TOK" --metrics kind=generative,sample_size=0
        --output "kind=json,path={out}/benchmarks.json" --disable-console-interactive)
      EXTRA=(--label GuideLLM --timeout 300s) ;;
    sglang)
      # Without its dependencies (torch and the server's), then what bench_serving imports.
      if [ ! -x "$CACHE/sglang/bin/python" ]; then
        "$PYTHON" -m venv "$CACHE/sglang"
        "$CACHE/sglang/bin/pip" install --quiet --no-deps "sglang==$SGLANG_VERSION"
        "$CACHE/sglang/bin/pip" install --quiet aiohttp numpy pandas requests tqdm transformers \
          pybase64 pillow IPython datasets 2>&1 | grep -v "sglang .* requires" || true
      fi
      CMD=(env HF_HUB_OFFLINE=1 "$CACHE/sglang/bin/python" -m sglang.bench_serving
        --backend sglang-oai --base-url {url} --model {model} --tokenizer "$TOK"
        --dataset-name random-ids --random-input-len {prompt_tokens}
        --random-output-len {output_tokens} --random-range-ratio 1 --num-prompts {requests}
        --request-rate {rate} --seed "$SEED" --disable-tqdm --warmup-requests 0
        --output-file {out}/sglang-result.json --output-details)
      EXTRA=(--label "SGLang bench_serving" --timeout 300s) ;;
    *) echo "unknown tool $tool" >&2; exit 2 ;;
  esac
  # shellcheck disable=SC2206 # MOCK is a list of flags, split on spaces on purpose
  EXTRA+=(${MOCK:-})
  if [ -n "${SPLIT:-}" ]; then
    echo "[audit] $tool at ${RATES// /, } req/s, costs split at $SPLIT tokens"
    HOLD=()
    if [ -n "${HOLD_AT:-}" ]; then HOLD=(--hold-at "${HOLD_AT// /,}"); fi
    if [ -n "${BATCHED:-}" ]; then HOLD+=(--batched "$BATCHED"); fi
    if [ -n "${FIT_AT:-}" ]; then HOLD+=(--fit-at "$FIT_AT"); fi
    series=()
    for k in $(seq 1 "$SERIES"); do
      name=$tool-split
      if [ "$k" -gt 1 ]; then name=$name-$k; echo "[audit] $tool: series $k of $SERIES"; fi
      if [ -n "${SERIES_FROM:-}" ]; then
        # Another sitting's series, read again rather than run (for its knee at another seed).
        cp "$SERIES_FROM/$name.json" "$OUT/$name.json"
        series+=("$OUT/$name.json")
        continue
      fi
      "$HB" audit --rates "${RATES// /,}" --cost-split "$SPLIT" --fit-on "$FIT_ON" "${HOLD[@]}" \
        --duration "$DURATION" --output-tokens "$TOKENS" --work-dir "$OUT/$name" --out "$OUT/$name.json" \
        "${EXTRA[@]}" -- "${CMD[@]}" > "$OUT/$name.txt" 2>&1 || echo "[audit] $name: exit $?"
      if [ -f "$OUT/$name.json" ]; then series+=("$OUT/$name.json"); fi
    done
    if [ "${#series[@]}" -gt 1 ]; then
      # Every series read as one calibration, and each series' audits forecast from the
      # others read together: a forecast from other sittings, not from its own.
      "$HB" audit --from "$(IFS=,; echo "${series[*]}")" --out "$OUT/$tool-pooled.json" \
        > "$OUT/$tool-pooled.txt" 2>&1 || echo "[audit] $tool pooled: exit $?"
      for k in "${!series[@]}"; do
        others=("${series[@]:0:$k}" "${series[@]:$((k + 1))}")
        "$HB" audit --from "$(IFS=,; echo "${others[*]}")" --held-out "${series[$k]}" \
          --out "$OUT/$tool-pooled-without-$((k + 1)).json" > "$OUT/$tool-pooled-without-$((k + 1)).txt" 2>&1 \
          || echo "[audit] $tool without series $((k + 1)): exit $?"
      done
    fi
    if [ "$REPEAT" -gt 1 ] && [ -f "$OUT/$tool-split.json" ]; then
      # The series' held-out rates audited REPEAT-1 times more, and the series' loop held
      # against all of them.
      held=()
      for rate in $("$PYTHON" - "$OUT/$tool-split.json" <<'EOF'
import json, sys
for p in json.load(open(sys.argv[1]))["points"]:
    if not (p.get("simulated") or {}).get("fitted_here"):
        print(f"{p['observed']['offered']['rate_per_s']:g}")
EOF
      ); do
        for k in $(seq 2 "$REPEAT"); do
          name=$tool-held-$rate-r$k
          echo "[audit] $tool at $rate req/s again ($k of $REPEAT)"
          "$HB" audit --rate "$rate" --duration "$DURATION" --output-tokens "$TOKENS" \
            --work-dir "$OUT/$name" --out "$OUT/$name.json" "${EXTRA[@]}" \
            -- "${CMD[@]}" > "$OUT/$name.txt" 2>&1 || echo "[audit] $name: exit $?"
          if [ -f "$OUT/$name.json" ]; then held+=("$OUT/$name.json"); fi
        done
      done
      if [ "${#held[@]}" -gt 0 ]; then
        "$HB" audit --from "$OUT/$tool-split.json" --held-out "$(IFS=,; echo "${held[*]}")" \
          --out "$OUT/$tool-held.json" > "$OUT/$tool-held.txt" 2>&1 \
          || echo "[audit] $tool held out: exit $?"
      fi
    fi
    if [ -n "${KNEE:-}" ] && [ -f "$OUT/$tool-split.json" ]; then
      # The knee in the same sitting as the series that predicted it: the tool audited at
      # each fraction of its predicted saturation in turn, until two steps in a row fall
      # short of 95 % of what they offered.
      sat=$("$PYTHON" - "$OUT/$tool-split.json" <<'EOF'
import json, sys
sims = [p["simulated"] for p in json.load(open(sys.argv[1]))["points"] if p.get("simulated")]
# A tool that sleeps each gap holds no rate above what its lateness allows, whatever its CPU.
p = sims[-1]["prediction"] if sims else {}
print(f"{min(p['saturation_per_s'], p.get('paced_held_per_s') or float('inf')):.0f}" if sims else "")
EOF
      )
      short=0
      quietest=
      for f in ${sat:+$KNEE}; do
        rate=$(awk -v s="$sat" -v f="$f" 'BEGIN { printf "%.0f", s * f }')
        name=$tool-knee-$rate
        echo "[audit] $tool at $rate req/s ($f of the predicted $sat)"
        "$HB" audit --rate "$rate" --duration "$KNEE_DURATION" --output-tokens "$TOKENS" \
          --work-dir "$OUT/$name" --out "$OUT/$name.json" "${EXTRA[@]}" \
          -- "${CMD[@]}" > "$OUT/$name.txt" 2>&1 || echo "[audit] $name: exit $?"
        # Held: 95 % of the rate delivered, and the server's true TTFT median within 50 ms
        # of the quietest step so far (the knee's table below reads it the same way).
        p50=$("$PYTHON" -c 'import json, sys; t = json.load(open(sys.argv[1]))["observed"]["truth"]; print(t["ttft"]["p50_s"] if t["achieved_rate_per_s"] >= 0.95 * float(sys.argv[2]) else "short")' \
          "$OUT/$name.json" "$rate" 2>/dev/null || echo short)
        held=no
        if [ "$p50" != short ]; then
          if [ -z "$quietest" ] || awk -v p="$p50" -v q="$quietest" 'BEGIN { exit !(p < q) }'; then
            quietest=$p50
          fi
          if awk -v p="$p50" -v q="$quietest" 'BEGIN { exit !(p <= q + 0.05) }'; then held=yes; fi
        fi
        if [ "$held" = yes ]; then
          short=0
        else
          short=$((short + 1))
          if [ "$short" -ge 2 ]; then break; fi
        fi
      done
      # The steps read against the series: for a tool that sleeps each gap, the chance each
      # step's own draws gave it of holding (the knee's table prints it).
      knees=("$OUT/$tool"-knee-*.json)
      if [ -f "${knees[0]}" ]; then
        # SGLang's bench draws its gaps from its seed: replayed apart from it, each step's
        # draws are known, and the walk is read given them too (`audit --drawn`).
        drawn=()
        if [ "$tool" = sglang ]; then
          if SEED=$SEED DRAWN="$OUT/$tool-knees-drawn.json" HEISENBENCH="$HB" CACHE="$CACHE" \
            bash bench/audit/sglang-gaps.sh "$OUT/$tool-split.json" "${knees[@]}" > "$OUT/$tool-gaps.txt" 2>&1; then
            drawn=(--drawn "$OUT/$tool-knees-drawn.json")
          else
            echo "[audit] $tool's draws not replayed: exit $? (see $OUT/$tool-gaps.txt)"
          fi
        fi
        "$HB" audit --from "$OUT/$tool-split.json" --held-out "$(IFS=,; echo "${knees[*]}")" "${drawn[@]}" \
          --out "$OUT/$tool-knees-read.json" > "$OUT/$tool-knees-read.txt" 2>&1 \
          || echo "[audit] $tool knee read against its series: exit $?"
      fi
    fi
    continue
  fi
  for rate in $RATES; do
    for k in $(seq 1 "$REPEAT"); do
      name=$tool-$rate
      if [ "$REPEAT" -gt 1 ]; then name=$name-r$k; fi
      echo "[audit] $tool at $rate req/s${name#$tool-$rate}"
      "$HB" audit --rate "$rate" --duration "$DURATION" --output-tokens "$TOKENS" \
        --work-dir "$OUT/$name" --out "$OUT/$name.json" "${EXTRA[@]}" \
        -- "${CMD[@]}" > "$OUT/$name.txt" 2>&1 || echo "[audit] $name: exit $?"
    done
  done
done

if [ -n "${SPLIT:-}" ]; then
  "$PYTHON" - "$OUT" $TOOLS <<'EOF'
import json, os, sys
out = sys.argv[1]
ms = lambda s: "-" if s is None else f"{s * 1e3:.2f}"
pct = lambda p, m: "-" if p is None or not m else f"{(p - m) / m * 100:+.0f} %"
print("| client | offered req/s x tokens | achieved | c: per second | a: per request | b: per chunk | share before send | measured excess mean / p50 / p90 / p99 ms | simulated | error of the mean / p99 | given its speed: error of the mean / p99 | against the calibration's speeds: mean / p99 | closed-form mean | saturation (simulated costs) | saturation as the cores fill |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for tool in sys.argv[2:]:
    path = os.path.join(out, f"{tool}-split.json")
    if not os.path.exists(path):
        print(f"| {tool} | no report |")
        continue
    r = json.load(open(path))
    points = r.get("points", [r])
    for i, a in enumerate(points):
        o, sim = a["observed"], a.get("simulated")
        rows = {x["statistic"]: x for x in (a.get("prediction") or {}).get("rows", [])}
        if not sim:
            print(f"| {tool} | {o['offered']['rate_per_s']:g} | {o['truth']['achieved_rate_per_s']:.0f} | no simulation |")
            continue
        p, m, s = sim["prediction"], sim["measured_excess_s"], sim["split_from"]
        if i == 0:
            held = [(s['short'], s['short_measured_excess_s'], s['short_predicted_s'])]
            if s.get("short_at_other_rate"):
                h = s["short_at_other_rate"]
                held.append((h["sample"], h["measured_excess_s"], h["predicted_s"]))
            for k, (smp, meas, pred) in enumerate(held):
                print(f"| {tool} | {s['rate_per_s'] * (k + 1):g} x {smp['chunks_per_request']:.0f} (calibration) | {smp.get('rate_per_s', 0):.0f} | | | | "
                      f"| {' / '.join(ms(x) for x in meas)} | {' / '.join(ms(x) for x in pred)} "
                      f"| {pct(pred[0], meas[0])} / {pct(pred[3], meas[3])} | | | | |")
        kind = "fitted" if sim.get("fitted_here") else "held out"
        # Held out: the loop given the run's own speed, beside the forecast, and where the
        # run fell against the band of the calibration's speeds.
        g = sim.get("given_its_speed")
        given = "" if g is None else f"{pct(g['reported_s'][0], m[0])} / {pct(g['reported_s'][3], m[3])} (at {g['speed']:.2f})"
        b = sim.get("across_speeds")
        def place(i):
            lo, hi = sorted((b["reported_s"][0][i], b["reported_s"][1][i]))
            return "-" if m[i] is None else "below" if m[i] < lo else "above" if m[i] > hi else "inside"
        band = "" if b is None else f"{place(0)} / {place(3)} ({b['speeds'][0]:.2f}-{b['speeds'][1]:.2f})"
        print(f"| {tool} | {o['offered']['rate_per_s']:g} x {p['chunks_per_request']:.0f} ({kind}) | {o['truth']['achieved_rate_per_s']:.0f} "
              f"| {p['costs'].get('per_second', 0):.3f} cores | {p['costs']['per_request_s'] * 1e3:.2f} ms | {p['costs']['per_chunk_s'] * 1e6:.1f} us | {p['before_send']:.2f} "
              f"| {' / '.join(ms(x) for x in m)} | {' / '.join(ms(x) for x in p['reported_s'])} "
              f"| {pct(p['reported_s'][0], m[0])} / {pct(p['reported_s'][3], m[3])} | {given} | {band} "
              f"| {ms((rows.get('mean') or {}).get('predicted_s'))} | {p['saturation_per_s']:.0f} req/s "
              f"| {'-' if p.get('filled_saturation_per_s') is None else format(p['filled_saturation_per_s'], '.0f') + ' req/s'} |")
EOF
  if [ "$REPEAT" -gt 1 ]; then
    "$PYTHON" - "$OUT" $TOOLS <<'EOF'
import json, os, sys
out = sys.argv[1]
def med(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
ms = lambda v: f"{med(v) * 1e3:.2f} ({min(v) * 1e3:.2f}-{max(v) * 1e3:.2f})"
pct = lambda p, m: f"{(p - m) / m * 100:+.0f} %"
print()
print("| client | held out at (offered) | audits | measured excess mean / p99 ms, median (range) | simulated mean / p99 ms, median (range) | error of the medians, mean / p99 | single audits within 25 %, mean / p99 | the same given each run's speed |")
print("|---|---|---|---|---|---|---|---|")
for tool in sys.argv[2:]:
    path = os.path.join(out, f"{tool}-held.json")
    if not os.path.exists(path):
        print(f"| {tool} | no held-out reading |")
        continue
    by_rate = {}
    for p in json.load(open(path))["points"]:
        sim = p.get("simulated")
        if not sim or sim.get("fitted_here"):
            continue
        m, s = sim["measured_excess_s"], sim["prediction"]["reported_s"]
        if m[0] is None or m[3] is None:
            continue
        g = (sim.get("given_its_speed") or {}).get("reported_s") or [None] * 4
        by_rate.setdefault(p["observed"]["offered"]["rate_per_s"], []).append((m[0], m[3], s[0], s[3], g[0], g[3]))
    for rate, xs in sorted(by_rate.items()):
        col = lambda k: [x[k] for x in xs]
        within = lambda k, at: sum(x[k + at] is not None and abs(x[k + at] - x[k]) <= 0.25 * x[k] for x in xs)
        # Given each run's speed: only the runs whose loops were the calibration's have it.
        given = sum(x[4] is not None for x in xs)
        given = f"{within(0, 4)} / {within(1, 4)} of {given}" if given else "not read (other loops)"
        print(f"| {tool} | {rate:g} | {len(xs)} | {ms(col(0))} / {ms(col(1))} | {ms(col(2))} / {ms(col(3))} "
              f"| {pct(med(col(2)), med(col(0)))} / {pct(med(col(3)), med(col(1)))} | {within(0, 2)} / {within(1, 2)} of {len(xs)} "
              f"| {given} |")
EOF
  fi
  if [ "$SERIES" -gt 1 ]; then
    "$PYTHON" - "$OUT" "$SERIES" $TOOLS <<'EOF'
import json, os, sys
out, n = sys.argv[1], int(sys.argv[2])
# An audit's identity across the readings: its rate, its requests and what the server saw
# (to nine digits: files written before figures were parsed exactly may differ in the last one).
key = lambda p: (p["observed"]["offered"]["rate_per_s"], p["observed"]["truth"]["requests"], round(p["observed"]["truth"]["achieved_rate_per_s"], 9))
def errors(sim):
    p, m = sim["prediction"]["reported_s"], sim["measured_excess_s"]
    return None if m[0] is None or m[3] is None else ((p[0] - m[0]) / m[0], (p[3] - m[3]) / m[3])
show = lambda e: "-" if e is None else f"{e[0] * 100:+.0f} / {e[1] * 100:+.0f} %"
def noise(p, sim):
    # The forecast's mean and p99 against the audit's own 95 % sampling intervals.
    i = ((p["observed"].get("paired_excess") or {}).get("interval"))
    if i is None:
        return None
    f = sim["prediction"]["reported_s"]
    return (i["mean"][0] <= f[0] <= i["mean"][1],
            f[3] >= i["quantile"][0] and (i.get("open_above", False) or f[3] <= i["quantile"][1]))
def ranged(sim):
    # The measured mean and p99 inside the forecast's range, or not.
    r, m = sim.get("forecast_range"), sim["measured_excess_s"]
    if r is None or m[0] is None or m[3] is None:
        return None
    return (r["mean_s"][0] <= m[0] <= r["mean_s"][1], r["p99_s"][0] <= m[3] <= r["p99_s"][1])
def gauged(sim, line="given_the_machine"):
    # The forecast at the speed the machine's gauge gives the run (its integer unit, or
    # with line="given_the_walk" its walk through memory): its errors.
    g, m = sim.get(line), sim["measured_excess_s"]
    if g is None or m[0] is None or m[3] is None:
        return None
    return ((g["reported_s"][0] - m[0]) / m[0], (g["reported_s"][3] - m[3]) / m[3])
def places(sim):
    # The measured mean and p99 against the band of the calibration's speeds.
    b, m = sim.get("across_speeds"), sim["measured_excess_s"]
    if b is None or m[0] is None or m[3] is None:
        return None
    def place(i):
        lo, hi = sorted((b["reported_s"][0][i], b["reported_s"][1][i]))
        return "below" if m[i] < lo else "above" if m[i] > hi else "inside"
    return place(0), place(3)
print()
print("| client | series | held out at (achieved) | measured excess mean / p99 ms | forecast from its own series: error of the mean / p99 | from every series | from the others | from the others, given the machine's speed (its gauge's unit) | from the others, given the memory's speed (its gauge's walk) | against the others' speeds: mean / p99 | inside the others' forecast range: mean / p99 | the others' forecast inside the run's own 95 % interval: mean / p99 |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for tool in sys.argv[3:]:
    pooled = os.path.join(out, f"{tool}-pooled.json")
    if not os.path.exists(pooled):
        print(f"| {tool} | no reading of the series together |")
        continue
    every = {key(p): p for p in json.load(open(pooled))["points"]}
    within = {"own": [0, 0, 0], "every": [0, 0, 0], "others": [0, 0, 0], "machine": [0, 0, 0], "walk": [0, 0, 0]}
    inside = [0, 0, 0]
    in_range = [0, 0, 0]
    held = [0, 0, 0]
    for k in range(1, n + 1):
        own = os.path.join(out, f"{tool}-split{'' if k == 1 else f'-{k}'}.json")
        without = os.path.join(out, f"{tool}-pooled-without-{k}.json")
        if not (os.path.exists(own) and os.path.exists(without)):
            continue
        others = {key(p): p for p in json.load(open(without))["points"]}
        for p in json.load(open(own))["points"]:
            sim = p.get("simulated")
            if not sim or sim.get("fitted_here"):
                continue
            m, o = sim["measured_excess_s"], p["observed"]
            es = {"own": errors(sim)}
            for name, reading in (("every", every), ("others", others)):
                q = reading.get(key(p), {}).get("simulated")
                es[name] = errors(q) if q else None
            q = others.get(key(p), {}).get("simulated")
            es["machine"] = gauged(q) if q else None
            es["walk"] = gauged(q, "given_the_walk") if q else None
            band = places(q) if q else None
            if band is not None:
                inside[0] += band[0] == "inside"
                inside[1] += band[1] == "inside"
                inside[2] += 1
            within_range = ranged(q) if q else None
            if within_range is not None:
                in_range[0] += within_range[0]
                in_range[1] += within_range[1]
                in_range[2] += 1
            sampled = noise(p, q) if q else None
            if sampled is not None:
                held[0] += sampled[0]
                held[1] += sampled[1]
                held[2] += 1
            for name, e in es.items():
                if e is not None:
                    w = within[name]
                    w[0] += abs(e[0]) <= 0.25
                    w[1] += abs(e[1]) <= 0.25
                    w[2] += 1
            mean_p99 = "-" if m[0] is None or m[3] is None else f"{m[0] * 1e3:.2f} / {m[3] * 1e3:.2f}"
            print(f"| {tool} | {k} | {o['offered']['rate_per_s']:g} ({o['truth']['achieved_rate_per_s']:.0f}) | {mean_p99} "
                  f"| {show(es['own'])} | {show(es['every'])} | {show(es['others'])} | {show(es['machine'])} | {show(es['walk'])} | {'-' if band is None else ' / '.join(band)} "
                  f"| {'-' if within_range is None else ' / '.join('yes' if x else 'no' for x in within_range)} "
                  f"| {'-' if sampled is None else ' / '.join('yes' if x else 'no' for x in sampled)} |")
    print(f"| {tool} | within 25 %, mean / p99 | | | " + " | ".join(f"{w[0]} / {w[1]} of {w[2]}" for w in within.values())
          + f" | inside: {inside[0]} / {inside[1]} of {inside[2]} | inside: {in_range[0]} / {in_range[1]} of {in_range[2]}"
          + f" | inside: {held[0]} / {held[1]} of {held[2]} |")
EOF
  fi
  if [ -n "${KNEE:-}" ]; then
    "$PYTHON" - "$OUT" $TOOLS <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
# Two knees. The throughput's: the highest step whose server saw 95 % of what it offered
# and answered it at its own pace, its true TTFT median within 50 ms of the tool's quietest
# step. The mock answers in well under a millisecond when it gets a core; on a machine the
# client and the server share, a client that fills the cores can keep sending at the rate
# while the server's own queue grows (GuideLLM's fourteen processes, r27: true medians of
# 0.7-1.7 s past its CPU bound, against 0.08-4.4 ms at every held step of the others), and
# the rate is then delivered, not held.
# The bound's: the first step at which the client ran out of CPU, its busiest process
# holding connections at 0.95 of a core or more (one interpreter lock) or the machine 95 %
# busy; the prediction's saturation is this one (its loop's utilisation reaching 1). Past
# it a loop may still keep up for a while by spending less a request (fewer wake-ups, more
# work a pass), its own queue growing meanwhile.
BOUND = 0.95
SERVER_PACE_S = 0.05
print()
print("| client | offered req/s | achieved | held | server's true TTFT p50 ms | busiest holder, cores / machine busy | CPU a request ms: tree / busiest holder / its main thread | holders' turns a request (share preempted) | late a gap ms | chance of holding: over a seed's draws / given its draws | reported TTFT p50 ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
verdicts = []
for tool in sys.argv[2:]:
    series = os.path.join(out, f"{tool}-split.json")
    # A tool that sleeps each gap: the chance each step's draws gave it, as the series reads it.
    read = os.path.join(out, f"{tool}-knees-read.json")
    chances, walk, knees_read = {}, None, None
    if os.path.exists(read):
        knees_read = json.load(open(read))
        # The steps as a walk: what such a walk reads over its draws (`audit --from`'s).
        walk = knees_read.get("knee_walk")
        for p in knees_read["points"]:
            sim = p.get("simulated") or {}
            # Over the draws a seed may give, and, where its draws were replayed, given them.
            c = (sim.get("held_chance"), sim.get("drawn_held_chance"))
            if c != (None, None):
                chances[(p["observed"]["offered"]["rate_per_s"], p["observed"]["truth"]["requests"])] = c
    steps = []
    for path in glob.glob(os.path.join(out, f"{tool}-knee-*.json")):
        o = json.load(open(path))["observed"]
        t, c = o["truth"], o["client"]
        rate, got = o["offered"]["rate_per_s"], t["achieved_rate_per_s"]
        per = lambda cores: "-" if cores is None or not got else f"{cores / got * 1e3:.2f}"
        holders = c.get("connected") or {}
        busiest = (holders.get("window_cpu_per_process_s") or c["window_cpu_per_process_s"] or [None])[0]
        busiest = None if busiest is None else busiest / c["window_s"]
        machine = c.get("machine")
        share = machine["busy_cores"] / machine["cores"] if machine else None
        main = holders.get("main_cores", c.get("busiest_main_cores"))
        rep = ((o.get("reported") or {}).get("ttft") or {}).get("p50_s")
        turns, preempted = holders.get("turns_per_s"), holders.get("preempted_share")
        steps.append({
            "rate": rate, "got": got, "delivered": got >= 0.95 * rate, "true_p50": t["ttft"]["p50_s"],
            "bound": (busiest or 0) >= BOUND or (share or 0) >= BOUND,
            "cores": "-" if busiest is None else f"{busiest:.2f}",
            "share": "-" if share is None else f"{share * 100:.0f} %",
            "cpu": " / ".join(per(x) for x in (c["window_cpu_s"] / c["window_s"] if c.get("window_cpu_s") else None, busiest, main)),
            "turns": "-" if turns is None or not got else f"{turns / got:.2f}" + ("" if preempted is None else f" ({preempted:.2f})"),
            "p50": "-" if rep is None else f"{rep * 1e3:.2f}",
            # What each gap between arrivals gained over the offered one: a tool that
            # sleeps each gap after the last (SGLang's) adds its sleep's lateness to each.
            "late": "-" if not got else f"{(1 / got - 1 / rate) * 1e3:.2f}",
            "chance": chances.get((rate, t["requests"])),
        })
    steps.sort(key=lambda s: s["rate"])
    quietest = min((s["true_p50"] for s in steps if s["delivered"]), default=0.0)
    for s in steps:
        s["held"] = s["delivered"] and s["true_p50"] <= quietest + SERVER_PACE_S
        held = "yes" if s["held"] else "no" if not s["delivered"] else "no (the server's queue)"
        chance = " / ".join("-" if c is None else f"{c * 100:.0f} %" for c in s["chance"] or (None, None))
        print(f"| {tool} | {s['rate']:g} | {s['got']:.0f} | {held} | {s['true_p50'] * 1e3:.2f} | {s['cores']} / {s['share']} | {s['cpu']} | {s['turns']} | {s['late']} | {chance} | {s['p50']} |")
    sims = [p["simulated"] for p in json.load(open(series))["points"] if p.get("simulated")] if os.path.exists(series) else []
    if not sims or not steps:
        verdicts.append(f"{tool}: no knee read")
        continue
    prediction = sims[-1]["prediction"]
    sat, filled = prediction["saturation_per_s"], prediction.get("filled_saturation_per_s")
    err = lambda x, k: f"{(x - k) / k * 100:+.0f} %"
    errs = lambda k: err(sat, k) + ("" if filled is None else f" (filling {err(filled, k)})")
    def errors(below, above, errs):
        # A prediction's errors against the ends of a bracket, as far as it was read.
        if below is None and above is None:
            return "not read"
        if below is None:
            return f"below {above:g}, {errs(above)} or more"
        if above is None:
            return f"{below:g} or above, {errs(below)} or less"
        return f"{errs(above)} to {errs(below)}"
    def bracket(name, below, above, errs):
        if below is None or above is None:
            return f"{name}: " + errors(below, above, errs)
        return f"{name} in [{below:g}, {above:g}): " + errors(below, above, errs)
    held = [s["rate"] for s in steps if s["held"]]
    lo = max(held) if held else None
    hi = min((s["rate"] for s in steps if not s["held"] and (lo is None or s["rate"] > lo)), default=None)
    first = next((s["rate"] for s in steps if s["bound"]), None)
    before = max((s["rate"] for s in steps if first is None or s["rate"] < first), default=None)
    as_filled = "" if filled is None else f", {filled:.0f} as its cores fill"
    bound_verdict = bracket("its CPU bound reached", before, first, errs)
    held_verdict = bracket("throughput held", lo, hi, errs)
    paced = prediction.get("paced_held_per_s")
    pacing = prediction.get("gap_lateness")
    # Where the knee's reading had the series' draws replayed, its lateness is read net of
    # them (`audit --drawn`): that pacing, not the series' own.
    net = next((p["simulated"]["prediction"] for p in (knees_read or {}).get("points", [])
                if ((p.get("simulated") or {}).get("prediction") or {}).get("gap_lateness", {}).get("net_of_draws")), None)
    if net is not None:
        paced, pacing = net.get("paced_held_per_s"), net["gap_lateness"]
    if paced is not None and paced < sat:
        # Its pacing, not its CPU, bounds the rate it holds: that bracket against it.
        as_filled += (f", {paced:.0f} held as it paces (each gap {pacing['late_s'] * 1e3:.2f} ms late"
                      + (", net of its replayed draws)" if pacing.get("net_of_draws") else ")"))
        held_verdict = bracket("throughput held, against the pacing's", lo, hi, lambda k: err(paced, k))
        drawn = [f"{s['rate']:g}: {s['chance'][0] * 100:.0f} %" for s in steps if s["chance"] and s["chance"][0] is not None]
        if drawn:
            held_verdict += "; the chance each step's draws gave it of holding, " + ", ".join(drawn)
        given = [f"{s['rate']:g}: {s['chance'][1] * 100:.0f} %" for s in steps if s["chance"] and s["chance"][1] is not None]
        if given:
            held_verdict += "; given its replayed draws, " + ", ".join(given)
        if walk:
            w = walk["predicted"]
            reads = [("none", w["none"])] + [(f"{s['rate_per_s']:g}", p) for s, p in zip(walk["steps"], w["highest"])]
            held_verdict += ("; a walk up these steps reads " + ", ".join(f"{r} {p * 100:.0f} %" for r, p in reads)
                             + f" (on past the last {w['walking_on'] * 100:.0f} %), this one's reading or lower {walk['at_most'] * 100:.0f} %")
            band = walk.get("within_band") or []
            if band:
                # Over the lateness's error too, and at longer steps: longer steps shrink
                # the draws' part, not the error.
                lengths = ", ".join(f"{p * 100:.0f} %" + ("" if t == 1 else f" at {t:g}x the length") for t, p in band)
                held_verdict += f"; over the lateness's error a walk reads within 15 % of the limit with chance {lengths}"
            given = walk.get("given_draws")
            if given:
                # Each step's draws replayed: the lateness's error is all that is left.
                g = given["walk"]
                reads = [("none", g["none"])] + [(f"{s['rate_per_s']:g}", p) for s, p in zip(walk["steps"], g["highest"])]
                at = given.get("at_lateness")
                at = "none" if at is None else f"{walk['steps'][at]['rate_per_s']:g}"
                held_verdict += ("; given each step's draws it reads " + ", ".join(f"{r} {p * 100:.0f} %" for r, p in reads if p >= 0.005)
                                 + f" ({at} at the lateness read), within 15 % {given['within_band'] * 100:.0f} %")
    top = prediction.get("batched_saturation_per_s")
    if top is not None and paced is None:
        # The throughput its CPU a request with the work met in batches bounds.
        held_verdict += f"; against the batched bound {top:.0f}: " + errors(lo, hi, lambda k: err(top, k))
    verdicts.append(f"{tool}: predicted {sat:.0f} req/s{as_filled}; {bound_verdict}; {held_verdict}")
print()
print("\n".join(verdicts))
EOF
  fi
  echo "[audit] reports in $OUT"
  exit 0
fi

"$PYTHON" - "$OUT" "$REPEAT" $TOOLS -- $RATES <<'EOF'
import json, os, sys
out, repeat = sys.argv[1], int(sys.argv[2])
i = sys.argv.index("--")
tools, rates = sys.argv[3:i], sys.argv[i + 1:]
names = lambda tool, rate: [f"{tool}-{rate}"] if repeat == 1 else [f"{tool}-{rate}-r{k}" for k in range(1, repeat + 1)]
ms = lambda s: "-" if s is None else f"{s * 1e3:.2f}"
print("| client | offered req/s | achieved (server) | CPU per chunk | utilisation | reported TTFT p50 / p99 ms | true TTFT p50 / p99 ms | TTFT excess mean / p99 ms | predicted wait mean ms | processes for p99 <= 1 ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
spread = {}
for tool in tools:
    for rate in rates:
        for name in names(tool, rate):
            label = name[len(tool) + 1:]
            p = os.path.join(out, f"{name}.json")
            if not os.path.exists(p):
                print(f"| {tool} | {label} | no report | | | | | | | |")
                continue
            r = json.load(open(p))
            o, pr = r["observed"], r.get("prediction") or {}
            t, rep = o["truth"], (o.get("reported") or {}).get("ttft") or {}
            rows = {x["statistic"]: x for x in pr.get("rows", [])}
            wait = pr.get("wait_s")
            c = o["client"]
            ex = [rows.get(s, {}).get("excess_s") for s in ("mean", "p99")]
            cpu = c["window_cpu_s"] / c["window_s"] / t["achieved_rate_per_s"] if t["achieved_rate_per_s"] else None
            spread.setdefault((tool, rate), []).append((ex[0], ex[1], cpu))
            print(f"| {tool} | {label} | {t['achieved_rate_per_s']:.0f} | {pr.get('cpu_per_chunk_s', 0) * 1e6:.1f} us"
                  f" | {pr.get('rho', 0):.2f} | {ms(rep.get('p50_s'))} / {ms(rep.get('p99_s'))}"
                  f" | {ms(t['ttft']['p50_s'])} / {ms(t['ttft']['p99_s'])}"
                  f" | {ms(ex[0])} / {ms(ex[1])}{' (paired)' if o.get('paired_excess') else ''}"
                  f" | {'saturated' if wait is None else ms(wait[0])}"
                  f" | {pr.get('loops_needed') or '-'} |")
# With REPEAT, the run-to-run spread of each rate's audits: what any prediction held
# against one of them carries.
if repeat > 1:
    print()
    for (tool, rate), xs in spread.items():
        def med(k, scale):
            v = sorted(x[k] * scale for x in xs if x[k] is not None)
            if not v:
                return "-"
            m = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
            return f"{m:.2f} ({v[0]:.2f}-{v[-1]:.2f}, {(v[-1] - v[0]) / m * 100:.0f} % of the median)"
        print(f"{tool} at {rate} req/s, {len(xs)} audits: excess mean {med(0, 1e3)} ms, p99 {med(1, 1e3)} ms, CPU a request {med(2, 1e3)} ms")
# The highest rate each tool held: the server saw at least 95 % of what was offered, and
# answered it at its own pace (its true TTFT median within 50 ms of the tool's quietest
# audit, as the knee's steps read it). Past it a client falls behind, and then reads whole
# responses from full socket buffers: what it achieves far beyond (RATES=1000) is that
# regime's throughput, not its knee.
print()
for tool in tools:
    seen = []
    for rate in rates:
        for name in names(tool, rate):
            p = os.path.join(out, f"{name}.json")
            if os.path.exists(p):
                t = json.load(open(p))["observed"]["truth"]
                seen.append((float(rate), t["achieved_rate_per_s"], t["ttft"]["p50_s"]))
    quietest = min((p50 for r, got, p50 in seen if got >= 0.95 * r), default=0.0)
    held = [r for r, got, p50 in seen if got >= 0.95 * r and p50 <= quietest + 0.05]
    print(f"{tool}: highest rate held within 5 %: {max(held):g} req/s" if held else f"{tool}: no rate held within 5 %")
EOF
echo "[audit] reports in $OUT"
