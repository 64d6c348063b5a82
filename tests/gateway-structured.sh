#!/usr/bin/env bash
# Description: structured output and tool calling through allm-gateway (issue 51) with the openai SDK on the stories model and a ChatML template with a small tool section: response_format json_schema / json_object, llama.cpp's grammar and json_schema, vLLM's structured_outputs and guided_* each constrain every seeded sample (JSON validated by jsonschema, regexes matched, choices one of them, GBNF parsed), on both routes and streamed; a grammar that does not compile is a 400 naming the field and the place, two grammars a 400 naming both; tools with tool_choice required and a named function always give calls that validate (whole and streamed: id and name first, then arguments; finish_reason tool_calls), auto and none give text, a call and its result go back in; LangChain's bind_tools and with_structured_output; LiteLLM's forced call, whole and streamed.
. "$(dirname "$0")/gateway-common.sh"
venv_need openai jsonschema langchain-openai litellm

ctl_start gwst --model "$M" --profile "$tmp/profile.json"
# ChatML with a short tool section of its own (names only): the stories model's
# 512-token context has no room for the Hermes preamble, which real-model-tools
# checks on SmolLM2
cat >"$tmp/tools.jinja" <<'JINJA'
{% if tools %}<|im_start|>system
Tools: {% for t in tools %}{{ t.function.name }} {% endfor %}as <tool_call><|im_end|>
{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}
JINJA
gw_start gwst --chat-template "$tmp/tools.jinja" --served-model-name stories
gw_up "$GW_URL" || exit 1
GW_URL=$GW_URL GW_MODEL=stories GW_SEEDS=3 GW_LANGCHAIN=1 GW_LITELLM=1 HOME=$tmp "$PY" "$TESTS_DIR/gateway-structured.py" >"$tmp/st.out" 2>&1
rc=$?
grep -E '^(ok|FAIL|Traceback)' "$tmp/st.out"
[ $rc -eq 0 ] || { fail "structured-output checks (exit $rc)"; tail -n 20 "$tmp/st.out"; }
[ "$(grep -c '^ok:' "$tmp/st.out")" = 32 ] || fail "not every check ran ($(grep -c '^ok:' "$tmp/st.out") ok)"
gw_stop "$GW_PID" "gateway"
daemon_stop "engine"
finish
