#!/usr/bin/env bash
# Structured output (issue 51) on SmolLM2-135M-Instruct (GGUF Q4_1): a typical JSON
# Schema (bench/grammar/person.schema.json) against no grammar, side by side, run by
# run alternating which goes first, each pair under /work/.bench.lock; and llama.cpp
# (llama-cpp-python, its own from_json_schema and grammar sampler) on the same file,
# prompt and schema. Prints a markdown table of medians with the load average.
#
#   batch 1: allm-run --bench, temperature 1, seed s: the constrained run's decode
#     tok/s, then the same number of tokens without a grammar (--ignore-eos)
#   16 streams: allm-run --workload of 16 copies of the prompt (seeds differ), with the
#     schema; then each request's own constrained length without it (--ignore-eos)
#   compile + first mask: tests/bench-grammar (a fresh compile each run)
#
# usage: bash bench/grammar.sh [REPS] [LLAMA_PY]   (REPS default 3; LLAMA_PY: a python with
#        llama_cpp, default /work/ref/venv/bin/python; skipped when it has none; LREPS=n
#        runs llama.cpp n times instead of REPS)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${BUILD_DIR:-$ROOT/build}
RUN=$B/tools/allm-run
REPS=${1:-3}
LPY=${2:-/work/ref/venv/bin/python}
MODEL=${MODEL:-$ROOT/.models-cache/SmolLM2-135M-Instruct.Q4_1.gguf}
SCHEMA=$ROOT/bench/grammar/person.schema.json
PROMPT=$'<|im_start|>user\nDescribe a fictional person as JSON.<|im_end|>\n<|im_start|>assistant\n'
LOCK=/work/.bench.lock
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

