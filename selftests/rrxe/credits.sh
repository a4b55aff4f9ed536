#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# End-to-end credits, side A (the sender): selftests/rrxe/credits.py against side B's
# credits-peer.sh, first its rrxe rounds (credits on, off, a QP on an SRQ), then the same
# slow receiver on rdma_rxe. Two TAP streams. By hand:
#   scripts/vm.sh --two --pcap OUT/wire.pcap --cmd selftests/rrxe/credits.sh \
#       --cmd-b selftests/rrxe/credits-peer.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"

modprobe rrxe || exit 1
ip link set eth0 up
rdma link add rrxe0 type rrxe netdev eth0 || exit 1
wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4"
g4=$(gid_index rrxe0 "$RRXE_LOCAL_IP4")
python3 "$here/credits.py" client rrxe0 "${g4:-0}" "$RRXE_PEER_IP4" 4797
rc=$?
python3 "$here/credits.py" client rrxe0 "${g4:-0}" "$RRXE_PEER_IP4" 4797 rxe || rc=1
rdma link delete rrxe0
rmmod rrxe
exit $rc
