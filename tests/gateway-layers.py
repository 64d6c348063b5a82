#!/usr/bin/env python3
# Description: the gateway's files keep their layers (engined/gateway/README.md, "Layers"): a request goes one way, HTTP -> API -> pump -> control, all over the shared state below them; no file includes the header of a layer above its own, every file of engined/gateway/ has a layer here, and no two files include each other's headers (no file circle).
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
D = os.path.join(ROOT, "engined", "gateway")
# top to bottom; a file may include headers of its own layer and of those below it
LAYERS = [
    ("http", "gw-http gw-conns gw-body gw-stream"),
    ("api", "gw-openai gw-api-err gw-structured gw-tools gw-fields gw-prompt gw-tokenize gw-json"),
    ("pump", "gw-pump gw-engine gw-slots gw-users"),
    ("control", "gw-ctl"),
    ("shared", "gateway gw-state gw-log gw-model gw-opts gw-text gw-cors chat-template"),
]
rank = {stem: i for i, (_, stems) in enumerate(LAYERS) for stem in stems.split()}
bad = 0
incs = {}
for f in sorted(os.listdir(D)):
    if not f.endswith((".c", ".h")):
        continue
    me = os.path.splitext(f)[0]
    if me not in rank:
        print(f"FAIL {f}: in no layer (add it to tests/gateway-layers.py and the README)")
        bad += 1
        continue
    for m in re.finditer(r'#\s*include\s+"([^"]+)\.h"', open(os.path.join(D, f)).read()):
        o = m.group(1)
        if o not in rank:
            continue  # another folder's header
        incs.setdefault(me, set()).add(o)
        if rank[o] < rank[me]:
            print(f"FAIL {f} ({LAYERS[rank[me]][0]}) includes {o}.h ({LAYERS[rank[o]][0]}): an arrow back up")
            bad += 1
for a, bs in sorted(incs.items()):
    for b in sorted(bs):
        if a < b and a in incs.get(b, ()):
            print(f"FAIL {a} and {b} include each other's headers (a file circle)")
            bad += 1
if bad:
    sys.exit(1)
print(f"gateway layers: {len(rank)} files, every arrow down, no circle")
