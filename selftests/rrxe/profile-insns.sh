#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The guest side of `make profile-insns` (scripts/profile-insns.sh): one perftest program,
# PROFILE_PROG with PROFILE_ARGS and -n PROFILE_N, in loopback on one device of
# PROFILE_DRIVER (rrxe or rdma_rxe) over one end of a veth pair, as bench-local.sh runs it
# (PROFILE_PAIR=1: between two devices on the pair's two ends, as its veth table does),
# while the host's QEMU counts the instructions executed; then the kernel's symbols
# (kallsyms, modules included) for the host to attribute them. Prints perftest's result.
here=$(dirname "$0")
. "$here/lib/gid.sh"
. "$here/lib/benchstat.sh"
ADDR=198.18.9.1
port=19700
driver=${PROFILE_DRIVER:-rrxe}
prog=${PROFILE_PROG:-ib_read_lat}
# shellcheck disable=SC2086 # the arguments are words
set -- ${PROFILE_ARGS:--s 2} -n "${PROFILE_N:-1000}"

if [ "${PROFILE_PAIR:-0}" = 1 ]; then
	# Two devices over a veth pair, as bench-local.sh's veth table runs them.
	routed_pair && pair_devices "$driver" veth || exit 1
else
	ip link add pv0 type veth peer name pv1 || exit 1
	ip addr add "$ADDR/24" dev pv0
	ip link set pv1 up
	ip link set pv0 up
	bench_device "$driver" pv0 "$ADDR" || exit 1
	cli_dev=$dev cli_gid=$g4 dst=$ADDR
fi
start_server "$prog" "$@"
sleep 1
"$prog" -d "$cli_dev" -F -x "$cli_gid" "$@" -p "$port" "$dst" 2>&1 |
	awk '$1 ~ /^[0-9]+$/ && NF >= 5'
wait "$server" || exit 1
# Addresses for root, then the symbols.
echo 0 >/proc/sys/kernel/kptr_restrict
cat /proc/kallsyms >"${RRXE_RESULTS:-/run/results}/kallsyms"
