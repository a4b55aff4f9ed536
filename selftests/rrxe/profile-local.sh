#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make profile-guest`: where the guest's CPU time goes while perftest runs in loopback on one
# device (as in bench-local.sh), sampled by the guest kernel's own profiler: `perf record -a
# -g` on the cpu-clock event (a timer: TCG has no hardware counters) over each program, on
# rrxe and then rdma_rxe in the same boot, and `perf report` of the symbols above
# BENCH_PROFILE_LIMIT percent (default 0.7) of all samples, with the idle loop's share on a
# line of its own instead of its rows, and how each CPU's samples split between the kernel's
# workers (where rrxe's QP runs and rdma_rxe's tasks go), perftest and idle.
# BENCH_PROFILE_PAIR=1 runs the programs between two devices over the routed veth pair of
# bench-local.sh's veth table instead (the path a wire's packets take). Programs:
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

PAIR=${BENCH_PROFILE_PAIR:-0}
if [ "$PAIR" = 1 ]; then
	routed_pair || exit 1
else
	ip link add pv0 type veth peer name pv1 || exit 1
	ip addr add "$ADDR/24" dev pv0
	ip link set pv1 up
	ip link set pv0 up
fi

# profile NAME PROG ARGS...: PROG's server and client, the client on $cdev under perf (over
# the pair, the server on the other device); prints perftest's result line and the profile.
profile() {
	local name=$1 prog=$2 data=/tmp/profile.data row
	shift 2
	local server
	start_server "$prog" "$@"
	row=$(perf record -q -a -g -e cpu-clock -F 1000 -o "$data" -- \
		timeout 300 "$prog" -d "$cdev" -F -x "$cgid" "$@" -p "$port" "$caddr" 2>&1 |
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
	# Each CPU's samples: kernel workers (kworker, ksoftirqd), perftest, idle, the rest.
	perf report -i "$data" --no-children --sort cpu,comm --stdio -g none 2>/dev/null |
		awk -v prog="$prog" '!/^#/ && NF >= 3 { sub("%", "", $1)
			k = $3 ~ /^(kworker|ksoftirqd)/ ? "workers" : $3 == prog ? "perftest" : $3 == "swapper" ? "idle" : "other"
			v[$2, k] += $1; cpus[$2] = 1 }
		END { for (c in cpus) printf "cpu %d: workers %.1f%%, perftest %.1f%%, idle %.1f%%, other %.1f%% of all samples\n",
			c, v[c, "workers"], v[c, "perftest"], v[c, "idle"], v[c, "other"] }' | sort
	rm -f "$data" "$data.txt"
}

for mod in rrxe rdma_rxe; do
	if [ "$PAIR" = 1 ]; then
		pair_devices "$mod" veth || exit 1
		cdev=$cli_dev cgid=$cli_gid caddr=$dst
	else
		bench_device "$mod" pv0 "$ADDR" || exit 1
		cdev=$dev cgid=$g4 caddr=$ADDR
	fi
	profile "$mod 64 B Writes" ib_write_bw -s 64 -n 20000
	profile "$mod 2 B Read latency" ib_read_lat -s 2 -n 2000
	profile "$mod 64 KiB Writes" ib_write_bw -s 65536 -n 1000
	if [ "$PAIR" = 1 ]; then pair_done; else rdma link delete "$dev"; fi
	rmmod "$mod"
done
exit $rc
