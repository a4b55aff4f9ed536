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
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"
. "$here/lib/device.sh"

case ${1:-rrxe} in
rrxe) mod=rrxe dev=rrxe0 ;;
rxe) mod=rdma_rxe dev=rxe0 ;;
*)
	echo "usage: $0 [rrxe|rxe]" >&2
	exit 2
	;;
esac

device_up "$mod" "$dev" || exit 1
if [ -z "$gid" ]; then
	rc=1
else
	RRXE_DEV=$dev RRXE_GID=$gid python3 "$here/negative.py"
	rc=$?
fi
device_down
exit $rc
