#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# UD multicast, side B: serves selftests/rrxe/mcast.py's requests over TCP 4798, on rrxe until
# side A says bye, then on rdma_rxe (both need UDP 4791: one at a time). TAP output.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
. "$here/lib/helper.sh"

export MCAST_VERBS=/tmp/mcast_verbs

# serve MODULE TYPE DEV: a device of MODULE over eth0 serving one client of mcast.py.
serve() {
	check "modprobe $1" modprobe "$1"
	check "rdma link add $3 type $2 netdev eth0" rdma link add "$3" type "$2" netdev eth0
	check "$3: IPv4 GID" wait_for 10 gid_index "$3" "$RRXE_LOCAL_IP4"
	check "$3: IPv6 GID" wait_for 10 gid_index "$3" "$RRXE_LOCAL_IP6"
	# Side A may still be running earlier tests (make check): the server waits for it.
	check "$3: served side A to the end" timeout "${MCAST_IDLE:-3000}" \
		python3 "$here/mcast.py" peer 4798
	check "rdma link delete $3" rdma link delete "$3"
	check "rmmod $1" rmmod "$1"
}

tap_begin "UD multicast, side B"
check "mcast_verbs.c built warning-free (by the kselftest build, else here)" helper_build mcast_verbs
ip link set eth0 up
serve rrxe rrxe rrxe0
serve rdma_rxe rxe rxe0
tap_end
