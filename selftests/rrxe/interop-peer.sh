#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Interoperability with rdma_rxe, side B: rdma_rxe servers for side A's rrxe clients, then
# rrxe servers for its rdma_rxe clients (selftests/rrxe/interop.sh).
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
tap_begin "interoperability with rdma_rxe, side B"
subtest "rdma_rxe (B) serving rrxe (A)" env VERBS_MOD=rdma_rxe "$here/verbs-peer.sh"
subtest "rrxe (B) serving rdma_rxe (A)" env VERBS_MOD=rrxe "$here/verbs-peer.sh"
tap_end
