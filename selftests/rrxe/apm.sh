#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Automatic path migration, side A (the client): selftests/rrxe/apm_verbs.c against side B's
# apm-peer.sh, first with the alternate path over port 2 of a two-port device (eth1, the
# second wire), then over two GID pairs of eth0 (each VM's first address and a second one,
# 198.18.1.N): setup, apm_verbs, counters and wire; then an armed QP against B's rdma_rxe.
# By hand:
#   scripts/vm.sh --two --wires 2 --pcap OUT/wire.pcap --cmd selftests/rrxe/apm.sh \
#	--cmd-b selftests/rrxe/apm-peer.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
. "$here/lib/apm.sh"

tap_begin "automatic path migration, side A"
if [ -n "${RRXE_LOCAL2_IP4:-}" ]; then
	apm_port2_refusals
	apm_setup_two_ports
	apm_port2_events
	# B's rping server waits on port 2's address (apm-peer.sh); until it listens, an attempt
	# fails.
	check "rdma_cm over port 2: rping -C 5 -V to $RRXE_PEER2_IP4 (CM MADs on port 2's QP1)" \
		wait_for 600 timeout 60 rping -c -a "$RRXE_PEER2_IP4" -C 5 -V -p 4798
	# Wire 1 fails twice: both VMs take eth0 down, later both lose all they send on it.
	subtest "apm_verbs client: migrations to port 2 (eth1) and back, against side B's rrxe" \
		env APM_ALT_PORT=2 APM_ALT_NETDEV=eth1 APM_FAIL=down APM_FAIL2=netem \
		"$APM_VERBS" client rrxe0 4799 "$RRXE_LOCAL_IP4" "$RRXE_LOCAL2_IP4" \
		"$RRXE_PEER_IP4" "$RRXE_PEER2_IP4"
	apm_counter_check path_migrations_auto 2
	# Two to fail back, one refused by the peer.
	apm_counter_check path_migrations_commanded 3
	apm_counter_check sent_pkts + 2
	apm_counter_check rcvd_bytes + 2
	# shellcheck disable=SC2016
	check "the second wire carried requests with MigReq = 1 between the port-2 addresses (pcap)" \
		eval 'python3 "$here/lib/roce_sniff.py" pcap /run/results/wire-2.pcap |
			grep -q "^$RRXE_LOCAL2_IP4 $RRXE_PEER2_IP4 .*migreq=1"'
	apm_teardown_two_ports
else
	skip "automatic path migration over a second port" "one wire: needs scripts/vm.sh --wires 2"
fi
apm_setup
subtest "apm_verbs client: migrations against side B's rrxe" \
	"$APM_VERBS" client rrxe0 4799 "$RRXE_LOCAL_IP4" "$(apm_alt_ip "$RRXE_LOCAL_IP4")" \
	"$RRXE_PEER_IP4" "$(apm_alt_ip "$RRXE_PEER_IP4")"
apm_counter_check path_migrations_auto 1
# One to fail back, one refused by the peer.
apm_counter_check path_migrations_commanded 2
apm_counter_check path_migrations_by_peer 0
# shellcheck disable=SC2016
check "the wire carried requests with MigReq = 1 between the alternate addresses (pcap)" \
	eval 'python3 "$here/lib/roce_sniff.py" pcap /run/results/wire.pcap |
		grep -q "^$(apm_alt_ip "$RRXE_LOCAL_IP4") $(apm_alt_ip "$RRXE_PEER_IP4") .*migreq=1"'
apm_teardown
# Side B now serves on rdma_rxe, which never migrates.
apm_setup
subtest "apm_verbs interop: an armed QP against side B's rdma_rxe" \
	"$APM_VERBS" interop rrxe0 4799 "$RRXE_LOCAL_IP4" "$(apm_alt_ip "$RRXE_LOCAL_IP4")" \
	"$RRXE_PEER_IP4" "$(apm_alt_ip "$RRXE_PEER_IP4")"
apm_teardown
tap_end
