#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside each VM of `make run` (see scripts/run.sh).
set -euo pipefail

modprobe rrxe
rdma link add rrxe0 type rrxe netdev eth0
echo "== $(hostname): rdma link"
rdma link show
echo "== $(hostname): ibv_devices"
ibv_devices
echo "== $(hostname): ibv_devinfo -d rrxe0"
ibv_devinfo -d rrxe0
echo "== $(hostname): GIDs of rrxe0 (RoCEv2, from eth0's addresses)"
ibv_devinfo -v -d rrxe0 | grep 'GID\['
rdma link delete rrxe0
rmmod rrxe
