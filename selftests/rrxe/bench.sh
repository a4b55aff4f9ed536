#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`, side A: perftest over the wire to side B, on rrxe and on rdma_rxe in the same
# boot and the same topology, in BENCH_REPEAT rounds (default 3) that each measure every figure
# once on both drivers:
#  - bandwidth (64 KiB) and latency (2 B) of RDMA Write, Send and RDMA Read;
#  - a slow receiver: ib_send_bw of 4 KiB with B keeping 1, 2 or 8 receives posted (-r), on
#    rrxe with end-to-end credits, on rrxe with them off (B's `credits` module parameter:
#    "no credit information", as rdma_rxe reports), on rrxe with credits through librrxe,
#    the project's provider, on both sides (its receives ring the doorbell the driver asks
#    for while A waits for credits; BENCH_LIBRRXE=0 leaves it out), and on rdma_rxe.
# Prints each figure's median (min-max) and the ratios of the medians, and the main table's
# ratios taken round by round as well. A benchmark, not a test: it fails only if a program
# does.
here=$(dirname "$0")
. "$here/lib/gid.sh"
. "$here/lib/benchstat.sh"
ITER=${BENCH_ITERS:-1000}
LAT_ITER=${BENCH_LAT_ITERS:-500}
CREDIT_ITER=${BENCH_CREDIT_ITERS:-2000}
REPEAT=$(bench_rounds)
RX_DEPTHS=${BENCH_RX_DEPTHS:-1 2 8}
# Which tables to measure: "main" (bandwidth and latency), "credits" (slow receiver).
TABLES=${BENCH_TABLES:-main credits}
# BENCH_PIN=CPU runs every perftest program, here and on side B, on that CPU of its guest
# (taskset): where a guest's busy-polling application runs, beside its NIC's interrupts or
# away from them, decides the slow-receiver ratios more than either driver does
# (Documentation/rrxe/benchmarks.rst). Unset, the guests' schedulers place them.
PIN=
[ -z "${BENCH_PIN:-}" ] || PIN="taskset -c $BENCH_PIN"
rc=0
port=19000
lib=$(cd "$here" && pwd)/provider/librrxe

ctl() { echo "$*" >&3 && read -r -t 300 CTL_REPLY <&3; }

# perf KEY KIND PROG ARGS...: runs PROG against a server of the same arguments on side B,
# appends its figure (bw: average MB/s; lat: average us) to fig[KEY] and keeps it in
# byround[KEY,ROUND] (ROUND: the rounds' loop variable round).
perf() {
	local key=$1 kind=$2 prog=$3 out row
	shift 3
	port=$((port + 1))
	ctl start "$key-$port" "$port" 300 "$prog" "$@" -p "$port"
	if [ "$CTL_REPLY" != ready ]; then
		echo "# $key: server did not start ($CTL_REPLY)"
		rc=1
		return
	fi
	out=$(timeout 300 $PIN "$prog" "${@//@GID4@/$g4}" -p "$port" "$RRXE_PEER_IP4" 2>&1) || rc=1
	ctl wait "$key-$port"
	# bw: "#bytes #iterations BW-peak BW-average MsgRate" (MB/s);
	# lat: "#bytes #iterations t_min t_max t_typical t_avg ..." (us).
	row=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 5 { r = $0 } END { print r }')
	echo "# $key $prog: $row"
	[ -n "$row" ] || return
	row=$(echo "$row" | awk -v k="$kind" '{ print (k == "bw") ? $4 : $6 }')
	# perftest printed 0.00 MB/s once for a transfer the wire showed complete in 9.75 s (its
	# clock, not the transfer): such a figure is left out, and said so.
	if awk -v v="$row" 'BEGIN { exit !(v + 0 == 0) }'; then
		echo "# $key: perftest reported 0, left out"
		return
	fi
	fig[$key]+="$row "
	byround[$key,$round]=$row
}

