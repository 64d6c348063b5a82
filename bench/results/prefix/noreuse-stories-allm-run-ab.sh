#!/usr/bin/env bash
# stories260K, no shared prefixes: allm-run in process (no client), caching on vs off alternated 5 times
B=/tmp/pcb-build2 M=/work/wt-b/data/models/stories260K
for wl in chatbot summary; do
for r in 1 2 3 4 5; do
	order="on off"; [ $((r % 2)) = 0 ] && order="off on"
	for pc in $order; do
		flock /work/.bench.lock $B/tools/allm-run --model $M --device cpu --workload $wl -n 1000 --max-output 64 --temperature 0 --ignore-eos \
			--gpu-blocks 128 --cpu-blocks 64 --prefix-caching $pc --profile /work/wt-b/bench/results/prefix/profile-stories-f32.json --calibrate-at-start --json 2>/dev/null |
			python3 -c "import json,sys; d=json.load(sys.stdin); print('$wl', $r, '$pc', d['throughput_tok_s'], d['outputs_sha256'][:12], d['prefix_cache']['hit_tokens'])"
	done
done
done
