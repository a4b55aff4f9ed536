#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of the foundation boot: an rrxe device on the far end of the wire, with its own
# addresses in its GID table, and the wire itself working.
set -u
. "$(dirname "$0")/lib/tap.sh"
tap_need_peer

tap_begin "rrxe foundation, peer side"
SYS=/sys/class/infiniband

check "modprobe rrxe" modprobe rrxe
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
check "GID table holds $RRXE_LOCAL_IP4" bash -c "ibv_devinfo -v -d rrxe0 | grep -q '::ffff:$RRXE_LOCAL_IP4, RoCE v2'"
check "GID table holds $RRXE_LOCAL_IP6" bash -c "ibv_devinfo -v -d rrxe0 | grep -q '$RRXE_LOCAL_IP6, RoCE v2'"
check "the wire reaches the peer over IPv4" ping -c 2 -W 5 "$RRXE_PEER_IP4"
check "the wire reaches the peer over IPv6" ping -6 -c 2 -W 5 "$RRXE_PEER_IP6"
check "rmmod rrxe" rmmod rrxe
check "rrxe0 is gone" test ! -e "$SYS/rrxe0"

tap_end
