#!/usr/bin/env bash
# heisenbench against a real inference engine on this machine's CPU: llama.cpp's
# OpenAI-compatible server (llama-cpp-python, compiled from source on first use) serving a
# tiny llama model generated here (make_model.py), on loopback.
#
# Opt-in: the first run compiles llama.cpp (about 8 minutes on 2 cores at full speed; the
# built wheel is cached in $CACHE/wheels, so later runs install in seconds). Never part of
# `cargo test` or .ci/run.
#
#   bash bench/llamacpp/run.sh            # everything; exits non-zero if a check fails
#
# Environment: PYTHON (a Python 3.12 interpreter; default: pyenv's 3.12 or python3),
# HEISENBENCH (the binary; default: target/release/heisenbench, built if missing),
# CACHE (default: ~/.cache/heisenbench/llamacpp), PORT (default 8391).
set -euo pipefail
cd "$(dirname "$0")/../.."

T0=$(date +%s)
CACHE=${CACHE:-$HOME/.cache/heisenbench/llamacpp}
PORT=${PORT:-8391}
URL=http://127.0.0.1:$PORT
PYTHON=${PYTHON:-$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python 2>/dev/null | tail -1)}
PYTHON=${PYTHON:-python3}
HB=${HEISENBENCH:-target/release/heisenbench}
VERSION=0.3.36
mkdir -p "$CACHE/wheels"

if [ ! -x "$HB" ]; then
  cargo build --release --locked
fi

VENV=$CACHE/venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import llama_cpp, gguf" 2>/dev/null; then
  echo "[llamacpp] installing llama-cpp-python $VERSION (compiles llama.cpp the first time)"
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
  "$VENV/bin/pip" wheel --quiet --wheel-dir "$CACHE/wheels" "llama-cpp-python[server]==$VERSION"
  "$VENV/bin/pip" install --quiet --no-index --find-links "$CACHE/wheels" \
    "llama-cpp-python[server]==$VERSION" || \
    "$VENV/bin/pip" install --quiet --find-links "$CACHE/wheels" "llama-cpp-python[server]==$VERSION"
  "$VENV/bin/pip" install --quiet gguf numpy
fi
T_INSTALL=$(( $(date +%s) - T0 ))

WORK=$(mktemp -d)
MODEL=$WORK/tiny.gguf
TOKENIZER=$WORK/tokenizer.json
"$VENV/bin/python" bench/llamacpp/make_model.py "$MODEL" --tokenizer "$TOKENIZER"

SERVER_PID=
start_server() {
  stop_server
  "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port "$PORT" \
    --n_ctx 512 --n_threads 1 "$@" > "$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    if curl -sf "$URL/v1/models" > /dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "[llamacpp] the server did not start:"; tail -20 "$WORK/server.log"; exit 1
}
stop_server() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  SERVER_PID=
}
trap 'stop_server; rm -rf "$WORK"' EXIT

FAILED=0
check() { # name, jq-free python expression over the report in $WORK/$1/report.json
  local name=$1 expr=$2
  if "$VENV/bin/python" - "$WORK/$name/report.json" "$expr" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
a = r["accounting"]
ok = eval(sys.argv[2])
print(("ok   " if ok else "FAIL ") + sys.argv[2])
sys.exit(0 if ok else 1)
EOF
  then :; else FAILED=1; fi
}
run() { # name, heisenbench run flags...
  local name=$1; shift
  echo "== $name: heisenbench run $*"
  "$HB" run --url "$URL" --workers 1 --timeout 60s --out "$WORK/$name" "$@" | sed 's/^/   /' || true
}

