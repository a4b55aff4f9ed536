#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Shared steps of the automatic path migration tests (selftests/rrxe/apm.sh, apm-peer.sh).

. "$(dirname "${BASH_SOURCE[0]}")/helper.sh"
APM_VERBS=/tmp/apm_verbs

# The second IPv4 address of a VM: 198.18.0.N becomes 198.18.1.N (inside the wire's /15).
apm_alt_ip() {
	echo "${1%.*.*}.1.${1##*.}"
}

apm_setup() {
	local alt
	alt=$(apm_alt_ip "$RRXE_LOCAL_IP4")
	check "apm_verbs.c built warning-free (by the kselftest build, else here)" helper_build apm_verbs
	check "modprobe rrxe" modprobe rrxe
	ip link set eth0 up
	check "second address $alt on eth0" ip addr add "$alt/15" dev eth0
	check "rdma link add rrxe0" rdma link add rrxe0 type rrxe netdev eth0
	check "rrxe0: GIDs of both addresses" \
		wait_for 10 eval 'gid_index rrxe0 "$RRXE_LOCAL_IP4" && gid_index rrxe0 "$alt"'
	check "rrxe0 claims automatic path migration (ibv_devinfo: AUTO_PATH_MIG)" \
		eval 'ibv_devinfo -v -d rrxe0 | grep -q AUTO_PATH_MIG'
}

# apm_counter_check NAME VALUE: the port counter NAME is VALUE ("+": at least 1).
apm_counter_check() {
	local v
	read -r v <"/sys/class/infiniband/rrxe0/ports/1/hw_counters/$1" || v=missing
	if [ "$2" = + ]; then
		check "counter $1 = $v (at least 1)" test "$v" -ge 1
	else
		check "counter $1 = $v (expected $2)" test "$v" = "$2"
	fi
}

apm_teardown() {
	check "rdma link delete rrxe0" rdma link delete rrxe0
	check "rmmod rrxe" rmmod rrxe
	ip addr del "$(apm_alt_ip "$RRXE_LOCAL_IP4")/15" dev eth0
}
