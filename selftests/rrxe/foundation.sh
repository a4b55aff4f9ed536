#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Foundation tests, run inside a VM (side A of a two-VM boot: eth0 is a virtio-net NIC wired
# to side B). Covers module load/unload, rdma link add/delete, the unmodified rdma-core rxe
# provider, GIDs and port state following the netdev, rmmod with devices present, and bad
# input.
set -u
. "$(dirname "$0")/lib/tap.sh"
. "$(dirname "$0")/lib/gid.sh"

tap_begin "rrxe foundation"

SYS=/sys/class/infiniband

has_dev() { [ -d "$SYS/$1" ]; }
no_dev() { [ ! -e "$SYS/$1" ]; }
# Whether the core's GID table (one ibv_query_gid_table call through uverbs) holds ADDR, as
# ibv_devinfo prints it. The table's absence checks ask it rather than sysfs: reading all
# 1,024 entries of ports/1/gids took 26-72 s on the debug kernel under TCG.
listed_gid() {
	local table
	table=$(ibv_devinfo -v -d "$1") || return 2
	grep -Eq "GID\[ *[0-9]+\]:[[:space:]]+${2//./\\.}, RoCE v2" <<<"$table"
}
unlisted_gid() {
	listed_gid "$@"
	[ $? = 1 ]
}
port_state() { cut -d: -f2 <"$SYS/$1/ports/1/state" | tr -d ' '; }
state_is() { [ "$(port_state "$1")" = "$2" ]; }

# --- module load -------------------------------------------------------------------------
check "modprobe rrxe" modprobe rrxe
check "rrxe is listed by lsmod" grep -q '^rrxe ' /proc/modules
check "modinfo alias rdma-link-rrxe" bash -c "modinfo rrxe | grep -q 'alias:.*rdma-link-rrxe'"

# --- link add on the virtio NIC ------------------------------------------------------------
ip link set eth0 up
check "rdma link add rrxe0 type rrxe netdev eth0" rdma link add rrxe0 type rrxe netdev eth0
check "rrxe0 appears in sysfs" has_dev rrxe0
check "rdma link show lists rrxe0/1 on eth0" bash -c "rdma link show rrxe0/1 | grep -q 'netdev eth0'"
check "parent device names the netdev (device/net/eth0)" test -d "$SYS/rrxe0/device/net/eth0"
check "node_type is CA" grep -q '^1: CA' "$SYS/rrxe0/node_type"
mac=$(cat /sys/class/net/eth0/address)
want_guid=$(python3 -c "import sys; m=[int(x,16) for x in sys.argv[1].split(':')]; m[0]^=2; g=m[:3]+[0xff,0xfe]+m[3:]; print(':'.join('%02x%02x'%(g[i],g[i+1]) for i in range(0,8,2)))" "$mac")
check "node_guid is the EUI-64 of the MAC ($want_guid)" grep -qx "$want_guid" "$SYS/rrxe0/node_guid"

# --- unmodified rdma-core: rxe provider ------------------------------------------------------
check "ibv_devices lists rrxe0" bash -c "ibv_devices | grep -q 'rrxe0'"
ibv_devinfo -v -d rrxe0 >/tmp/devinfo.txt 2>&1
check "ibv_devinfo -v -d rrxe0 succeeds" ibv_devinfo -v -d rrxe0
check "ibv_devinfo: hca_id rrxe0" grep -q 'hca_id:[[:space:]]*rrxe0' /tmp/devinfo.txt
check "ibv_devinfo: link_layer Ethernet" grep -q 'link_layer:[[:space:]]*Ethernet' /tmp/devinfo.txt
check "ibv_devinfo: vendor_id 0xffffff" grep -q 'vendor_id:[[:space:]]*0xffffff' /tmp/devinfo.txt
check "ibv_devinfo: max_pkeys 1" grep -q 'max_pkeys:[[:space:]]*1$' /tmp/devinfo.txt
check "ibv_devinfo: active_mtu 1024 for a 1500-byte netdev" grep -q 'active_mtu:[[:space:]]*1024' /tmp/devinfo.txt
echo "# ibv_devinfo -v -d rrxe0:"
sed 's/^/#   /' /tmp/devinfo.txt

