#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench-local`: perftest in loopback on one device in one VM, so that no second guest's
# scheduling enters the figures: server and client on the same device over one end of a
# veth pair, on rrxe and on rdma_rxe in turn, BENCH_REPEAT rounds in the same boot (rrxe,
# then rdma_rxe, each round: both need UDP 4791, so one at a time). Figures:
#  - bandwidth of 64 KiB RDMA Write, Send and RDMA Read (MB/s), with the guest's kernel
#    CPU time per MB: system, irq and softirq time (both ends poll their CQs in user space,
#    so user time is polling; the driver's work is kernel time);
#  - latency of 2-byte RDMA Write, Send and RDMA Read (average us);
#  - message rate of 64-byte RDMA Writes (thousands a second), with kernel CPU us a message;
#  - the same on rrxe through librrxe, the project's provider, against rdma-core's rxe
#    provider (BENCH_LIBRRXE=0 leaves it out);
#  - the same between two devices over a veth pair, where packets take the IP stack, skbs,
#    the ICRC and the veth as on a wire: both drivers' devices on the pair's two ends in
#    one namespace (routed over the pair, not to the local address), and rrxe's also in two
#    namespaces (rdma_rxe binds its UDP socket in init_net alone before Linux 7.1), and
#    64 KiB Writes over it at a 4096-byte path MTU as well (the veths' MTU 9000);
#  - a slow receiver: ib_send_bw of 4 KiB with the server keeping 1, 2 or 8 receives posted
#    (-r), on rrxe with end-to-end credits, with them off (the `credits` module parameter:
#    "no credit information", as rdma_rxe reports), through librrxe (whose receives ring
#    the doorbell rrxe asks for while the sender waits for credits) and on rdma_rxe, with
#    rrxe's credit holds, receive doorbells and RNR NAKs a message.
# BENCH_TABLES picks the tables: "main" (loopback and librrxe), "veth" (the pair of
# devices), "credits" (the slow receiver); all three by default. BENCH_RUN_TIMES=1 has
# rrxe's runs time themselves (the run_times module parameter) and prints where their time
# went; its clock readings then count in every figure of rrxe's.
# With BENCH_SWEEP=1 (`make bench-sweep`) it runs the sweep instead, over a veth of MTU 9000:
#  - RDMA Write bandwidth from 2 B to 1 MiB, Send and RDMA Read at 4 KiB and 1 MiB (MB/s);
#  - 64 KiB RDMA Write over 1, 4, 16 and 64 QPs (-q, the same bytes in all), and with path
#    MTU 1024 and 4096 (-m).
# Prints each figure's median (min-max), its spread ((max-min)/median) and the rrxe/rdma_rxe
# ratio of the medians, and then the headline ratios (loopback and pair) taken round by
# round, with the rounds rrxe was the faster in. A benchmark, not a test: it fails only if a
# program does.
# Documentation/rrxe/benchmarks.rst.
here=$(dirname "$0")
. "$here/lib/gid.sh"
. "$here/lib/benchstat.sh"
REPEAT=${BENCH_REPEAT:-5}
BW_ITER=${BENCH_ITERS:-1000}
LAT_ITER=${BENCH_LAT_ITERS:-1000}
RATE_ITER=${BENCH_RATE_ITERS:-20000}
CREDIT_ITER=${BENCH_CREDIT_ITERS:-2000}
RX_DEPTHS=${BENCH_RX_DEPTHS:-1 2 8}
TABLES=${BENCH_TABLES:-main veth credits}
CREDITS_PARAM=/sys/module/rrxe/parameters/credits
RUN_TIMES=${BENCH_RUN_TIMES:-0}
ADDR=198.18.9.1
rc=0
port=19000

# The QP tasks' counters rrxe keeps (nothing on rdma_rxe, which has no such counters): runs
# and timer arms, then where the runs' time went, in ns (Documentation/rrxe/benchmarks.rst).
WORK="qp_task_runs qp_timer_arms qp_run_ns qp_rx_ns qp_tx_build_ns qp_tx_send_ns qp_deliver_ns qp_timer_arm_ns send_doorbells"
# Their short names in fig[KEY,NAME]: a count a message (an iteration), or us a message.
WORK_KEYS="runs arms run rx build send deliver arm doorbells"

