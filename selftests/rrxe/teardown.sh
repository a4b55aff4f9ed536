#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Teardown under traffic: RC traffic (ibv_rc_pingpong, server and client in loopback on one
# rrxe device) and, while it runs, kill -9 of either end or both, a link flap, `rmmod`,
# `rdma link delete` and deletion of the netdev under the device. Nothing may splat or leak
# (KASAN, lockdep and kmemleak on the debug kernel; the harness checks the logs after the
# boot); no QP of a killed process may outlive it; a device (or its successor) must carry
# traffic afterwards; a flap shorter than the RC retry budget loses nothing.
# Every device sits on a veth of its own, so the test needs no wire and one VM:
#   scripts/vm.sh --variant debug --module drivers/infiniband/sw/rrxe/rrxe.ko --cmd selftests/rrxe/teardown.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"

# kill -9 rounds cycle through client, server, both.
if soak; then KILLS=9 ROUNDS=10; else KILLS=3 ROUNDS=1; fi
SYS=/sys/class/infiniband
LOG=/tmp/teardown
mkdir -p "$LOG"

modprobe rrxe || exit 1
# Three veth pairs: for rrxe0, for the device that is deleted, for the netdev that is.
ip link add tdv4 type veth peer name tdv5
ip link add tdv0 type veth peer name tdv1
ip link add tdv2 type veth peer name tdv3
for l in tdv0 tdv1 tdv2 tdv3 tdv4 tdv5; do ip link set "$l" up; done
ip addr add 198.18.42.1/24 dev tdv4
ip addr add 198.18.40.1/24 dev tdv0
ip addr add 198.18.41.1/24 dev tdv2
rdma link add rrxe0 type rrxe netdev tdv4 || exit 1

# gid_of DEV ADDR: waits for DEV's RoCE v2 GID of ADDR and prints its index.
gid_of() {
	local g
	for _ in $(seq 100); do
		g=$(gid_index "$1" "$2") && { echo "$g"; return 0; }
		sleep 0.1
	done
	return 1
}

rcvd() {
	local v
	read -r v <"$SYS/$1/ports/1/hw_counters/rcvd_pkts" 2>/dev/null || v=0
	echo "$v"
}

# moving DEV FROM: the device has received 50 packets more than FROM.
moving() {
	[ "$(rcvd "$1")" -ge $(($2 + 50)) ]
}

# start DEV GID PORT N SIZE: an ibv_rc_pingpong server and client on DEV in loopback (N
# exchanges of SIZE bytes, buffers checked); sets SRV and CLI. Returns once packets flow.
start() {
	local dev=$1 g=$2 port=$3 n=$4 size=$5 base
	base=$(rcvd "$dev")
	ibv_rc_pingpong -d "$dev" -g "$g" -s "$size" -n "$n" -c -p "$port" >"$LOG/srv" 2>&1 &
	SRV=$!
	wait_for 60 listening "$port" || return 1
	ibv_rc_pingpong -d "$dev" -g "$g" -s "$size" -n "$n" -c -p "$port" 127.0.0.1 >"$LOG/cli" 2>&1 &
	CLI=$!
	wait_for 60 moving "$dev" "$base"
}

# stop: kills and reaps the traffic's two processes.
stop() {
	kill -9 "$SRV" "$CLI" 2>/dev/null
	wait "$SRV" "$CLI" 2>/dev/null
}

# device_traffic TAG DEV NETDEV ADDR PORT: adds DEV over NETDEV and starts traffic on it
# (start); a failure is reported under TAG and returns non-zero.
device_traffic() {
	local tag=$1 dev=$2 g
	rdma link add "$dev" type rrxe netdev "$3" || { _tap_result fail "$tag: rdma link add $dev"; return 1; }
	g=$(gid_of "$dev" "$4") || { _tap_result fail "$tag: $dev has its GID"; return 1; }
	start "$dev" "$g" "$5" 1000000 65536 && return 0
	_tap_result fail "$tag: traffic started" "$(cat "$LOG/srv" "$LOG/cli")"
	return 0
}

