#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# XRC through the raw uverbs write commands and the rings they map, on one rrxe device in
# loopback: XRC domains, XRC SRQs, XRC target QPs that outlive the process that created
# them and the errnos of their misuse (xrc.py); Sends, Writes and Reads from an XRC
# initiator into the XRC SRQs they name, and the NAKs of SRQs and keys a target must refuse
# (xrc_data.py). Runs as root in the VM.
#
#   xrc.sh [rrxe|rxe]
#
# rdma_rxe has no XRC (no alloc_xrcd, no IB_DEVICE_XRC): with `rxe` the script reports
# one skip and loads nothing. The device runs over eth0 when there is one, else over a
# veth pair.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"
. "$here/lib/device.sh"

case ${1:-rrxe} in
rrxe) mod=rrxe dev=rrxe0 ;;
rxe)
	tap_begin "XRC through raw uverbs commands on rxe0"
	skip "XRC domains, SRQs and target QPs" "rdma_rxe implements no XRC (no alloc_xrcd, IB_DEVICE_XRC unset)"
	tap_end
	exit $?
	;;
*)
	echo "usage: $0 [rrxe|rxe]" >&2
	exit 2
	;;
esac

xsrq_client() {
	local i out
	for i in $(seq 60); do
		out=$(RDMAV_DRIVERS=$lib timeout 300 ibv_xsrq_pingpong -d "$dev" -g "$gid" -n 100 \
			-p 18820 "$RRXE_PEER_IP4" 2>&1) && { tail -n 3 <<<"$out"; return 0; }
		grep -q "Couldn't connect" <<<"$out" || { echo "$out"; return 1; }
		sleep 2
	done
	echo "$out"
	return 1
}

tap_begin "XRC on $dev"
check "$mod: $dev up (over eth0, else a veth pair)" \
	device_up "$mod" "$dev"
if check "$dev has a RoCE v2 GID" test -n "${gid:-}"; then
	export RRXE_DEV=$dev RRXE_GID=$gid
	subtest "xrc.py: domains, SRQs, target QPs and their misuse" python3 "$here/xrc.py"
	subtest "xrc_data.py: traffic into XRC SRQs, and the NAKs" python3 "$here/xrc_data.py"
	# Two VMs (the peer runs xrc-peer.sh): a target outliving its creator receives from the
	# peer's initiator; one skip unless RRXE_XRC_PEER (else RRXE_SRQ_PEER) is 1.
	subtest "xrc_seed.py: the seed's scenario against side B" python3 "$here/xrc_seed.py" a
	# libibverbs' XRC example, unmodified, through librrxe against side B's server (which
	# starts once the seed is over: connection refusals are retried).
	lib=$here/provider/librrxe
	if [ "${RRXE_XRC_PEER:-${RRXE_SRQ_PEER:-}}" != 1 ]; then
		skip "two VMs: ibv_xsrq_pingpong through librrxe" "RRXE_XRC_PEER is not 1"
	elif [ ! -f "$lib-rdmav34.so" ]; then
		skip "two VMs: ibv_xsrq_pingpong through librrxe" "no $lib-rdmav34.so"
	else
		check "two VMs: ibv_xsrq_pingpong -n 100 through librrxe, client of side B's server" \
			xsrq_client
	fi
fi
device_down
tap_end