# work_counts: rrxe's values of $WORK so far, in that order, on one line.
work_counts() {
	counts "$WORK"
}

# The credit mechanism's counters (rrxe only; the device's, so both ends of a loopback
# transfer): the sender's holds for credits, the receiver's receive doorbells, the RNR NAKs
# the sender got; a message each in the slow-receiver table.
CREDIT_COUNTERS="credit_holds recv_doorbells rnr_naks_rcvd"
CREDIT_KEYS="holds doorbells rnrs"

# perf KEY KIND PROG ARGS...: runs PROG's server and client on $dev (or, when set, the
# client through the prefix cli_in on cli_dev and cli_gid, to dst, and the server as
# start_server says); appends its figure to
# fig[KEY] (bw: average MB/s; lat: average us; rate: thousands of messages a second) and,
# for bw and rate, the kernel CPU time to fig[KEY,cpu] (ms a MB; us a message); on rrxe,
# QP task runs and timer arms a message (an iteration) to fig[KEY,runs] and fig[KEY,arms];
# the figure also to byround[KEY,ROUND], ROUND being the rounds' loop variable round.
perf() {
	local key=$1 kind=$2 prog=$3 out row t0 t1 w0 w1
	shift 3
	local server
	start_server "$prog" "$@"
	w0=$(work_counts)
	t0=$(kernel_ticks)
	out=$("${cli_in[@]}" timeout 300 "$prog" -d "${cli_dev:-$dev}" -F -x "${cli_gid:-$g4}" \
		"$@" -p "$port" "${dst:-$ADDR}" 2>&1) || rc=1
	t1=$(kernel_ticks)
	wait "$server" || rc=1
	w1=$(work_counts)
	row=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 5 { r = $0 } END { print r }')
	echo "# $key $prog $*: $row; kernel CPU $((t1 - t0)) ticks"
	[ -n "$row" ] || return
	# A rate of zero over iterations that ran is perftest failing to calibrate its cycle
	# counter against the clock (under TCG, now and then): no figure, and its words.
	no_figure "$key" "$kind" "$row" "$out" && return
	if [ -n "$w0" ] && [ -n "$w1" ]; then
		local k=0 name
		for name in $WORK_KEYS; do
			k=$((k + 1))
			# Counts a message; the times (ns, the third to eighth) in us a message.
			fig[$key,$name]+="$(awk -v a="$w0" -v b="$w1" -v k=$k '{ split(a, x, " ");
				split(b, y, " "); printf "%.2f", (y[k] - x[k]) / $2 / (k > 2 && k < 9 ? 1000 : 1) }' \
				<<<"$row") "
		done
	fi
	add_figure "$key" "$kind" "$row" $((t1 - t0)) "$round"
}

# slow KEY R: ib_send_bw of CREDIT_ITER 4 KiB messages into a server keeping R receives
# posted, as perf's "bw" (fig[KEY]); on rrxe also the credit counters a message
# (fig[KEY,holds], fig[KEY,doorbells], fig[KEY,rnrs]).
slow() {
	local key=$1 depth=$2 c0 c1 k=0 name
	c0=$(counts "$CREDIT_COUNTERS")
	perf "$key" bw ib_send_bw -s 4096 -n "$CREDIT_ITER" -r "$depth"
	c1=$(counts "$CREDIT_COUNTERS")
	[ -n "$c0" ] && [ -n "$c1" ] || return 0
	for name in $CREDIT_KEYS; do
		k=$((k + 1))
		fig[$key,$name]+="$(awk -v a="$c0" -v b="$c1" -v k=$k -v n="$CREDIT_ITER" 'BEGIN {
			split(a, x, " "); split(b, y, " "); printf "%.2f", (y[k] - x[k]) / n }') "
	done
}

ip link add bv0 type veth peer name bv1 || exit 1
ip addr add "$ADDR/24" dev bv0
ip link set bv1 up
ip link set bv0 up

