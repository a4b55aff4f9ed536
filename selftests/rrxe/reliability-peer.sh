#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# RC reliability, side B (the responder): serves selftests/rrxe/reliability.py's requests over
# TCP 4794 until side A says bye. TAP output.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
tap_begin "rrxe RC reliability, responder side"
check "modprobe rrxe" modprobe rrxe
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
g4=$(wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4" && gid_index rrxe0 "$RRXE_LOCAL_IP4")
check "IPv4 GID index found ($g4)" test -n "$g4"
# Side A may still be running earlier tests (make check): the server waits for it.
check "served side A to the end" timeout "${RELIABILITY_IDLE:-3000}" \
	python3 "$here/reliability.py" server rrxe0 "$g4" 4794
check "rdma link delete rrxe0" rdma link delete rrxe0
check "rmmod rrxe" rmmod rrxe
tap_end