# deleted DESC PID LOG DEV: PID, a deletion started under the traffic, must finish by itself
# while the traffic's processes still hold their contexts (LOG has its output), and DEV be
# gone; then the traffic stops. DESC is "TAG: what".
deleted() {
	reap "$2" 120
	report "$1" $? "$(cat "$3")"
	check "${1%%:*}: $4 is gone" wait_for 60 test ! -e "$SYS/$4"
	stop
}

# gone PID...: none of the processes is left (reaped).
gone() {
	local p
	for p in "$@"; do
		kill -0 "$p" 2>/dev/null && return 1
	done
	return 0
}

# reap PID SECS: waits for PID (killed after SECS); returns its status.
reap() {
	local wd s
	(sleep "$2" && kill -9 "$1") 2>/dev/null &
	wd=$!
	wait "$1"
	s=$?
	kill "$wd" 2>/dev/null
	wait "$wd" 2>/dev/null
	return $s
}

# report DESC STATUS DETAIL: ok if STATUS is 0, else not ok with the status and DETAIL.
report() {
	if [ "$2" = 0 ]; then
		_tap_result ok "$1"
	else
		_tap_result fail "$1" "status $2: $3"
	fi
}

# no_user_qps DEV: no QP of a process (every QP listed names no pingpong) on DEV.
no_user_qps() {
	! rdma resource show qp link "$1/1" 2>/dev/null | grep -q pingpong
}

# exchange DEV GID PORT: a short checked exchange completes.
exchange() {
	local dev=$1 g=$2 port=$3 srv
	timeout 120 ibv_rc_pingpong -d "$dev" -g "$g" -n 20 -c -p "$port" >"$LOG/x-srv" 2>&1 &
	srv=$!
	wait_for 60 listening "$port" || return 1
	timeout 120 ibv_rc_pingpong -d "$dev" -g "$g" -n 20 -c -p "$port" 127.0.0.1 || return 1
	wait $srv
}

G0=$(gid_of rrxe0 198.18.42.1) || exit 1
port=18700

tap_begin "teardown under traffic on rrxe0 (GID $G0): $KILLS kill rounds, $ROUNDS of each other kind"

# --- kill -9 mid-transfer ------------------------------------------------------------------
# The victim's QPs are destroyed by the core as its file closes; the survivor then retries
# into nothing (RETRY_EXC_ERR) or waits for a message that never comes, and is killed too.
for r in $(seq "$KILLS"); do
	port=$((port + 1))
	case $((r % 3)) in
	1) what=client ;;
	2) what=server ;;
	0) what=both ;;
	esac
	if ! start rrxe0 "$G0" "$port" 1000000 65536; then
		_tap_result fail "round $r: traffic started" "$(cat "$LOG/srv" "$LOG/cli")"
		stop
		continue
	fi
	case $what in
	client) kill -9 "$CLI" ;;
	server) kill -9 "$SRV" ;;
	both) kill -9 "$CLI" "$SRV" ;;
	esac
	sleep 1
	stop
	check "round $r: kill -9 of the $what mid-transfer, both ends gone" gone "$SRV" "$CLI"
	check "round $r: no QP of theirs left on rrxe0" wait_for 30 no_user_qps rrxe0
	check "round $r: rrxe0 carries a checked exchange afterwards" exchange rrxe0 "$G0" $((port + 500))
done

# --- rmmod under traffic ------------------------------------------------------------------
# Open user contexts do not hold the module: rrxe offers disassociate_ucontext, so rmmod goes
# on under traffic and the core cuts both processes' contexts off (IBV_EVENT_DEVICE_FATAL,
# then EIO). ibv_rc_pingpong never reads its async events and polls its CQ, which gets
# nothing more, until it is killed. rrxe0 then comes back and carries traffic.
port=$((port + 1))
if start rrxe0 "$G0" "$port" 1000000 65536; then
	check "rmmod under traffic completes, the user contexts cut off" timeout 120 rmmod rrxe
	check "rrxe0 went with the module" test ! -e "$SYS/rrxe0"
