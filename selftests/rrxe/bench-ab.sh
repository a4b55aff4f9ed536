#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench-ab` (scripts/bench.sh ab): two or more builds of rrxe, and rdma_rxe if asked,
# measured in one boot between two devices over bench-local.sh's routed veth pair, rounds
# interleaved (the order reversed in even rounds), so that a change is measured against the
# tree before it rather than against another boot. Not a test: make check does not run it.
#
#   BENCH_AB_MODULES   "LABEL=PATH.ko ..." in the guest (scripts/bench.sh puts the files in
#                      the results directory), or the word rdma_rxe; the first is the base
#                      every ratio is taken against
#   BENCH_REPEAT       rounds (default 5)
#   BENCH_AB_SPECS     "KEY KIND PROGRAM ARGS;..." (KIND: bw, lat or rate, as bench-local.sh's
#                      figures); the default: 64 KiB Write, Send and Read bandwidth, the
#                      64-byte Write rate and 2-byte Write and Read latency
#   BENCH_AB_MTU       the veths' MTU (default 1500; 9000 for a 4096-byte path MTU, -m 4096)
#   BENCH_AB_COUNTERS  rrxe counters (names as `rdma statistic` shows them) whose growth over
#                      each figure's run, summed over both devices, each figure's line
#                      prints: where two builds' paths part (which runs were made at once,
#                      moved, woken)
#
# Each figure: median (min-max) of the rounds and the spread for every build, its ratio to
# the first build's median, and the guest's kernel CPU a MB or a message (bw, rate), which
# moves less with the host's scheduling than the figures themselves; then, for each other
# build, the ratio to the first taken round by round (the two measured minutes apart, so a
# slow spell of the host's that spans a round slows both) with the rounds in which it was
# the faster: when a change makes no difference, each round is a coin's toss
# (Documentation/rrxe/benchmarks.rst, *Comparing two builds*). Under TCG the same code
# at other addresses can move a figure by as much as a change does: compare the builds
# made with `make module RRXE_LAYOUT_PAD=1` too.

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/gid.sh"
. "$here/lib/benchstat.sh"

REPEAT=${BENCH_REPEAT:-5}
DEFAULT_SPECS="write bw ib_write_bw -s 65536 -n 2000;send bw ib_send_bw -s 65536 -n 2000"
DEFAULT_SPECS+=";read bw ib_read_bw -s 65536 -n 2000;rate rate ib_write_bw -s 64 -n 20000"
DEFAULT_SPECS+=";write-lat lat ib_write_lat -s 2 -n 1000;read-lat lat ib_read_lat -s 2 -n 1000"
SPECS=${BENCH_AB_SPECS:-$DEFAULT_SPECS}
port=19300
rc=0