# The "veth" table's two topologies: in one namespace, bw1 and bw2 routed to each other over
# the pair (routed_pair); in two, bnv1 in bns1 and bnv2 in bns2, over the plain route.
if [[ " $TABLES " == *" veth "* ]] && [ "${BENCH_SWEEP:-0}" != 1 ]; then
	routed_pair && netns_pair || exit 1
fi

# pair_mtu TOPOLOGY MTU: the MTU of the pair's two veths (the ports' MTU follows).
pair_mtu() {
	if [ "$1" = netns ]; then
		ip -n "$NS_CLI" link set bnv1 mtu "$2" && ip -n "$NS_SRV" link set bnv2 mtu "$2"
	else
		ip link set bw1 mtu "$2" && ip link set bw2 mtu "$2"
	fi
}

row() { # LABEL KEY
	printf '%-30s %22s %5s %22s %5s %8s\n' "$1" "$(stat "rrxe,$2")" "$(spread "rrxe,$2")" \
		"$(stat "rdma_rxe,$2")" "$(spread "rdma_rxe,$2")" "$(ratio "rrxe,$2" "rdma_rxe,$2")"
}

# main_rows FN: the main figures' rows, each printed by FN LABEL KEY.
main_rows() {
	local op
	for op in write send read; do
		"$1" "ib_${op}_bw 64KiB MB/s" "$op,bw"
		"$1" "  kernel CPU ms/MB" "$op,bw,cpu"
		"$1" "  QP task runs/msg" "$op,bw,runs"
	done
	for op in write send read; do
		"$1" "ib_${op}_lat 2B us" "$op,lat"
		"$1" "  QP task runs/iteration" "$op,lat,runs"
	done
	"$1" "ib_write_bw 64B kmsg/s" rate
	"$1" "  kernel CPU us/msg" "rate,cpu"
	"$1" "  QP task runs/msg" "rate,runs"
}

