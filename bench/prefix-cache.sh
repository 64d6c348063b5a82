#!/usr/bin/env bash
# The prefix cache's benchmarks (issue 38, DESIGN §5b): five tables, each run on
# stories260K and on --dummy medium (a 110M Llama, f16 weights and KV), engines
# started here with allm-bench-prefix or allm-bench as their clients; every timed
# run holds /work/.bench.lock (or $BENCH_LOCK) so two benchmarks never overlap.
#   shared     8 groups x 8 prompts (a group's system prompt + 64 own tokens, 32
#              out, 4 in flight), caching on vs off, alternated REPS times
#   multiturn  16 conversations x 5 rounds (Q new tokens a round, 16 out), the
#              device pool a quarter of the working set: host + disk tiers, no
#              tiers, caching off
#   restore    a prefix of L tokens held only in the host pool or only on disk
#              (the disk throttled to none/200/50/10 MB/s by the test hook), then
#              a request reading it: TTFT under adaptive, swap (always restore) and
#              recompute (never restore)
#   noreuse    the paper's workloads (no shared prefixes) with caching on vs off
#   policies   adaptive vs recompute vs swap where cached prefixes and tiers mix
#              (the multi-turn workload with tiers), throughput and turnaround
# Usage: bench/prefix-cache.sh [SECTION...]     (default: all)
#   MODELS="stories medium"  REPS=3  RESULTS=bench/results/prefix
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
B=$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)
ENGINED=$B/engined/allm-engined CTL=$B/ctl/allmctl ALLM=$B/clientlib/allm
BP=$B/tools/allm-bench-prefix ABENCH=$B/tools/allm-bench
RESULTS=${RESULTS:-$BENCH_DIR/results/prefix}
REPS=${REPS:-3}
MODELS=${MODELS:-stories medium}
LOCK=${BENCH_LOCK:-/work/.bench.lock}
SECTIONS=${*:-shared multiturn restore noreuse policies}
mkdir -p "$RESULTS"
export ALLM_RUNTIME_DIR=$(mktemp -d /tmp/allm-prefix-bench.XXXXXX)
EPID=
trap 'rm -rf "$ALLM_RUNTIME_DIR"' EXIT
echo "$(date -u '+%F %T UTC') prefix-cache.sh $SECTIONS ($MODELS): load $(cut -d' ' -f1-3 /proc/loadavg), build $(git -C "$ROOT" rev-parse --short HEAD)" >>"$RESULTS/runs.txt"

# model_args NAME: the engine's model flags; VOCAB, CTX: ids and context to stay in
model_args() {
	case $1 in
	stories) MARGS=(--model "$ROOT/data/models/stories260K" --kv-cache-dtype f16); VOCAB=500; CTX=512 ;;
	medium) MARGS=(--dummy medium --dtype f16 --kv-cache-dtype f16); VOCAB=30000; CTX=2048 ;;
	esac
	# one calibrated profile per model (the grid once, then loaded: no estimate noise)
	MARGS+=(--profile "$RESULTS/profile-$1.json")
	[ -f "$RESULTS/profile-$1.json" ] || MARGS+=(--calibrate-at-start)
}

# locked CMD...: runs CMD holding the benchmark lock (one timed run at a time)
locked() { (flock 9 && "$@") 9>"$LOCK"; }

# start NAME [engine flags...] / stop NAME: one engine, waited for
start() {
	local name=$1
	shift
	"$ENGINED" --name "$name" --device cpu "${MARGS[@]}" "$@" >"$RESULTS/engine-$name.log" 2>&1 &
	EPID=$!
	for _ in $(seq 3000); do [ -S "$ALLM_RUNTIME_DIR/$name.sock" ] && return 0; kill -0 $EPID || break; sleep 0.1; done
	echo "engine $name did not start: $(tail -n 3 "$RESULTS/engine-$name.log")" >&2
	exit 1
}
stop() {
	"$CTL" --name "$1" shutdown >/dev/null 2>&1 || true
	wait $EPID 2>/dev/null || true
	EPID=
}
ctl() { "$CTL" --name "$@" >/dev/null; }
js() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# one_run NAME OUT CLIENT_ARGS -- ENGINE_FLAGS: an engine, the client's JSON, its status
one_run() {
	local name=$1 out=$2 cargs=() eargs=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do cargs+=("$1"); shift; done
	shift
	eargs=("$@")
	start "$name" "${eargs[@]}"
	"$BP" --name "$name" "${cargs[@]}" >"$out"
	"$CTL" --name "$name" status --json >"$out.status"
	stop "$name"
}

