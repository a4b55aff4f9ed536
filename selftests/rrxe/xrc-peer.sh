#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of xrc.sh's two-VM half (the XRC seed, selftests/rrxe/xrc_seed.py): an XRC initiator QP
# on rrxe0 over eth0, driven by side A over the control channel (TCP 4800) until A says
# bye: A's P1 creates an XRC target towards it and dies, A's P2 holds the target through
# OPEN_QP, and this initiator's Sends and RDMA Write land in P2's XRC SRQ. TAP output;
# side A's rows check the traffic. Then an ibv_xsrq_pingpong server through librrxe, the
# project's provider, for side A's client.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"

tap_begin "XRC seed, initiator side"
check "modprobe rrxe" modprobe rrxe
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
g4=$(wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4" && gid_index rrxe0 "$RRXE_LOCAL_IP4")
check "IPv4 GID index found ($g4)" test -n "$g4"
# In make check side A reaches xrc_seed.py after the tests before xrc.sh and xrc.sh's
# single-VM scripts: wait for it, as srq-peer.sh does.
check "served side A's XRC seed to the end (bye, no error)" timeout "${XRC_PEER_WAIT:-3000}" \
	python3 "$here/xrc_seed.py" peer rrxe0 "${g4:-0}" 4800
# Then libibverbs' XRC example, unmodified, through librrxe: the server for xrc.sh's client.
lib=$(cd "$here" && pwd)/provider/librrxe
if [ -f "$lib-rdmav34.so" ]; then
	check "ibv_xsrq_pingpong server through librrxe, for side A's client" \
		timeout 900 env RDMAV_DRIVERS="$lib" ibv_xsrq_pingpong -d rrxe0 -g "${g4:-0}" -n 100 -p 18820
else
	skip "ibv_xsrq_pingpong server through librrxe" "no $lib-rdmav34.so"
fi
check "rdma link delete rrxe0" rdma link delete rrxe0
check "rmmod rrxe" rmmod rrxe
tap_end
