#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make profile-guest`: where the guest's CPU time goes while perftest runs in loopback on one
# device (as in bench-local.sh), sampled by the guest kernel's own profiler: `perf record -a
# -g` on the cpu-clock event (a timer: TCG has no hardware counters) over each program, on
# rrxe and then rdma_rxe in the same boot, and `perf report` of the symbols above
# BENCH_PROFILE_LIMIT percent (default 0.7) of all samples, with the idle loop's share on a
# line of its own instead of its rows. Programs:
# 64-byte RDMA Writes (ib_write_bw -s 64, the message rate), 2-byte RDMA Read latency and
# 64 KiB RDMA Writes. A profile, not a test: it fails only if a program does.
# Documentation/rrxe/benchmarks.rst.
here=$(dirname "$0")
. "$here/lib/gid.sh"
. "$here/lib/benchstat.sh"
LIMIT=${BENCH_PROFILE_LIMIT:-0.7}
ADDR=198.18.9.1
rc=0
port=19500

command -v perf >/dev/null || { echo "profile-local: no perf in the guest (linux-perf)"; exit 1; }
# Kernel and module symbols for a profiler run by root.
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid

ip link add pv0 type veth peer name pv1 || exit 1
ip addr add "$ADDR/24" dev pv0
ip link set pv1 up
ip link set pv0 up

# profile NAME PROG ARGS...: PROG's server and client on $dev, the client under perf; prints
# perftest's result line and the profile.
profile() {
	local name=$1 prog=$2 data=/tmp/profile.data row
	shift 2
	local server
	start_server "$prog" "$@"
	row=$(perf record -q -a -g -e cpu-clock -F 1000 -o "$data" -- \
		timeout 300 "$prog" -d "$dev" -F -x "$g4" "$@" -p "$port" "$ADDR" 2>&1 |
		awk '$1 ~ /^[0-9]+$/ && NF >= 5 { r = $0 } END { print r }') || rc=1
	wait "$server" || rc=1
	echo
	echo "== $name: $prog $*: $row"
	# Percentages of all samples; the idle loop's rows summed into one line.
	perf report -i "$data" --no-children --sort dso,sym --stdio -g none \
		--percent-limit "$LIMIT" 2>/dev/null |
		awk '!/^#/ && NF' >"$data.txt"
	awk '/ default_idle| do_idle| cpuidle/ { idle += $1 } END { printf "idle: %.1f%% of the samples\n", idle }' "$data.txt"
	grep -v ' default_idle\| do_idle\| cpuidle' "$data.txt" | head -40
	rm -f "$data" "$data.txt"
}

for mod in rrxe rdma_rxe; do
	bench_device "$mod" pv0 "$ADDR" || exit 1
	profile "$mod 64 B Writes" ib_write_bw -s 64 -n 20000
	profile "$mod 2 B Read latency" ib_read_lat -s 2 -n 2000
	profile "$mod 64 KiB Writes" ib_write_bw -s 65536 -n 1000
	rdma link delete "$dev"
	rmmod "$mod"
done
exit $rc
