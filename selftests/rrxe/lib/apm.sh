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

# What the port2 parameter refuses, and that a device it names nothing for has one port.
apm_port2_refusals() {
	local p=/sys/module/rrxe/parameters/port2
	check "modprobe rrxe port2=eth0:nosuch0" modprobe rrxe port2=eth0:nosuch0
	check_fails "port2 naming no netdev: rdma link add over eth0 refused" \
		rdma link add rrxe0 type rrxe netdev eth0
	check "port2 set to eth0:eth0 at run time" eval "echo eth0:eth0 >$p"
	check_fails "port2 pairing eth0 with itself: refused" \
		rdma link add rrxe0 type rrxe netdev eth0
	check "port2 pairs nothing with eth0 (eth2:eth1)" eval "echo eth2:eth1 >$p"
	check "rdma link add rrxe0 over eth0" rdma link add rrxe0 type rrxe netdev eth0
	check "rrxe0 has one port" eval '[ -e /sys/class/infiniband/rrxe0/ports/1 ] &&
		[ ! -e /sys/class/infiniband/rrxe0/ports/2 ]'
	check "rdma link delete rrxe0" rdma link delete rrxe0
	check "rmmod rrxe" rmmod rrxe
}

# A two-port device: rrxe0 with port 1 over eth0 and port 2 over eth1, the second wire
# (scripts/vm.sh --wires 2), through the port2 module parameter.
apm_setup_two_ports() {
	local s=/sys/class/infiniband/rrxe0/ports
	check "apm_verbs.c built warning-free (by the kselftest build, else here)" helper_build apm_verbs
	check "modprobe rrxe port2=eth0:eth1" modprobe rrxe port2=eth0:eth1
	check "rdma link add rrxe0 (netdev eth0) gets a second port over eth1" \
		rdma link add rrxe0 type rrxe netdev eth0
	check "rrxe0 has two ports: rdma link shows rrxe0/2 over eth1" \
		eval 'rdma link show rrxe0/2 | grep -q "netdev eth1"'
	check "port 1's GID table has eth0's address, port 2's has eth1's" \
		wait_for 10 eval 'gid_index rrxe0 "$RRXE_LOCAL_IP4" 1 && gid_index rrxe0 "$RRXE_LOCAL2_IP4" 2'
	check "and not each other's" eval '! gid_index rrxe0 "$RRXE_LOCAL2_IP4" 1 &&
		! gid_index rrxe0 "$RRXE_LOCAL_IP4" 2'
	check "rdma link add over eth1, port 2 of rrxe0, is refused" \
		eval '! rdma link add rrxe9 type rrxe netdev eth1 2>/dev/null'
	check "both ports ACTIVE" eval 'grep -q ACTIVE $s/1/state && grep -q ACTIVE $s/2/state'
	check "rrxe0 claims automatic path migration (ibv_devinfo: AUTO_PATH_MIG)" \
		eval 'ibv_devinfo -v -d rrxe0 | grep -q AUTO_PATH_MIG'
}

# Port events of a two-port device: eth1 down and up again takes port 2 down and up, and
# tells user consumers (ibv_asyncwatch), while port 1 stays ACTIVE.
apm_port2_events() {
	local s=/sys/class/infiniband/rrxe0/ports w=/tmp/asyncwatch.out pid
	ibv_asyncwatch -d rrxe0 >"$w" 2>&1 &
	pid=$!
	sleep 1
	ip link set eth1 down
	# shellcheck disable=SC2016
	check "eth1 down: port 2 DOWN, port 1 still ACTIVE" \
		wait_for 10 eval 'grep -q DOWN $s/2/state && grep -q ACTIVE $s/1/state'
	ip link set eth1 up
	check "eth1 up: port 2 ACTIVE again" wait_for 10 grep -q ACTIVE "$s/2/state"
	check "port 2 has eth1's GID again" wait_for 10 gid_index rrxe0 "$RRXE_LOCAL2_IP4" 2
	check "ibv_asyncwatch saw PORT_ERR then PORT_ACTIVE on port 2, nothing on port 1" \
		wait_for 10 eval "grep -q 'PORT_ERR.*port 2' $w && grep -q 'PORT_ACTIVE.*port 2' $w &&
			! grep -q 'port 1' $w"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	local line
	while IFS= read -r line; do echo "# $line"; done <"$w"
}

# apm_counter_check NAME VALUE [PORT]: the counter NAME of PORT (default 1) is VALUE ("+": at
# least 1).
apm_counter_check() {
	local v port=${3:-1}
	read -r v <"/sys/class/infiniband/rrxe0/ports/$port/hw_counters/$1" || v=missing
	if [ "$2" = + ]; then
		check "port $port counter $1 = $v (at least 1)" test "$v" -ge 1
	else
		check "port $port counter $1 = $v (expected $2)" test "$v" = "$2"
	fi
}

apm_teardown() {
	check "rdma link delete rrxe0" rdma link delete rrxe0
	check "rmmod rrxe" rmmod rrxe
	ip addr del "$(apm_alt_ip "$RRXE_LOCAL_IP4")/15" dev eth0
}

apm_teardown_two_ports() {
	check "rdma link delete rrxe0 (both ports)" rdma link delete rrxe0
	check "rmmod rrxe" rmmod rrxe
}