labels=()
declare -A path
for m in ${BENCH_AB_MODULES:-}; do
	if [ "$m" = rdma_rxe ]; then
		label=rdma_rxe
	else
		label=${m%%=*} path[$label]=${m#*=}
		[ "$label" != "$m" ] && [ -f "${path[$label]}" ] ||
			{ echo "bench-ab: '$m' is not LABEL=PATH.ko of an existing file"; exit 1; }
	fi
	labels+=("$label")
done
[ ${#labels[@]} -ge 2 ] || { echo "bench-ab: BENCH_AB_MODULES names fewer than two builds"; exit 1; }

# rrxe's dependencies (ib_core, ib_uverbs, the UDP tunnel modules) loaded from the tree the
# VM was booted with, so that each build loads with insmod.
modprobe rrxe && rmmod rrxe || exit 1

# load LABEL / unload LABEL
load() {
	if [ "$1" = rdma_rxe ]; then modprobe rdma_rxe; else insmod "${path[$1]}"; fi
}
unload() {
	if [ "$1" = rdma_rxe ]; then rmmod rdma_rxe; else rmmod rrxe; fi
}

# measure ROUND LABEL KEY KIND PROGRAM ARGS...: one figure into fig[LABEL,KEY] and
# byround[LABEL,KEY,ROUND], and its kernel CPU into fig[LABEL,KEY,cpu] (ms a MB for bw, us a
# message for rate).
measure() {
	local round=$1 label=$2 key=$3 kind=$4 prog=$5 out row t0 t1 c0 c1 grown=''
	shift 5
	start_server "$prog" "$@"
	[ -n "${BENCH_AB_COUNTERS:-}" ] && c0=$(counts "$BENCH_AB_COUNTERS")
	t0=$(kernel_ticks)
	out=$(timeout 300 "$prog" -d "$cli_dev" -F -x "$cli_gid" "$@" -p "$port" "$dst" 2>&1) || rc=1
	t1=$(kernel_ticks)
	wait "$server" || rc=1
	if [ -n "${c0:-}" ]; then
		c1=$(counts "$BENCH_AB_COUNTERS")
		grown=$(echo "$BENCH_AB_COUNTERS" "$c0" "$c1" | awk '{ n = (NF) / 3
			for (i = 1; i <= n; i++) printf "; %s +%d", $i, $(2 * n + i) - $(n + i) }')
	fi
	row=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 5 { r = $0 } END { print r }')
	echo "# $label $key: $row; kernel CPU $((t1 - t0)) ticks$grown"
	[ -n "$row" ] || return
	no_figure "$label,$key" "$kind" "$row" "$out" && return
	add_figure "$label,$key" "$kind" "$row" $((t1 - t0)) "$round"
}

routed_pair || exit 1
if [ -n "${BENCH_AB_MTU:-}" ]; then
	ip link set bw1 mtu "$BENCH_AB_MTU" && ip link set bw2 mtu "$BENCH_AB_MTU" || exit 1
fi
IFS=';' read -ra specs <<<"$SPECS"
for r in $(seq "$REPEAT"); do
	order=("${labels[@]}")
	if ((r % 2 == 0)); then
		order=()
		for ((i = ${#labels[@]} - 1; i >= 0; i--)); do order+=("${labels[i]}"); done
	fi
	for label in "${order[@]}"; do
		echo "# round $r: $label"
		load "$label" || exit 1
		mod=rrxe
		[ "$label" = rdma_rxe ] && mod=rdma_rxe
		pair_devices "$mod" veth || exit 1
		for spec in "${specs[@]}"; do
			read -r key kind prog args <<<"$spec"
			# shellcheck disable=SC2086 # the spec's arguments, word by word
			measure "$r" "$label" "$key" "$kind" "$prog" $args
		done
		pair_done
		unload "$label" || exit 1
	done
done

echo
echo "builds over the routed veth pair, MTU ${BENCH_AB_MTU:-1500}; median (min-max) and spread of"
echo "$REPEAT rounds in one boot; x${labels[0]}: the median over ${labels[0]}'s"
for spec in "${specs[@]}"; do
	read -r key kind _ <<<"$spec"
	unit="MB/s" cpu="kernel CPU ms/MB"
	[ "$kind" = lat ] && unit=us
	[ "$kind" = rate ] && unit=kmsg/s cpu="kernel CPU us/msg"
	printf '%s, %s\n' "$key" "$unit"
	for label in "${labels[@]}"; do
		printf '  %-12s %24s %5s %6s' "$label" "$(stat "$label,$key")" \
			"$(spread "$label,$key")" "$(ratio "$label,$key" "${labels[0]},$key")"
		[ "$kind" = lat ] || printf '   %s %s' "$cpu" "$(median "$label,$key,cpu")"
		echo
	done
	for label in "${labels[@]:1}"; do
		printf '  %-12s by round: %s\n' "$label/${labels[0]}" \
			"$(paired "$label,$key" "${labels[0]},$key" "$kind" "$REPEAT")"
	done
done
exit $rc
