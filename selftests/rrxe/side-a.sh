#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Everything VM A runs in the `make check` boot, through the kselftest runner (lib/sides.sh).
# Teardown under traffic needs one VM only and runs on side B (side-b.sh), while this side
# runs MWs, negative tests and rings.
here=$(dirname "$0")
. "$here/lib/sides.sh"
# Side B runs srq-peer.sh and xrc-peer.sh: srq.sh's and xrc.sh's two-VM halves run against
# them.
export RRXE_SRQ_PEER=${RRXE_SRQ_PEER:-1}
export RRXE_XRC_PEER=${RRXE_XRC_PEER:-1}
run_programs foundation.sh objects.sh limits.sh mr.sh kverbs.sh verbs.sh srq.sh xrc.sh mw.sh \
	negative.sh rings.sh qp.sh spray.sh credits.sh mcast.sh apm.sh reliability.sh nvmeof.sh
