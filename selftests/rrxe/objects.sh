#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Verbs objects (PD, CQ) through unmodified rdma-core, on an rrxe device over eth0.
set -u
modprobe rrxe || exit 1
ip link set eth0 up
rdma link add rrxe0 type rrxe netdev eth0 || exit 1
python3 "$(dirname "$0")/objects.py"
rc=$?
rdma link delete rrxe0
rmmod rrxe
exit $rc
