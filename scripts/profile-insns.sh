#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make profile-insns`: the guest instructions a perftest iteration costs, function by
# function, on rrxe and on rdma_rxe. QEMU counts every translation block the guest executes
# (scripts/qemu-plugin/insncount.c, a TCG plugin); each driver is booted twice, running
# PROFILE_PROG (default ib_read_lat) with PROFILE_ARGS (default "-s 2") PROFILE_BASE (1000)
# and then PROFILE_BASE + PROFILE_N (50000) times in loopback on one device
# (selftests/rrxe/profile-insns.sh), so that the difference of the two counts, divided by
# PROFILE_N, is what the iterations cost, without the boot. Blocks are attributed to the
# kernel's symbols (modules' included), those in user space to one line. Counts of
# instructions, not of time: two runs of one commit agree within a few instructions an
# iteration, and a commit's effect shows function by function. Under TCG time follows them
# for kernel code (Documentation/rrxe/benchmarks.rst); user space's count follows time
# (perftest's clock-rate calibration loop, a polling program's wait), not the iterations.
# PROFILE_PAIR=1 runs the program between two devices over a veth pair instead (the path
# a wire's packets take: skbs, IP, the veth; bench-local.sh's veth table).
# PROFILE_DRIVERS picks the drivers (default "rrxe rdma_rxe"), PROFILE_TOP the lines shown
# (40); PROFILE_MODULE names an rrxe.ko built before (another commit's, for a comparison)
# to load instead of the tree's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export HOME="${HOME:-/root}"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

prog=${PROFILE_PROG:-ib_read_lat}
args=${PROFILE_ARGS:--s 2}
base=${PROFILE_BASE:-1000}
n=${PROFILE_N:-50000}
top=${PROFILE_TOP:-40}

scripts/deps.sh
scripts/kernel.sh build release >/dev/null
module=${PROFILE_MODULE:-drivers/infiniband/sw/rrxe/rrxe.ko}
[ -n "${PROFILE_MODULE:-}" ] || make --no-print-directory -s module VARIANT=release
scripts/kselftest.sh release "$repo/build/kselftest" >/dev/null
out=${RRXE_PROFILE_OUT:-$(mktemp -d /tmp/rrxe-profile.XXXXXX)}
mkdir -p "$out"
gcc -O2 -Wall -shared -fPIC -o "$out/libinsncount.so" scripts/qemu-plugin/insncount.c -lpthread

for driver in ${PROFILE_DRIVERS:-rrxe rdma_rxe}; do
	for count in "$base" "$((base + n))"; do
		run=$out/$driver-$count
		scripts/vm.sh --variant release --timeout 3600 --out "$run" \
			--plugin "$out/libinsncount.so,out=$run/blocks" \
			--env "PROFILE_DRIVER=$driver" --env "PROFILE_PROG=$prog" \
			--env "PROFILE_ARGS=$args" --env "PROFILE_N=$count" \
			--env "PROFILE_PAIR=${PROFILE_PAIR:-0}" \
			--module "$module" \
			--cmd "$repo/build/kselftest/rrxe/profile-insns.sh" | sed "s/^/$driver, $count iterations: /"
	done
	echo "$driver: $prog $args, guest instructions an iteration ($n iterations)"
	python3 scripts/profile-insns.py "$out/$driver-$base" "$out/$driver-$((base + n))" "$n" "$top"
done
