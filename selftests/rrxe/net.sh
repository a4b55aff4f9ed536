#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The RoCEv2 wire in the kernel glue (glue/net.rs), side A of a two-VM boot (side B runs
# net-peer.sh): the UDP port 4791 opens with the first rrxe device and closes with the last,
# devices share it, rdma_rxe holding it makes rdma link add fail with EADDRINUSE, and hand-made
# packets from the peer (garbage, truncated, bad ICRC, good) are counted, not crashed on.
set -u
. "$(dirname "$0")/lib/tap.sh"
tap_need_peer

tap_begin "rrxe net"

SYS=/sys/class/infiniband
SYNC_PORT=4792

# Sockets bound to 4791 (0x12B7) in /proc/net/udp{,6}.
socks() { awk 'NR > 1 && $2 ~ /:12B7$/' /proc/net/udp /proc/net/udp6 2>/dev/null | wc -l; }
socks4() { awk 'NR > 1 && $2 ~ /:12B7$/' /proc/net/udp | wc -l; }
socks6() { awk 'NR > 1 && $2 ~ /:12B7$/' /proc/net/udp6 | wc -l; }
port_open() { [ "$(socks)" -gt 0 ]; }
port_closed() { [ "$(socks)" -eq 0 ]; }
no_dev() { [ ! -e "$SYS/$1" ]; }
# The counters rrxe prints when it closes the port (the last line of its kind).
closed_line() { dmesg | grep 'rrxe: RoCEv2 UDP port 4791 closed' | tail -1; }
# Serves two TCP connections from the peer: "are you ready" and "I am done".
sync_server() {
	python3 - "$SYNC_PORT" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(1)
s.settimeout(120)
for _ in range(2):
    c, _ = s.accept()
    c.close()
PY
}

modprobe -r rdma_rxe 2>/dev/null
check "modprobe rrxe" modprobe rrxe
check "no socket on 4791 before any device" port_closed

# --- first device opens the port --------------------------------------------------------
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
check "UDP 4791 open over IPv4 (/proc/net/udp)" test "$(socks4)" -eq 1
check "UDP 4791 open over IPv6 (/proc/net/udp6)" test "$(socks6)" -eq 1

# --- packets from the peer ---------------------------------------------------------------
# The peer sends garbage, truncated, bad-ICRC and good packets to 4791 between the two sync
# connections; the kernel must survive them, and the counters printed when the port closes
# must account for them.
check "peer sent its packets" sync_server
sleep 1
check "rrxe0 still there after the peer's packets" test -d "$SYS/rrxe0"

# --- a second device shares the port -----------------------------------------------------
ip link add vn0 type veth peer name vn1
ip link set vn0 up
ip link set vn1 up
check "second device rrxe1 over veth vn0" rdma link add rrxe1 type rrxe netdev vn0
check "still one socket per family on 4791" test "$(socks)" -eq 2
check "rdma link delete rrxe0" rdma link delete rrxe0
check "port stays open while rrxe1 exists" port_open
check "rdma link delete rrxe1" rdma link delete rrxe1
check "port closed after the last device" wait_for 5 port_closed
line=$(closed_line)
echo "# $line"
check "closing logs the wire counters" test -n "$line"
rx() { sed -n "s/.*rx \([0-9]*\) (bad icrc \([0-9]*\), truncated \([0-9]*\), malformed \([0-9]*\).*/\\$1/p" <<<"$line"; }
check "peer's 2 good packets (IPv4, IPv6) received" test "$(rx 1)" = 2
check "peer's 2 bad-ICRC packets counted" test "$(rx 2)" = 2
check "peer's 3 runt packets (garbage, short ICRC, garbage over IPv6) counted as truncated" \
	test "$(rx 3)" = 3
check "nothing malformed" test "$(rx 4)" = 0

# --- lifetime: the netdev going away and rmmod release the port ----------------------------
check "rdma link add rrxe1 over vn0 again" rdma link add rrxe1 type rrxe netdev vn0
check "port open again" port_open
ip link del vn0
check "deleting the netdev removes rrxe1" wait_for 10 no_dev rrxe1
check "... and closes the port" wait_for 5 port_closed
check "rdma link add rrxe0 again" rdma link add rrxe0 type rrxe netdev eth0
check "rmmod rrxe with a device present" rmmod rrxe
check "rmmod closed the port" port_closed

# --- rdma_rxe holds the port -----------------------------------------------------------------
if modprobe rdma_rxe 2>/dev/null; then
	check "rdma_rxe has 4791 open" port_open
	modprobe rrxe
	before=$(dmesg | wc -l)
	rdma link add rrxe0 type rrxe netdev eth0 >/tmp/net-add.log 2>&1
	rc=$?
	check "rdma link add fails while rdma_rxe holds 4791" test "$rc" -ne 0
	check "rdma reports EADDRINUSE" grep -qi 'address already in use' /tmp/net-add.log
	check "dmesg names the netdev and EADDRINUSE" bash -c \
		"dmesg | tail -n +$((before + 1)) | grep -q 'rrxe: eth0: UDP port 4791 (RoCEv2) is in use.*EADDRINUSE'"
	check "no rrxe0 left behind" no_dev rrxe0
	check "rdma_rxe still has its port" port_open
	check "rmmod rdma_rxe" rmmod rdma_rxe
	check "rdma link add works after rmmod rdma_rxe" rdma link add rrxe0 type rrxe netdev eth0
	check_fails "modprobe rdma_rxe fails while rrxe0 holds 4791" modprobe rdma_rxe
	check "rdma link delete rrxe0" rdma link delete rrxe0
	check "rmmod rrxe" rmmod rrxe
else
	skip "rdma_rxe holds 4791" "rdma_rxe module not available"
fi

tap_end
