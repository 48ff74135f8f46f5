#!/usr/bin/env bash
# redis-benchmark against Slipstream's Redis-protocol front door and against
# Redis, same machine, same commands, one run (glue: the numbers are the
# tools' own). Prints a markdown report on stdout.
#
#   bench/resp/redis_benchmark.sh [--design rowan-kv] [--requests 200000] [--clients 50]
#                                 [--data 100] [--keys 100000] [--dir /dev/shm/slip-resp-bench]
#
# Slipstream: `slip cluster up` with 3 nodes, RF 3; redis-benchmark talks to
# node 0's RESP port, which forwards each key to its shard's primary. A SET's
# +OK means the value is in the PM of all three replicas (the durability
# class is the cluster's: dram when --dir is on tmpfs, file otherwise).
# Redis: Debian's redis-server, one primary and two replicas (replicaof), no
# persistence (save "", appendonly no): a SET's +OK means the primary's
# memory. WAIT: the same SETs each followed by WAIT 2 0 (acked once both
# replicas have it, in memory), sent through `redis-cli --pipe` and timed —
# and the same SETs without WAIT through the same pipe to both systems.
set -euo pipefail

DESIGN=rowan-kv REQUESTS=200000 CLIENTS=50 DATA=100 KEYS=100000 DIR=/dev/shm/slip-resp-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --design) DESIGN=$2; shift 2 ;;
    --requests) REQUESTS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SLIP=$ROOT/build/slip
[ -x "$SLIP" ] || { echo "build slip first (cmake --build build --target slip)" >&2; exit 1; }
for t in redis-server redis-cli redis-benchmark; do
  command -v $t >/dev/null || { echo "$t missing: scripts/install-deps" >&2; exit 1; }
done

free_base() {  # three consecutive free loopback ports
  local p
  for p in $(shuf -i 20000-60000 -n 50); do
    if ! (ss -ltn | awk '{print $4}' | grep -qE ":($p|$((p+1))|$((p+2)))\$"); then echo $p; return; fi
  done
  return 1
}
SLIP_PORT=$(free_base)
REDIS_PORT=$(free_base)
[ "$REDIS_PORT" != "$SLIP_PORT" ] || REDIS_PORT=$((SLIP_PORT + 10))
WORK=$(mktemp -d)
cleanup() {
  "$SLIP" cluster down --dir "$DIR" >/dev/null 2>&1 || true
  for i in 0 1 2; do redis-cli -p $((REDIS_PORT + i)) shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$WORK" "$DIR"
}
trap cleanup EXIT

rm -rf "$DIR"
"$SLIP" cluster up --dir "$DIR" --nodes 3 --rf 3 --design "$DESIGN" --resp-port "$SLIP_PORT" >/dev/null
PASS=$("$SLIP" cluster password --dir "$DIR")
PM=$(python3 -c "import json,sys; print(json.load(open('$DIR/cluster.json'))['config']['pm'])" 2>/dev/null || echo "?")

for i in 0 1 2; do
  args=(--port $((REDIS_PORT + i)) --save "" --appendonly no --dir "$WORK" --daemonize yes
        --pidfile "$WORK/redis-$i.pid" --logfile "$WORK/redis-$i.log" --dbfilename "dump-$i.rdb")
  [ $i -gt 0 ] && args+=(--replicaof 127.0.0.1 "$REDIS_PORT")
  redis-server "${args[@]}"
done
for i in 0 1 2; do
  for _ in $(seq 100); do redis-cli -p $((REDIS_PORT + i)) ping >/dev/null 2>&1 && break; sleep 0.1; done
done
for _ in $(seq 100); do
  [ "$(redis-cli -p "$REDIS_PORT" info replication | grep -c 'state=online')" = 2 ] && break; sleep 0.1
done

# One redis-benchmark run: "SET rps p50 ms" and "GET rps p50 ms" lines.
bench() {  # port password pipeline
  local auth=()
  [ -n "$2" ] && auth=(-a "$2")
  redis-benchmark -p "$1" "${auth[@]}" -t set,get -n "$REQUESTS" -c "$CLIENTS" -r "$KEYS" -d "$DATA" -P "$3" --csv 2>/dev/null |
    awk -F, 'NR>1 {gsub(/"/,""); print $1, $2, $5}'
}

