#!/usr/bin/env bash
# Description: a 9-second run of the soak (tools/soak.sh, issue 49): 2 ring and 2 HTTP clients against one allm-engined + allm-gateway with the prefix cache on (few blocks: they move down the tiers) and `allmctl cache reset` every second, every greedy answer equal to a cache-off engine's and gateway's, memory sampled, both stopped clean; the 5-minute run is the same tool with --minutes 5.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
bash "$ROOT/tools/soak.sh" --minutes 0.15 --ring-clients 2 --http-clients 2 --reset-every 1
rc=$?
[ $rc = 77 ] && echo "SKIP: the venv (adaptivellm package) cannot be built here"
exit $rc
