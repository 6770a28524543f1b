#!/usr/bin/env bash
# heisenbench against llama.cpp's own C++ server, `llama-server --metrics`, with the
# server's Prometheus endpoint scraped during the run: the TTFT split into the client's
# send lag, the server's queue and prefill, and the rest, at a low and a saturating rate.
#
# Opt-in, never part of `cargo test` or .ci/run: the first run builds llama-server from the
# llama.cpp source vendored in the llama-cpp-python source package (about 12 minutes on 2
# cores at -j1; cmake and ninja come from PyPI). The build is cached in $CACHE/build-server.
#
#   bash bench/llamacpp/server.sh        # exits non-zero if a check fails
#
# Environment: PYTHON (a Python 3.12; default pyenv's), HEISENBENCH (default
# target/release/heisenbench, built if missing), CACHE (default ~/.cache/heisenbench/llamacpp),
# PORT (default 8392), JOBS (build parallelism, default 1).
set -euo pipefail
cd "$(dirname "$0")/../.."

T0=$(date +%s)
CACHE=${CACHE:-$HOME/.cache/heisenbench/llamacpp}
PORT=${PORT:-8392}
URL=http://127.0.0.1:$PORT
PYTHON=${PYTHON:-$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python 2>/dev/null | tail -1)}
PYTHON=${PYTHON:-python3}
HB=${HEISENBENCH:-target/release/heisenbench}
VERSION=0.3.36
JOBS=${JOBS:-1}
mkdir -p "$CACHE"

[ -x "$HB" ] || cargo build --release --locked

VENV=$CACHE/venv
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -c "import gguf, numpy, cmake, ninja, scikit_build_core" 2>/dev/null ||
  "$VENV/bin/pip" install --quiet gguf numpy cmake ninja scikit-build-core

SERVER=$CACHE/build-server/bin/llama-server
if [ ! -x "$SERVER" ]; then
  SRC=$CACHE/src/llama_cpp_python-$VERSION/vendor/llama.cpp
  if [ ! -d "$SRC" ]; then
    echo "[llama-server] fetching the llama-cpp-python $VERSION source package"
    # Without build isolation pip reads the package's metadata with the scikit-build-core
    # installed above and compiles nothing.
    "$VENV/bin/pip" download --quiet --no-deps --no-build-isolation --no-binary llama-cpp-python \
      "llama-cpp-python==$VERSION" -d "$CACHE/src"
    tar xzf "$CACHE/src/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE/src"
  fi
  echo "[llama-server] building (about 12 minutes at -j1)"
  "$VENV/bin/cmake" -S "$SRC" -B "$CACHE/build-server" -G Ninja \
    -DCMAKE_MAKE_PROGRAM="$VENV/bin/ninja" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON > "$CACHE/cmake.log"
  "$VENV/bin/cmake" --build "$CACHE/build-server" --target llama-server -j "$JOBS" > "$CACHE/build.log"
fi
T_BUILD=$(( $(date +%s) - T0 ))

WORK=$(mktemp -d)
"$VENV/bin/python" bench/llamacpp/make_model.py "$WORK/tiny.gguf" --tokenizer "$WORK/tokenizer.json"

# One slot (-np 1), one thread: requests are served one at a time, the rest wait
# ("deferred"), so the queue is the server's and the knee is low.
"$SERVER" -m "$WORK/tiny.gguf" --host 127.0.0.1 --port "$PORT" -c 2048 -np 1 -t 1 --metrics \
  > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true; wait $SERVER_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 100); do
  curl -sf "$URL/metrics" > /dev/null 2>&1 && break
  sleep 0.2
done

run() { # name, flags...
  local name=$1; shift
  echo "== $name: heisenbench run $*"
  "$HB" run --url "$URL" --tokenizer "$WORK/tokenizer.json" --prompt-tokens 64 \
    --scrape-interval 200ms --timeout 120s --out "$WORK/$name" "$@" |
    grep -E "^live:|SATURATED|TTFT from|server:|its own|running|TTFT split|scraping" | sed 's/^/   /'
}
run low --qps 2 --duration 10s --output-tokens 32
run saturated --qps 80 --duration 8s --output-tokens 128

"$VENV/bin/python" - "$WORK" <<'EOF'
import json, sys
ok = True
for name, check in [("low", lambda q: q < 0.1), ("saturated", lambda q: q > 0.8)]:
    r = json.load(open(f"{sys.argv[1]}/{name}/report.json"))
    a = r["server"]["attribution"]
    parts = {p["name"]: p for p in a["parts"]}
    print("   %-9s offered %5.1f req/s, TTFT mean %9.3f ms: %s" % (
        name, r["offered_qps"], a["ttft_mean_s"] * 1e3,
        ", ".join("%s %.3f ms (%.1f %%)" % (k, p["mean_s"] * 1e3, p["share"] * 100) for k, p in parts.items())))
    good = check(parts["queue"]["share"]) and r["accounting"]["balanced"]
    print(("ok   " if good else "FAIL ") + f"{name}: queue share {parts['queue']['share']:.3f}")
    ok &= good
sys.exit(0 if ok else 1)
EOF
echo "[llama-server] build ${T_BUILD}s, total $(( $(date +%s) - T0 ))s"
