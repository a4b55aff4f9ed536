#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Negative tests (negative.py) through pyverbs and the unmodified rxe provider, on one
# soft-RoCE device in loopback: rrxe (default) or rdma_rxe for comparison.
#
#   negative.sh [rrxe|rxe]
#
# The device runs over eth0 when there is one, else over a veth pair. rdma_rxe and rrxe
# both bind UDP 4791: the script loads its module, runs, and unloads it again.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/tap.sh"
. "$here/../lib/gid.sh"

case ${1:-rrxe} in
rrxe) mod=rrxe dev=rrxe0 ;;
rxe) mod=rdma_rxe dev=rxe0 ;;
*)
	echo "usage: $0 [rrxe|rxe]" >&2
	exit 2
	;;
esac

if [ -e /sys/class/net/eth0 ]; then
	nd=eth0
	addr=${RRXE_LOCAL_IP4:-}
	ip link set eth0 up
else
	nd=vng0
	addr=198.51.100.1
	ip link add vng0 type veth peer name vng1
	ip addr add "$addr/24" dev vng0
	ip link set vng1 up
	ip link set vng0 up
fi
modprobe "$mod" || exit 1
rdma link add "$dev" type "${mod#rdma_}" netdev "$nd" || exit 1
wait_for 10 gid_index "$dev" "$addr"
gid=$(gid_index "$dev" "$addr")
if [ -z "$gid" ]; then
	echo "# no RoCE v2 GID for $addr on $dev"
	rc=1
else
	RRXE_DEV=$dev RRXE_GID=$gid python3 "$here/negative.py"
	rc=$?
fi
rdma link delete "$dev"
[ "$nd" = vng0 ] && ip link delete vng0
rmmod "$mod"
exit $rc
