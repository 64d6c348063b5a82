#!/usr/bin/env bash
# Description: the prefix cache through a real allm-engined and its clients (DESIGN §5b, §9): a prompt sent twice is served from the cache the second time (allm --json cached_tokens, status prefix_cache with exactly DESIGN §9's keys, vllm:/allm_ prefix metrics) with the same ids; set prefix_caching=off stops it, cache reset drops every cached block, a pool shrink evicts cleanly (to the host pool); with the test hook that makes every block key collide, another prompt of the same length never gets the first one's KV (its ids stay allm-run's, cached_tokens 0) while the same prompt still hits; two uids sending the same prompt get no hit from each other, one uid does, and --share-prefix-cache lets them share (run as root: the second uid via setpriv, else that part is skipped).
. "$(dirname "$0")/daemon-common.sh"
CTL=$BUILD_DIR/ctl/allmctl
for b in "$CTL"; do [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }; done
st() { "$CTL" --name "$1" status --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$2"; }

# two prompts of 40 ids (two full blocks of 16 can be cached), the same length
A=$(python3 -c "print(','.join(str(1 + (i * 37) % 500) for i in range(40)))")
B=$(python3 -c "print(','.join(str(1 + (i * 53 + 7) % 500) for i in range(40)))")
# gen NAME IDS [ALLM...]: "<cached_tokens> <generated ids>" of one greedy request
gen() {
	local name=$1 ids=$2
	shift 2
	"$@" "$ALLM" --name "$name" generate --prompt-ids "$ids" --max-tokens 12 --temperature 0 --json 2>"$tmp/gen.err" |
		python3 -c "import json,sys; d=json.load(sys.stdin); print(d['cached_tokens'], ' '.join(map(str, d['generated_ids'])))"
}
ref() { "$RUN" --model "$M" --device cpu --prompt-ids "$1" --max-tokens 12 --temperature 0 --ids | sed -n 's/^generated: //p'; }
REF_A=$(ref "$A")
REF_B=$(ref "$B")
[ -n "$REF_A" ] && [ -n "$REF_B" ] && [ "$REF_A" != "$REF_B" ] || { fail "allm-run references: '$REF_A' '$REF_B'"; finish; }

# --- hits, status, metrics ------------------------------------------------------
daemon_start pc --gpu-blocks 64 --cpu-blocks 32
r1=$(gen pc "$A") r2=$(gen pc "$A")
[ "${r1#* }" = "$REF_A" ] && [ "${r2#* }" = "$REF_A" ] && ok "the same prompt twice: allm-run's ids both times" ||
	fail "ids: '$r1' / '$r2', want '$REF_A'"
[ "${r1%% *}" = 0 ] && [ "${r2%% *}" = 32 ] && ok "cached_tokens: 0 the first time, 32 (two blocks) the second" ||
	fail "cached_tokens: '${r1%% *}' then '${r2%% *}'"
"$CTL" --name pc status --json >"$tmp/s.json"
python3 - "$tmp/s.json" <<'PY' && ok "status prefix_cache: DESIGN §9's keys, 32 of 80 tokens hit on the device" || fail "status prefix_cache: $(python3 -c "import json; print(json.load(open('$tmp/s.json')).get('prefix_cache'))")"
import json, sys
d = json.load(open(sys.argv[1]))["prefix_cache"]
assert set(d) == {"enabled", "queried_tokens", "hit_tokens", "hit_tokens_by_tier", "cached_blocks",
                  "restored_tokens", "recomputed_cached_tokens"}, sorted(d)
assert set(d["hit_tokens_by_tier"]) == set(d["cached_blocks"]) == {"device", "host", "disk"}
assert d["enabled"] is True and d["queried_tokens"] == 80 and d["hit_tokens"] == 32, d
assert d["hit_tokens_by_tier"]["device"] == 32 and d["cached_blocks"]["device"] >= 2, d
PY
"$CTL" --name pc metrics >"$tmp/m.txt"
for m in 'vllm:prefix_cache_queries_total{model_name="[^"]*"} 80' 'vllm:prefix_cache_hits_total{model_name="[^"]*"} 32' \
	'allm_prefix_cache_hits_total{model_name="[^"]*",tier="device"} 32' 'vllm:kv_cache_usage_perc{' \
	'allm_prefix_restores_total{model_name="[^"]*",tier="host",choice="restore"} 0'; do
	grep -q "^$m" "$tmp/m.txt" && ok "metrics: ${m%%\{*}" || fail "metrics: no '$m'"
done

# --- off, reset, a shrink, a killed client ------------------------------------------
"$CTL" --name pc set prefix_caching=off >/dev/null || fail "set prefix_caching=off"
r3=$(gen pc "$A")
[ "$r3" = "0 $REF_A" ] && [ "$(st pc "['prefix_cache']['enabled']")" = False ] &&
	[ "$(st pc "['prefix_cache']['cached_blocks']['device']")" = 0 ] &&
	ok "prefix_caching=off: no hit, nothing cached, same ids" || fail "off: '$r3', $(st pc "['prefix_cache']")"
"$CTL" --name pc set prefix_caching=on >/dev/null || fail "set prefix_caching=on"
gen pc "$A" >/dev/null
n=$("$CTL" --name pc --json cache reset | python3 -c "import json,sys; print(json.load(sys.stdin)['dropped_blocks'])")
[ "$n" -ge 2 ] && [ "$(st pc "['prefix_cache']['cached_blocks']['device']")" = 0 ] &&
	[ "$(gen pc "$A")" = "0 $REF_A" ] && ok "allmctl cache reset dropped $n blocks: the next request misses" ||
	fail "cache reset: dropped '$n', then $(st pc "['prefix_cache']")"
gen pc "$A" >/dev/null
"$CTL" --name pc set gpu_blocks=1 >/dev/null || fail "set gpu_blocks=1"
moved=$(st pc "['prefix_cache']['cached_blocks']")
"$CTL" --name pc set gpu_blocks=64 >/dev/null || fail "set gpu_blocks=64"
r4=$(gen pc "$A")
[ "$(st pc "['blocks']['gpu']['used']")" = 0 ] && [ "${r4#* }" = "$REF_A" ] &&
	[ "$(python3 -c "d=$moved; print(d['device'] <= 1 and d['device'] + d['host'] >= 2)")" = True ] &&
	ok "a shrink to one block evicts the cached ones cleanly (to the host: $moved); the prompt then gets ${r4%% *} cached tokens and its ids" ||
	fail "after the shrink: cached $moved, then '$r4', blocks $(st pc "['blocks']")"
daemon_stop pc

# --- forged collisions: equal keys never serve another prompt's KV --------------------
ALLM_PREFIX_TEST_COLLIDE=1 daemon_start collide
ca=$(gen collide "$A") cb=$(gen collide "$B") ca2=$(gen collide "$A")
[ "$cb" = "0 $REF_B" ] && ok "every key equal: the other prompt gets no hit and its own ids" ||
	fail "collision: B got '$cb', want '0 $REF_B'"
[ "$ca" = "0 $REF_A" ] && [ "$ca2" = "32 $REF_A" ] && ok "every key equal: the same prompt still hits (32 tokens)" ||
	fail "collision: A got '$ca' then '$ca2'"
daemon_stop collide

# --- isolation: uids, and --share-prefix-cache -----------------------------------------
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "skip: the second uid needs root and setpriv"
	finish
fi
NOBODY=65534
chmod 711 "$tmp"
# a runtime directory the engine makes itself (711 with --allow-uid)
export ALLM_RUNTIME_DIR=$tmp/run-iso
# the client as the other uid runs from copies: the clone may sit in a 0700 directory
other_uid_tree clientlib/allm
AS_NOBODY=(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups -- env ALLM_ENGINE_UID=0
	ALLM_RUNTIME_DIR="$ALLM_RUNTIME_DIR")
gen_as() { # gen_as NAME IDS: as the other uid
	"${AS_NOBODY[@]}" "$OTHER_BUILD/clientlib/allm" --name "$1" generate --prompt-ids "$2" --max-tokens 12 --temperature 0 --json \
		2>"$tmp/gen.err" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['cached_tokens'], ' '.join(map(str, d['generated_ids'])))"
}
for share in no yes; do
	extra=()
	[ $share = yes ] && extra=(--share-prefix-cache)
	daemon_start "iso-$share" --allow-uid $NOBODY "${extra[@]}"
	# each call's stderr kept apart: a failure says whose request failed and why
	mine=$(gen "iso-$share" "$A")
	cp "$tmp/gen.err" "$tmp/mine.err"
	theirs=$(gen_as "iso-$share" "$A")
	cp "$tmp/gen.err" "$tmp/theirs.err"
	theirs2=$(gen_as "iso-$share" "$A")
	want_theirs=0
	[ $share = yes ] && want_theirs=32
	[ "$mine" = "0 $REF_A" ] && [ "$theirs" = "$want_theirs $REF_A" ] && [ "$theirs2" = "32 $REF_A" ] &&
		ok "share $share: uid $NOBODY after root: $want_theirs cached tokens; after itself: 32" ||
		fail "share $share: root '$mine' ($(cat "$tmp/mine.err")), uid $NOBODY '$theirs' ($(cat "$tmp/theirs.err")) then '$theirs2' ($(cat "$tmp/gen.err")); engine log: $(tail -n 5 "$DLOG")"
	daemon_stop "iso-$share"
done
finish
