#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# UD multicast, side A: selftests/rrxe/mcast.py against side B's mcast-peer.sh, first rrxe on
# both sides, then B on rdma_rxe (mckey both ways), each a subtest of one KTAP stream. By hand:
#   scripts/vm.sh --two --cmd selftests/rrxe/mcast.sh --cmd-b selftests/rrxe/mcast-peer.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
. "$here/lib/helper.sh"

# The verbs half's tool (ibv_attach_mcast), selftests/rrxe/lib/helper.sh.
export MCAST_VERBS=/tmp/mcast_verbs
tap_begin "UD multicast, side A"
check "mcast_verbs.c built warning-free (by the kselftest build, else here)" helper_build mcast_verbs
check "modprobe rrxe" modprobe rrxe
ip link set eth0 up
check "rdma link add rrxe0" rdma link add rrxe0 type rrxe netdev eth0
check "rrxe0: IPv4 GID" wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4"
check "rrxe0: IPv6 GID" wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP6"
# The last check deletes rrxe0 (a device going away with a QP attached).
subtest "mcast.py: rrxe on both sides" python3 "$here/mcast.py" client rrxe0 "$RRXE_PEER_IP4" 4798
check "rrxe0 again" rdma link add rrxe0 type rrxe netdev eth0
check "rrxe0: IPv4 GID again" wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4"
subtest "mcast.py: side B on rdma_rxe" \
	python3 "$here/mcast.py" client rrxe0 "$RRXE_PEER_IP4" 4798 rxe
check "rdma link delete rrxe0" rdma link delete rrxe0
check "rmmod rrxe" rmmod rrxe
tap_end
