#!/usr/bin/env bash
# Fleet routing benchmark (DESIGN §14, issue E): two allm-engined --dummy medium, each
# pinned to one core (taskset) with one worker thread and a device pool that holds half
# of the shared prefixes, each behind its allm-gateway, behind HAProxy (deploy/haproxy-gen.sh);
# tools/allm-load.py drives the same workload through each routing:
#   uniform: P prefixes, requests spread evenly:  prefix affinity (body hash) vs round robin
#   skewed:  half the requests on one hot prefix: prefix affinity (bounded load) vs leastconn
#   uniform-affinity-nobound: affinity without the load bound (--balance-factor 0), to
#            measure what the bound costs in hits where no prefix is hot
# Runs alternate (affinity, baseline, affinity, ...) RUNS times under /work/.bench.lock.
# Results: bench/results/fleet/*.json and table.md (bench/README.md "Several engines").
# usage: bash bench/fleet.sh [RUNS]     (env: N requests per run, CONC clients, R0 the first
# run's number: R0=4 adds runs 4.. beside 1..3)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$ROOT/build} # B=DIR: binaries from another build (DIR/engined/)
OUT=$ROOT/bench/results/fleet
RUNS=${1:-3} N=${N:-144} CONC=${CONC:-6}
P=8 L=256 S=32 OUTTOK=4
# 8 prefixes of 256 tokens = 16 blocks each; each engine's pool: 4 prefixes + what its
# share of the running requests (CONC/2) holds of its own (3 blocks each) + 2
GPU_BLOCKS=$((P / 2 * L / 16 + CONC / 2 * 3 + 2))
PY=$(bash "$ROOT/tools/venv.sh" openai)
mkdir -p "$OUT"
tmp=$(mktemp -d /tmp/allm-fleet.XXXXXX)
export ALLM_RUNTIME_DIR=$tmp/run
mkdir -p "$ALLM_RUNTIME_DIR"
chmod 700 "$ALLM_RUNTIME_DIR"
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap 'stop_all; rm -rf "$tmp"' EXIT
PORT0=$((20000 + $$ % 20000))

start_fleet() { # routing balance-factor
	stop_all
	for i in 0 1; do
		taskset -c $i "$B/engined/allm-engined" --name f$i --dummy medium --threads 1 --gpu-blocks $GPU_BLOCKS \
			--cpu-blocks 8 --profile "$tmp/profile-$i.json" >"$tmp/engine-$i.log" 2>&1 &
		pids+=($!)
	done
	for i in 0 1; do
		for t in $(seq 600); do [ -S "$ALLM_RUNTIME_DIR/f$i.sock" ] && break; sleep 0.05; done
		"$B/engined/allm-gateway" --engine f$i --port $((PORT0 + 1 + i)) >"$tmp/gw-$i.log" 2>&1 &
		pids+=($!)
	done
	bash "$ROOT/deploy/haproxy-gen.sh" --bind 127.0.0.1:$PORT0 --route "$1" --balance-factor "$2" \
		127.0.0.1:$((PORT0 + 1)) 127.0.0.1:$((PORT0 + 2)) >"$tmp/haproxy.cfg"
	haproxy -f "$tmp/haproxy.cfg" -db >"$tmp/haproxy.log" 2>&1 &
	pids+=($!)
	for t in $(seq 200); do
		curl -sf "http://127.0.0.1:$PORT0/health" >/dev/null && curl -sf "http://127.0.0.1:$((PORT0 + 1))/health" >/dev/null &&
			curl -sf "http://127.0.0.1:$((PORT0 + 2))/health" >/dev/null && break
		sleep 0.1
	done
	sleep 1 # two health checks: both servers UP
}

run() { # name routing balance-factor [load args]
	local name=$1 route=$2 factor=$3
	shift 3
	start_fleet "$route" "$factor"
	# warm both engines' predictors (first estimate) with one short request each
	for i in 1 2; do
		curl -s "http://127.0.0.1:$((PORT0 + i))/v1/completions" -d '{"model":"dummy:medium","prompt":[5,6,7],"max_tokens":2}' >/dev/null
	done
	"$PY" "$ROOT/tools/allm-load.py" --url "http://127.0.0.1:$PORT0" --workload shared-prefix -n "$N" \
		--prefixes $P --prefix-tokens $L --suffix-tokens $S --max-output $OUTTOK --concurrency "$CONC" \
		--metrics "http://127.0.0.1:$((PORT0 + 1)),http://127.0.0.1:$((PORT0 + 2))" "$@" --json \
		--records "$OUT/$name.jsonl" \
		>"$OUT/$name.json" 2>"$tmp/load.err" || { cat "$tmp/load.err"; exit 1; }
	echo "$(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $name $(python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print(f\"{d['req_s']:.3f} req/s, hit {d['prefix_cache']['hit_fraction']:.3f}, TTFT p50 {d['ttft_ms']['p50']:.0f} p99 {d['ttft_ms']['p99']:.0f} ms, failed {d['failed']}, per instance\",
      {k: (v['requests'], round(v['prefix_cache']['hit_fraction'] or 0, 3)) for k, v in d['instances'].items()})" "$OUT/$name.json")" |
		tee -a "$OUT/runs.txt"
}

echo "# $(date -Is) $(nproc) cores; gpu_blocks $GPU_BLOCKS; N $N CONC $CONC P $P L $L S $S out $OUTTOK" >>"$OUT/runs.txt"
for r in $(seq "${R0:-1}" $((${R0:-1} + RUNS - 1))); do
	run "uniform-affinity-$r" body:256 150
	run "uniform-roundrobin-$r" roundrobin 0
	run "uniform-affinity-nobound-$r" body:256 0
	run "skewed-affinity-$r" body:256 150 --hot 0.5 --seed $((r + 10))
	run "skewed-leastconn-$r" leastconn 0 --hot 0.5 --seed $((r + 10))
done
