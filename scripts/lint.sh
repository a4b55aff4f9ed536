#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds rrxe.ko against the VARIANT kernel with the kernel's CLIPPY=1 and fails on any
# compiler or clippy warning, or on a module dependency cycle in the crate.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
variant=${1:-release}
export HOME="${HOME:-/root}"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export LIBCLANG_PATH=/usr/lib/llvm-19/lib

cd "$repo"
# The driver is a one-way chain of modules (Documentation/rrxe/design.rst): no cycles.
python3 "$here/modcycles.py" drivers/infiniband/sw/rrxe/rrxe_main.rs
# layout_pad.rs is in the module only when asked for (make module RRXE_LAYOUT_PAD=1); it
# needs nothing but core, so the host's compiler checks it here, where the build below
# leaves it out.
pad=$(mktemp -d)
rustc --edition 2021 --crate-type lib --emit metadata -D warnings --out-dir "$pad" \
	drivers/infiniband/sw/rrxe/layout_pad.rs
rm -r "$pad"
kdir=$("$here/kernel.sh" build "$variant")
kmake=(make -C "$kdir" ARCH=x86_64 LLVM=-19 M="$repo")
# Every object is rebuilt, so each warning is seen, and a module built for the other
# variant is not reused.
"${kmake[@]}" clean >/dev/null
echo "$kdir" >.module-kdir
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${kmake[@]}" CLIPPY=1 -j"$(nproc)" modules >"$log" 2>&1; then
	cat "$log"
	echo "lint.sh: build failed" >&2
	exit 1
fi
cat "$log"
if grep -nE '^(warning|error)(\[|:)|: warning:|WARNING:' "$log"; then
	echo "lint.sh: the build has warnings" >&2
	exit 1
fi
