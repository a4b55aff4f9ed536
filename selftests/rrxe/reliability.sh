#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# RC reliability, side A (the requester): selftests/rrxe/reliability.py against side B's
# reliability-peer.sh, with tc netem on both VMs' eth0. TAP output.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
modprobe rrxe || exit 1
ip link set eth0 up
rdma link add rrxe0 type rrxe netdev eth0 || exit 1
for _ in $(seq 50); do
	g4=$(gid_index rrxe0 "$RRXE_LOCAL_IP4") && break
	sleep 0.2
done
python3 "$here/reliability.py" client rrxe0 "${g4:-0}" "$RRXE_PEER_IP4" 4794
rc=$?
rdma link delete rrxe0
rmmod rrxe
exit $rc