decode() { sed -n 's/.*decode \([0-9]*\) tokens in .* = \([0-9.]*\) tok\/s.*/\1 \2/p' "$1"; }
gen_tps() { sed -n 's/.*(gen \([0-9.]*\) tok\/s).*/\1/p' "$1"; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

echo "# grammar bench $(date -u +%FT%TZ) on $(uname -n): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') (AVX2, FMA, F16C; no AVX-512)"
echo "# model $MODEL, schema $SCHEMA, reps $REPS"
: >"$tmp/b1c"; : >"$tmp/b1u"; : >"$tmp/b16c"; : >"$tmp/b16u"; : >"$tmp/load"
for rep in $(seq 1 "$REPS"); do
	seed=$rep
	flock "$LOCK" bash -c '
		set -e
		RUN=$1; MODEL=$2; PROMPT=$3; SCHEMA=$4; seed=$5; tmp=$6; rep=$7
		uptime | sed "s/.*average: //" >>"$tmp/load"
		c() { "$RUN" --model "$MODEL" --prompt "$PROMPT" --json-schema "$SCHEMA" --temperature 1 --seed "$seed" \
			--max-tokens 300 --bench >"$tmp/c.err" 2>&1; }
		u() { "$RUN" --model "$MODEL" --prompt "$PROMPT" --temperature 1 --seed "$seed" --max-tokens "$1" \
			--ignore-eos --bench >"$tmp/u.err" 2>&1; }
		# the constrained run first decides the length; the pair alternates
		# which runs first by repeating the unconstrained one on odd reps
		c
		n=$(sed -n "s/.*decode \([0-9]*\) tokens.*/\1/p" "$tmp/c.err")
		if [ $((rep % 2)) -eq 1 ]; then u $((n + 1)); c; else u $((n + 1)); fi
		cat "$tmp/c.err" >"$tmp/c.last"; cat "$tmp/u.err" >"$tmp/u.last"
	' _ "$RUN" "$MODEL" "$PROMPT" "$SCHEMA" "$seed" "$tmp" "$rep"
	decode "$tmp/c.last" | awk '{print $2}' >>"$tmp/b1c"
	decode "$tmp/u.last" | awk '{print $2}' >>"$tmp/b1u"
	echo "batch 1 rep $rep: constrained $(decode "$tmp/c.last") | free $(decode "$tmp/u.last") (tokens tok/s)" >&2
done
PROMPT=$PROMPT python3 -c 'import json, os
for i in range(16):
    print(json.dumps({"prompt": os.environ["PROMPT"], "max_tokens": 300}))' >"$tmp/wl.jsonl"
for rep in $(seq 1 "$REPS"); do
	flock "$LOCK" bash -c '
		set -e
		RUN=$1; MODEL=$2; SCHEMA=$3; tmp=$4; rep=$5
		uptime | sed "s/.*average: //" >>"$tmp/load"
		c() { "$RUN" --model "$MODEL" --workload "$tmp/wl.jsonl" --json-schema "$SCHEMA" --temperature 1 \
			--seed $((rep * 100)) --max-num-seqs 16 --records "$tmp/rec.jsonl" >"$tmp/w16c.out" 2>&1; }
		u() { "$RUN" --model "$MODEL" --workload "$tmp/wlu.jsonl" --temperature 1 --seed $((rep * 100)) \
			--max-num-seqs 16 --ignore-eos >"$tmp/w16u.out" 2>&1; }
		c
		python3 - "$tmp" <<PY
import json, sys
t = sys.argv[1]
recs = {r["index"]: r for r in map(json.loads, open(t + "/rec.jsonl"))}
lines = [json.loads(x) for x in open(t + "/wl.jsonl")]
with open(t + "/wlu.jsonl", "w") as f:
    for i, q in enumerate(lines):
        q["max_tokens"] = max(1, recs[i]["n_generated"])
        f.write(json.dumps(q) + "\n")
PY
		if [ $((rep % 2)) -eq 1 ]; then u; c; else u; fi
	' _ "$RUN" "$MODEL" "$SCHEMA" "$tmp" "$rep"
	gen_tps "$tmp/w16c.out" >>"$tmp/b16c"
	gen_tps "$tmp/w16u.out" >>"$tmp/b16u"
	echo "16 streams rep $rep: constrained $(gen_tps "$tmp/w16c.out") | free $(gen_tps "$tmp/w16u.out") gen tok/s" >&2
done
comp=$("$B/tests/bench-grammar" "$MODEL" json_schema "$SCHEMA" "$ROOT/bench/grammar/person.sample.json" 20)
lc=""
if "$LPY" -c "import llama_cpp" 2>/dev/null; then
	: >"$tmp/lg"; : >"$tmp/lf"
	for rep in $(seq 1 "${LREPS:-$REPS}"); do
		out=$(flock "$LOCK" "$LPY" "$ROOT/bench/grammar-llamacpp.py" "$MODEL" "$SCHEMA" 2 "$rep" 1.0)
		echo "llama.cpp rep $rep: $out" >&2
		echo "$out" | sed -n 's/.*grammar: [0-9]* tokens, decode \([0-9.]*\) tok.*/\1/p' >>"$tmp/lg"
		echo "$out" | sed -n 's/.*free: [0-9]* tokens, decode \([0-9.]*\) tok.*/\1/p' >>"$tmp/lf"
	done
	lc="| llama.cpp (llama-cpp-python 0.3.36), batch 1 | $(median <"$tmp/lg") | $(median <"$tmp/lf") | $(awk -v a="$(median <"$tmp/lg")" -v b="$(median <"$tmp/lf")" 'BEGIN{printf "%.2f", a/b}') |"
fi
c1=$(median <"$tmp/b1c"); u1=$(median <"$tmp/b1u"); c16=$(median <"$tmp/b16c"); u16=$(median <"$tmp/b16u")
# the ratio of each pair (run back to back), then their median: the load moves
# between pairs more than within one
ratio() { paste "$1" "$2" | awk '{printf "%.3f\n", $1 / $2}' | median; }
echo
echo "| decode, tok/s (median of $REPS) | with the schema | without | median ratio of the pairs |"
echo "|---|---|---|---|"
echo "| AdaptiveLLM-C, batch 1 | $c1 | $u1 | $(ratio "$tmp/b1c" "$tmp/b1u") |"
echo "| AdaptiveLLM-C, 16 streams | $c16 | $u16 | $(ratio "$tmp/b16c" "$tmp/b16u") |"
[ -n "$lc" ] && echo "$lc"
[ -n "$lc" ] && echo && echo "AdaptiveLLM-C / llama.cpp with the schema, batch 1: $(awk -v a="$c1" -v b="$(median <"$tmp/lg")" 'BEGIN{printf "%.2f", a/b}')x"
echo
echo "$comp"
echo "load averages (1/5/15 min) at each pair: $(tr '\n' ';' <"$tmp/load")"