# memcpy_rate SIZE: the guest's copy rate between two SIZE-byte buffers in user space, MB/s
# (CPython's bytearray slice assignment, a memmove; 64 MiB copied).
memcpy_rate() {
	python3 -c '
import sys, time
sz = int(sys.argv[1]); a = bytearray(sz); b = bytearray(sz); n = max(16, (64 << 20) // sz)
t = time.perf_counter()
for _ in range(n):
    b[:] = a
print("%.1f" % (n * sz / (time.perf_counter() - t) / 1e6))' "$1"
}

# sweep_iters SIZE: messages for a bandwidth figure of SIZE bytes: 16 MiB worth, at least 200
# and at most 5,000.
sweep_iters() {
	local n=$((16777216 / $1))
	[ "$n" -lt 200 ] && n=200
	[ "$n" -gt 5000 ] && n=5000
	echo "$n"
}

if [ "${BENCH_SWEEP:-0}" = 1 ]; then
	# Room for a 4096-byte path MTU: the port's MTU follows the netdev's.
	ip link set bv0 mtu 9000
	ip link set bv1 mtu 9000
	SIZES="2 64 1024 4096 16384 65536 262144 1048576"
	for round in $(seq "$REPEAT"); do
		for mod in rrxe rdma_rxe; do
			bench_device "$mod" bv0 "$ADDR" || exit 1
			echo "# round $round: $mod"
			for sz in $SIZES; do
				perf "$mod,write,$sz" bw ib_write_bw -s "$sz" -n "$(sweep_iters "$sz")"
			done
			for op in send read; do
				for sz in 4096 1048576; do
					perf "$mod,$op,$sz" bw "ib_${op}_bw" -s "$sz" -n "$(sweep_iters "$sz")"
				done
			done
			for q in 1 4 16 64; do
				perf "$mod,qps,$q" bw ib_write_bw -s 65536 -q "$q" -n $((1024 / q))
			done
			for m in 1024 4096; do
				perf "$mod,mtu,$m" bw ib_write_bw -s 65536 -m "$m" -n 1000
			done
			rdma link delete "$dev"
			rmmod "$mod"
		done
		for sz in 4096 65536 1048576; do
			fig[memcpy,$sz]+="$(memcpy_rate "$sz") "
		done
	done
	echo
	echo "perftest sweep in loopback on one device, MB/s, median (min-max) and spread of $REPEAT rounds"
	printf '%-30s %22s %5s %22s %5s %8s\n' "" "rrxe" "" "rdma_rxe" "" "rrxe/rxe"
	for sz in $SIZES; do
		row "ib_write_bw $sz B" "write,$sz"
		row "  kernel CPU ms/MB" "write,$sz,cpu"
		row "  QP task runs/msg" "write,$sz,runs"
	done
	for op in send read; do
		for sz in 4096 1048576; do
			row "ib_${op}_bw $sz B" "$op,$sz"
			row "  kernel CPU ms/MB" "$op,$sz,cpu"
		done
	done
	for q in 1 4 16 64; do
		row "ib_write_bw 64KiB, $q QPs" "qps,$q"
	done
	for m in 1024 4096; do
		row "ib_write_bw 64KiB, MTU $m" "mtu,$m"
	done
	echo "(higher is better, but kernel CPU and task runs)"
	echo
	echo "the guest's memcpy between two buffers of the same size, MB/s, median (min-max)"
	for sz in 4096 65536 1048576; do
		printf '%-30s %22s %5s\n' "memcpy $sz B" "$(stat "memcpy,$sz")" "$(spread "memcpy,$sz")"
	done
	exit $rc
fi

# librrxe: rrxe again, perftest through the project's provider (RDMAV_DRIVERS) instead of
# rdma-core's rxe provider, when the kselftest install has it (BENCH_LIBRRXE=0: not).
lib=$(cd "$here" && pwd)/provider/librrxe
mods="rrxe rdma_rxe"
[ "${BENCH_LIBRRXE:-1}" = 1 ] && [ -f "$lib-rdmav34.so" ] && mods="rrxe librrxe rdma_rxe"
# The pair's figures are set against both drivers' loopback ones: those run too.
[[ " $TABLES " == *" veth "* ]] && mods="rrxe rrxe-veth rrxe-netns ${mods#rrxe } rdma_rxe-veth"
main=0
[[ " $TABLES " == *" main "* || " $TABLES " == *" veth "* ]] && main=1
for round in $(seq "$REPEAT"); do
	for mod in $mods; do
		kmod=${mod/librrxe/rrxe}
		kmod=${kmod%-*}
		if [[ $mod == *-* ]]; then
			pair_devices "$kmod" "${mod#*-}" || exit 1
		else
			bench_device "$kmod" bv0 "$ADDR" || exit 1
		fi
		[ "$kmod" = rrxe ] && echo "$RUN_TIMES" >/sys/module/rrxe/parameters/run_times
		echo "# round $round: $mod"
		if [ "$mod" = librrxe ]; then export RDMAV_DRIVERS=$lib; else unset RDMAV_DRIVERS; fi
		if [ "$main" = 1 ]; then
			for op in write send read; do
				perf "$mod,$op,bw" bw "ib_${op}_bw" -s 65536 -n "$BW_ITER"
				perf "$mod,$op,lat" lat "ib_${op}_lat" -s 2 -n "$LAT_ITER"
			done
			perf "$mod,rate" rate ib_write_bw -s 64 -n "$RATE_ITER"
		fi
		# Over the pair, 64 KiB Writes at a 4096-byte path MTU too (the veths' MTU 9000 for
		# them): a packet's fixed cost in the kernel's path sets the pair's figures, and a
		# quarter as many packets carry the same bytes.
		if [ "$main" = 1 ] && [[ $mod == *-* ]]; then
			if pair_mtu "${mod#*-}" 9000; then
				perf "$mod,mtu4096" bw ib_write_bw -s 65536 -m 4096 -n "$BW_ITER"
			else
				rc=1
			fi
			pair_mtu "${mod#*-}" 1500 || rc=1
		fi
		if [[ " $TABLES " == *" credits "* ]] && [[ $mod != *-* ]]; then
			for d in $RX_DEPTHS; do
				slow "$mod,slow,$d" "$d"
			done
			# The same on rrxe with credit reporting off (read as each QP is created).
			if [ "$mod" = rrxe ] && [ -w "$CREDITS_PARAM" ]; then
				echo 0 >"$CREDITS_PARAM"
				for d in $RX_DEPTHS; do
					slow "nocredits,slow,$d" "$d"
				done
				echo 1 >"$CREDITS_PARAM"
			fi
		fi
		unset RDMAV_DRIVERS
		if [[ $mod == *-* ]]; then pair_done; else rdma link delete "$dev"; fi
		rmmod "$kmod"
	done
done

if [[ " $TABLES " == *" credits "* ]]; then
	echo
	echo "slow receiver in loopback: ib_send_bw -s 4096 -n $CREDIT_ITER -r N, MB/s, median (min-max) and"
	echo "spread of $REPEAT rounds; rrxe with credits (rdma-core's rxe provider), without them, with them"
	echo "through librrxe; a message: the sender's holds for credits, the receiver's doorbells, RNR NAKs"
	printf '%-16s %22s %5s %22s %5s %22s %5s %22s %5s %7s %7s %7s\n' "" "rrxe credits" "" \
		"rrxe no credits" "" "librrxe credits" "" "rdma_rxe" "" "on/rxe" "lib/rxe" "on/off"
	for d in $RX_DEPTHS; do
		printf '%-16s %22s %5s %22s %5s %22s %5s %22s %5s %7s %7s %7s\n' "-r $d MB/s" \
			"$(stat "rrxe,slow,$d")" "$(spread "rrxe,slow,$d")" \
			"$(stat "nocredits,slow,$d")" "$(spread "nocredits,slow,$d")" \
			"$(stat "librrxe,slow,$d")" "$(spread "librrxe,slow,$d")" \
			"$(stat "rdma_rxe,slow,$d")" "$(spread "rdma_rxe,slow,$d")" \
			"$(ratio "rrxe,slow,$d" "rdma_rxe,slow,$d")" \
			"$(ratio "librrxe,slow,$d" "rdma_rxe,slow,$d")" \
			"$(ratio "rrxe,slow,$d" "nocredits,slow,$d")"
		for name in $CREDIT_KEYS; do
			printf '%-16s %22s %5s %22s %5s %22s %5s\n' "  $name/msg" \
				"$(stat "rrxe,slow,$d,$name")" "" "$(stat "nocredits,slow,$d,$name")" "" \
				"$(stat "librrxe,slow,$d,$name")" ""
		done
	done
	[ "$main" = 1 ] || exit $rc
fi

echo
echo "perftest in loopback on one device, median (min-max) and spread of $REPEAT rounds"
printf '%-30s %22s %5s %22s %5s %8s\n' "" "rrxe" "" "rdma_rxe" "" "rrxe/rxe"
main_rows row
row "  QP timer arms/msg" "rate,arms"
echo "(bandwidth and rate: higher is better; latency and CPU: lower is better)"
echo
if [ "$RUN_TIMES" = 1 ]; then
	echo "rrxe's QP task runs, us a message (an iteration), median (min-max) and spread: the whole"
	echo "run, and its parts (rx: received packets; build and send: packets sent; deliver:"
	echo "completions to CQs; arm: the timer); the rest of a run is its bookkeeping"
	printf '%-30s %22s %5s\n' "" "rrxe" ""
	prow() { # LABEL KEY
		printf '%-30s %22s %5s\n' "$1" "$(stat "rrxe,$2")" "$(spread "rrxe,$2")"
	}
	for key in write,bw send,bw read,bw write,lat send,lat read,lat rate; do
		case $key in
		*,bw) label="ib_${key%,*}_bw 64KiB" ;;
		*,lat) label="ib_${key%,*}_lat 2B" ;;
		rate) label="ib_write_bw 64B" ;;
		esac
		prow "$label run" "$key,run"
		for part in rx build send deliver arm; do
			prow "  $part" "$key,$part"
		done
	done
