#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Everything VM A runs in the debug boot of `make check`, through the kselftest runner
# (lib/sides.sh). The single-VM programs come first, while side B runs its own (teardown
# under traffic, MWs); then the pairs, each with its -peer.sh on side B.
#
# The wire proofs of credits and of a third sender (credits.sh, spray.sh) run in make
# check's release boot (release-a.sh): their rules are the transport's, proven on the host,
# and their kernel paths are those verbs.sh and reliability.sh drive here; their 350 s of
# debug TCG put make check past CI's limit in a slow hour. make soak runs them here too.
here=$(dirname "$0")
. "$here/lib/sides.sh"
# Side B runs srq-peer.sh and xrc-peer.sh: srq.sh's and xrc.sh's two-VM halves run against
# them.
export RRXE_SRQ_PEER=${RRXE_SRQ_PEER:-1}
export RRXE_XRC_PEER=${RRXE_XRC_PEER:-1}
soak_only=()
[ "${RRXE_SOAK:-0}" = 1 ] && soak_only=(spray.sh credits.sh)
run_programs foundation.sh objects.sh limits.sh mr.sh kverbs.sh negative.sh rings.sh provider.sh \
	verbs.sh srq.sh xrc.sh qp.sh "${soak_only[@]}" mcast.sh apm.sh reliability.sh nvmeof.sh
