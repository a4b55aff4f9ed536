#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# End-to-end credits, side A (the sender): selftests/rrxe/credits.py against side B's
# credits-peer.sh, first its rrxe rounds (credits on, off, a QP on an SRQ), then credits on
# with B's server through librrxe, then the same slow receiver on rdma_rxe, each a subtest of
# one KTAP stream. By hand:
#   scripts/vm.sh --two --pcap OUT/wire.pcap --cmd selftests/rrxe/credits.sh \
#       --cmd-b selftests/rrxe/credits-peer.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"

tap_begin "end-to-end credits, sender side"
check "modprobe rrxe" modprobe rrxe
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
check "rrxe0: IPv4 GID" wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4"
g4=$(gid_index rrxe0 "$RRXE_LOCAL_IP4")
subtest "credits.py: side B's rrxe (credits on, off, a QP on an SRQ)" \
	python3 "$here/credits.py" client rrxe0 "${g4:-0}" "$RRXE_PEER_IP4" 4797
# Side B serves this round only when librrxe is there (the same tree on both VMs).
if [ -f "$here/provider/librrxe-rdmav34.so" ]; then
	subtest "credits.py: side B's rrxe through librrxe (receive doorbells)" \
		python3 "$here/credits.py" client rrxe0 "${g4:-0}" "$RRXE_PEER_IP4" 4797 librrxe
else
	skip "credits.py through librrxe" "no $here/provider/librrxe-rdmav34.so (scripts/kselftest.sh builds it)"
fi
subtest "credits.py: side B's rdma_rxe (no credits advertised)" \
	python3 "$here/credits.py" client rrxe0 "${g4:-0}" "$RRXE_PEER_IP4" 4797 rxe
check "rdma link delete rrxe0" rdma link delete rrxe0
check "rmmod rrxe" rmmod rrxe
tap_end