# 1. One request at a time (--interrupt_requests False: first come, first served).
start_server --interrupt_requests False
run completions --qps 2 --requests 20 --prompt-tokens 16 --output-tokens 32
check completions 'a["completed"] == 20 and a["balanced"]'
# llama-cpp-python streams a chunk per token, but now and then one more (an empty text
# while it holds back a word): the streamed count is the token count to within 1 %.
check completions 'abs(r["tokens_stream"] - 20 * 32) <= 0.01 * 20 * 32'
check completions 'r["ttft"]["from_actual"]["p50_s"] > 0 and r["itl"]["p50_s"] > 0'
run chat --api chat --qps 2 --requests 20 --prompt-tokens 16 --output-tokens 32
check chat 'a["completed"] == 20 and abs(r["tokens_stream"] - 20 * 32) <= 0.01 * 20 * 32'
run whole --no-stream --qps 2 --requests 20 --prompt-tokens 16 --output-tokens 32
check whole 'a["completed"] == 20 and r["tokens_usage"] == 20 * 32 and r["token_mismatches"] == 0'
# Exact prompts: the model's own tokenizer (written beside the GGUF as a tokenizer.json);
# llama.cpp's usage counts the prompt plus its BOS, for every length.
run prompts --no-stream --qps 2 --requests 20 --prompt-tokens uniform:1,300 --output-tokens 4 \
  --tokenizer "$TOKENIZER"
check prompts 'a["completed"] == 20 and r["prompt_tokens"]["checked"] == 20'
check prompts 'r["prompt_tokens"]["usual_overhead"] == 1 and r["prompt_tokens"]["mismatches"] == 0'
# Without it a prompt is words, which this vocabulary does not hold as single tokens.
run words --no-stream --qps 2 --requests 20 --prompt-tokens uniform:1,300 --output-tokens 4
check words 'r["prompt_tokens"]["mismatches"] > 0'
echo "== sweep: heisenbench sweep (64-token streams)"
"$HB" sweep --url "$URL" --from 0.5 --to 6 --steps 6 --stage-duration 10s --workers 1 \
  --prompt-tokens 16 --output-tokens 64 --max-p99 1s --json > "$WORK/sweep.json" || true
"$VENV/bin/python" - "$WORK/sweep.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
for st in s.get("stages", []):
    print("   offered %.2f achieved %.2f req/s, p99 TTFT %.3f s" % (st["offered_qps"], st["achieved_qps"], st["p99_s"]))
print("   knee (req/s):", s.get("knee_qps"))
EOF

# The server's own prompt cache: llama.cpp keeps the tokens it last evaluated and
# prefills only what differs. Identical prompts (--prompts repeated) skip their prefill
# after the first; unique prompts (the default) pay it every time; a shared system prompt
# (one prefix group) pays only its own part.
run unique --qps 1 --requests 20 --prompt-tokens 400 --output-tokens 4 --tokenizer "$TOKENIZER"
run identical --qps 1 --requests 20 --prompt-tokens 400 --output-tokens 4 --tokenizer "$TOKENIZER" \
  --prompts repeated
run shared --qps 1 --requests 20 --prompt-tokens 16 --prefix-groups 1 --prefix-tokens 384 \
  --output-tokens 4 --tokenizer "$TOKENIZER"
check unique 'a["completed"] == 20 and r["prompt_tokens"]["mismatches"] == 0'
check identical 'a["completed"] == 20'
check shared 'a["completed"] == 20'
"$VENV/bin/python" - "$WORK" <<'EOF' || FAILED=1
import json, sys
p50 = {}
for name in ["unique", "identical", "shared"]:
    r = json.load(open(f"{sys.argv[1]}/{name}/report.json"))
    t = r["ttft"]["from_actual"]
    p50[name] = t["p50_s"]
    print("   %-9s TTFT p50 %.2f ms, p99 %.2f ms (%d completed)" % (name, t["p50_s"] * 1e3, t["p99_s"] * 1e3, r["accounting"]["completed"]))
ok = p50["identical"] < 0.5 * p50["unique"] and p50["shared"] < 0.5 * p50["unique"]
print(("ok   " if ok else "FAIL ") + "identical and shared-prefix prompts prefill faster than unique ones (the cache)")
sys.exit(0 if ok else 1)
EOF

# 2. The default: a new request interrupts the stream in progress ([DONE], no finish reason).
start_server
run interrupted --qps 20 --requests 40 --prompt-tokens 16 --output-tokens 64
check interrupted 'a["balanced"] and a["failed"].get("truncated", 0) > 0'
check interrupted 'a["failed"].get("stream_broken", 0) == 0 and a["failed"].get("malformed", 0) == 0'

stop_server
echo "[llamacpp] install ${T_INSTALL}s, total $(( $(date +%s) - T0 ))s; llama-cpp-python $VERSION"
exit $FAILED
