#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Automatic path migration, side A (the client): selftests/rrxe/apm_verbs.c against side B's
# apm-peer.sh, over two GID pairs of eth0 (each VM's first address and a second one,
# 198.18.1.N): setup, apm_verbs, counters and wire; then an armed QP against B's rdma_rxe.
# By hand:
#   scripts/vm.sh --two --pcap OUT/wire.pcap --cmd selftests/rrxe/apm.sh --cmd-b selftests/rrxe/apm-peer.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
. "$here/lib/gid.sh"
. "$here/lib/apm.sh"

tap_begin "automatic path migration, side A"
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
