#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# librrxe, rrxe's libibverbs provider (providers/rrxe/).
#
#   scripts/provider.sh build      build it as build/provider/librrxe-rdmav34.so
#   scripts/provider.sh install    build it and install it beside libibverbs' providers, with
#                                  providers/rrxe/rrxe.driver in /etc/libibverbs.d in place of
#                                  rdma-core's rxe.driver (dpkg-divert), so that it binds rrxe
#                                  devices for every application; rdma_rxe devices keep the
#                                  stock rxe provider
#   scripts/provider.sh uninstall  undo install
#   scripts/provider.sh check-abi  show that it loads beside the installed libibverbs and
#                                  refuses one of another private ABI (make check runs it)
#
# Installing it on the machine that runs make check changes which provider the guests, whose
# root is the host's, use for every test: make check expects it not installed.
#
# The name follows libibverbs' convention, lib<name>-rdmav<private ABI>.so; the library
# links to libibverbs' private symbols of version IBVERBS_PRIVATE_34 and so loads only
# into the libibverbs it was built for. Applications load it by naming it in RDMAV_DRIVERS
# (the path without the suffix):
#
#   RDMAV_DRIVERS=$PWD/build/provider/librrxe ibv_devinfo -d rrxe0
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}

build() {
	cargo build --quiet --release -p rrxe-provider --manifest-path "$repo/Cargo.toml"
	mkdir -p "$repo/build/provider"
	cp "$repo/target/release/librrxe.so" "$repo/build/provider/librrxe-rdmav34.so"
}

# The installed libibverbs' provider directory: where its own rxe provider is.
provider_dir() {
	local f
	for f in /usr/lib/*/libibverbs/librxe-rdmav34.so /usr/lib*/libibverbs/librxe-rdmav34.so; do
		[ -f "$f" ] && { dirname "$f"; return 0; }
	done
	echo "provider.sh: no librxe-rdmav34.so: is rdma-core 44 (ibverbs-providers) installed?" >&2
	return 1
}

conf=/etc/libibverbs.d
case ${1:-build} in
build)
	build
	echo "$repo/build/provider/librrxe-rdmav34.so"
	;;
install)
	build
	dir=$(provider_dir)
	install -m 0644 "$repo/build/provider/librrxe-rdmav34.so" "$dir/"
	dpkg-divert --quiet --local --rename --divert "$conf/rxe.driver.distrib" --add "$conf/rxe.driver"
	install -m 0644 "$repo/providers/rrxe/rrxe.driver" "$conf/rrxe.driver"
	echo "installed $dir/librrxe-rdmav34.so and $conf/rrxe.driver ($conf/rxe.driver diverted)"
	;;
check-abi)
	# librrxe must load beside the libibverbs it was built for and refuse any other
	# private ABI: a copy of the installed libibverbs whose version IBVERBS_PRIVATE_34 is
	# renamed stands in for another rdma-core.
	build
	so=$repo/build/provider/librrxe-rdmav34.so
	real=$(python3 -c 'import ctypes.util; print(ctypes.util.find_library("ibverbs"))')
	# awk reads all of ldconfig's output: exiting early could end ldconfig with SIGPIPE,
	# which pipefail and set -e would turn into a silent failure.
	real=$(ldconfig -p | awk -v n="$real" '$1 == n && !found { print $NF; found = 1 }')
	fake=$(mktemp -d)
	trap 'rm -rf "$fake"' EXIT
	python3 - "$real" "$fake/${real##*/}" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
assert b.count(b"IBVERBS_PRIVATE_34") == 1, "libibverbs does not define IBVERBS_PRIVATE_34 once"
open(sys.argv[2], "wb").write(b.replace(b"IBVERBS_PRIVATE_34", b"IBVERBS_PRIVATE_99"))
PY
	load='import ctypes, os, sys
try:
    ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW)
    print("loaded")
except OSError as e:
    print("refused:", e)
    sys.exit(1)'
	echo "with $real:"
	python3 -c "$load" "$so"
	echo "with a libibverbs of another private ABI ($fake):"
	if LD_LIBRARY_PATH=$fake python3 -c "$load" "$so"; then
		echo "provider.sh: librrxe loaded against another private ABI" >&2
		exit 1
	fi
	;;
uninstall)
	dir=$(provider_dir)
	rm -f "$dir/librrxe-rdmav34.so" "$conf/rrxe.driver"
	dpkg-divert --quiet --local --rename --remove "$conf/rxe.driver"
	echo "removed librrxe; the stock rxe provider drives rrxe devices again"
	;;
*)
	echo "usage: $0 build|install|uninstall|check-abi" >&2
	exit 2
	;;
esac
