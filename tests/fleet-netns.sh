#!/usr/bin/env bash
# Description: several engines across hosts behind HAProxy (DESIGN §14, deploy/): three hosts in network namespaces (veth links to a fourth, HAProxy's, with addresses only inside them), an allm-engined + allm-gateway in each, HAProxy configured by deploy/haproxy-gen.sh (consistent hash of the body's first bytes, bounded load, /health checks); a shared-prefix and a multi-turn workload keep their prefixes on one engine each; a killed engine fails only its in-flight streams (with an error event) while new requests go to the others, and rejoins when it comes back; a drained engine (allmctl drain) finishes its streams and takes nothing new. Needs root and haproxy (77 otherwise).
. "$(dirname "$0")/daemon-common.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GW=$BUILD_DIR/engined/allm-gateway
CTL=$BUILD_DIR/ctl/allmctl
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v haproxy >/dev/null || { echo "SKIP: no haproxy (tools/install-deps.sh installs it)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no ip (iproute2)"; exit 77; }
. "$(dirname "$0")/venv-common.sh"
venv_need openai

# names unique to this run: namespaces allmPID-lb, -h1..3; links vPID{l,h}N
id=$$ NS=allm$$
netns_cleanup() {
	local n
	for n in lb h1 h2 h3; do ip netns del "$NS-$n" 2>/dev/null; done
}
trap 'cleanup; netns_cleanup' EXIT
ip netns add "$NS-lb" 2>"$tmp/netns.err" || { echo "SKIP: cannot make a network namespace: $(cat "$tmp/netns.err")"; exit 77; }
ip netns exec "$NS-lb" ip link set lo up
for i in 1 2 3; do
	ip netns add "$NS-h$i"
	ip netns exec "$NS-h$i" ip link set lo up
	# the link is made inside the namespaces: nothing appears on this host's network
	ip link add "v${id}l$i" netns "$NS-lb" type veth peer name "v${id}h$i" netns "$NS-h$i"
	ip netns exec "$NS-lb" ip addr add "10.231.$i.1/24" dev "v${id}l$i"
	ip netns exec "$NS-lb" ip link set "v${id}l$i" up
	ip netns exec "$NS-h$i" ip addr add "10.231.$i.2/24" dev "v${id}h$i"
	ip netns exec "$NS-h$i" ip link set "v${id}h$i" up
done
in_ns() { local n=$1; shift; ip netns exec "$NS-$n" "$@"; }

# host i: an engine (--dummy small) and its gateway on 10.231.i.2:8000
EPID=() GPID=()
start_engine() {
	local i=$1
	mkdir -p "$tmp/h$i"
	# not through in_ns: $! must be the engine itself (ip and env exec it), not a subshell
	ip netns exec "$NS-h$i" env ALLM_RUNTIME_DIR="$tmp/h$i" "$ENGINED" --name e --dummy small --device cpu \
		--profile "$tmp/profile.json" --gpu-blocks 256 --cpu-blocks 64 >>"$tmp/engine-h$i.log" 2>&1 &
	EPID[$i]=$!
	BG_PIDS+=($!)
}
for i in 1 2 3; do
	start_engine $i
	ip netns exec "$NS-h$i" env ALLM_RUNTIME_DIR="$tmp/h$i" "$GW" --engine e --host "10.231.$i.2" --port 8000 \
		--engine-timeout 3 >"$tmp/gateway-h$i.log" 2>&1 &
	GPID[$i]=$!
	BG_PIDS+=($!)
done

# a load bound of 200%: with one request in flight (the affinity checks below; a
# finished stream may still count for a moment) nothing ever spills, so every
# request of a prefix must land on its engine
bash "$ROOT/deploy/haproxy-gen.sh" --bind 127.0.0.1:8000 --stats 127.0.0.1:8404 --check-ms 250 --route body:160 \
	--balance-factor 200 \
	10.231.1.2:8000 10.231.2.2:8000 10.231.3.2:8000 >"$tmp/haproxy.cfg" || { fail "haproxy-gen.sh"; finish; }
haproxy -c -q -f "$tmp/haproxy.cfg" || { fail "haproxy -c: the generated configuration"; finish; }
ip netns exec "$NS-lb" haproxy -f "$tmp/haproxy.cfg" -db >"$tmp/haproxy.log" 2>&1 &
BG_PIDS+=($!)

# servers_up: "e1 e2 e3" as HAProxy's checks see them
servers() { in_ns lb curl -s 'http://127.0.0.1:8404/stats;csv' | awk -F, '$1 == "engines" && $2 ~ /^e/ { printf "%s=%s ", $2, $18 }'; }
wait_servers() { # WANT TIMEOUT_S
	local i
	for i in $(seq $(($2 * 10))); do
		[ "$(servers)" = "$1 " ] && return 0
		sleep 0.1
	done
	return 1
}
wait_servers "e1=UP e2=UP e3=UP" 20 && ok "HAProxy sees three engines UP across the namespaces" ||
	{ fail "servers: $(servers); $(tail -n 5 "$tmp/haproxy.log")"; finish; }

