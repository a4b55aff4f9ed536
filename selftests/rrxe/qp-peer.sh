#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of qp.sh: learns the number and expected PSN of side A's QP over TCP port 4796,
# then sends it three RC Sends (selftests/rrxe/lib/roce_send.py): one with another P_Key, one from
# an address that is not its path's, and a good one, whose payload side A checks; then,
# over the path with the right P_Key, forged requests with plausible PSNs and a key A's QP
# never gave out: an RDMA Write ahead of the ePSN, the good Send again (now a duplicate),
# and an RDMA Write at the ePSN, which must break the connection.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
send() { python3 "$here/lib/roce_send.py" send "$RRXE_PEER_IP4" "$@"; }
write() { python3 "$here/lib/roce_send.py" write "$RRXE_PEER_IP4" "$@"; }
# An R_Key side A's QP never gave out (rrxe's key index 0xD1E1EC is far beyond any MR).
FORGED_RKEY=0xd1e1ec20

tap_begin "QP context, peer side"
# In make check side A gets to qp.py after its earlier scripts: wait for it.
exec 3<&-
for _ in $(seq "${QP_PEER_WAIT:-1800}"); do
	exec 3<>"/dev/tcp/$RRXE_PEER_IP4/4796" 2>/dev/null && break
	sleep 1
done
qp=
read -r -t 60 qp psn <&3
check "side A sent its QP number ($qp) and ePSN ($psn)" test -n "$qp"
check "a Send with P_Key 0x8001" send "$RRXE_LOCAL_IP4" "$qp" "$psn" 0x8001 bad-pkey
check "a Send from 198.18.0.99, not the QP's path" send 198.18.0.99 "$qp" "$psn" 0xffff bad-path
sleep 0.5
check "a good Send" send "$RRXE_LOCAL_IP4" "$qp" "$psn" 0xffff 'rrxe-qp!'
sleep 0.5
me=$RRXE_LOCAL_IP4
check "a forged RDMA Write at ePSN + 4" write "$me" "$qp" $((psn + 5)) 0xffff $FORGED_RKEY forged-a
sleep 0.5
check "the good Send again, a duplicate" send "$me" "$qp" "$psn" 0xffff 'rrxe-qp?'
sleep 0.5
check "a forged RDMA Write at the ePSN" write "$me" "$qp" $((psn + 1)) 0xffff $FORGED_RKEY forged-b
sleep 0.5
echo done >&3
exec 3<&-
tap_end
