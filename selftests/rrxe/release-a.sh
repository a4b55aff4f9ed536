#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side A of make check's release-kernel boot, through the kselftest runner (lib/sides.sh):
# interoperability with rdma_rxe (both directions, with interop-peer.sh on side B), then
# rdma-core's own test suite on rrxe0 over eth0 (so its rdma_cm tests run: the device has a
# parent with a net interface).
here=$(dirname "$0")
. "$here/lib/sides.sh"
run_programs interop.sh pyverbs-suite.sh
