#!/usr/bin/env bash
# The layer check (cmake/CheckLayers.cmake) must fail configuration on an
# upward include, naming the file, the line and the module, and must pass
# the same tree once the include is gone.
#   check_layers_test.sh CMAKE_DIR FIXTURE_DIR
set -euo pipefail
cmake_dir=$1 fixture=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/slip_layers_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$fixture" "$work/src-tree"
tree="$work/src-tree"

if cmake -S "$tree" -B "$work/b1" -DSLIP_CMAKE_DIR="$cmake_dir" >"$work/out1" 2>&1; then
  echo "FAIL: an upward include configured"; cat "$work/out1"; exit 1
fi
grep -q "src/low/low.cc:2: module 'low' includes 'high/', which it does not link" "$work/out1" ||
  { echo "FAIL: the error does not name the file, line and module"; cat "$work/out1"; exit 1; }

# Without the upward include the same tree configures.
sed -i '/#include "high\/high.h"/d' "$tree/src/low/low.cc"
cmake -S "$tree" -B "$work/b2" -DSLIP_CMAKE_DIR="$cmake_dir" >"$work/out2" 2>&1 ||
  { echo "FAIL: a clean tree was refused"; cat "$work/out2"; exit 1; }
echo PASS
