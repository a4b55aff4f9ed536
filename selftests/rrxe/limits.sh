#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Object limits (selftests/rrxe/limits.py): rrxe loaded with low max_pd ... max_ah parameters
# reports and enforces them; a value above rrxe's capacity is clamped to it.
set -u
here=$(dirname "$0")
limits="pd=5 cq=5 qp=5 srq=3 mr=5 mw=4 ah=4"
# shellcheck disable=SC2046,SC2086 - one max_KIND=N argument per word
modprobe rrxe $(printf 'max_%s ' $limits) || exit 1
ip link set eth0 up
rdma link add rrxe0 type rrxe netdev eth0 || exit 1
RRXE_LIMITS=$limits RRXE_NETDEV=eth0 python3 "$here/limits.py"
rc=$?
rdma link delete rrxe0 2>/dev/null
rmmod rrxe
exit $rc
