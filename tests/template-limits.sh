#!/usr/bin/env bash
# Description: hostile and broken templates against the Jinja interpreter (engined/template/): nesting bombs, loops and strings that would take minutes or gigabytes, endless macro recursion, mutation of the sandbox's immutable values, unknown constructs and unterminated blocks each get one error naming the limit or the construct (and its line), within seconds, never a crash or a hang.
set -uo pipefail
R=${1:-${BUILD_DIR:-build}/tests/template-render}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo '{"trusted": {}, "data": {"l": [1, 2]}}' >"$T/ctx.json"
fails=0
# check RC SUBSTRING TEMPLATE: exit status and a substring of the message
check() {
  local want=$1 msg=$2
  printf '%s' "$3" >"$T/t.jinja"
  timeout 60 "$R" "$T/t.jinja" "$T/ctx.json" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" != "$want" ] || ! grep -qF -- "$msg" "$T/err"; then
    echo "FAIL: ${3:0:60}...: exit $rc (want $want), message: $(head -c 200 "$T/err") (want: $msg)"
    fails=$((fails + 1))
  else
    echo "ok: ${3:0:50}... -> $(head -c 100 "$T/err")"
  fi
}
rep() { python3 -c "import sys; print(sys.argv[1] * int(sys.argv[2]), end='')" "$1" "$2"; }
check 3 "nested deeper than 200" "$(rep '{% if 1 %}' 5000)$(rep '{% endif %}' 5000)"
check 3 "nested deeper than 200" "{{ $(rep '(' 100000)1$(rep ')' 100000) }}"
check 3 "nested deeper than 200" "{{ $(rep '[' 100000)$(rep ']' 100000) }}"
check 3 "nested deeper than 200" "{{ $(rep 'not ' 100000) 1 }}"
check 6 "steps" "{% for i in range(100000) %}{% for j in range(100000) %}{{ j if j < 0 }}{% endfor %}{% endfor %}"
check 6 "output is longer" "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}"
check 6 "MiB of memory" "{% set ns = namespace(s='x') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
check 6 "calls deeper than 200" "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"
check 6 "a string longer than" "{{ 'x' * 100000000000 }}"
check 6 "a list longer than" "{{ [1] * 100000000000 }}"
check 5 "Range too big" "{{ range(1000000000000) | length }}"
check 5 "integer overflow" "{{ 9223372036854775807 + 1 }}"
check 5 "integer overflow" "{{ 2 ** 200 }}"
check 5 "division or modulo by zero" "{{ 1 // 0 }}"
check 5 "access to attribute 'update' of 'dict' object is unsafe" "{% set d = {} %}{{ d.update({'a': 1}) }}"
check 5 "access to attribute 'append' of 'list' object is unsafe" $'\n\n{{ l.append(3) }}'
check 5 "line 3: access to attribute 'append'" $'\n\n{{ l.append(3) }}'
check 5 "line 2: unsupported filter 'from_json'" $'x\n{{ "{}" | from_json }}'
check 5 "unsupported test 'nonsense'" "{{ 1 is nonsense }}"
check 3 "line 2: unsupported statement 'include'" $'a\n{% include "x" %}'
check 3 "unsupported statement 'extends'" "{% extends 'x' %}"
check 3 "unsupported construct 'recursive'" "{% for x in l recursive %}{% endfor %}"
check 3 "missing '{% endfor %}'" "{% for x in l %}"
check 3 "unexpected 'endif'" "{% endif %}"
check 3 "unterminated string" "{{ 'abc }}"
check 3 "unterminated comment" "{# abc"
check 3 "unexpected end of template" "{{ 1 + "
check 4 "boom" "{{ raise_exception('boom') }}"
# a template's raise_exception text is passed as written
check 4 "Conversation roles must alternate user/assistant/user/assistant/..." "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
[ "$fails" = 0 ] || exit 1
