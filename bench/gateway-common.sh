# Sourced by the benchmarks that put one allm-engined and its allm-gateway on
# stories260K (gateway-vs-rings.sh, gateway-users.sh, python-client.sh; not run):
# a private temporary folder cleaned up on exit, the seeded token-id workload they
# share, and starting the two programs.
# shellcheck shell=bash

epid=
gpid=
# gw_bench_tmp PREFIX: $tmp (0700) and $ALLM_RUNTIME_DIR in it; on exit the engine
# and gateway started here are stopped and $tmp removed
gw_bench_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	chmod 700 "$tmp"
	export ALLM_RUNTIME_DIR=$tmp/run
	trap gw_bench_cleanup EXIT
}
gw_bench_cleanup() {
	[ -n "$gpid" ] && kill -TERM "$gpid" 2>/dev/null
	[ -n "$epid" ] && kill -TERM "$epid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
# gw_bench_workload N T: N requests of 8..24 prompt ids (seeded), T tokens each, as
# allm-bench's JSONL on stdout
gw_bench_workload() {
	python3 - "$1" "$2" <<'PY'
import json, random, sys
n, t = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(1)
for _ in range(n):
    print(json.dumps({"prompt_ids": [1] + [rng.randrange(3, 512) for _ in range(rng.randint(7, 23))],
                      "max_tokens": t}))
PY
}
# gw_bench_engine BUILD NAME PROFILE: allm-engined on $M (CPU) as NAME, waited
# for; sets epid
gw_bench_engine() {
	"$1/engined/allm-engined" --name "$2" --model "$M" --device cpu --profile "$3" \
		>"$tmp/engine.log" 2>&1 &
	epid=$!
	for _ in $(seq 1200); do [ -S "$ALLM_RUNTIME_DIR/$2.sock" ] && return 0; sleep 0.05; done
	echo "the engine did not start" >&2
	tail -n 5 "$tmp/engine.log" >&2
	exit 1
}
# gw_bench_gateway BUILD NAME: allm-gateway for engine NAME on a free port, up
# when /health says 200; sets gpid and port
gw_bench_gateway() {
	"$1/engined/allm-gateway" --engine "$2" --port 0 --max-connections 1024 >"$tmp/gateway.log" 2>&1 &
	gpid=$!
	port=
	for _ in $(seq 400); do
		port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$tmp/gateway.log" | head -n 1)
		[ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] &&
			return 0
		sleep 0.05
	done
	echo "the gateway did not start" >&2
	cat "$tmp/gateway.log" >&2
	exit 1
}
