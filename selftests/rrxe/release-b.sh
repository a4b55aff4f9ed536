#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of make check's release-kernel boot, through the kselftest runner (lib/sides.sh):
# rdma_rxe and rrxe servers for side A's interoperability clients (interop-peer.sh), the
# peers of spray.sh and credits.sh, then rrxe in network namespaces (netns.sh, one VM: it
# runs while side A runs rdma-core's suite, so at no cost; the debug boot runs it too,
# side-b.sh, under KASAN, lockdep and kmemleak).
here=$(dirname "$0")
. "$here/lib/sides.sh"
wire=(spray-peer.sh credits-peer.sh)
[ "${RRXE_SOAK:-0}" = 1 ] && wire=()
run_programs interop-peer.sh "${wire[@]}" netns.sh
