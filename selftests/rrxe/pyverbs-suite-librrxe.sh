#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's test suite on rrxe through librrxe, the project's provider (pyverbs-suite.sh
# librrxe; the kselftest runner passes no arguments). make check runs it after the stock
# provider's run in the same boot, whose passes it requires too.
exec "$(dirname "$0")/pyverbs-suite.sh" librrxe "$@"
