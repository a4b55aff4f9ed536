#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of make check's release-kernel boot, through the kselftest runner (lib/sides.sh):
# rdma_rxe and rrxe servers for side A's interoperability clients (interop-peer.sh), the
# peers of spray.sh and credits.sh, then rrxe in network namespaces (netns.sh, one VM: it
# runs while side A runs rdma-core's suite, so at no cost; the debug boot runs it too,
# side-b.sh, under KASAN, lockdep and kmemleak).
here=$(dirname "$0")
. "$here/lib/sides.sh"
# netns.sh lends eth0 to a namespace and deletes it (a physical netdev's way back to
# init_net), then sets eth0 up again as scripts/vm-init.sh did.
export NETNS_LEND=${NETNS_LEND:-eth0}
wire=(spray-peer.sh credits-peer.sh)
[ "${RRXE_SOAK:-0}" = 1 ] && wire=()
run_programs interop-peer.sh "${wire[@]}" netns.sh
