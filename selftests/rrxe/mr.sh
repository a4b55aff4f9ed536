#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# User MR memory access (mr.py) on an rrxe device over eth0, two QPs in loopback.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"

modprobe rrxe || exit 1
ip link set eth0 up
rdma link add rrxe0 type rrxe netdev eth0 || exit 1
wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4"
RRXE_GID=$(gid_index rrxe0 "$RRXE_LOCAL_IP4") python3 "$here/mr.py"
rc=$?
rdma link delete rrxe0
rmmod rrxe
exit $rc