# SETs through one redis-cli --pipe connection: seconds taken.
pipe_time() {  # port password file
  local auth=()
  [ -n "$2" ] && auth=(-a "$2" --no-auth-warning)
  local t0 t1
  t0=$(date +%s.%N)
  redis-cli -p "$1" "${auth[@]}" --pipe <"$3" >"$WORK/pipe.out" 2>&1
  t1=$(date +%s.%N)
  grep -q "errors: 0" "$WORK/pipe.out" || { cat "$WORK/pipe.out" >&2; return 1; }
  awk "BEGIN {print $t1 - $t0}"
}
PIPE_N=$((REQUESTS / 10))
python3 - "$WORK" "$PIPE_N" "$DATA" <<'EOF'
import sys
work, n, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
v = "x" * data
def cmd(*a):
    return "*%d\r\n" % len(a) + "".join("$%d\r\n%s\r\n" % (len(x), x) for x in a)
with open(work + "/sets.resp", "w", newline="") as f:
    for i in range(n):
        f.write(cmd("SET", "pipe:%d" % i, v))
with open(work + "/sets_wait.resp", "w", newline="") as f:
    for i in range(n):
        f.write(cmd("SET", "pipe:%d" % i, v))
        f.write(cmd("WAIT", "2", "0"))
EOF

echo "# redis-benchmark: Slipstream's RESP front door vs Redis"
echo
echo "Date: $(date -u +%F). Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), shared and noisy."
echo "Slipstream: $DESIGN, 3 nodes, RF 3, tcp provider on loopback, PM class **$PM**; redis-benchmark on node 0's port."
echo "Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2): 1 primary + 2 replicas, no persistence."
echo "redis-benchmark: -n $REQUESTS -c $CLIENTS -r $KEYS -d $DATA; p50 in ms."
echo
echo "| target | pipeline | SET req/s | SET p50 | GET req/s | GET p50 |"
echo "|---|---|---|---|---|---|"
declare -A R
for P in 1 16; do
  for target in slip redis; do
    if [ $target = slip ]; then out=$(bench "$SLIP_PORT" "$PASS" $P); else out=$(bench "$REDIS_PORT" "" $P); fi
    set_l=$(echo "$out" | awk '$1=="SET"{print $2, $3}')
    get_l=$(echo "$out" | awk '$1=="GET"{print $2, $3}')
    R[$target,$P,set]=${set_l%% *}
    R[$target,$P,get]=${get_l%% *}
    echo "| $target | $P | ${set_l%% *} | ${set_l##* } | ${get_l%% *} | ${get_l##* } |"
  done
done
echo
echo "Ratios slip / redis (same run): SET $(awk "BEGIN {printf \"%.2f\", ${R[slip,1,set]} / ${R[redis,1,set]}}") (P1), $(awk "BEGIN {printf \"%.2f\", ${R[slip,16,set]} / ${R[redis,16,set]}}") (P16); GET $(awk "BEGIN {printf \"%.2f\", ${R[slip,1,get]} / ${R[redis,1,get]}}") (P1), $(awk "BEGIN {printf \"%.2f\", ${R[slip,16,get]} / ${R[redis,16,get]}}") (P16)."
echo
echo "## One connection, redis-cli --pipe, $PIPE_N SETs"
echo
echo "| target | what an ack means | seconds | SET/s |"
echo "|---|---|---|---|"
t=$(pipe_time "$SLIP_PORT" "$PASS" "$WORK/sets.resp")
echo "| slip | in PM on 3 replicas ($PM class) | $(printf %.2f "$t") | $(awk "BEGIN {printf \"%.0f\", $PIPE_N / $t}") |"
t=$(pipe_time "$REDIS_PORT" "" "$WORK/sets.resp")
echo "| redis | in the primary's memory | $(printf %.2f "$t") | $(awk "BEGIN {printf \"%.0f\", $PIPE_N / $t}") |"
t=$(pipe_time "$REDIS_PORT" "" "$WORK/sets_wait.resp")
echo "| redis + WAIT 2 0 after each SET | in 3 replicas' memory | $(printf %.2f "$t") | $(awk "BEGIN {printf \"%.0f\", $PIPE_N / $t}") |"