# Round by round, both drivers in each (in the order bench_order gives, which side B follows):
# between two guests a figure drifts with the host's load over minutes, and interleaving puts
# every column through the same drift instead of measuring one driver's minutes against the
# other's.
for round in $(seq "$REPEAT"); do
	for mod in $(bench_order "$round"); do
		echo "# round $round: $mod"
		bench_device "$mod" eth0 "$RRXE_LOCAL_IP4" || exit 1
		# (The group keeps the failed attempts' messages off stderr without silencing it.)
		for _ in $(seq 600); do
			{ exec 3<>"/dev/tcp/$RRXE_PEER_IP4/4793"; } 2>/dev/null && break
			sleep 1
		done
		[[ " $TABLES " == *" main "* ]] && for op in write send read; do
			perf "$mod,$op,bw" bw "ib_${op}_bw" -d "$dev" -F -x @GID4@ -s 65536 -n "$ITER"
			perf "$mod,$op,lat" lat "ib_${op}_lat" -d "$dev" -F -x @GID4@ -s 2 -n "$LAT_ITER"
		done
		modes=-
		[ "$mod" = rrxe ] && modes="on off"
		[ "$mod" = rrxe ] && [ "${BENCH_LIBRRXE:-1}" = 1 ] && [ -f "$lib-rdmav34.so" ] &&
			modes="on off librrxe"
		[[ " $TABLES " == *" credits "* ]] || modes=
		# The credit modes take turns at going first, as the drivers do.
		read -ra modes <<<"$modes"
		for ((i = 0; i < ${#modes[@]}; i++)); do
			m=${modes[(i + round - 1) % ${#modes[@]}]}
			key=$mod
			if [ "$m" != - ]; then
				key=$mod-credits-$m
				ctl set credits "$([ "$m" = off ] && echo 0 || echo 1)"
				[ "$CTL_REPLY" = ok ] || { echo "# set credits: $CTL_REPLY"; rc=1; }
				ctl set provider "$([ "$m" = librrxe ] && echo librrxe || echo stock)"
				[ "$CTL_REPLY" = ok ] || { echo "# set provider: $CTL_REPLY"; rc=1; }
				if [ "$m" = librrxe ]; then export RDMAV_DRIVERS=$lib; else unset RDMAV_DRIVERS; fi
			fi
			for r in $RX_DEPTHS; do
				perf "$key,r$r" bw ib_send_bw -d "$dev" -F -x @GID4@ -s 4096 \
					-n "$CREDIT_ITER" -r "$r"
			done
			unset RDMAV_DRIVERS
		done
		ctl done
		exec 3>&-
		rdma link delete "$dev"
		rmmod "$mod"
		sleep 2
	done
done

if [[ " $TABLES " == *" main "* ]]; then
	echo
	echo "perftest, median (min-max) of $REPEAT runs"
	printf '%-22s %24s %24s %9s\n' "" "rrxe" "rdma_rxe" "rrxe/rxe"
	for op in write send read; do
		for kind in bw lat; do
			label="ib_${op}_$kind ($([ "$kind" = bw ] && echo "64KiB, MB/s" || echo "2B, us"))"
			printf '%-22s %24s %24s %9s\n' "$label" "$(stat "rrxe,$op,$kind")" \
				"$(stat "rdma_rxe,$op,$kind")" "$(ratio "rrxe,$op,$kind" "rdma_rxe,$op,$kind")"
		done
	done
	echo "(bandwidth: average MB/s, higher is better; latency: average us, lower is better)"
	echo "rrxe/rdma_rxe round by round (the two minutes apart in each round): median (min-max)"
	echo "of the rounds' ratios, and the rounds in which rrxe was the faster"
	for op in write send read; do
		for kind in bw lat; do
			printf '%-22s %s\n' "ib_${op}_$kind" \
				"$(paired "rrxe,$op,$kind" "rdma_rxe,$op,$kind" "$kind" "$REPEAT")"
		done
	done
fi
[[ " $TABLES " == *" credits "* ]] || exit $rc
echo
echo "slow receiver: ib_send_bw -s 4096 -n $CREDIT_ITER -r N, MB/s, median (min-max)${BENCH_PIN:+, on CPU $BENCH_PIN}"
printf '%-6s %22s %22s %22s %22s %8s %8s %8s\n' "" "rrxe credits" "rrxe no credits" \
	"rrxe credits, librrxe" "rdma_rxe" "on/off" "on/rxe" "lib/rxe"
for r in $RX_DEPTHS; do
	printf '%-6s %22s %22s %22s %22s %8s %8s %8s\n' "-r $r" "$(stat "rrxe-credits-on,r$r")" \
		"$(stat "rrxe-credits-off,r$r")" "$(stat "rrxe-credits-librrxe,r$r")" \
		"$(stat "rdma_rxe,r$r")" \
		"$(ratio "rrxe-credits-on,r$r" "rrxe-credits-off,r$r")" \
		"$(ratio "rrxe-credits-on,r$r" "rdma_rxe,r$r")" \
		"$(ratio "rrxe-credits-librrxe,r$r" "rdma_rxe,r$r")"
done
exit $rc
