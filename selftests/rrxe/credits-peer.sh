#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# End-to-end credits, side B (the slow receiver): serves selftests/rrxe/credits.py's rounds over
# TCP 4797, on rrxe until side A says bye, on rrxe again through librrxe (when the kselftest
# install has it), then on rdma_rxe (both need UDP 4791: one at a time). TAP output.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
# load_driver() appends the provider suffix; credits.sh looks for the same file.
lib=$(cd "$here" && pwd)/provider/librrxe

# serve MODULE TYPE DEV: a device of MODULE over eth0 serving one client of credits.py.
serve() {
	local g4
	check "modprobe $1" modprobe "$1"
	check "rdma link add $3 type $2 netdev eth0" rdma link add "$3" type "$2" netdev eth0
	g4=$(wait_for 10 gid_index "$3" "$RRXE_LOCAL_IP4" && gid_index "$3" "$RRXE_LOCAL_IP4")
	check "$3: IPv4 GID index found ($g4)" test -n "$g4"
	# Side A may still be running earlier tests (make check): the server waits for it.
	check "$3: served side A to the end" timeout "${CREDITS_IDLE:-3000}" \
		python3 "$here/credits.py" server "$3" "${g4:-0}" 4797
	if [ "$1" = rrxe ] && [ -f "$lib-rdmav34.so" ]; then
		check "$3 through librrxe: served side A to the end" timeout "${CREDITS_IDLE:-3000}" \
			env RDMAV_DRIVERS="$lib" python3 "$here/credits.py" server "$3" "${g4:-0}" 4797
	fi
	check "rdma link delete $3" rdma link delete "$3"
	check "rmmod $1" rmmod "$1"
}

tap_begin "end-to-end credits, receiver side"
ip link set eth0 up
serve rrxe rrxe rrxe0
serve rdma_rxe rxe rxe0
tap_end