else
	_tap_result fail "traffic for rmmod started" "$(cat "$LOG/srv" "$LOG/cli")"
fi
stop
modprobe rrxe
check "rrxe0 over tdv4 again after the rmmod" rdma link add rrxe0 type rrxe netdev tdv4
G0=$(gid_of rrxe0 198.18.42.1)
check "rrxe0 carries a checked exchange after the rmmod" exchange rrxe0 "${G0:-0}" $((port + 500))

# --- link flap ------------------------------------------------------------------------------
# A flap well inside the retry budget (ibv_rc_pingpong: 7 retries of a 67 ms ACK timeout,
# which rrxe backs off to 268 ms) loses nothing: both ends finish, buffers checked.
for r in $(seq "$ROUNDS"); do
	port=$((port + 1))
	if ! start rrxe0 "$G0" "$port" 300 4096; then
		_tap_result fail "flap $r: traffic started" "$(cat "$LOG/srv" "$LOG/cli")"
		stop
		continue
	fi
	ip link set tdv4 down
	sleep 0.2
	ip link set tdv4 up
	reap "$CLI" 300
	c=$?
	reap "$SRV" 60
	sv=$?
	report "flap $r: a 0.2 s link flap mid-transfer, both ends complete, buffers checked" \
		$((c | sv)) "client $c, server $sv; $(tail -n 5 "$LOG/cli" "$LOG/srv")"
	wait_for 10 gid_index rrxe0 198.18.42.1
done

# --- rdma link delete under traffic ---------------------------------------------------------
# The core cuts the processes' contexts off and the device goes without waiting for them
# (disassociate_ucontext). The device can be added again and used.
for r in $(seq "$ROUNDS"); do
	port=$((port + 1))
	device_traffic "delete $r" rrxe1 tdv0 198.18.40.1 "$port" || continue
	rdma link delete rrxe1 >"$LOG/del" 2>&1 &
	del=$!
	sleep 1
	deleted "delete $r: rdma link delete rrxe1 under traffic finishes with the processes still running" \
		"$del" "$LOG/del" rrxe1
done
if rdma link add rrxe1 type rrxe netdev tdv0 && G1=$(gid_of rrxe1 198.18.40.1); then
	check "rrxe1 added again carries a checked exchange" exchange rrxe1 "$G1" $((port + 500))
	rdma link delete rrxe1
else
	_tap_result fail "rrxe1 added again"
fi

# --- the netdev deleted under traffic -------------------------------------------------------
# The netdev's unregistration queues the device's, which cuts the processes' contexts off
# rather than waiting for them (disassociate_ucontext), so `ip link delete` returns with the
# traffic's processes still running. The network stack must keep answering meanwhile.
for r in $(seq "$ROUNDS"); do
	port=$((port + 1))
	if [ "$r" -gt 1 ]; then
		ip link add tdv2 type veth peer name tdv3
		ip link set tdv2 up
		ip link set tdv3 up
		ip addr add 198.18.41.1/24 dev tdv2
	fi
	device_traffic "netdev $r" rrxe2 tdv2 198.18.41.1 "$port" || continue
	ip link delete tdv2 >"$LOG/ipdel" 2>&1 &
	del=$!
	sleep 1
	check "netdev $r: while ip link delete tdv2 runs, the network stack answers (veth add/delete)" \
		bash -c "timeout 30 ip link add tdx0 type veth peer name tdx1 && timeout 30 ip link delete tdx0"
	deleted "netdev $r: ip link delete tdv2 under traffic returns with the processes still running" \
		"$del" "$LOG/ipdel" rrxe2
done

check "rdma link delete rrxe0" rdma link delete rrxe0
ip link delete tdv0 2>/dev/null
ip link delete tdv4 2>/dev/null
check "rmmod rrxe" rmmod rrxe
tap_end
