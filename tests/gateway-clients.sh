#!/usr/bin/env bash
# Description: allm-gateway through three clients no one here wrote (issue 48), pinned with their whole closures in tools/venv-pins.txt: the openai SDK, LiteLLM's OpenAI-compatible provider and LangChain's ChatOpenAI, each with a plain chat (the same greedy text across the three), a streamed one, n=2, logprobs and an error in OpenAI's shape; the SDK's models.retrieve(). The stories model with a ChatML template.
. "$(dirname "$0")/gateway-common.sh"
venv_need openai litellm langchain-openai

ctl_start gwcl --model "$M" --profile "$tmp/profile.json"
python3 -c 'import json, sys; open(sys.argv[2], "w").write(json.load(open(sys.argv[1]))["chat_template"])' \
	"$TESTS_DIR/chat-templates/chatml.json" "$tmp/chatml.jinja"
gw_start gwcl --chat-template "$tmp/chatml.jinja" --served-model-name stories
gw_up "$GW_URL" || exit 1
GW_URL=$GW_URL GW_MODEL=stories HOME=$tmp "$PY" "$TESTS_DIR/gateway-clients.py" >"$tmp/clients.out" 2>&1
rc=$?
grep -E '^(ok|FAIL|Traceback)' "$tmp/clients.out"
[ $rc -eq 0 ] || { fail "client checks (exit $rc)"; tail -n 20 "$tmp/clients.out"; }
[ "$(grep -c '^ok:' "$tmp/clients.out")" = 16 ] || fail "not every client check ran"
gw_stop "$GW_PID" "gateway"
daemon_stop "engine"
finish
