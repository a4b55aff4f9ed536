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
uninstall)
	dir=$(provider_dir)
	rm -f "$dir/librrxe-rdmav34.so" "$conf/rrxe.driver"
	dpkg-divert --quiet --local --rename --remove "$conf/rxe.driver"
	echo "removed librrxe; the stock rxe provider drives rrxe devices again"
	;;
*)
	echo "usage: $0 build|install|uninstall" >&2
	exit 2
	;;
esac
