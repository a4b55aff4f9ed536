#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of srq.sh: ibv_srq_pingpong servers for side A's two-VM runs.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
. "$here/lib/srq.sh"

tap_begin "ibv_srq_pingpong servers, peer side"
check "modprobe rrxe" modprobe rrxe
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4"
G=$(gid_index rrxe0 "$RRXE_LOCAL_IP4")
# In make check side A reaches its client only after the tests before srq.sh and srq.sh's
# single-VM half, which took 25 minutes on a host running at half speed: wait for it, as
# the other servers do.
# 8 QPs on completion events, not 16 polling: see srq.sh.
check "server: 8 QPs on one SRQ, events" timeout "${SRQ_PEER_WAIT:-3000}" \
	ibv_srq_pingpong -d rrxe0 -g "$G" -n "$SRQ_WIRE_N" -q 8 -p 18610 -c -e
check "server: 4 KiB messages, events" \
	timeout 600 ibv_srq_pingpong -d rrxe0 -g "$G" -n 200 -q 8 -s 4096 -e -p 18611
rdma link delete rrxe0
check "rmmod rrxe" rmmod rrxe
tap_end
