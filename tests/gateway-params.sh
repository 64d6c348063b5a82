#!/usr/bin/env bash
# Description: the request parameters' table through allm-gateway (issue 39): for every row of the build's request-params.json the gateway takes a value inside the row's range (200) and answers one outside it with a 400 that names the key and the table's range; a prompt id outside the vocabulary is refused naming its position and id; the gateway's text is the engine's (decoded once, in the prompt's context): the same as the allm CLI's for the same request, greedy and seeded.
. "$(dirname "$0")/gateway-common.sh"

TABLE=$BUILD_DIR/common/request-params.json
[ -f "$TABLE" ] || { echo "FAIL: $TABLE not built"; exit 1; }
ctl_start gwparams --model "$M" --profile "$tmp/profile.json"
gw_start gwparams
gw_up "$GW_URL" || exit 1
MODEL=$(curl -s "$GW_URL/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')

# --- every row: a value in range, one outside -------------------------------------------
python3 - "$GW_URL" "$MODEL" "$TABLE" <<'PY' >"$tmp/rows.out" 2>&1
import json, sys, urllib.error, urllib.request
url, model, table = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))

def post(extra):
    body = dict({"model": model, "prompt": "Once upon a", "max_tokens": 4, "temperature": 0}, **extra)
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

flags = table["flags"]
n = 0
for row in table["rows"]:
    key, lo, hi, t = row["json"], row["lo"], row["hi"], row["type"]
    if t in ("u64", "bool") or key is None:
        continue  # every value of a seed is one; a flag is true or false; no JSON key (grammar_kind)
    k = 1 if row["flags"] & flags["plus_one"] else 0  # users write the stored value - 1
    inside = (lo + hi) / 2 if t == "f32" else int(lo) - k
    if key == "max_tokens":
        inside = 4
    outs = []
    if hi < 2**31 - 1:  # past the top (an int32 row's top is the type's)
        outs.append(hi - k + 0.5 if t == "f32" else int(hi) - k + 1)
    # below the bottom (the bottom itself where it is open); -1 is off for some (vLLM's)
    below = lo if row["flags"] & flags["lo_open"] else (lo - 0.5 if t == "f32" else int(lo) - k - 1)
    if below == -1 and row["flags"] & flags["json_neg1"]:
        below = -2
    if not (t != "f32" and k == 0 and row["off"] == below):
        outs.append(below)
    code, body = post({key: inside})
    print(("ok" if code == 200 else "FAIL") + ": %s %r inside [%g, %g]: %d %s" % (key, inside, lo, hi, code,
          "" if code == 200 else body))
    for outside in outs:
        code, body = post({key: outside})
        err = body.get("error", {}) if isinstance(body, dict) else {}
        good = code == 400 and err.get("param") == key and key in err.get("message", "")
        print(("ok" if good else "FAIL") + ": %s %r outside: %d %s" % (key, outside, code, err.get("message")))
    n += 1
print("ok: %d rows checked" % n if n >= 9 else "FAIL: only %d rows checked" % n)
PY
grep -q FAIL "$tmp/rows.out" && fail "table rows through the gateway: $(grep FAIL "$tmp/rows.out")" ||
	ok "every row's range through the gateway ($(tail -n 1 "$tmp/rows.out"))"
grep -h "outside:" "$tmp/rows.out" | head -n 3

# --- a prompt id outside the vocabulary: which one, where --------------------------------
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "$GW_URL/v1/completions" -H 'Content-Type: application/json' \
	-d "{\"model\": \"$MODEL\", \"prompt\": [1, 100000], \"max_tokens\": 2}")
[ "$code" = 400 ] && grep -q 'prompt token at 1 (id 100000) is not in 0\.\.' "$tmp/body" &&
	ok "a prompt id outside the vocabulary: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"]["message"])' "$tmp/body")" ||
	fail "prompt id 100000: $code $(cat "$tmp/body")"

# --- the text is the engine's: the same as allm's --------------------------------------------
for args in "0 0" "1 7"; do
	set -- $args
	gw=$(curl -s "$GW_URL/v1/completions" -H 'Content-Type: application/json' \
		-d "{\"model\": \"$MODEL\", \"prompt\": \"Once upon a\", \"max_tokens\": 30, \"temperature\": $1, \"seed\": $2}" |
		python3 -c 'import json, sys; sys.stdout.write(json.load(sys.stdin)["choices"][0]["text"])')
	cli=$("$ALLM" generate --name gwparams --prompt "Once upon a" --max-tokens 30 --temperature "$1" --seed "$2" 2>/dev/null)
	[ -n "$gw" ] && [ "$gw" = "$cli" ] && ok "temperature $1 seed $2: the gateway's text is allm's ('$gw')" ||
		fail "temperature $1 seed $2: gateway '$gw' vs allm '$cli'"
done

gw_stop "$GW_PID" "gateway"
daemon_stop "engine"
finish
