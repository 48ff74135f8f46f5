#!/usr/bin/env bash
# Fixed-seed campaigns with a given slip binary; prints everything but the speed.
B=$1
for D in rpc-kv rowan-kv rwrite-kv batch-kv share-kv tailwind; do
  $B sim --design $D --seeds 1..12 --crashes 2 --failover-crashes 1 --partitions 1 --slow 1 --cold-start 2>&1
  $B sim --design $D --seeds 1..6 --workers 3 --crashes 2 --cold-start --crash-in-cold-start 2>&1
  [ $D != rpc-kv ] && $B sim --layer replication --design $D --seeds 1..40 2>&1
  [ $D != rpc-kv ] && $B sim --layer replication --design $D --seeds 1..20 --bug ack-early 2>&1
done | sed -E 's/, [0-9.]+ seeds\/s//'