# --- shared system prompts ----------------------------------------------------------
section_shared() {
	local m=$1 sys=512
	[ "$m" = stories ] && sys=384 # its context is 512: 384 + 64 + 32 fit
	for r in $(seq "$REPS"); do
		# alternated: on first in odd reps, off first in even ones
		local order="on off"
		[ $((r % 2)) = 0 ] && order="off on"
		for pc in $order; do
			model_args "$m"
			local out=$RESULTS/shared-$m-$pc-$r.json
			locked one_run sh-$m "$out" shared --system $sys --vocab $VOCAB -- --prefix-caching $pc
			echo "shared $m caching $pc rep $r: $(js "$out" "'hit %.3f, TTFT cold %s warm %s ms, %.2f req/s' % (d['hit_fraction'], d['ttft_cold_p50_ms'], d['ttft_warm_p50_ms'], d['req_s'])")"
		done
	done
}

# --- multi-turn conversations across tiers ---------------------------------------------
# mt_shape MODEL: Q (new tokens a round) and WS (the working set in blocks of 16)
mt_shape() {
	Q=96
	[ "$1" = stories ] && Q=80 # 5 rounds of 80 + 4 answers + 16 out fit its 512
	WS=$((16 * ((5 * Q + 5 * 16 + 15) / 16)))
}
section_multiturn() {
	local m=$1
	mt_shape "$m"
	local dev=$((WS / 4))
	for r in $(seq "$REPS"); do
		for cfg in tiers notiers off; do
			model_args "$m"
			local flags=(--gpu-blocks $dev)
			case $cfg in
			tiers) flags+=(--cpu-blocks $((WS / 2)) --disk-swap-space 1 --disk-swap-dir /var/tmp) ;;
			notiers) flags+=(--cpu-blocks 0) ;;
			off) flags+=(--cpu-blocks 0 --prefix-caching off) ;;
			esac
			local out=$RESULTS/multiturn-$m-$cfg-$r.json
			locked one_run mt-$m "$out" multiturn --question $Q --vocab $VOCAB -- "${flags[@]}"
			echo "multiturn $m $cfg (device $dev of $WS blocks) rep $r: $(js "$out" "'cached %.3f, TTFT round 1 p50 %s, later p50 %s p99 %s ms, wait max/median %s/%s ms, %.1f s' % (d['hit_fraction'], d['ttft_round1_p50_ms'], d['ttft_later_p50_ms'], d['ttft_later_p99_ms'], d['wait_max_ms'], d['wait_median_ms'], d['duration_s'])")"
		done
	done
}

