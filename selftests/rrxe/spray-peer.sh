#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Side B of spray.sh: the ibv_rc_pingpong client of side A's server, the responder of A's
# RC traffic rounds (selftests/rrxe/reliability.py server) and, while they run, a third sender:
# selftests/rrxe/lib/roce_spray.py sprays A's QP (from a foreign address, with foreign P_Keys,
# random bytes; over its path at PSNs far behind and far ahead), then A's UDP port 4791
# (QPNs nothing has, bad ICRCs, runts). Side A counts what arrived.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
. "$here/lib/spray.sh"

LOG=/tmp/spray-client.log
# start_client: the pingpong client against A, retried while A's server is not listening
# (in make check A gets there after its earlier scripts); returns once the client has
# printed both QPs' addresses, with its PID in $cli.
start_client() {
	local end=$((SECONDS + ${SPRAY_WAIT:-1800}))
	while [ $SECONDS -lt $end ]; do
		# Line-buffered: the addresses are wanted while the client runs.
		: >"$LOG"
		stdbuf -oL ibv_rc_pingpong -d rrxe0 -g "$g4" -n "$SPRAY_PP_N" -s 1024 -c -e -p "$SPRAY_PORT" \
			"$RRXE_PEER_IP4" >"$LOG" 2>&1 &
		cli=$!
		while kill -0 "$cli" 2>/dev/null; do
			[[ $(<"$LOG") == *"remote address"* ]] && return 0
			sleep 0.2
		done
		wait "$cli"
		grep -q "Couldn't connect" "$LOG" || return 1
		sleep 1
	done
	return 1
}
# field WHICH NAME: from the client's "local address: ... QPN 0x.., PSN 0x.., ..." lines.
field() {
	sed -n "s/.*$1 address: .*$2 \(0x[0-9a-f]*\),.*/\1/p" "$LOG"
}

tap_begin "a third sender: spray side"
check "modprobe rrxe" modprobe rrxe
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
g4=$(wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4" && gid_index rrxe0 "$RRXE_LOCAL_IP4")
python3 "$here/reliability.py" server rrxe0 "$g4" "$SPRAY_TRAFFIC_PORT" \
	>/tmp/spray-traffic-server.log 2>&1 &
srv=$!
cli=
if start_client; then
	_tap_result ok "pingpong client connected to side A"
	qpn=$(field remote QPN)
	# A expects requests at our first PSN and sends its own from its first PSN.
	rq_psn=$(field local PSN)
	sq_psn=$(field remote PSN)
	echo "# side A's QP $qpn, ePSN $rq_psn, its first PSN $sq_psn"
	t0=$(date +%s.%N)
	check "spray A's live QP: $SPRAY_N packets each from $SPRAY_FOREIGN, with foreign P_Keys, fuzzed, over its path far behind and far ahead" \
		python3 "$here/lib/roce_spray.py" qp "$RRXE_PEER_IP4" "$RRXE_LOCAL_IP4" \
		"$SPRAY_FOREIGN" "$qpn" "$rq_psn" "$sq_psn" "$SPRAY_N" 1
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "# the QP phase took %.1f s\n", b - a }'
	check "the pingpong was still running when that spray ended (its QP was live)" kill -0 "$cli"
	check "spray A's port: $SPRAY_N packets each to QPNs nothing has, with bad ICRCs, runts" \
		python3 "$here/lib/roce_spray.py" port "$RRXE_PEER_IP4" "$RRXE_LOCAL_IP4" \
		"$SPRAY_FOREIGN" "$qpn" "$rq_psn" "$sq_psn" "$SPRAY_N" 2
	check "pingpong client under the spray: exit 0, buffers checked" wait "$cli"
	grep "bytes in" "$LOG" | sed 's/^/# /'
else
	_tap_result fail "pingpong client connected to side A" "$(tail -5 "$LOG")"
fi
# A's traffic rounds end a round after its pingpong server does.
if timeout "${SPRAY_WAIT:-1800}" tail --pid="$srv" -f /dev/null; then
	check "served side A's RC traffic to the end" wait "$srv"
else
	kill "$srv"
	_tap_result fail "served side A's RC traffic to the end" "$(tail -5 /tmp/spray-traffic-server.log)"
fi
check "rdma link delete rrxe0" rdma link delete rrxe0
check "rmmod rrxe" rmmod rrxe
tap_end
