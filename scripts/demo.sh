#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside each VM of `make run` (see scripts/run.sh): side b serves, side a connects.
set -euo pipefail

modprobe rrxe
rdma link add rrxe0 type rrxe netdev eth0
echo "== $(hostname): rdma link"
rdma link show
echo "== $(hostname): ibv_devinfo -d rrxe0"
ibv_devinfo -d rrxe0
# The GID table entry of this VM's IPv4 address (RoCEv2 GIDs are IPv4-mapped IPv6).
gid_index() {
	local hex f
	hex=$(printf '%02x%02x:%02x%02x' ${1//./ })
	for f in /sys/class/infiniband/rrxe0/ports/1/gids/*; do
		if grep -q "ffff:$hex" "$f" 2>/dev/null; then
			basename "$f"
			return
		fi
	done
}
gid=$(gid_index "$RRXE_LOCAL_IP4")
echo "== $(hostname): IPv4 GID index $gid"
if [ "$RRXE_VM" = b ]; then
	echo "== $(hostname): ibv_rc_pingpong server (1 MiB messages, data checked)"
	timeout 120 ibv_rc_pingpong -d rrxe0 -g "$gid" -s 1048576 -n 10 -c
	echo "== $(hostname): rping server (rdma_cm)"
	timeout 120 rping -s -a "$RRXE_LOCAL_IP4" -C 5 -v
else
	sleep 3
	echo "== $(hostname): ibv_rc_pingpong client to $RRXE_PEER_IP4"
	timeout 120 ibv_rc_pingpong -d rrxe0 -g "$gid" -s 1048576 -n 10 -c "$RRXE_PEER_IP4"
	sleep 3
	echo "== $(hostname): rping client to $RRXE_PEER_IP4"
	timeout 120 rping -c -a "$RRXE_PEER_IP4" -C 5 -v
fi
echo "== $(hostname): rdma statistic show link rrxe0/1"
rdma statistic show link rrxe0/1
rdma link delete rrxe0
rmmod rrxe