# --dummy small: real shapes, ~500 tokens/s a stream, so a 300-token stream lasts
# about 0.6 s; prompts are token ids (no tokenizer)
LOAD=("$PY" "$ROOT/tools/allm-load.py" --url http://127.0.0.1:8000 --json)
# streaming I: waits (10 s at most) until engine I runs a stream that has sent some
# of its 300 tokens (so the gateway has answered its headers) and has most of them
# still to come, so the kill or drain that follows lands mid-stream. HAProxy's count
# of sessions, used before, once saw e2 busy when its only stream was about to end.
streaming() {
	local i
	for i in $(seq 500); do
		ALLM_RUNTIME_DIR="$tmp/h$1" "$CTL" --name e requests 2>/dev/null |
			awk '$3 == "running" && $5 >= 8 && $5 < 150 { f = 1 } END { exit !f }' && return 0
		sleep 0.02
	done
	return 1
}
check() { "$PY" "$(dirname "$0")/fleet-netns.py" "$@"; }
SECONDS=0
phase() { echo "--- $* (at ${SECONDS} s)"; }
t0() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['t0'])" "$1"; }
# shared NAME N MAX-OUTPUT CONCURRENCY SEED: the kill and drain phases' load, 12 prefixes
# of 30 tokens (the same seed, the same prefixes); records in $tmp/NAME.jsonl, the
# summary in $tmp/NAME.json, errors in $tmp/NAME.err
shared() {
	in_ns lb "${LOAD[@]}" --workload shared-prefix -n "$2" --prefixes 12 --prefix-tokens 30 --suffix-tokens 6 \
		--max-output "$3" --concurrency "$4" --seed "$5" --records "$tmp/$1.jsonl" >"$tmp/$1.json" 2>"$tmp/$1.err"
}

# --- workloads: shared prefixes stay on one engine each; conversations keep theirs ---
in_ns lb "${LOAD[@]}" --workload shared-prefix -n 48 --prefixes 6 --prefix-tokens 40 --suffix-tokens 6 \
	--max-output 8 --concurrency 1 --records "$tmp/shared.jsonl" >"$tmp/shared.json" 2>"$tmp/load.err" ||
	fail "shared-prefix load: $(tail -n 3 "$tmp/load.err")"
check affinity "$tmp/shared.jsonl" || fails=$((fails + 1))
in_ns lb "${LOAD[@]}" --workload multiturn --conversations 6 --turns 3 --prefix-tokens 8 --suffix-tokens 30 \
	--max-output 8 --concurrency 1 --records "$tmp/multi.jsonl" >"$tmp/multi.json" 2>"$tmp/load.err" ||
	fail "multi-turn load: $(tail -n 3 "$tmp/load.err")"
check multiturn "$tmp/multi.jsonl" || fails=$((fails + 1))

phase kill
# --- an engine killed mid-run: its streams fail, nothing else; then it rejoins ---
shared kill 48 300 6 2 &
LP=$!
BG_PIDS+=($LP)
streaming 1 || fail "no stream under way on e1"
t_kill=$(date +%s.%N)
kill -9 "${EPID[1]}"
# new requests after the kill, on the same prefixes (seed 2), some of them e1's: they go
# to the others whatever the timing (the running load covers the first moments: its
# requests that met e1's 503 "no engine" were retried elsewhere, or the kill check fails)
shared after 24 4 4 2 || fail "load right after the kill: $(tail -n 3 "$tmp/after.err")"
wait "$LP" || fail "load during the kill: $(tail -n 3 "$tmp/kill.err")"
check kill "$tmp/kill.jsonl" "$(t0 "$tmp/kill.json")" "$t_kill" || fails=$((fails + 1))
check elsewhere "$tmp/after.jsonl" "$tmp/kill.jsonl" e1 || fails=$((fails + 1))
wait_servers "e1=DOWN e2=UP e3=UP" 5 && ok "HAProxy took e1 out: $(servers)" || fail "after the kill: $(servers)"
start_engine 1
wait_servers "e1=UP e2=UP e3=UP" 15 && ok "e1's engine restarted: its gateway reconnected and HAProxy has it UP" ||
	fail "rejoin: $(servers); $(tail -n 3 "$tmp/gateway-h1.log")"
shared rejoin 30 4 4 3 || fail "load after the rejoin: $(tail -n 3 "$tmp/rejoin.err")"
check rejoin "$tmp/rejoin.jsonl" || fails=$((fails + 1))

phase drain
# --- a drained engine: its streams finish, nothing fails, nothing new goes to it ---
# streams of 300 tokens (~0.6 s, more on a busy host): the one seen under way on e2 is
# still running when allmctl drain lands a few ms later
shared drain 60 300 6 4 &
LP=$!
BG_PIDS+=($LP)
streaming 2 || fail "no stream under way on e2"
t_drain=$(date +%s.%N)
in_ns h2 env ALLM_RUNTIME_DIR="$tmp/h2" "$CTL" --name e drain >/dev/null || fail "allmctl drain"
# allmctl drain has returned: e2's streams are done; new requests on the same prefixes
# (seed 4), some of them e2's, go to the others whatever the timing
shared after2 24 4 4 4 || fail "load right after the drain: $(tail -n 3 "$tmp/after2.err")"
wait "$LP" || fail "load during the drain: $(tail -n 3 "$tmp/drain.err")"
check drain "$tmp/drain.jsonl" "$(t0 "$tmp/drain.json")" "$t_drain" || fails=$((fails + 1))
check elsewhere "$tmp/after2.jsonl" "$tmp/drain.jsonl" e2 || fails=$((fails + 1))
wait_servers "e1=UP e2=DOWN e3=UP" 5 && ok "HAProxy has the drained e2 DOWN" || fail "after the drain: $(servers)"
in_ns h2 env ALLM_RUNTIME_DIR="$tmp/h2" "$CTL" --name e resume >/dev/null || fail "allmctl resume"
wait_servers "e1=UP e2=UP e3=UP" 10 && ok "allmctl resume: e2 back in rotation" || fail "after resume: $(servers)"
finish
