#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds the kernel verbs consumer test module (tests/kverbs/rrxe_kverbs_test.ko) against
# the VARIANT kernel (debug by default), from clean, and prints the .ko's path. Fails on
# any compiler warning. The build products are ignored by tests/kverbs/.gitignore.
#
#   scripts/build-kverbs-test.sh [debug|release]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
variant=${1:-debug}
mdir=$repo/tests/kverbs

kdir=$("$here/kernel.sh" build "$variant")
kmake=(make -C "$kdir" ARCH=x86_64 LLVM=-19 M="$mdir")
# Every object is rebuilt, so each warning is seen, and a module built for the other
# variant is not reused.
"${kmake[@]}" clean >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${kmake[@]}" -j"$(nproc)" modules >"$log" 2>&1; then
	cat "$log" >&2
	echo "build-kverbs-test.sh: build failed" >&2
	exit 1
fi
if grep -nE ': warning:|: error:|^WARNING:' "$log" >&2; then
	echo "build-kverbs-test.sh: the build has warnings" >&2
	exit 1
fi
echo "$mdir/rrxe_kverbs_test.ko"
