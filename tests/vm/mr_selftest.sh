#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# MR memory access (copies across pages, iova offsets, atomics) through the in-kernel
# self-test: needs rrxe.ko built with `make module RRXE_SELFTEST=1`.
set -u
modprobe rrxe || exit 1
ip link set eth0 up
rdma link add rrxe0 type rrxe netdev eth0 || exit 1
python3 "$(dirname "$0")/mr_selftest.py"
rc=$?
dmesg | grep "MR self-test" | sed 's/^/# /'
rdma link delete rrxe0
rmmod rrxe
exit $rc
