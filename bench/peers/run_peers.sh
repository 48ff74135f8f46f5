#!/usr/bin/env bash
# Reproduces bench/results/2026-11-23-peers.md: YCSB Load, A, B and C against
# every single-machine target, one `compare` invocation per workload, then
# the plots. Usage: bench/peers/run_peers.sh [BUILD_DIR] [OUT_DIR]
# (BENCH overrides the command, e.g. BENCH="build/slip bench".)
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-bench/results}
BENCH=${BENCH:-$BUILD/slip-bench bench}
TARGETS=${TARGETS:-local,rocksdb,redis,redis-wait,memcached}
SECS=${SECS:-10}
for w in load a b c; do
  echo "== workload $w: $(uptime)"
  $BENCH compare --targets "$TARGETS" --workload "$w" --threads 2 --records 100000 \
      --seconds "$SECS" --warmup 2 --json "$OUT/2026-11-23-peers-$w.json"
done
"$(dirname "$0")/../plot" -o "$OUT/2026-11-23-peers" "$OUT"/2026-11-23-peers-{load,a,b,c}.json
