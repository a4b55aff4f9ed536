#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of make check's release-kernel boot: rdma_rxe and rrxe servers for side A's
# interoperability clients (interop-peer.sh), then rrxe in network namespaces (netns.sh, one
# VM: it runs while side A runs rdma-core's suite). The debug kernel runs netns.sh in
# `make soak` (side-b.sh): under make check's debug boot it would cost side A minutes of
# waiting for side B.
here=$(dirname "$0")
rc=0
"$here/interop-peer.sh" || rc=1
echo "# === netns.sh"
start=$SECONDS
"$here/netns.sh" || rc=1
echo "# === netns.sh: $((SECONDS - start)) s"
exit $rc
