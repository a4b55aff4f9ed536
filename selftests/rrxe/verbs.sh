#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Data-path acceptance tests, side A (the clients). Side B (selftests/rrxe/verbs-peer.sh) runs the
# servers; a TCP control channel to it (port 4793, selftests/rrxe/lib/verbs_ctl.py) starts each server
# and reports once it listens, so every client connects exactly once. Then the same programs
# in loopback, server and client on this VM's one device (destination GID = source GID).
# Programs: rdma-core's ibv_{rc,uc,ud}_pingpong (-c checks the received data) and perftest.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"

tap_begin "rrxe verbs data path"
CTL_PORT=4793
# Per-program limits: TCG is slow, but every run here takes seconds when things work.
CLIENT_TMO=${VERBS_CLIENT_TMO:-60}
SERVER_TMO=${VERBS_SERVER_TMO:-90}
[ "${RRXE_VARIANT:-}" = debug ] && CLIENT_TMO=300 && SERVER_TMO=360
OUT=/tmp/verbs-out
mkdir -p "$OUT"

# VERBS_MOD=rdma_rxe runs the same tests on rdma_rxe's rxe0, for comparison.
MOD=${VERBS_MOD:-rrxe}
DEV=${MOD#rdma_}0
check "modprobe $MOD" modprobe "$MOD"
ip link set eth0 up
check "rdma link add $DEV type ${MOD#rdma_} netdev eth0" rdma link add "$DEV" type "${MOD#rdma_}" netdev eth0
g4=$(wait_for 10 gid_index "$DEV" "$RRXE_LOCAL_IP4" && gid_index "$DEV" "$RRXE_LOCAL_IP4")
g6=$(wait_for 10 gid_index "$DEV" "$RRXE_LOCAL_IP6" && gid_index "$DEV" "$RRXE_LOCAL_IP6")
check "IPv4 GID index found ($g4)" test -n "$g4"
check "IPv6 GID index found ($g6)" test -n "$g6"

# Lines worth keeping from a program's output: pingpong rates, perftest result rows.
summary() {
	grep -E 'bytes in|iters in|^custom |^ *[0-9]+ +[0-9]+ +[0-9.]+|#bytes' "$1" | sed 's/^/#   /'
}
show_log() {
	sed 's/^/#   /' "$1" | tail -25
}

ctl_open() { exec 3<>"/dev/tcp/$RRXE_PEER_IP4/$CTL_PORT"; }
ctl() { # request... -> $CTL_REPLY
	CTL_REPLY=
	echo "$*" >&3 && read -r -t "$SERVER_TMO" CTL_REPLY <&3
}

# debug_soak_only PROG PATTERN...: whether PROG, matching one of the glob PATTERNs, is left
# to `make soak` on the debug kernel. There each program costs tens of seconds of TCG, so
# make check keeps one run of each code path: on the wire the bandwidth programs run the
# latency programs' operations, and in loopback RC and rping run (every QP type's packets
# take the same loopback path; UC and UD run on the wire).
debug_soak_only() {
	local prog=$1 p
	shift
	[ "${RRXE_VARIANT:-}" = debug ] && ! soak || return 1
	for p in "$@"; do
		# shellcheck disable=SC2053 - $p is a glob pattern
		[[ $prog == $p ]] && return 0
	done
	return 1
}

# remote NAME PORT PROG ARGS...: PROG's server on B (ARGS, @GID4@/@GID6@/@DEV@ as B's GID
# indices and device there: the two sides may run different drivers), its client here with ARGS (our GID indices) against B.
remote() {
	local name=$1 port=$2 prog=$3
	shift 3
	local sargs=() cargs=() a
	for a in "$@"; do
		sargs+=("$a")
		a=${a//@GID4@/$g4}
		a=${a//@DEV@/$DEV}
		cargs+=("${a//@GID6@/$g6}")
	done
	local desc="wire: $prog ${cargs[*]}"
	if debug_soak_only "$prog" 'ib_*_lat'; then
		skip "$desc" "$SOAK_ONLY"
		return
	fi
	if ! ctl start "$name" "$port" "$SERVER_TMO" "$prog" "${sargs[@]}" -p "$port" ||
		[ "$CTL_REPLY" != ready ]; then
		_tap_result fail "$desc" "server on B did not start: ${CTL_REPLY:-no reply}"
		return
	fi
	timeout "$CLIENT_TMO" "$prog" "${cargs[@]}" -p "$port" "$RRXE_PEER_IP4" >"$OUT/$name" 2>&1
	local crc=$?
	ctl wait "$name"
	local src=${CTL_REPLY#rc }
	if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
		_tap_result ok "$desc"
		summary "$OUT/$name"
	else
		_tap_result fail "$desc" "client exit $crc, server ${CTL_REPLY:-no reply}"
		show_log "$OUT/$name"
	fi
}

# loop NAME PORT PROG ARGS...: server and client here, on rrxe0, the same GID.
loop() {
	local name=$1 port=$2 prog=$3
	shift 3
	local args=() a
	for a in "$@"; do
		a=${a//@GID4@/$g4}
		a=${a//@DEV@/$DEV}
		args+=("${a//@GID6@/$g6}")
	done
	local desc="loopback: $prog ${args[*]}"
	# On the debug kernel make check runs perftest and the UC and UD pingpongs over the
	# wire only: in loopback they take the paths the RC pingpong and rping take there.
	if debug_soak_only "$prog" 'ib_*' ibv_uc_pingpong ibv_ud_pingpong; then
		skip "$desc" "$SOAK_ONLY"
		return
	fi
	timeout "$SERVER_TMO" "$prog" "${args[@]}" -p "$port" >"$OUT/$name.srv" 2>&1 &
	local spid=$!
	if ! wait_for 120 listening "$port"; then
		kill "$spid" 2>/dev/null
		wait "$spid"
		_tap_result fail "$desc" "server did not listen"
		show_log "$OUT/$name.srv"
		return
	fi
	timeout "$CLIENT_TMO" "$prog" "${args[@]}" -p "$port" 127.0.0.1 >"$OUT/$name" 2>&1
	local crc=$?
	wait "$spid"
	local src=$?
	if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
		_tap_result ok "$desc"
		summary "$OUT/$name"
	else
		_tap_result fail "$desc" "client exit $crc, server exit $src"
		show_log "$OUT/$name"
		echo "#   server:"
		show_log "$OUT/$name.srv"
	fi
}

# rping (librdmacm: connection setup by CM MADs over the GSI QP, then RDMA Read/Write and
# Send, -V verifying every buffer) against B, and in loopback to this VM's own address.
rping_remote() { # NAME PORT
	local name=$1 port=$2 desc="wire: rping -C $RPING_N -V to $RRXE_PEER_IP4"
	if ! ctl start "$name" "$port" "$SERVER_TMO" rping -s -a 0.0.0.0 -C "$RPING_N" -V -p "$port" ||
		[ "$CTL_REPLY" != ready ]; then
		_tap_result fail "$desc" "server on B did not start: ${CTL_REPLY:-no reply}"
		return
	fi
	timeout "$CLIENT_TMO" rping -c -a "$RRXE_PEER_IP4" -C "$RPING_N" -V -p "$port" >"$OUT/$name" 2>&1
	local crc=$?
	ctl wait "$name"
	if [ "$crc" = 0 ] && [ "${CTL_REPLY#rc }" = 0 ]; then
		_tap_result ok "$desc"
	else
		_tap_result fail "$desc" "client exit $crc, server ${CTL_REPLY:-no reply}"
		show_log "$OUT/$name"
	fi
}
rping_loop() { # NAME PORT
	local name=$1 port=$2 desc="loopback: rping -C $RPING_N -V to $RRXE_LOCAL_IP4"
	timeout "$SERVER_TMO" rping -s -a "$RRXE_LOCAL_IP4" -C "$RPING_N" -V -p "$port" \
		>"$OUT/$name.srv" 2>&1 &
	local spid=$!
	if ! wait_for 120 cm_listening "$port"; then
		kill "$spid" 2>/dev/null
		wait "$spid"
		_tap_result fail "$desc" "server did not listen"
		show_log "$OUT/$name.srv"
		return
	fi
	timeout "$CLIENT_TMO" rping -c -a "$RRXE_LOCAL_IP4" -C "$RPING_N" -V -p "$port" >"$OUT/$name" 2>&1
	local crc=$?
	wait "$spid"
	local src=$?
	if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
		_tap_result ok "$desc"
	else
		_tap_result fail "$desc" "client exit $crc, server exit $src"
		show_log "$OUT/$name"
		show_log "$OUT/$name.srv"
	fi
}
RPING_N=100

# Error NAKs this port sent and received (rrxe's counters; empty on a driver without them).
error_naks() {
	rdma statistic show link "$DEV/1" 2>/dev/null |
		awk '{ for (i = 1; i < NF; i++)
			if ($i == "error_naks_sent" || $i == "error_naks_rcvd") { n += $(i + 1); f = 1 } }
		     END { if (f) print n }'
}

# rstream and riostream (librdmacm's rsockets: a stream socket over RC, the data by RDMA
# Write with Immediate into the peer's buffer, riostream's by riowrite into a buffer the
# peer mapped with riomap; -T v verifies it) against B: with the default calls, blocking
# ones that wait for all (-T b) and nonblocking ones (-T n). Not rstream's rpoll-driven
# mode (-T a): its client fails with POLLHUP (exit 16) when the server's last data and its
# shutdown arrive together, between two rdma_rxe VMs too (6 runs in 8; rrxe 7 or 8 in 8).
# rsockets sends its control messages (credits, shutdown) as
# zero-length Writes with Immediate whose R_Key and VA are left uninitialised; a responder
# must not check them (IBA C9-88). rrxe once answered the shutdown of nearly every run with
# a Remote Access Error NAK: the run passed, the NAK was on the wire. So no error NAK may be
# counted on this port during the run.
rstream_remote() { # NAME PORT PROG [-T MODE]...
	local name=$1 port=$2 prog=$3
	shift 3
	local opts=(-p "$port" -S 65536 -C "$N" -T v "$@") before after
	local desc="wire: $prog -S 65536 -C $N -T v $* to $RRXE_PEER_IP4, no error NAK"
	before=$(error_naks)
	if ! ctl start "$name" "$port" "$SERVER_TMO" "$prog" -b 0.0.0.0 "${opts[@]}" ||
		[ "$CTL_REPLY" != ready ]; then
		_tap_result fail "$desc" "server on B did not start: ${CTL_REPLY:-no reply}"
		return
	fi
	timeout "$CLIENT_TMO" "$prog" -s "$RRXE_PEER_IP4" "${opts[@]}" >"$OUT/$name" 2>&1
	local crc=$?
	ctl wait "$name"
	# The last control message may still be in flight when both programs have exited.
	sleep 1
	after=$(error_naks)
	if [ "$crc" = 0 ] && [ "${CTL_REPLY#rc }" = 0 ] && [ "$before" = "$after" ]; then
		_tap_result ok "$desc"
		summary "$OUT/$name"
	else
		_tap_result fail "$desc" \
			"client exit $crc, server ${CTL_REPLY:-no reply}, error NAKs ${before:-?} -> ${after:-?}"
		show_log "$OUT/$name"
	fi
}

MiB=1048576
PT=(-d @DEV@ -F -x)
# Iterations: pingpong, 1 MiB pingpong, perftest (at least 5). The debug kernel under TCG
# runs the data path about ten times slower: fewer there, the same code paths.
N=200 NBIG=10 NPT=100
[ "${RRXE_VARIANT:-}" = debug ] && N=20 NBIG=2 NPT=10
# The tests, each as NAME PORT PROG ARGS (a function per mode prefixes wire/loopback).
# Over the wire the RC pingpongs sleep on CQ events (-e) rather than busy-poll: under TCG on a
# loaded host a polling process starves the softirq (ksoftirqd) that receives the peer's
# packets for longer than the retry budget ibv_rc_pingpong fixes (timeout 14 = 67 ms, 7
# retries), and RC fails with "transport retry counter exceeded" for no fault of the wire.
# The loopback runs, which need no receive softirq, busy-poll.
tests() {
	local run=$1 base=$2 g=@GID4@ ev=
	[ "$run" = remote ] && ev=-e
	$run rc "$((base + 0))" ibv_rc_pingpong -d @DEV@ -g $g -n $N -c $ev
	$run rc-1m "$((base + 1))" ibv_rc_pingpong -d @DEV@ -g $g -s $MiB -n $NBIG -r 16 -c $ev
	$run uc "$((base + 2))" ibv_uc_pingpong -d @DEV@ -g $g -n $N -c
	$run uc-1m "$((base + 3))" ibv_uc_pingpong -d @DEV@ -g $g -s $MiB -n $NBIG -r 16 -c
	# UD messages are limited to the path MTU (1024 for a 1500-byte netdev).
	$run ud "$((base + 4))" ibv_ud_pingpong -d @DEV@ -g $g -s 1024 -n $N -c
	$run ud-small "$((base + 5))" ibv_ud_pingpong -d @DEV@ -g $g -s 64 -n $N -c
	$run send-bw "$((base + 6))" ib_send_bw "${PT[@]}" $g -n $NPT -s 65536
	$run write-bw "$((base + 7))" ib_write_bw "${PT[@]}" $g -n $NPT -s 65536
	$run read-bw "$((base + 8))" ib_read_bw "${PT[@]}" $g -n $NPT -s 65536
	$run atomic-bw "$((base + 9))" ib_atomic_bw "${PT[@]}" $g -n $NPT
	$run send-lat "$((base + 10))" ib_send_lat "${PT[@]}" $g -n $NPT -s 64
	$run write-lat "$((base + 11))" ib_write_lat "${PT[@]}" $g -n $NPT -s 64
	$run read-lat "$((base + 12))" ib_read_lat "${PT[@]}" $g -n $NPT -s 64
}

# Side B runs teardown.sh before verbs-peer.sh (side-b.sh): on a slow host it may still be
# busy when A gets here.
if wait_for "${VERBS_SYNC_SECS:-900}" ctl_open; then
	_tap_result ok "control channel to side B (TCP $CTL_PORT)"
	tests remote 18600
	remote rc-v6 18620 ibv_rc_pingpong -d @DEV@ -g @GID6@ -n $N -c -e
	rping_remote rping 18630
	rstream_remote rstream 18640 rstream
	rstream_remote rstream-blocking 18641 rstream -T b
	rstream_remote rstream-nonblocking 18642 rstream -T n
	rstream_remote riostream 18643 riostream
	ctl "done"
	exec 3>&-
else
	_tap_result fail "control channel to side B (TCP $CTL_PORT)" "side B never listened"
fi

# VERBS_LOOPBACK=0 skips the loopback runs (interoperability boots, where only the wire
# between the two drivers is of interest).
if [ "${VERBS_LOOPBACK:-1}" = 1 ]; then
	tests loop 18700
	rping_loop rping-loop 18730
fi

check "rdma link delete $DEV" rdma link delete "$DEV"
check "rmmod $MOD" rmmod "$MOD"
tap_end
