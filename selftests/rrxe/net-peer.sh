#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of the wire tests (net.sh): once side A has its port open, send it hand-made
# RoCEv2 packets (selftests/rrxe/lib/roce_send.py), then tell it we are done.
set -u
. "$(dirname "$0")/lib/tap.sh"
tap_need_peer
send() { python3 "$(dirname "$0")/lib/roce_send.py" "$@"; }
sync_a() { python3 -c "import socket,sys; socket.create_connection((sys.argv[1], 4792), 2).close()" "$RRXE_PEER_IP4"; }

tap_begin "rrxe net, peer side"
check "side A is ready" wait_for 120 sync_a
check "send garbage over IPv4" send garbage "$RRXE_PEER_IP4"
check "send a runt (3-byte ICRC) over IPv4" send short "$RRXE_PEER_IP4"
check "send a bad ICRC over IPv4" send bad-icrc "$RRXE_PEER_IP4"
check "send a good packet over IPv4" send good "$RRXE_PEER_IP4" "$RRXE_LOCAL_IP4"
check "send garbage over IPv6" send garbage "$RRXE_PEER_IP6"
check "send a bad ICRC over IPv6" send bad-icrc "$RRXE_PEER_IP6"
check "send a good packet over IPv6" send good "$RRXE_PEER_IP6" "$RRXE_LOCAL_IP6"
sleep 1
check "tell side A we are done" wait_for 20 sync_a
tap_end
