#!/usr/bin/env bash
# Runs Debian's fi_pingpong and our ofi_pingpong_bench on the same libfabric
# provider, one after the other, and prints a markdown table of both.
# Builds nothing.
#
#   bench/fabric/run_pingpong.sh BENCH_BINARY [--iters N] [--runs N]
#                                [--providers "shm tcp"] [--port P]
#
#   BENCH_BINARY  path to ofi_pingpong_bench (e.g. build/bench/micro/ofi_pingpong_bench)
#   --iters N     ping-pong round trips per measurement (default 10000)
#   --runs N      repetitions of each tool per provider (default 3)
#   --providers   which of shm, tcp to run (default "shm tcp")
#   --port P      fi_pingpong's out-of-band control port (default 47592)
#
# What is compared (64 B messages, both sides on this host):
#   fi_pingpong -e rdm -S 64 -I N: FI_MSG ping-pong; prints the mean
#     one-way time "usec/xfer" (= elapsed / 2N) and "Mxfers/sec" (2N /
#     elapsed), both with 2 decimals. We show RTT = 2 x usec/xfer and round
#     trips/s = 1e6 / RTT. It reports no percentiles.
#   ofi_pingpong_bench: the same ping-pong through our Endpoint API
#     (send_recv), a one-sided ping-pong (write_poll: each side Writes 64 B
#     into the peer's memory and spins on its own), and one-way streaming
#     rates with 64 operations in flight (send_stream, write_stream).
#     libfabric-bin has no one-sided ping-pong to compare write_poll with.
#     On tcp it runs twice: with the default remote completion (a send or
#     write completes once the peer acknowledged it: FI_TRANSMIT_COMPLETE,
#     one extra message per operation) and with --local-completion
#     (completion when handed to the local socket, as fi_pingpong does;
#     weaker semantics, see src/fabric/ofi/ofi_fabric.h), labelled "(local)".
set -euo pipefail

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
BENCH=$1
shift
ITERS=10000
RUNS=3
PROVIDERS="shm tcp"
PORT=47592
while [[ $# -gt 0 ]]; do
  case $1 in
    --iters) ITERS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --providers) PROVIDERS=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ -x $BENCH ]] || { echo "not executable: $BENCH" >&2; exit 2; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong not found (Debian: libfabric-bin)" >&2; exit 2; }

ofi_name() {
  case $1 in
    shm) echo "shm" ;;
    tcp) echo "tcp;ofi_rxm" ;;
    *) echo "unknown provider $1" >&2; exit 2 ;;
  esac
}

# Waits until something listens on TCP port $1 (at most ~5 s).
wait_listen() {
  for _ in $(seq 50); do
    if ss -ltnH "sport = :$1" 2>/dev/null | grep -q .; then return 0; fi
    sleep 0.1
  done
  return 1
}

ROWS=()
RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT

# fi_pingpong server + client on loopback; appends one table row.
run_fi_pingpong() {
  local prov=$1 name
  name=$(ofi_name "$prov")
  local cmd=(fi_pingpong -p "$name" -e rdm -I "$ITERS" -S 64)
  local srv_out
  srv_out=$(mktemp)
  timeout 120 "${cmd[@]}" -B "$PORT" >"$srv_out" 2>&1 &
  local srv=$!
  if ! wait_listen "$PORT"; then
    kill "$srv" 2>/dev/null || true
    echo "fi_pingpong server did not start" >&2
    cat "$srv_out" >&2
    rm -f "$srv_out"
    return 1
  fi
  local out rc=0
  out=$(timeout 120 "${cmd[@]}" -P "$PORT" 127.0.0.1 2>&1) || rc=$?
  wait "$srv" || true
  rm -f "$srv_out"
  {
    echo "\$ ${cmd[*]} -B $PORT &   # server"
    echo "\$ ${cmd[*]} -P $PORT 127.0.0.1"
    echo "$out"
    [[ $rc -eq 0 ]] || echo "(exit $rc)"
  } >>"$RAW"
  # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
  local line
  line=$(echo "$out" | awk '$1 == "64" {print}' | tail -1)
  if [[ $rc -ne 0 || -z $line ]]; then
    ROWS+=("| $prov | fi_pingpong | msg ping-pong | failed (exit $rc) | - | - | - |")
    return 0
  fi
  ROWS+=("$(echo "$line" | awk -v p="$prov" '{
      usec = $7;
      printf "| %s | fi_pingpong | msg ping-pong | %.2f (mean) | - | %.2f | %.0f |", p, 2 * usec, 2 * usec, 1e6 / (2 * usec) }')")
}

# Our bench: appends one row per test. $2 (optional): extra flag.
run_ours() {
  local prov=$1
  local cmd=("$BENCH" --provider "$prov" --iters "$ITERS" --warmup $((ITERS / 10)) --stream $((ITERS * 10)))
  if [[ $# -ge 2 ]]; then cmd+=("$2"); fi
  local out rc=0
  out=$(timeout 300 "${cmd[@]}" 2>&1) || rc=$?
  [[ $rc -eq 0 ]] || ROWS+=("| $prov | ofi_pingpong_bench | (run) | failed (exit $rc) | - | - | - |")
  {
    echo "\$ ${cmd[*]}"
    echo "$out"
    [[ $rc -eq 0 ]] || echo "(exit $rc)"
  } >>"$RAW"
  while IFS= read -r line; do
    ROWS+=("$(echo "$line" | awk -v p="$prov" '
      { for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] } }
      v["test"] ~ /pingpong/ {
        t = v["test"] == "send_recv_pingpong" ? "send/recv ping-pong" : "write+poll ping-pong";
        if (v["completion"] == "local") t = t " (local)";
        printf "| %s | ofi_pingpong_bench | %s | %.2f (p50) | %.2f | %.2f | %.0f |", p, t,
               v["p50"], v["p99"], v["mean"], v["roundtrips_per_s"] }
      v["test"] ~ /stream/ {
        t = v["test"] == "send_stream" ? "send stream (64 in flight)" : "write stream (64 in flight)";
        if (v["completion"] == "local") t = t " (local)";
        printf "| %s | ofi_pingpong_bench | %s | - | - | - | %.0f msgs/s one-way |", p, t, v["msgs_per_s"] }')")
  done < <(echo "$out" | grep '^provider=' || true)
}

echo "# fabric ping-pong, 64 B, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo
echo "- host: $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- libfabric: $(fi_info --version 2>/dev/null | tr '\n' ' ')"
echo "- bench: $BENCH; iters $ITERS, runs $RUNS"
echo

for prov in $PROVIDERS; do
  for run in $(seq "$RUNS"); do
    run_fi_pingpong "$prov"
    run_ours "$prov"
    if [[ $prov == tcp ]]; then run_ours "$prov" --local-completion; fi
  done
done

echo "| provider | tool | test | RTT us | RTT p99 us | RTT mean us | round trips/s |"
echo "|---|---|---|---|---|---|---|"
for r in "${ROWS[@]}"; do echo "$r"; done
echo
echo "<details><summary>raw output</summary>"
echo
echo '```'
cat "$RAW"
echo '```'
echo "</details>"
