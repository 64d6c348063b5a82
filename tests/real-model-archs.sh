#!/usr/bin/env bash
# Description: the engine on the real Gemma 3 270M (gemma3) and Qwen2.5-Coder-0.5B-Instruct (qwen2) Q4_K_M GGUF files, fetched into .models-cache/ by tools/models.sh (SKIP where neither can be had), against llama.cpp's answers on the same files (tests/data/real-archs/NAME.json): greedy ids from five prompts given as llama.cpp's ids (teacher-forced and free-running, parting only at its near ties), logits and perplexity within 1 % on a fixed text of ~700 tokens, longer than Gemma's 512-token window (test-real-model), then allm-run --model FILE.gguf --prompt-ids as users run it.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$root/build}
RUN=$BUILD_DIR/tools/allm-run
fails=0 ran=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# the files by name, where tools/models.sh puts them (fetched once; it may fetch
# nothing here: then the files that are missing are skipped)
model_path() {
	local f=$root/.models-cache/$1
	if [ ! -f "$f" ]; then
		bash "$root/tools/models.sh" >/dev/null 2>&1 || true
	fi
	[ -f "$f" ] && echo "$f"
}

for pair in gemma3:gemma-3-270m-q4_k_m.gguf qwen2:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; do
	name=${pair%%:*} file=${pair#*:}
	ref=$root/tests/data/real-archs/$name.json
	if ! path=$(model_path "$file"); then
		echo "skip: $file is not in .models-cache/ (tools/models.sh fetches it)"
		continue
	fi
	ran=$((ran + 1))
	"$BUILD_DIR/tests/test-real-model" "$path" "$ref" && ok "$name: test-real-model" || fail "$name: test-real-model"
	# allm-run as users run the file, on llama.cpp's ids of its first prompt
	prompt_ids=$(python3 -c 'import json, sys; print(",".join(map(str, json.load(open(sys.argv[1]))["greedy"][0]["prompt_ids"])))' "$ref")
	got=$("$RUN" --model "$path" --device cpu --prompt-ids "$prompt_ids" --max-tokens 16 --temperature 0 \
		--ids 2>/dev/null | sed -n 's/^generated: //p')
	python3 - "$ref" "$got" <<'PY' && ok "$name: allm-run --prompt-ids gives llama.cpp's greedy ids up to a near tie" || fail "$name: allm-run: $got"
import json, sys
g = json.load(open(sys.argv[1]))["greedy"][0]
got = [int(x) for x in sys.argv[2].split()]
for k, want in enumerate(g["generated"]):
    if k >= len(got):
        sys.exit(1)
    if got[k] != want:
        top = dict((t, l) for t, l in g["top"][k])
        print(f"  parts at step {k}: ours {got[k]}, llama.cpp {want}")
        sys.exit(0 if got[k] in top and top[want] - top[got[k]] < 0.5 else 1)
sys.exit(0)
PY
done
[ $ran -gt 0 ] || { echo "SKIP: neither real model is in .models-cache/"; exit 77; }
[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "real-model-archs.sh: all checks passed"
