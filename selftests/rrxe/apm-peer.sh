#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Automatic path migration, side B (the server): serves selftests/rrxe/apm.sh (over a second
# port, then over a second GID pair), then checks its counters. TAP.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
. "$here/lib/apm.sh"

tap_begin "automatic path migration, side B"
if [ -n "${RRXE_LOCAL2_IP4:-}" ]; then
	apm_setup_two_ports
	# Side A may still be running earlier tests (make check): the servers wait for it.
	timeout "${APM_IDLE:-3000}" rping -s -a "$RRXE_LOCAL2_IP4" -C 5 -V -p 4798 \
		>/tmp/rping-port2.out 2>&1 &
	rping_pid=$!
	check "served side A's migrations to port 2 and back" \
		timeout "${APM_IDLE:-3000}" env APM_ALT_PORT=2 APM_ALT_NETDEV=eth1 \
		"$APM_VERBS" server rrxe0 4799 "$RRXE_LOCAL_IP4" "$RRXE_LOCAL2_IP4" \
		"$RRXE_PEER_IP4" "$RRXE_PEER2_IP4"
	# Two failures of wire 1, each followed by a commanded migration back.
	apm_counter_check path_migrations_by_peer 4
	apm_counter_check path_migrations_auto 0
	apm_counter_check path_mig_requests_refused "+"
	apm_counter_check sent_pkts + 2
	check "rping server on port 2's address served side A" wait "$rping_pid"
	apm_teardown_two_ports
else
	skip "automatic path migration over a second port" "one wire: needs scripts/vm.sh --wires 2"
fi
apm_setup
# Side A may still be running earlier tests (make check): the server waits for it.
check "served side A to the end" timeout "${APM_IDLE:-3000}" "$APM_VERBS" server rrxe0 4799 \
	"$RRXE_LOCAL_IP4" "$(apm_alt_ip "$RRXE_LOCAL_IP4")" \
	"$RRXE_PEER_IP4" "$(apm_alt_ip "$RRXE_PEER_IP4")"
apm_counter_check path_migrations_by_peer 2
apm_counter_check path_migrations_auto 0
apm_counter_check path_mig_requests_refused "+"
apm_teardown
# rdma_rxe, which stores no alternate path: side A arms alone.
check "modprobe rdma_rxe" modprobe rdma_rxe
check "rdma link add rxe0" rdma link add rxe0 type rxe netdev eth0
check "rxe0: IPv4 GID" wait_for 10 gid_index rxe0 "$RRXE_LOCAL_IP4"
ip addr add "$(apm_alt_ip "$RRXE_LOCAL_IP4")/15" dev eth0
check "rxe0 served side A's armed QP" timeout 600 "$APM_VERBS" server rxe0 4799 \
	"$RRXE_LOCAL_IP4" "$(apm_alt_ip "$RRXE_LOCAL_IP4")" \
	"$RRXE_PEER_IP4" "$(apm_alt_ip "$RRXE_PEER_IP4")"
ip addr del "$(apm_alt_ip "$RRXE_LOCAL_IP4")/15" dev eth0
check "rdma link delete rxe0" rdma link delete rxe0
check "rmmod rdma_rxe" rmmod rdma_rxe
tap_end
