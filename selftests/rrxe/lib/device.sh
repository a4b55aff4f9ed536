# SPDX-License-Identifier: GPL-2.0
# One soft-RoCE device in loopback for the single-VM tests (sourced, after tap.sh and
# gid.sh: it uses wait_for and gid_index).
#
#   device_up MOD DEV  load MOD (rrxe or rdma_rxe) and add DEV (rdma link type: MOD
#                      without its rdma_ prefix) over eth0 when there is one (address
#                      $RRXE_LOCAL_IP4), else over a new veth pair vng0/vng1 (198.51.100.1
#                      on vng0); set gid to the index of the address's RoCE v2 GID, empty
#                      (and a `#` line saying so) when there is none. Fails when MOD or DEV
#                      cannot be added, and undoes nothing then.
#   device_down        delete DEV and the veth pair device_up made, if any; unload MOD.
#   rdma_stat DEV NAME the counter NAME of `rdma statistic` on DEV's port 1 (empty if none).

device_up() {
	device_mod=$1
	device_dev=$2
	local addr
	if [ -e /sys/class/net/eth0 ]; then
		device_nd=eth0
		addr=${RRXE_LOCAL_IP4:-}
		ip link set eth0 up
	else
		device_nd=vng0
		addr=198.51.100.1
		ip link add vng0 type veth peer name vng1
		ip addr add "$addr/24" dev vng0
		ip link set vng1 up
		ip link set vng0 up
	fi
	modprobe "$device_mod" || return 1
	rdma link add "$device_dev" type "${device_mod#rdma_}" netdev "$device_nd" || return 1
	wait_for 10 gid_index "$device_dev" "$addr"
	gid=$(gid_index "$device_dev" "$addr")
	[ -n "$gid" ] || echo "# no RoCE v2 GID for $addr on $device_dev"
	return 0
}

device_down() {
	rdma link delete "$device_dev"
	[ "$device_nd" = vng0 ] && ip link delete vng0
	rmmod "$device_mod"
}

rdma_stat() {
	rdma statistic show link "$1/1" 2>/dev/null | tr ' ' '\n' |
		awk -v n="$2" '$0 == n { getline; print; exit }'
}
