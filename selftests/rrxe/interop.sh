#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Interoperability with rdma_rxe, side A: the verbs clients over the wire on rrxe against
# rdma_rxe servers on side B, then on rdma_rxe against rrxe servers
# (selftests/rrxe/interop-peer.sh).
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
rc=0
echo "# === rrxe (A) -> rdma_rxe (B)"
VERBS_MOD=rrxe VERBS_LOOPBACK=0 "$here/verbs.sh" || rc=1
echo "# === rdma_rxe (A) -> rrxe (B)"
VERBS_MOD=rdma_rxe VERBS_LOOPBACK=0 "$here/verbs.sh" || rc=1
exit $rc
