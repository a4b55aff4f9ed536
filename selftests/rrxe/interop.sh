#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Interoperability with rdma_rxe, side A: the verbs clients over the wire on rrxe against
# rdma_rxe servers on side B, then on rdma_rxe against rrxe servers
# (selftests/rrxe/interop-peer.sh).
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
tap_begin "interoperability with rdma_rxe, side A"
subtest "rrxe (A) -> rdma_rxe (B): verbs.sh's clients over the wire" \
	env VERBS_MOD=rrxe VERBS_LOOPBACK=0 "$here/verbs.sh"
subtest "rdma_rxe (A) -> rrxe (B): verbs.sh's clients over the wire" \
	env VERBS_MOD=rdma_rxe VERBS_LOOPBACK=0 "$here/verbs.sh"
tap_end
