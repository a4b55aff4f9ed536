#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side A of make check's release-kernel boot, through the kselftest runner (lib/sides.sh):
# interoperability with rdma_rxe (both directions, with interop-peer.sh on side B), the wire
# proofs of a third sender and of end-to-end credits (spray.sh, credits.sh; the debug boot
# runs them in make soak, side-a.sh says why), then rdma-core's own test suite on rrxe0
# over eth0 (so its rdma_cm tests run: the device has a parent with a net interface).
here=$(dirname "$0")
. "$here/lib/sides.sh"
wire=(spray.sh credits.sh)
[ "${RRXE_SOAK:-0}" = 1 ] && wire=()
run_programs interop.sh "${wire[@]}" pyverbs-suite.sh pyverbs-suite-librrxe.sh
