#!/usr/bin/env bash
# The client library as an application sees it: install the build into a
# fresh prefix, build examples/ against it with find_package(Slipstream),
# and run the example against a real 3-node cluster.
#   install_test.sh SOURCE_DIR BUILD_DIR SLIP_BINARY
set -euo pipefail
src=$1 build=$2 slip=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/slip_install_test.XXXXXX")
cleanup() {
  "$slip" cluster down --dir "$work/cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
# Only the client and what it links: no server, store or replication.
for lib in server store replication node sim index; do
  if [[ -e "$work/prefix/lib/libslip_$lib.a" ]]; then
    echo "FAIL: libslip_$lib.a was installed"; exit 1
  fi
done
[[ -f "$work/prefix/include/slip/client.h" && -f "$work/prefix/include/slip/status.h" ]] ||
  { echo "FAIL: public headers missing"; exit 1; }
# Public headers include only each other and the standard library.
if grep -h '#include "' "$work/prefix/include/slip/"*.h | grep -v '"slip/'; then
  echo "FAIL: a public header includes a private one"; exit 1
fi

cmake -S "$src/examples" -B "$work/example" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/example" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

"$slip" cluster up --nodes 3 --dir "$work/cluster" >/dev/null
out=$("$work/example/kv_example" --dir "$work/cluster")
echo "$out"
grep -qx "get greeting -> hello, slipstream" <<<"$out"
grep -q "^after delete: NotFound" <<<"$out"
grep -qx "async: 100 of 100 keys read back" <<<"$out"
grep -q "^oversized key: TooLarge" <<<"$out"
grep -qx "ok" <<<"$out"
echo PASS