else
	echo "(rrxe's runs were not timed: BENCH_RUN_TIMES=1 times them and prints where their time went)"
fi
if [[ $mods == *librrxe* ]]; then
	echo
	echo "rrxe through librrxe (the project's provider) and through rdma-core's rxe provider"
	printf '%-30s %22s %5s %22s %5s %8s\n' "" "librrxe" "" "rxe provider" "" "ratio"
	lrow() { # LABEL KEY
		printf '%-30s %22s %5s %22s %5s %8s\n' "$1" "$(stat "librrxe,$2")" "$(spread "librrxe,$2")" \
			"$(stat "rrxe,$2")" "$(spread "rrxe,$2")" "$(ratio "librrxe,$2" "rrxe,$2")"
	}
	for op in write send read; do
		lrow "ib_${op}_bw 64KiB MB/s" "$op,bw"
	done
	for op in write send read; do
		lrow "ib_${op}_lat 2B us" "$op,lat"
	done
	lrow "ib_write_bw 64B kmsg/s" rate
	lrow "  kernel CPU us/msg" "rate,cpu"
	lrow "  send doorbells/msg" "rate,doorbells"
fi
if [[ $mods == *-veth* ]]; then
	echo
	echo "two devices over a veth pair (IP stack, skbs, ICRC, veth), both drivers, and rrxe's in two"
	echo "namespaces; median (min-max) and spread of $REPEAT rounds; lo/pair: each driver's loopback"
	echo "figure (the main table's) over its pair's"
	printf '%-26s %22s %5s %22s %5s %7s %22s %5s %7s %11s\n' "" "rrxe" "" "rdma_rxe" "" \
		"rrxe/rxe" "rrxe namespaces" "" "ns/rrxe" "lo/pair"
	vrow() { # LABEL KEY
		printf '%-26s %22s %5s %22s %5s %7s %22s %5s %7s %11s\n' "$1" \
			"$(stat "rrxe-veth,$2")" "$(spread "rrxe-veth,$2")" \
			"$(stat "rdma_rxe-veth,$2")" "$(spread "rdma_rxe-veth,$2")" \
			"$(ratio "rrxe-veth,$2" "rdma_rxe-veth,$2")" \
			"$(stat "rrxe-netns,$2")" "$(spread "rrxe-netns,$2")" \
			"$(ratio "rrxe-netns,$2" "rrxe-veth,$2")" \
			"$(ratio "rrxe,$2" "rrxe-veth,$2")/$(ratio "rdma_rxe,$2" "rdma_rxe-veth,$2")"
	}
	main_rows vrow
	vrow "ib_write_bw MTU 4096 MB/s" mtu4096
	vrow "  kernel CPU ms/MB" mtu4096,cpu
	echo "(task runs: both of rrxe's devices together; lo/pair: rrxe's, then rdma_rxe's; MTU 4096:"
	echo "the veths' MTU 9000, path MTU 4096, where the other rows have 1500 and 1024)"
fi
# The headline ratios again, taken round by round: in a round the two drivers run minutes
# apart, so a slow spell of the host's that spans it slows both.
echo
echo "rrxe/rdma_rxe round by round: median (min-max) of the rounds' ratios, and the rounds in"
echo "which rrxe was the faster"
printf '%-26s %-44s %s\n' "" "loopback" "veth pair"
for key in write,bw send,bw read,bw write,lat send,lat read,lat rate mtu4096; do
	kind=bw
	case $key in
	*,bw) label="ib_${key%,*}_bw 64KiB" ;;
	*,lat) label="ib_${key%,*}_lat 2B" kind=lat ;;
	rate) label="ib_write_bw 64B rate" kind=rate ;;
	mtu4096) label="ib_write_bw MTU 4096" ;;
	esac
	printf '%-26s %-44s %s\n' "$label" "$(paired "rrxe,$key" "rdma_rxe,$key" "$kind" "$REPEAT")" \
		"$(paired "rrxe-veth,$key" "rdma_rxe-veth,$key" "$kind" "$REPEAT")"
done
exit $rc
