#!/usr/bin/env bash
# Description: structured output and tool calling on real models through allm-engined and allm-gateway with the openai SDK (tests/gateway-structured.py): SmolLM2-135M-Instruct (GGUF Q4_1; its ChatML template has no tool section, so the gateway's Hermes preamble carries the tools) gets every structured-output spelling and every tool_choice; Qwen2.5-Coder-0.5B-Instruct (Q4_K_M; its own template renders the tools and names <tool_call>) calls the weather tool on its own under tool_choice auto, and required and named calls parse, whole and streamed. Each model skips alone where tools/models.sh cannot fetch it.
. "$(dirname "$0")/gateway-common.sh"
. "$(dirname "$0")/real-model-common.sh"
venv_need openai jsonschema
real_model_need

run_py() { # run_py NAME URL MODEL [ENV...]: the client's checks, which must all pass
	local name=$1 url=$2 model=$3
	shift 3
	env GW_URL="$url" GW_MODEL="$model" HOME="$tmp" "$@" "$PY" "$TESTS_DIR/gateway-structured.py" >"$tmp/$name.out" 2>&1
	local rc=$?
	sed "s/^/$name: /" "$tmp/$name.out" | grep -E '^[a-z0-9.-]+: (ok|FAIL|Traceback)'
	[ $rc -eq 0 ] || { fail "$name: checks (exit $rc)"; tail -n 20 "$tmp/$name.out"; }
}

ctl_start rmt --model "$SMOLLM2" --profile "$BUILD_DIR/real-model-profile.json" \
	--max-num-batched-tokens 256 --gpu-blocks 64 --cpu-blocks 64
gw_start rmt --served-model-name smollm2
gw_up "$GW_URL" || exit 1
run_py smollm2 "$GW_URL" smollm2 GW_SEEDS=1
gw_stop "$GW_PID" "smollm2 gateway"
daemon_stop "smollm2 engine"

QWEN=$(cd "$TESTS_DIR/.." && pwd)/.models-cache/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
[ -f "$QWEN" ] || bash "$TESTS_DIR/../tools/models.sh" qwen2.5-coder >/dev/null 2>&1 || true
if [ -f "$QWEN" ]; then
	ctl_start rmq --model "$QWEN" --profile "$BUILD_DIR/real-model-profile-qwen.json" \
		--max-num-batched-tokens 512 --gpu-blocks 64 --cpu-blocks 64
	gw_start rmq --served-model-name qwen
	gw_up "$GW_URL" || exit 1
	run_py qwen "$GW_URL" qwen GW_SEEDS=1 GW_ONLY=tools GW_AUTO_CALLS=1 GW_PARALLEL=1
	gw_stop "$GW_PID" "qwen gateway"
	daemon_stop "qwen engine"
else
	echo "skip: Qwen2.5-Coder is not in .models-cache/ (tools/models.sh qwen2.5-coder fetches it)"
fi
finish
