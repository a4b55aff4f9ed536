#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Hostile ring contents (rings.py): a process scribbles on the SQ, RQ, SRQ and CQ rings it
# maps from the driver (producer and consumer indices, header fields, malformed WQEs) and
# checks for error completions, bounded work and a device that still works. One rrxe
# device in loopback.
#
#   rings.sh [rrxe|rxe]
#
# rrxe only: rdma_rxe trusts ring memory in ways these rows would turn into kernel faults
# (Documentation/rrxe/uverbs-abi.rst section 10: the raw wr.opcode indexes
# rxe_wr_opcode_info[], an SQ producer above index_mask makes the requester walk the ring
# forever, inline data is read at user offsets), so `rxe` reports one skip and runs nothing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"
. "$here/lib/device.sh"

case ${1:-rrxe} in
rrxe) mod=rrxe dev=rrxe0 ;;
rxe)
	tap_begin "hostile ring contents on rdma_rxe"
	skip "hostile ring contents" "rdma_rxe trusts ring memory (uverbs-abi.rst 10): these rows would fault or hang its kernel"
	tap_end
	exit $?
	;;
*)
	echo "usage: $0 [rrxe|rxe]" >&2
	exit 2
	;;
esac

device_up "$mod" "$dev" || exit 1
if [ -z "$gid" ]; then
	rc=1
else
	RRXE_DEV=$dev RRXE_GID=$gid python3 "$here/rings.py"
	rc=$?
fi
device_down
exit $rc
