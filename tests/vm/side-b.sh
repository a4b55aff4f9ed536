#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Everything VM B runs in the `make check` boot, one TAP stream per script: the foundation
# peer, then the servers of the verbs tests (verbs-peer.sh waits on its control channel
# until side A's verbs.sh connects, after A's own earlier scripts), the ibv_srq_pingpong
# servers of srq.sh's two-VM half (srq-peer.sh), the XRC initiator of xrc.sh's two-VM
# half (xrc-peer.sh, which waits for xrc.sh's single-VM scripts), teardown under traffic
# (teardown.sh: one VM is enough, and B would otherwise idle while side A runs its
# single-VM scripts mw.sh, negative.sh and rings.sh; qp.sh waits for B), the QP that qp.sh's
# wire-path checks aim at (qp-peer.sh), the client and third sender of spray.sh
# (spray-peer.sh), the slow receiver of credits.sh (credits-peer.sh),
# the multicast peer of mcast.sh (mcast-peer.sh), the responder of the RC reliability
# tests (reliability-peer.sh, which likewise waits for reliability.sh), then the NVMe over
# Fabrics target (nvmeof-peer.sh, for side A's nvmeof.sh).
here=$(dirname "$0")
rc=0
for t in foundation-peer.sh verbs-peer.sh srq-peer.sh xrc-peer.sh teardown.sh qp-peer.sh spray-peer.sh credits-peer.sh mcast-peer.sh apm-peer.sh reliability-peer.sh nvmeof-peer.sh; do
	echo "# === $t"
	start=$SECONDS
	"$here/$t" || rc=1
	echo "# === $t: $((SECONDS - start)) s"
done
exit $rc
