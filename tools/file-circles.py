#!/usr/bin/env python3
"""Counts the file-level circles in each folder: two files (a .c and its .h are one
file here) each of which includes the other's header. Folders depend one way
(../shared/checks/folder-arrows.sh); this is the same rule one level down.
Usage: python3 tools/file-circles.py [ROOT...]   (default: engined common ctl shm clientlib)
Prints each circle and the count per folder; exit 0 always (a measure, not a gate)."""
import collections
import os
import re
import sys

roots = sys.argv[1:] or ["engined", "common", "ctl", "shm", "clientlib"]
total = 0
for root in roots:
    for d, _, fs in sorted(os.walk(root)):
        stems = {os.path.splitext(f)[0] for f in fs if f.endswith((".c", ".h", ".cu"))}
        inc = collections.defaultdict(set)  # file stem -> stems of this folder's headers it includes
        for f in fs:
            if not f.endswith((".c", ".h", ".cu")):
                continue
            me = os.path.splitext(f)[0]
            text = open(os.path.join(d, f), errors="replace").read()
            for m in re.finditer(r'#\s*include\s+"([^"]+)\.h"', text):
                other = os.path.basename(m.group(1))
                if other != me and other in stems and os.path.exists(os.path.join(d, other + ".h")):
                    inc[me].add(other)
        circles = sorted({tuple(sorted((a, b))) for a in list(inc) for b in inc[a] if a in inc.get(b, ())})
        if circles:
            print(f"{d}: {len(circles)}: " + ", ".join(f"{a}/{b}" for a, b in circles))
        total += len(circles)
print(f"{total} file circles")
