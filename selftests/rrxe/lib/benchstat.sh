#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Devices and figures of the benchmarks (bench.sh, bench-peer.sh, bench-local.sh): fig[KEY]
# holds one figure per repetition, space-separated.
#
#   bench_device MOD NETDEV ADDR
#                      load MOD (rrxe or rdma_rxe), add its device ($dev: rrxe0 or rxe0)
#                      over NETDEV, and set g4 to the index of ADDR's RoCE v2 GID
#   stat KEY           "median (min-max)" of fig[KEY], or "-"
#   median KEY         the median alone
#   spread KEY         (max - min) / median in percent, or "-"
#   ratio KEY1 KEY2    median(KEY1) / median(KEY2), or "-"
#   bench_rounds       the two-VM benchmark's rounds (BENCH_REPEAT, default 3), which both
#                      sides must agree on
#   bench_order ROUND  the drivers in the order round ROUND measures them: rrxe first in odd
#                      rounds, rdma_rxe first in even ones, so that neither always has the
#                      boot's first (or last) minutes
#   start_server PROG ARGS...
#                      start PROG's perftest server on $dev (set by bench_device) at the
#                      next port ($port, which the caller starts at a free one) and wait
#                      until it listens; its PID in $server. When set, srv_in (a command
#                      prefix, such as ip netns exec NS), srv_dev and srv_gid run it there,
#                      on that device and GID instead

declare -A fig
srv_in=()

bench_rounds() { echo "${BENCH_REPEAT:-3}"; }

bench_order() {
	if (($1 % 2)); then echo rrxe rdma_rxe; else echo rdma_rxe rrxe; fi
}

start_server() {
	local prog=$1 i
	shift
	port=$((port + 1))
	"${srv_in[@]}" "$prog" -d "${srv_dev:-$dev}" -F -x "${srv_gid:-$g4}" "$@" -p "$port" \
		>/dev/null 2>&1 &
	server=$!
	for i in $(seq 100); do
		"${srv_in[@]}" ss -Hltn "sport = :$port" | grep -q . && return
		sleep 0.1
	done
}

bench_device() {
	dev=${1#rdma_}0
	modprobe "$1" && rdma link add "$dev" type "${1#rdma_}" netdev "$2" || return
	for _ in $(seq 100); do
		g4=$(gid_index "$dev" "$3") && return
		sleep 0.1
	done
	return 1
}

# _sorted KEY: the figures of KEY, one a line, in increasing order.
_sorted() {
	tr ' ' '\n' <<<"${fig[$1]:-}" | awk 'NF' | sort -g
}

stat() {
	_sorted "$1" | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "-"; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.2f (%.2f-%.2f)\n", m, v[1], v[NR]
		}'
}

median() { stat "$1" | awk '{ print $1 }'; }

spread() {
	stat "$1" | awk -F'[ ()-]+' '
		$1 == "-" || $1 + 0 == 0 { print "-"; next }
		{ printf "%.0f%%\n", ($3 - $2) / $1 * 100 }'
}

ratio() {
	awk -v a="$(median "$1")" -v b="$(median "$2")" \
		'BEGIN { if (a != "-" && b != "-" && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
}