# --- GIDs follow addresses ---------------------------------------------------------------
ip addr add 198.18.7.1/24 dev eth0
check "GID for 198.18.7.1 appears in sysfs, RoCE v2" wait_for 5 gid_index rrxe0 198.18.7.1
check "ibv_devinfo shows the IPv4 GID (RoCE v2)" listed_gid rrxe0 ::ffff:198.18.7.1
ip -6 addr add 2001:db8:7::1/64 dev eth0 nodad
check "GID for 2001:db8:7::1 appears in sysfs, RoCE v2" wait_for 5 gid_index rrxe0 2001:db8:7::1
ip addr del 198.18.7.1/24 dev eth0
check "GID for 198.18.7.1 goes away" wait_for 5 unlisted_gid rrxe0 ::ffff:198.18.7.1
ip -6 addr del 2001:db8:7::1/64 dev eth0
check "GID for 2001:db8:7::1 goes away" wait_for 5 unlisted_gid rrxe0 2001:db8:7::1

# --- port state follows the netdev ---------------------------------------------------------
check "port ACTIVE while eth0 is up with carrier" state_is rrxe0 ACTIVE
ibv_asyncwatch -d rrxe0 >/tmp/async.txt 2>&1 &
watch_pid=$!
# It prints its async event FD once its context is open (line-buffered): an event before
# that reaches no file of its. A fixed second was once too short for a debug guest.
wait_for 20 grep -q 'async event FD' /tmp/async.txt
ip link set eth0 down
check "port DOWN after ip link set down" wait_for 5 state_is rrxe0 DOWN
check "phys_state Disabled when administratively down" grep -q 'Disabled' "$SYS/rrxe0/ports/1/phys_state"
ip link set eth0 up
check "port ACTIVE again after ip link set up" wait_for 10 state_is rrxe0 ACTIVE
wait_for 10 grep -q 'IBV_EVENT_PORT_ACTIVE' /tmp/async.txt
kill $watch_pid 2>/dev/null
wait $watch_pid 2>/dev/null
check "IBV_EVENT_PORT_ERR delivered to userspace" grep -q 'IBV_EVENT_PORT_ERR' /tmp/async.txt
check "IBV_EVENT_PORT_ACTIVE delivered to userspace" grep -q 'IBV_EVENT_PORT_ACTIVE' /tmp/async.txt
sed 's/^/#   async: /' /tmp/async.txt

# Carrier without admin change: a veth pair loses carrier when its peer goes down.
ip link add veth0 type veth peer name veth1
ip link set veth0 up
ip link set veth1 up
check "rdma link add rrxe1 over veth0" rdma link add rrxe1 type rrxe netdev veth0
check "rrxe1 ACTIVE with carrier" wait_for 5 state_is rrxe1 ACTIVE
ip link set veth1 down
check "rrxe1 DOWN when veth0 loses carrier" wait_for 5 state_is rrxe1 DOWN
check "phys_state Polling while up without carrier" grep -q 'Polling' "$SYS/rrxe1/ports/1/phys_state"
ip link set veth1 up
check "rrxe1 ACTIVE when carrier returns" wait_for 5 state_is rrxe1 ACTIVE

# --- bad input -------------------------------------------------------------------------------
check_fails "link add on a missing netdev fails" rdma link add rrxe9 type rrxe netdev nosuchdev0
check_fails "link add with a duplicate name fails" rdma link add rrxe0 type rrxe netdev veth1
check "duplicate name left no device on veth1" bash -c "! rdma link show | grep -q 'netdev veth1'"
check_fails "second device on the same netdev fails" rdma link add rrxe5 type rrxe netdev eth0
check "no rrxe5 was left behind" no_dev rrxe5
check_fails "link add on loopback is refused (RoCE needs Ethernet)" rdma link add rrxe6 type rrxe netdev lo
check_fails "link add with a '%' in the name fails" rdma link add 'rrxe%d' type rrxe netdev veth1
# nldev runs `rdma link add`s in parallel: two at once on one netdev must not both win.
ip link add vq0 type veth peer name vq1
for i in 1 2 3; do
	rdma link add "rrxeq$i" type rrxe netdev vq0 2>/dev/null &
done
wait
check "3 concurrent link adds on one netdev leave exactly one device" \
	bash -c "[ \$(rdma link show | grep -c 'netdev vq0 ') -eq 1 ]"
ip link del vq0
check "its device goes with the netdev" wait_for 10 bash -c "! rdma link show | grep -q 'netdev vq0 '"
check "rdma link delete rrxe1" rdma link delete rrxe1
check "rrxe1 is gone" no_dev rrxe1
check_fails "deleting rrxe1 twice fails" rdma link delete rrxe1

