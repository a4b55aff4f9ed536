#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`, side B: for each round and each driver in it, in side A's order (bench_order:
# both need UDP 4791, so one at a time, in the same boot), a device over eth0 and the verbs
# control channel through which side A (selftests/rrxe/bench.sh) starts each perftest server.
here=$(dirname "$0")
. "$here/lib/gid.sh"
. "$here/lib/benchstat.sh"

for round in $(seq "$(bench_rounds)"); do
	for mod in $(bench_order "$round"); do
		bench_device "$mod" eth0 "$RRXE_LOCAL_IP4" || exit 1
		# BENCH_PIN (bench.sh): the servers it starts inherit its CPU.
		${BENCH_PIN:+taskset -c "$BENCH_PIN"} python3 "$here/lib/verbs_ctl.py" 4793 600 \
			"/tmp/bench-$mod-$round.txt" "GID4=$g4" >/dev/null
		rdma link delete "$dev"
		rmmod "$mod"
	done
done
