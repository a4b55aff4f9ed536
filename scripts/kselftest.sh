#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds and installs rrxe's kselftest target (selftests/rrxe) with the kselftest framework
# of the kernel it runs on, and checks that kernel against the target's config fragment.
#
#   scripts/kselftest.sh release|debug [INSTALL_PATH]
#
# The target is written in the kernel's conventions (its Makefile includes ../lib.mk), so it
# is built where that holds: a scratch tools/testing/selftests (build/kselftest-src/) that
# holds the framework files of the kernel's source tree and a copy of selftests/rrxe. The
# kernel's own `make install` then writes INSTALL_PATH (default build/kselftest):
# run_kselftest.sh, kselftest/ (runner, ktap helpers), kselftest-list.txt and rrxe/. The
# guests see the host's root, so the install runs there at the same path:
#
#   build/kselftest/run_kselftest.sh -c rrxe            every program, in the Makefile's order
#   build/kselftest/run_kselftest.sh -t rrxe:netns.sh   one of them
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
variant=${1:-release}
install=$(realpath -m "${2:-$repo/build/kselftest}")

kdir=$("$here/kernel.sh" dir "$variant")
[ -f "$kdir/.config" ] && [ -d "$kdir/source/tools/testing/selftests" ] || {
	echo "kselftest.sh: no built $variant kernel at $kdir (make kernel VARIANT=$variant)" >&2
	exit 1
}
ksrc=$(realpath "$kdir/source")

# Every option of the fragment, as the kernel's selftests document their needs (an `=m` is
# also met by `=y`).
missing=0
while IFS= read -r line; do
	case $line in '' | '#'*) continue ;; esac
	if ! grep -qx "$line" "$kdir/.config" &&
		! { [ "${line%=m}" != "$line" ] && grep -qx "${line%=m}=y" "$kdir/.config"; }; then
		echo "kselftest.sh: the $variant kernel lacks $line (selftests/rrxe/config)" >&2
		missing=1
	fi
done <"$repo/selftests/rrxe/config"
[ "$missing" = 0 ] || exit 1

scratch=$repo/build/kselftest-src
st=$scratch/tools/testing/selftests
rm -rf "$scratch"
mkdir -p "$st" "$scratch/scripts"
cp "$ksrc/scripts/subarch.include" "$scratch/scripts/"
cp -r "$ksrc/tools/testing/selftests/"{Makefile,lib.mk,run_kselftest.sh,kselftest,kselftest.h,kselftest_harness.h} "$st/"
cp -r "$repo/selftests/rrxe" "$st/rrxe"
rm -rf "$st/rrxe/__pycache__" "$st/rrxe/lib/__pycache__"

rm -rf "$install"
make -s -C "$st" TARGETS=rrxe KSFT_INSTALL_PATH="$install" install

# librrxe, the userspace provider provider.sh runs the examples through (built on the host
# like the C helpers above; the guests share the host's libibverbs).
"$repo/scripts/provider.sh" build >/dev/null
mkdir -p "$install/rrxe/provider"
cp "$repo/build/provider/librrxe-rdmav34.so" "$repo/providers/rrxe/rrxe.driver" "$install/rrxe/provider/"
echo "$install"
