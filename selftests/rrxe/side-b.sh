#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Everything VM B runs in the `make check` boot, through the kselftest runner
# (lib/sides.sh): the foundation
# peer; teardown under traffic (teardown.sh: one VM is enough, and it fills the time B
# would otherwise idle while side A runs foundation.sh, longer than foundation-peer.sh, and
# its single-VM scripts up to verbs.sh, whose control channel waits for B); in `make soak`
# also rrxe in network namespaces (netns.sh, one VM too; make check runs it in the release
# boot, release-b.sh: here it kept side A waiting 4 to 9 minutes); the servers of
# the verbs tests (verbs-peer.sh waits on its control channel until side A's verbs.sh
# connects), the ibv_srq_pingpong servers of srq.sh's two-VM half (srq-peer.sh), the XRC
# initiator of xrc.sh's two-VM half (xrc-peer.sh, which waits for xrc.sh's single-VM
# scripts), the QP that qp.sh's wire-path checks aim at (qp-peer.sh), the client and third
# sender of spray.sh (spray-peer.sh), the slow receiver of credits.sh (credits-peer.sh),
# the multicast peer of mcast.sh (mcast-peer.sh), the responder of the RC reliability
# tests (reliability-peer.sh, which likewise waits for reliability.sh), then the NVMe over
# Fabrics target (nvmeof-peer.sh, for side A's nvmeof.sh).
here=$(dirname "$0")
. "$here/lib/sides.sh"
soak_only=()
[ "${RRXE_SOAK:-0}" = 1 ] && soak_only=(netns.sh)
run_programs foundation-peer.sh teardown.sh "${soak_only[@]}" verbs-peer.sh srq-peer.sh \
	xrc-peer.sh qp-peer.sh spray-peer.sh credits-peer.sh mcast-peer.sh apm-peer.sh \
	reliability-peer.sh nvmeof-peer.sh