# --- restore or recompute, host and throttled disk --------------------------------------
# ids L SEED: L token ids (a prefix), comma-separated
ids() { python3 -c "import sys; n, s, v = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]); print(','.join(str(1 + (i * 7919 + s * 104729) % (v - 1)) for i in range(n)))" "$1" "$2" "$VOCAB"; }
# restore_cells NAME G C LENS TIERS OUT: every length x tier x policy x 3 trials
restore_cells() {
	local name=$1 g=$2 c=$3 lens=$4 tiers=$5 out=$6 pre q r st
	for L in $lens; do
		for tier in $tiers; do
			for pol in adaptive swap recompute; do
				for t in 1 2 3; do
					ctl "$name" cache reset
					ctl "$name" set preempt=swap gpu_blocks=$g cpu_blocks=$c
					pre=$(ids "$L" "$t")
					"$ALLM" --name "$name" generate --prompt-ids "$pre,1" --max-tokens 1 --temperature 0 >/dev/null 2>&1
					# down to the tier: the device pool shrinks (first the host's, for disk)
					[ "$tier" = disk ] && ctl "$name" set cpu_blocks=0
					ctl "$name" set gpu_blocks=1
					# the pool keeps one block: a request of one token takes it too
					"$ALLM" --name "$name" generate --prompt-ids 2 --max-tokens 1 --temperature 0 >/dev/null 2>&1
					ctl "$name" set gpu_blocks=$g cpu_blocks=$c preempt=$pol
					q=$(ids 16 $((t + 1000 * L)))
					r=$("$ALLM" --name "$name" generate --prompt-ids "$pre,$q" --max-tokens 1 --temperature 0 --json 2>/dev/null)
					st=$("$CTL" --name "$name" status --json)
					python3 -c "import json, sys; r = json.loads(sys.argv[1]); s = json.loads(sys.argv[2])
print(json.dumps({'len': int(sys.argv[3]), 'tier': sys.argv[4], 'policy': sys.argv[5], 'trial': int(sys.argv[6]),
    'ttft_ms': r['ttft_ms'], 'cached': r['cached_tokens'], 'decisions': s['prefix_tiers']['decisions']}))" \
						"$r" "$st" "$L" "$tier" "$pol" "$t" >>"$out"
				done
			done
		done
	done
}
restore_engine() { # restore_engine NAME THROTTLE G C LENS TIERS OUT
	local name=$1 th=$2
	shift 2
	if [ "$th" = none ]; then unset ALLM_KV_DISK_THROTTLE_MBPS; else export ALLM_KV_DISK_THROTTLE_MBPS=$th; fi
	start "$name" --gpu-blocks "$1" --cpu-blocks "$2" --disk-swap-space 1 --disk-swap-dir /var/tmp --max-num-seqs 1
	unset ALLM_KV_DISK_THROTTLE_MBPS
	restore_cells "$name" "$@"
	stop "$name"
}
section_restore() {
	local m=$1 lens="16 64 256 768"
	model_args "$m"
	[ "$m" = stories ] && lens="16 64 256 448"
	local g=$((CTX / 16 + 8)) c=$((CTX / 16 + 8))
	for th in none 200 50 10; do
		local out=$RESULTS/restore-$m-$th.jsonl tiers=disk
		[ "$th" = none ] && tiers="host disk" # the host link is not throttled
		: >"$out"
		locked restore_engine rs-$m "$th" $g $c "$lens" "$tiers" "$out"
		echo "restore $m, disk $th MB/s: $(wc -l <"$out") runs"
	done
}

# --- no reuse: the paper's workloads, caching on vs off --------------------------------
section_noreuse() {
	local m=$1 n=200 outs="64 128"
	model_args "$m"
	[ "$m" = medium ] && n=64 && outs=64
	for wl in chatbot alpaca summary; do
		for out in $outs; do
			for r in $(seq "$REPS"); do
				local cmp=on,off
				[ $((r % 2)) = 0 ] && cmp=off,on
				local f=$RESULTS/noreuse-$m-$wl-$out-$r.json
				locked "$ABENCH" "${MARGS[@]}" --device cpu --gpu-blocks 128 --cpu-blocks 64 \
					--workload "$wl" -n $n --max-output "$out" --temperature 0 --ignore-eos --seed 1 \
					--compare prefix_caching=$cmp --json --no-progress >"$f"
				echo "noreuse $m $wl $out rep $r: $(js "$f" "' '.join('%s %.1f tok/s' % (x['setting']['prefix_caching'], x['throughput_tok_s']) for x in d['runs'])")"
			done
		done
	done
}

# --- adaptive vs fixed where cached prefixes and tiers mix -------------------------------
section_policies() {
	local m=$1
	mt_shape "$m"
	for r in $(seq "$REPS"); do
		for pol in adaptive recompute swap; do
			model_args "$m"
			local out=$RESULTS/policies-$m-$pol-$r.json
			locked one_run po-$m "$out" multiturn --question $Q --vocab $VOCAB -- --preempt $pol \
				--gpu-blocks $((WS / 4)) --cpu-blocks $((WS / 2)) --disk-swap-space 1 --disk-swap-dir /var/tmp
			echo "policies $m $pol rep $r: $(js "$out" "'%.1f s, %.2f req/s, %.0f tok/s, cached %.3f, turnaround %.3f' % (d['duration_s'], d['req_s'], d['throughput_tok_s'], d['hit_fraction'], d['mean_weighted_turnaround'])")"
		done
	done
}

for m in $MODELS; do
	for s in $SECTIONS; do
		"section_$s" "$m"
	done
done
python3 "$BENCH_DIR/prefix-tables.py" "$RESULTS" >"$RESULTS/tables.md"
cat "$RESULTS/tables.md"
