#!/usr/bin/env bash
# Builds one of the fuzz targets with clang + libFuzzer (+ ASan/UBSan) and runs it on
# its growing corpus. Usage:
#   tools/fuzz.sh [sqe|hello|ctl|gateway|...|gguf] [RUNS (default 1000000)] [--merge] [libFuzzer flags]
#     sqe      the daemon's handling of one SQE and the arena bytes it names
#     hello    the daemon's handshake: what a peer writes on the socket
#     ctl      the control plane's msgpack validator, decoder, lookups and JSON
#     gateway  allm-gateway's parsing of /v1/completions and /v1/chat/completions
#              bodies: fields, tokenization, chat templates, choices
#     tokenizer a model's tokenizer.json and tokenizer_config.json, then encoding,
#              decoding and stream-decoding a text (inputs up to 64 KiB)
#     model    a model's config.json and model.safetensors, loaded onto the CPU
#              backend in each storage dtype (inputs up to 64 KiB)
#     profile  the predictor profile of the cache directory and a simulated
#              device's profile, as read at start (inputs up to 64 KiB)
#     chat     a model's chat_template text (the Jinja interpreter), parsed or
#              refused, and messages and tools rendered through it
#     gguf     a GGUF file (--model FILE.gguf): its header, the model loaded onto the
#              CPU backend in each storage dtype, its tokenizer encoding and decoding
#              a text (inputs up to 64 KiB)
#     grammar  a request's grammar (GBNF, JSON Schema, regex, choice) compiled, and
#              a matcher walked by token ids: masks must agree with accept()
# The corpus lives in build-fuzz/corpus-TARGET and grows from run to run (seeded from
# tests/fuzz/corpus-TARGET, the regression corpus meson's suite "fuzz" replays).
# --merge then adds the inputs that reach new code to tests/fuzz/corpus-TARGET (commit
# them); crashing inputs land in build-fuzz/ as crash-* (add them there too, fixed).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=sqe
case "${1:-}" in sqe | hello | ctl | gateway | tokenizer | model | profile | chat | gguf | grammar) TARGET=$1; shift ;; esac
RUNS=1000000
case "${1:-}" in '' | -*) ;; *) RUNS=$1; shift ;; esac
MERGE=0
if [ "${1:-}" = --merge ]; then MERGE=1; shift; fi
OUT=build-fuzz
SEEDS=tests/fuzz/corpus-$TARGET
CORPUS=$OUT/corpus-$TARGET
mkdir -p "$CORPUS"
cp -n "$SEEDS"/* "$CORPUS/" 2>/dev/null || true

INC=(-Icommon -Ikernels -Ikernels/cpu -Ishm -Iinclude -Iengined/ctlserver -Ictl)
SRC=(shm/*.c)
for f in common/*.c; do [ "$f" = common/params-json.c ] || SRC+=("$f"); done # that one is a program
PKGS=(jansson liburing)
# what meson generates from data/: the embedded default model (engined/model; the
# gateway's without the weights) and the simulated device's profiles (kernels)
M=data/models/stories260K
embed_model() { # SYMBOL FILE...: $OUT/SYMBOL.c, added to SRC
  local sym=$1
  shift
  python3 engined/model/embed-dir.py "$OUT/$sym.c" "$sym" '<embedded>/stories260K' "$@"
  SRC+=("$OUT/$sym.c")
}
embed_sim_profiles() {
  python3 engined/model/embed-dir.py "$OUT/allm_sim_profiles.c" allm_sim_profiles \
    '<embedded>/sim-profiles' data/sim-profiles/*.json
  SRC+=("$OUT/allm_sim_profiles.c")
}
if [ "$TARGET" = ctl ]; then
  SRC+=(ctl/ctl-proto.c ctl/ctl-encode.c tests/fuzz-ctl.c)
  PKGS=(msgpack-c jansson)
  pkg-config --exists msgpack-c || PKGS=(msgpack jansson)
elif [ "$TARGET" = chat ]; then
  INC+=(-Iengined/gateway -Iengined/template)
  SRC+=(engined/template/*.c engined/gateway/chat-template.c tests/fuzz-chat.c)
elif [ "$TARGET" = profile ]; then
  embed_sim_profiles
  INC+=(-Iengined/sched)
  SRC+=(engined/sched/predictor.c engined/sched/predictor-lsq.c engined/sched/predictor-profile.c
    kernels/sim/sim-profile.c kernels/sim/sim-cost.c tests/fuzz-profile.c)
elif [ "$TARGET" = model ]; then
  # the loaders and the CPU backend they load onto, as engined/model and kernels build them
  embed_sim_profiles
  embed_model allm_default_model $M/config.json $M/generation_config.json $M/model.safetensors \
    $M/special_tokens_map.json $M/tokenizer.json $M/tokenizer_config.json
  INC+=(-Iengined/model)
  SRC+=(kernels/*.c kernels/cpu/*.c kernels/sim/*.c engined/model/*.c tests/fuzz-model.c)
elif [ "$TARGET" = gguf ]; then
  # the GGUF container, the model loaders and the CPU backend, the tokenizer
  embed_sim_profiles
  embed_model allm_default_model $M/config.json $M/generation_config.json $M/model.safetensors \
    $M/special_tokens_map.json $M/tokenizer.json $M/tokenizer_config.json
  INC+=(-Iengined/model -Iengined/tokenizer)
  SRC+=(kernels/*.c kernels/cpu/*.c kernels/sim/*.c engined/model/*.c engined/tokenizer/*.c tests/fuzz-gguf.c)
elif [ "$TARGET" = grammar ]; then
  INC+=(-Iengined/tokenizer -Iengined/grammar)
  SRC+=(engined/tokenizer/*.c engined/grammar/*.c tests/fuzz-grammar.c)
elif [ "$TARGET" = tokenizer ]; then
  INC+=(-Iengined/tokenizer)
  SRC+=(engined/tokenizer/*.c tests/fuzz-tokenizer.c)
elif [ "$TARGET" = gateway ]; then
  # the request-body path of liballm-gateway and what it calls; the HTTP server,
  # the ring pump and the main are not under test here
  embed_model allm_gateway_default_model $M/config.json $M/generation_config.json \
    $M/special_tokens_map.json $M/tokenizer.json $M/tokenizer_config.json
  INC+=(-Iengined/tokenizer -Iengined/gateway -Iengined/template -Iclientlib)
  SRC+=(engined/tokenizer/*.c engined/template/*.c clientlib/client.c clientlib/client-connect.c tests/fuzz-gateway.c)
  for f in chat-template gw-text gw-model gw-api-err gw-openai gw-prompt gw-json gw-log; do SRC+=("engined/gateway/$f.c"); done
else
  embed_model allm_default_model $M/config.json $M/generation_config.json $M/model.safetensors \
    $M/special_tokens_map.json $M/tokenizer.json $M/tokenizer_config.json
  embed_sim_profiles
  SRC+=(kernels/*.c kernels/cpu/*.c kernels/sim/*.c tests/fuzz-daemon.c "tests/fuzz-$TARGET.c")
  [ "$TARGET" = hello ] && SRC+=(tests/raw-client.c)
  # the daemon's main and the control server (ZeroMQ) are not under test here
  for d in tokenizer grammar model kv exec sched workload serve; do
    INC+=("-Iengined/$d")
    for f in engined/$d/*.c; do [ "$f" = engined/serve/daemon.c ] || SRC+=("$f"); done
  done
fi
LIBS=$(pkg-config --libs "${PKGS[@]}")
case $TARGET in sqe | hello | model | gguf) LIBS="$LIBS -lopenblas" ;; esac
echo "fuzz.sh: building $OUT/fuzz-$TARGET (${#SRC[@]} files)" >&2
clang -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "${INC[@]}" $(pkg-config --cflags "${PKGS[@]}") \
  "${SRC[@]}" -o "$OUT/fuzz-$TARGET" $LIBS -lm -lpthread -ldl
echo "fuzz.sh: running $RUNS executions on $CORPUS ($(ls "$CORPUS" | wc -l) inputs)" >&2
MAX_LEN=4096
case $TARGET in tokenizer | model | profile | gguf) MAX_LEN=65536 ;; esac # their seeds are whole files
"$OUT/fuzz-$TARGET" -runs="$RUNS" -max_len=$MAX_LEN -artifact_prefix="$OUT/" -print_final_stats=1 "$@" "$CORPUS"
echo "fuzz.sh: $CORPUS holds $(ls "$CORPUS" | wc -l) inputs" >&2
if [ $MERGE = 1 ]; then
  before=$(ls "$SEEDS" | wc -l)
  "$OUT/fuzz-$TARGET" -merge=1 "$SEEDS" "$CORPUS" 2>&1 | tail -n 2 >&2
  echo "fuzz.sh: $SEEDS: $before -> $(ls "$SEEDS" | wc -l) inputs (commit the new ones)" >&2
fi
