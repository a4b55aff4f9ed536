#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: perftest on rrxe and on rdma_rxe in the same two-VM boot (release kernel),
# with the rrxe/rdma_rxe ratio of each figure. `scripts/bench.sh local` (`make bench-local`):
# the same comparison in one VM, loopback on one device and two devices over a veth pair
# (selftests/rrxe/bench-local.sh);
# BENCH_ICOUNT=SHIFT runs that VM with QEMU's instruction counting (scripts/vm.sh --icount);
# BENCH_APPEND='ARGS' adds ARGS to its kernel's command line (BENCH_APPEND=idle=poll: vCPUs
# that poll instead of halting when idle);
# BENCH_SWEEP=1 (`make bench-sweep`) runs the sizes, QP counts and MTUs there instead.
# `scripts/bench.sh profile` (`make profile-guest`): perftest in that VM under the guest's perf
# (selftests/rrxe/profile-local.sh).
# `scripts/bench.sh ab [LABEL=]FILE.ko... [rdma_rxe]` (`make bench-ab AB='...'`): those builds of
# rrxe (labelled A, B, ... unless named), and rdma_rxe if named, in one VM over the veth pair,
# rounds interleaved, ratios against the first (selftests/rrxe/bench-ab.sh).
# See Documentation/rrxe/benchmarks.rst.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export HOME="${HOME:-/root}"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

scripts/deps.sh
scripts/kernel.sh build release >/dev/null
make --no-print-directory -s module VARIANT=release
# The guest scripts run from the kselftest install, which has librrxe beside them (the
# librrxe rows and columns; selftests/rrxe/bench*.sh skip them without it).
scripts/kselftest.sh release "$repo/build/kselftest" >/dev/null
guest=$repo/build/kselftest/rrxe
out=${RRXE_BENCH_OUT:-$(mktemp -d /tmp/rrxe-bench.XXXXXX)}
# BENCH_* settings (selftests/rrxe/bench.sh) reach the guests.
envs=()
for v in $(compgen -v BENCH_); do
	envs+=(--env "$v=${!v}")
done
if [ "${1:-}" = profile ]; then
	exec scripts/vm.sh --variant release --timeout 3600 --out "$out" "${envs[@]}" \
		--module drivers/infiniband/sw/rrxe/rrxe.ko --cmd "$guest/profile-local.sh"
fi
if [ "${1:-}" = ab ]; then
	shift
	mkdir -p "$out/ab"
	mods=() letter=A
	for m in "$@"; do
		if [ "$m" = rdma_rxe ]; then
			mods+=(rdma_rxe)
			continue
		fi
		label=$letter file=$m
		[[ $m == *=* ]] && label=${m%%=*} file=${m#*=}
		[[ $label =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "bench.sh: label '$label'" >&2; exit 1; }
		[ -f "$file" ] || { echo "bench.sh: no module file $file" >&2; exit 1; }
		# The guest sees the results directory on /run/results (scripts/vm-init.sh).
		cp "$file" "$out/ab/$label.ko"
		mods+=("$label=/run/results/ab/$label.ko")
		letter=$(echo "$letter" | tr A-Y B-Z)
	done
	[ ${#mods[@]} -ge 2 ] || { echo "bench.sh ab: name two builds or more" >&2; exit 1; }
	exec scripts/vm.sh --variant release --timeout 7200 --out "$out" "${envs[@]}" \
		--env "BENCH_AB_MODULES=${mods[*]}" \
		--module drivers/infiniband/sw/rrxe/rrxe.ko --cmd "$guest/bench-ab.sh"
fi
if [ "${1:-}" = local ]; then
	icount=()
	[ -z "${BENCH_ICOUNT:-}" ] || icount=(--icount "$BENCH_ICOUNT")
	[ -z "${BENCH_APPEND:-}" ] || icount+=(--append "$BENCH_APPEND")
	exec scripts/vm.sh --variant release --timeout 7200 --out "$out" "${envs[@]}" "${icount[@]}" \
		--module drivers/infiniband/sw/rrxe/rrxe.ko --cmd "$guest/bench-local.sh"
fi
# BENCH_PCAP=FILE keeps the wire's frames, for selftests/rrxe/lib/credit_cycle.py.
pcap=()
[ -z "${BENCH_PCAP:-}" ] || pcap=(--pcap "$BENCH_PCAP")
# The Unix wire: the TCP one holds a pausing sender's last frames ~40 ms (Nagle), which a
# credit-limited sender and every ping-pong pay (Documentation/rrxe/benchmarks.rst).
scripts/vm.sh --variant release --two --wire "${BENCH_WIRE:-unix}" --timeout 5400 --out "$out" "${envs[@]}" "${pcap[@]}" \
	--module drivers/infiniband/sw/rrxe/rrxe.ko \
	--cmd "$guest/bench.sh" --cmd-b "$guest/bench-peer.sh" | sed -n 's/^\[a\] //p'
