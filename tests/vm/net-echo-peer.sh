#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of net-echo.sh: send good RoCEv2 packets to side A and check the packets its
# transmit() sends back (captured on eth0): ICRC, headers, payload.
set -u
. "$(dirname "$0")/../lib/tap.sh"
lib="$(dirname "$0")/../lib"
send() { python3 "$lib/roce_send.py" "$@"; }
sync_a() { python3 -c "import socket,sys; socket.create_connection((sys.argv[1], 4792), 2).close()" "$RRXE_PEER_IP4"; }
out=/tmp/echo.txt

tap_begin "rrxe net echo, peer side"
python3 "$lib/roce_sniff.py" eth0 0xE0E0 2 30 "$out" &
sniffer=$!
check "sniffer ready" wait_for 60 test -e "$out.ready"
check "side A is ready" wait_for 120 sync_a
check "send a good packet over IPv4" send good "$RRXE_PEER_IP4" "$RRXE_LOCAL_IP4"
check "send a good packet over IPv6" send good "$RRXE_PEER_IP6" "$RRXE_LOCAL_IP6"
wait $sniffer
sed 's/^/# /' "$out"
v4() { grep "^v4 $RRXE_PEER_IP4 $RRXE_LOCAL_IP4 " "$out"; }
v6() { grep "^v6 $RRXE_PEER_IP6 $RRXE_LOCAL_IP6 " "$out"; }
has() { "$1" | grep -q "$2"; }
check "IPv4 echo received from A" v4
check "IPv4 echo: ICRC verifies" has v4 icrc=ok
check "IPv4 echo: payload intact" has v4 payload=ok
check "IPv4 echo: TTL 64, DF, header checksum" has v4 'ttl=64 df=1 ipcsum=ok'
check "IPv6 echo received from A" v6
check "IPv6 echo: ICRC verifies" has v6 icrc=ok
check "IPv6 echo: payload intact, hop limit 64" has v6 'payload=ok ttl=64'
check "tell side A we are done" wait_for 20 sync_a
tap_end
