#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side A of make check's release-kernel boot: interoperability with rdma_rxe (both
# directions, with tests/vm/interop-peer.sh on side B), then rdma-core's own test suite on
# rrxe0 over eth0 (so its rdma_cm tests run: the device has a parent with a net interface).
here=$(dirname "$0")
rc=0
"$here/interop.sh" || rc=1
echo "# === pyverbs-suite.sh rrxe"
"$here/pyverbs-suite.sh" rrxe || rc=1
exit $rc
