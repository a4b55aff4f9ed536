#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Everything VM B runs in the debug boot of `make check`, through the kselftest runner
# (lib/sides.sh): the foundation peer, then the single-VM programs that fill the time side
# A spends on its own (teardown under traffic, MWs, rrxe in network namespaces), then the
# peers of side A's pairs. Each peer waits on its control channel until its side-A program
# connects.
here=$(dirname "$0")
. "$here/lib/sides.sh"
# netns.sh lends eth0 to a namespace and deletes it (a physical netdev's way back to
# init_net), then sets eth0 up again as scripts/vm-init.sh did.
export NETNS_LEND=${NETNS_LEND:-eth0}
soak_wire=()
[ "${RRXE_SOAK:-0}" = 1 ] && soak_wire=(spray-peer.sh credits-peer.sh)
run_programs foundation-peer.sh teardown.sh mw.sh netns.sh verbs-peer.sh \
	srq-peer.sh xrc-peer.sh qp-peer.sh "${soak_wire[@]}" mcast-peer.sh apm-peer.sh \
	reliability-peer.sh nvmeof-peer.sh
