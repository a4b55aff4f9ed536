#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A third sender on the wire (side A, the victim): an ibv_rc_pingpong server on rrxe0 with
# side B's client (spray-peer.sh) and, beside it, rounds of RC Sends, RDMA Writes, RDMA
# Reads and fetch-and-adds with verified data (selftests/rrxe/reliability.py traffic: A requests,
# B's server responds), while B also sprays selftests/rrxe/lib/roce_spray.py's packets at the
# pingpong's QP (from a foreign address, with foreign P_Keys, random bytes; over its own
# path at PSNs far behind and far ahead) and at port 4791 (QPNs nothing has, bad ICRCs,
# runts). Both must finish with their data checked, every packet of the drop classes must
# be dropped and counted exactly once, in the counter its class names (IBA 9.6.1.1 path,
# 10.9.3 P_Key, A17.4 ICRC), and the ones over the path must be taken by the PSN rules
# (9.7.5.1 duplicates and out-of-sequence requests, 9.7.6.1.2 ghost responses), none of
# them dropped before; the harness checks the kernel log (KASAN, lockdep, kmemleak).
#   scripts/vm.sh --two --cmd selftests/rrxe/spray.sh --cmd-b selftests/rrxe/spray-peer.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
. "$here/lib/spray.sh"

HW=/sys/class/infiniband/rrxe0/ports/1/hw_counters
# Every counter a received packet can be dropped in before a QP acts on it.
DROPS="rcvd_no_qp rcvd_malformed wire_icrc_errors wire_truncated wire_malformed wire_no_device
rcvd_wrong_path rcvd_pkey_violations rcvd_wrong_transport rcvd_qp_not_ready"

# Bash builtins only: under TCG every exec costs 150 ms (1.5 s on the debug kernel).
declare -A BEFORE
snapshot() { # every counter into BEFORE
	local f v
	for f in "$HW"/*; do
		read -r v <"$f"
		BEFORE[${f##*/}]=$v
	done
}
delta() { # NAME: its change since the snapshot
	local a
	read -r a <"$HW/$1"
	echo $((a - ${BEFORE[$1]}))
}
drops() { # the change of all of $DROPS together
	local n a sum=0
	for n in $DROPS; do
		read -r a <"$HW/$n"
		sum=$((sum + a - ${BEFORE[$n]}))
	done
	echo "$sum"
}
# Side B's six classes of SPRAY_N packets each have arrived (or more: see the checks).
all_counted() {
	[ "$(drops)" -ge $((6 * SPRAY_N)) ]
}
moved() { # DESC GOT OP WANT: a counter change GOT, checked with test's OP (-eq, -ge)
	if [ "$2" "$3" "$4" ]; then
		_tap_result ok "$1"
	else
		_tap_result fail "$1" "moved by $2, expected $3 $4"
	fi
}

tap_begin "a third sender sprays rrxe0's live RC QP and its UDP port"
check "modprobe rrxe" modprobe rrxe
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
g4=$(wait_for 10 gid_index rrxe0 "$RRXE_LOCAL_IP4" && gid_index rrxe0 "$RRXE_LOCAL_IP4")
snapshot
# Rounds of RC traffic for as long as the pingpong runs (B's server waits for them).
stop=/tmp/spray-traffic.stop
rm -f "$stop"
python3 "$here/reliability.py" traffic rrxe0 "$g4" "$RRXE_PEER_IP4" "$SPRAY_TRAFFIC_PORT" \
	"$stop" >/tmp/spray-traffic.tap 2>&1 &
traffic=$!
# In make check side B's client reaches this server after its own earlier scripts; the
# server waits for it (and ends a hang).
check "pingpong server under the spray: exit 0, buffers checked" \
	timeout "${SPRAY_WAIT:-1800}" ibv_rc_pingpong -d rrxe0 -g "$g4" -n "$SPRAY_PP_N" -s 1024 \
	-c -e -p "$SPRAY_PORT"
touch "$stop"
wait "$traffic"
rc=$?
sed 's/^/# traffic: /' /tmp/spray-traffic.tap
moved "RC Sends, Writes, Reads and fetch-and-adds beside it: all complete, data verified" \
	"$rc" -eq 0
# Side B's port phase follows its QP phase and may still be running.
wait_for 300 all_counted
diag=""
for n in $DROPS duplicate_requests out_of_seq_requests rcvd_ignored_responses \
	duplicate_responses seq_naks_sent error_naks_sent rcvd_pkts; do
	diag+="$n $(delta "$n") "
done
echo "# deltas: $diag"
# The fuzz class lands in whichever counter catches a packet first (its P_Key, its path,
# its opcode, its length): the classes aimed at one counter are checked at least, the ones
# nothing else reaches exactly, and the sum exactly.
moved "from a foreign address: dropped as not over the QP's path" \
	"$(delta rcvd_wrong_path)" -ge "$SPRAY_N"
moved "another partition's P_Key: dropped as P_Key violations" \
	"$(delta rcvd_pkey_violations)" -ge "$SPRAY_N"
moved "to QPNs nothing has: dropped as no QP" "$(delta rcvd_no_qp)" -eq "$SPRAY_N"
moved "a wrong ICRC: dropped as ICRC errors" "$(delta wire_icrc_errors)" -eq "$SPRAY_N"
moved "1 to 15 bytes: dropped as truncated" "$(delta wire_truncated)" -ge "$SPRAY_N"
# Requests and responses alternate in the classes over the path, the requests first.
half=$((SPRAY_N / 2))
moved "over the path, far behind: requests taken as duplicates" \
	"$(delta duplicate_requests)" -ge "$half"
moved "over the path, far ahead: requests dropped as out of sequence" \
	"$(delta out_of_seq_requests)" -ge "$half"
moved "over the path, either way: responses ignored as ghosts or duplicates" \
	$(($(delta rcvd_ignored_responses) + $(delta duplicate_responses))) -ge $((2 * half))
moved "a sequence NAK for the first of a run ahead" "$(delta seq_naks_sent)" -ge 1
moved "no sprayed key looked at: no error NAK sent" "$(delta error_naks_sent)" -eq 0
moved "every packet of the drop classes dropped and counted once, none over the path, none of the pingpong's or the traffic's (all drop counters)" \
	"$(drops)" -eq $((6 * SPRAY_N))
check "rdma link delete rrxe0" rdma link delete rrxe0
check "rmmod rrxe" rmmod rrxe
tap_end
