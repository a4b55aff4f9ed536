#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The QP context (qp.py) on an rrxe device over eth0. In make check side B runs qp-peer.sh,
# which sends the hand-made packets of the path and P_Key checks:
#   scripts/vm.sh --two --cmd selftests/rrxe/qp.sh --cmd-b selftests/rrxe/qp-peer.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"

modprobe rrxe || exit 1
ip link set eth0 up
rdma link add rrxe0 type rrxe netdev eth0 || exit 1
wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4"
RRXE_GID=$(gid_index rrxe0 "$RRXE_LOCAL_IP4") python3 "$here/qp.py"
rc=$?
rdma link delete rrxe0
rmmod rrxe
exit $rc
