#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# TX and loopback of the wire path, side A (side B runs net-echo-peer.sh). Needs a test build
# of the module, `make module RRXE_WIRE_ECHO=1`, whose receive path reflects the peer's good
# packets back over the wire (transmit) and to itself (loopback); see glue/net.rs, mod echo.
set -u
. "$(dirname "$0")/../lib/tap.sh"

tap_begin "rrxe net echo"
closed_line() { dmesg | grep 'rrxe: RoCEv2 UDP port 4791 closed' | tail -1; }
sync_server() {
	python3 - <<'PY'
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 4792))
s.listen(1)
s.settimeout(120)
for _ in range(2):
    c, _ = s.accept()
    c.close()
PY
}

check "modprobe rrxe" modprobe rrxe
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
check "peer sent its packets and saw the echoes" sync_server
check "rdma link delete rrxe0" rdma link delete rrxe0
line=$(closed_line)
echo "# $line"
dmesg | grep 'wire echo' | sed 's/^/# /'
check "2 echoes, each transmitted and looped back without error" \
	test "$(dmesg | grep -c 'wire echo: transmit Ok(()), loopback Ok(())')" = 2
check "counters: rx 4 (2 from the peer, 2 looped back, ICRCs good), tx 4, no errors" \
	bash -c "grep -q 'rx 4 (bad icrc 0, truncated 0, malformed 0, nomem 0, no device 0), tx 4 (errors 0)' <<<'$line'"
check "rmmod rrxe" rmmod rrxe
tap_end