# --- netdev removal takes the device with it ----------------------------------------------------
check "rdma link add rrxe2 over veth1" rdma link add rrxe2 type rrxe netdev veth1
ip link del veth0
check "rrxe2 goes away with its netdev" wait_for 10 no_dev rrxe2

# --- add/delete cycles -----------------------------------------------------------------------------
# A cycle takes ~20 s on the debug kernel under TCG (device registration and RCU grace
# periods), 0.1 s on release: fewer there (five in make soak), the same code paths.
CYCLES=20
if [ "${RRXE_VARIANT:-}" = debug ]; then
	if soak; then CYCLES=5; else CYCLES=2; fi
fi
cycle() {
	local i
	ip link add vc0 type veth peer name vc1 || return 1
	for i in $(seq 1 "$CYCLES"); do
		rdma link add rrxec type rrxe netdev vc0 || return 1
		rdma link delete rrxec || return 1
	done
	ip link del vc0
}
check "$CYCLES link add/delete cycles" cycle

# --- rdma_rxe cannot bind the RoCEv2 port rrxe holds ------------------------------------------
# Both bind UDP 4791 (rdma_rxe at module load, rrxe with its first device), so they cannot
# have devices at the same time; selftests/rrxe/net.sh covers the other direction (EADDRINUSE).
ip link add vr0 type veth peer name vr1
ip link set vr0 up
ip link set vr1 up
if modinfo rdma_rxe >/dev/null 2>&1; then
	check_fails "modprobe rdma_rxe fails while rrxe0 holds UDP 4791" modprobe rdma_rxe
else
	skip "modprobe rdma_rxe fails while rrxe0 holds UDP 4791" "rdma_rxe module not available"
fi

# --- rmmod ------------------------------------------------------------------------------------------
# A user context does not pin the module: rrxe offers disassociate_ucontext, so rmmod goes
# on at once and the core cuts the context off (the unaffiliated event
# IBV_EVENT_DEVICE_FATAL on its async event fd, then EIO from every command). The holder
# keeps a PD, which the cut destroys, and closes what is left after.
rm -f /tmp/ctx-open /tmp/ctx-result
python3 "$(dirname "$0")/lib/fatal_hold.py" rrxe0 /tmp/ctx-open /tmp/ctx-result &
py_pid=$!
wait_for 180 test -e /tmp/ctx-open
check "rmmod with a user context open completes at once" timeout 60 rmmod rrxe
check "the context's process got IBV_EVENT_DEVICE_FATAL and then EIO" \
	wait_for 60 grep -qx "event=DEVICE_FATAL errno=5" /tmp/ctx-result
wait $py_pid
check "modprobe rrxe after the cut" modprobe rrxe
check "rrxe0 over eth0 again" rdma link add rrxe0 type rrxe netdev eth0
check "rdma link add rrxe3 over vr1" rdma link add rrxe3 type rrxe netdev vr1
check "rmmod rrxe with devices present" rmmod rrxe
check "rrxe0 and rrxe3 are gone" bash -c "[ ! -e $SYS/rrxe0 ] && [ ! -e $SYS/rrxe3 ]"
check "modprobe rrxe again" modprobe rrxe
check "rdma link add autoloads nothing twice: rrxe0 again" rdma link add rrxe0 type rrxe netdev eth0
check "rmmod rrxe again" rmmod rrxe
check "autoload: rdma link add loads rrxe via rdma-link-rrxe" rdma link add rrxe0 type rrxe netdev eth0
check "final rmmod" rmmod rrxe

# With rdma_rxe loaded first, it has the port and rrxe refuses devices until it is gone.
if modprobe rdma_rxe 2>/dev/null; then
	modprobe rrxe
	check_fails "rdma link add rrxe0 fails while rdma_rxe holds UDP 4791" \
		rdma link add rrxe0 type rrxe netdev eth0
	check "rmmod rdma_rxe" rmmod rdma_rxe
	check "rrxe works after rmmod rdma_rxe" rdma link add rrxe0 type rrxe netdev eth0
	check "rmmod rrxe" rmmod rrxe
else
	skip "rdma link add fails while rdma_rxe holds UDP 4791" "rdma_rxe module not available"
fi

tap_end
