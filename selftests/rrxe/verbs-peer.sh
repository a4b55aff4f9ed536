#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of the verbs data-path tests (selftests/rrxe/verbs.sh): an rrxe device over eth0 and a
# control channel (selftests/rrxe/lib/verbs_ctl.py, TCP 4793) through which side A starts each verbs
# server here once it is ready for it. Every server's output and exit status is reported.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"

tap_begin "rrxe verbs data path, server side"
# Side A may still be running earlier tests (make check: foundation.sh, objects.sh): wait.
IDLE=${VERBS_IDLE:-1800}

# VERBS_MOD=rdma_rxe runs the same tests on rdma_rxe's rxe0, for comparison.
MOD=${VERBS_MOD:-rrxe}
DEV=${MOD#rdma_}0
check "modprobe $MOD" modprobe "$MOD"
ip link set eth0 up
check "rdma link add $DEV type ${MOD#rdma_} netdev eth0" rdma link add "$DEV" type "${MOD#rdma_}" netdev eth0
g4=$(wait_for 10 gid_index "$DEV" "$RRXE_LOCAL_IP4" && gid_index "$DEV" "$RRXE_LOCAL_IP4")
g6=$(wait_for 10 gid_index "$DEV" "$RRXE_LOCAL_IP6" && gid_index "$DEV" "$RRXE_LOCAL_IP6")
check "IPv4 GID index found ($g4)" test -n "$g4"
check "IPv6 GID index found ($g6)" test -n "$g6"

res=/tmp/verbs-servers.txt
python3 "$here/lib/verbs_ctl.py" 4793 "$IDLE" "$res" "GID4=$g4" "GID6=$g6" "DEV=$DEV"
check "side A drove the tests to the end" test -s "$res"
while read -r name rc secs; do
	check "server $name exited 0 (${secs}s)" test "$rc" = 0
done <"$res"

check "rdma link delete $DEV" rdma link delete "$DEV"
check "rmmod $MOD" rmmod "$MOD"
tap_end
