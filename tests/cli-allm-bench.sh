#!/usr/bin/env bash
# Description: allm-bench against an engine it spawns and against a running --name engine on stories260K: the §12 JSON keys and types, outputs_sha256 equal to allm-run --workload's, --compare with 3 policies (equal hashes, per-setting fields), --records lines with send <= first token <= finish, --ping, bad flags exit 2, and no engine or runtime dir left behind (bad --model, SIGINT).
set -u
BUILD_DIR=${BUILD_DIR:-$(cd "$(dirname "$0")/../build" && pwd)}
DATA_DIR=${DATA_DIR:-$(cd "$(dirname "$0")/../data" && pwd)}
M=$DATA_DIR/models/stories260K
BENCH=$BUILD_DIR/tools/allm-bench
RUN=$BUILD_DIR/tools/allm-run
ENGINED=$BUILD_DIR/engined/allm-engined
[ -f "$M/model.safetensors" ] || { echo "FAIL: $M is missing from the checkout"; exit 1; }
for b in "$BENCH" "$RUN" "$ENGINED"; do
	[ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the JSON"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/allm-bench-test.XXXXXX")
# allm-bench makes its private runtime dirs under $TMPDIR: here, to check they go
export TMPDIR=$tmp/t ALLM_RUNTIME_DIR=$tmp/run
mkdir -p "$TMPDIR"
EP=
cleanup() {
	[ -n "$EP" ] && kill -9 "$EP" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

PROF=(--profile "$tmp/profile.json")
WL=(--workload chatbot -n 12 --max-output 16 --seed 2 --temperature 0)

# no_leftovers WHAT: no private runtime dir and no engine named after a bench pid
no_leftovers() {
	local left
	left=$(ls -A "$TMPDIR")
	[ -z "$left" ] && ok "$1: no runtime dir left" || fail "$1: left in \$TMPDIR: $left"
	if ps -eo args | grep -q "^[^ ]*allm-engined --name bench-$2-"; then
		fail "$1: an allm-engined of allm-bench pid $2 is still running"
	else
		ok "$1: no allm-engined left"
	fi
}

# --- a spawned engine: JSON, hash, records ---
"$BENCH" --model "$M" "${WL[@]}" "${PROF[@]}" --json --records "$tmp/rec.jsonl" \
	>"$tmp/b.json" 2>"$tmp/b.err" &
bp=$!
wait $bp && ok "spawned run exits 0" || { fail "spawned run: $(tail -n 5 "$tmp/b.err")"; }
no_leftovers "spawned run" $bp
"$RUN" --model "$M" "${WL[@]}" "${PROF[@]}" --json >"$tmp/r.json" 2>/dev/null ||
	fail "allm-run --workload failed"
python3 - "$tmp/b.json" "$tmp/r.json" "$tmp/rec.jsonl" <<'PY' && ok "JSON keys/types, hash = allm-run's, records sane" || fail "JSON/records checks"
import json, sys
raw = open(sys.argv[1]).read()
b = json.loads(raw)  # stdout holds only the JSON
r = json.load(open(sys.argv[2]))
num = (int, float)
for k in ["duration_s", "throughput_tok_s", "gen_throughput_tok_s", "req_s", "mean_weighted_turnaround"]:
    assert isinstance(b[k], num) and b[k] > 0, k
assert b["requests"] == 12 and isinstance(b["requests"], int)
assert b["mean_weighted_turnaround"] >= 1
for k in ["ttft_ms", "tpot_ms", "e2e_ms"]:
    for p in ["p50", "p90", "p99", "mean"]:
        assert isinstance(b[k][p], num), (k, p)
    assert b[k]["p50"] <= b[k]["p90"] <= b[k]["p99"], k
for k in ["swap", "recompute"]:
    assert k in b["preemptions"] and k in b["predictor_mape"]
    assert b["preemptions"][k] is None or isinstance(b["preemptions"][k], int)
assert isinstance(b["preemptions"]["total"], int)
assert len(b["outputs_sha256"]) == 64
assert b["outputs_sha256"] == r["outputs_sha256"], (b["outputs_sha256"], r["outputs_sha256"])
assert b["generated_tokens"] == r["generated_tokens"]
lines = open(sys.argv[3]).read().splitlines()
assert len(lines) == 12, len(lines)
seen = set()
for l in lines:
    x = json.loads(l)
    seen.add(x["index"])
    assert 0 <= x["send_s"] <= x["first_sched_s"] <= x["finish_s"], x
    assert x["send_s"] <= x["first_token_s"] <= x["finish_s"], x
    assert x["n_generated"] == len(x["generated"]) and x["n_prompt"] > 0
    assert isinstance(x["preemptions"]["total"], int)
assert seen == set(range(12))
# inter-token gaps: ordered percentiles, and all the gaps of a request lie between its
# first token and its finish
itl = b["itl_ms"]
assert all(isinstance(itl[p], num) for p in ["p50", "p90", "p99", "mean"]), itl
assert 0 <= itl["p50"] <= itl["p90"] <= itl["p99"] <= itl["max"], itl
recs = [json.loads(l) for l in lines]
gaps = sum(x["n_generated"] - 1 for x in recs if x["n_generated"] > 0)
span_ms = sum((x["finish_s"] - x["first_token_s"]) * 1e3 for x in recs if x["n_generated"] > 0)
assert gaps > 0 and itl["mean"] > 0 and itl["mean"] * gaps <= span_ms * 1.001 + 1, (itl, gaps, span_ms)
PY

# --- --compare: three policies under small pools, one engine each ---
"$BENCH" --model "$M" --workload chatbot -n 16 --max-output 32 --seed 1 --temperature 0 \
	--gpu-blocks 8 --cpu-blocks 4 "${PROF[@]}" --compare preempt=adaptive,recompute,swap \
	--json >"$tmp/c.json" 2>"$tmp/c.err" &
bp=$!
wait $bp && ok "--compare exits 0" || fail "--compare: $(tail -n 5 "$tmp/c.err")"
no_leftovers "--compare" $bp
python3 - "$tmp/c.json" <<'PY' && ok "--compare: 3 runs, settings in order, equal hashes, preemptions" || fail "--compare JSON"
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"]
assert [r["setting"]["preempt"] for r in runs] == ["adaptive", "recompute", "swap"]
assert len({r["outputs_sha256"] for r in runs}) == 1
for r in runs:
    assert r["requests"] == 16 and r["throughput_tok_s"] > 0
    if r["policy"] is not None:  # the engine's status, when it has a control plane
        assert r["policy"]["preempt"] == r["setting"]["preempt"], r["policy"]
    assert "swap" in r["preemptions"] and "recompute" in r["predictor_mape"]
assert any(r["preemptions"]["total"] > 0 for r in runs), "8 GPU blocks should preempt"
PY
grep -q "^swap " "$tmp/c.err" && ok "--compare --json: table on stderr" || fail "no table on stderr"

# --- an engine already running (--name) ---
"$ENGINED" --name bt --model "$M" --device cpu "${PROF[@]}" >"$tmp/e.log" 2>&1 &
EP=$!
for _ in $(seq 400); do [ -S "$ALLM_RUNTIME_DIR/bt.sock" ] && break; sleep 0.025; done
"$BENCH" --name bt "${WL[@]}" --json --concurrency 4 >"$tmp/n.json" 2>"$tmp/n.err" &&
	ok "--name run exits 0" || fail "--name: $(tail -n 5 "$tmp/n.err")"
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a['outputs_sha256']==b['outputs_sha256'] and a['requests']==12" \
	"$tmp/n.json" "$tmp/r.json" && ok "--name: hash = allm-run's (with --concurrency 4)" || fail "--name hash"
"$BENCH" --name bt -n 4 --max-output 4 --rate 50 >"$tmp/t.txt" 2>/dev/null &&
	grep -q "outputs_sha256" "$tmp/t.txt" && ok "--name --rate: text summary" || fail "--name --rate"
kill -TERM $EP; wait $EP && ok "the --name engine still exits 0" || fail "--name engine exit"
EP=

# --- --ping ---
"$BENCH" --ping 200 --json >"$tmp/p.json" &&
	python3 -c "import json,sys; o=json.load(open(sys.argv[1])); assert set(o)=={'ring_spin','ring_sleep','uds'} and all(v['n']==200 and v['p50']>0 for v in o.values())" "$tmp/p.json" &&
	ok "--ping 200 --json" || fail "--ping"

# --- bad flags: exit 2 with a message, nothing started ---
bad() {
	local out rc
	out=$("$BENCH" "$@" 2>&1 >/dev/null)
	rc=$?
	[ $rc -eq 2 ] && echo "$out" | grep -q "allm-bench: " && ok "exit 2: $* ($out)" ||
		fail "'$*' gave $rc: $out"
}
bad --model "$M" --bogus 1
bad --model "$M" -n 0
bad --model "$M" --gpu-blocks x
bad --model "$M" --compare foo=1,2
bad --model "$M" --compare preempt=fast
bad --model "$M" --dummy tiny
bad --name bt --gpu-blocks 8
bad --name bt --compare sched=fair,fcfs
bad -n 3
bad --model "$M" --workload "$tmp/none.jsonl"
bad --model "$M" --rate
no_leftovers "bad flags" 0

# --- the engine fails to start: exit 1, its log shown, nothing left ---
"$BENCH" --model "$tmp/no-such-model" -n 2 >"$tmp/f.out" 2>"$tmp/f.err" &
bp=$!
wait $bp
rc=$?
[ $rc -eq 1 ] && grep -q "no-such-model" "$tmp/f.err" && ok "bad --model: exit 1 with the engine's error" ||
	fail "bad --model: rc $rc: $(cat "$tmp/f.err")"
no_leftovers "bad --model" $bp

# --- SIGINT during a run: exit 130, the engine stopped, its dir gone ---
"$BENCH" --model "$M" --workload chatbot -n 5000 --max-output 256 --ignore-eos --seed 1 \
	--temperature 0 "${PROF[@]}" >/dev/null 2>"$tmp/i.err" &
bp=$!
for _ in $(seq 400); do ls "$TMPDIR"/*/bench-$bp-0.sock >/dev/null 2>&1 && break; sleep 0.025; done
sleep 0.3
kill -INT $bp
wait $bp
rc=$?
[ $rc -eq 130 ] && ok "SIGINT: exit 130" || fail "SIGINT: exit $rc: $(tr "\r" "\n" <"$tmp/i.err" | grep -v "^requests" | tail -n 12)"
no_leftovers "SIGINT" $bp

if [ $fails -gt 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "cli-allm-bench: all checks passed"
