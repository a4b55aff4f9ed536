#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics (RDMA), side A: the nvme-rdma host connects to side B's target
# (selftests/rrxe/nvmeof-peer.sh) through rrxe0, writes a pseudo-random pattern with O_DIRECT,
# reads it back, and has B check the RAM disk behind the namespace. nvme-rdma registers
# every data buffer with Fast Register WQEs and the target invalidates them with Send
# with Invalidate (or the host with Local Invalidate): rrxe's counters must show both.
# NVMEOF_HOST_MOD=rdma_rxe runs the host on rdma_rxe's rxe0 instead (interoperability; the
# counter checks, rrxe's own, are skipped). TAP output.
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
nqn=nqn.2014-08.org.rrxe:ram0
size=$((2 * 1024 * 1024))
MOD=${NVMEOF_HOST_MOD:-rrxe}
DEV=${MOD#rdma_}0
tap_begin "rrxe NVMe over Fabrics, host side ($DEV)"
check "modprobe $MOD" modprobe "$MOD"
ip link set eth0 up
check "rdma link add $DEV type ${MOD#rdma_} netdev eth0" rdma link add "$DEV" type "${MOD#rdma_}" netdev eth0
counter() { # NAME: its value on $DEV/1
	rdma statistic show link "$DEV/1" | tr ' ' '\n' | awk -v n="$1" '$0 == n { getline; print; exit }'
}
if [ "$MOD" = rrxe ]; then
	check "device counts fast registrations" test -n "$(counter fast_reg_mrs)"
	fr0=$(counter fast_reg_mrs)
fi

# The control connection to B; its listener is up once the target is configured.
ctl_open() {
	exec 3<>"/dev/tcp/$RRXE_PEER_IP4/4795"
}
check "target side ready (control connection)" wait_for 120 ctl_open
ctl() { # REQUEST: B's one-line answer
	echo "$*" >&3 && timeout 60 head -n1 <&3
}

connect() {
	echo "transport=rdma,traddr=$RRXE_PEER_IP4,trsvcid=4420,nqn=$nqn" >/dev/nvme-fabrics
}
check "nvme-rdma connect to $RRXE_PEER_IP4:4420" connect
check "namespace /dev/nvme0n1 appears" wait_for 30 test -b /dev/nvme0n1

head -c "$size" /dev/urandom >/tmp/pattern
want=$(sha256sum </tmp/pattern | cut -d' ' -f1)
check "write 2 MiB (O_DIRECT)" dd if=/tmp/pattern of=/dev/nvme0n1 bs=64k oflag=direct status=none
check "write 1 MiB in one request (O_DIRECT)" \
	dd if=/tmp/pattern of=/dev/nvme0n1 bs=1M count=1 oflag=direct status=none
got=$(dd if=/dev/nvme0n1 bs=1M count=2 iflag=direct status=none | sha256sum | cut -d' ' -f1)
check "read back 2 MiB (1 MiB requests, O_DIRECT) matches" test "$got" = "$want"
got=$(dd if=/dev/nvme0n1 bs=4k count=$((size / 4096)) iflag=direct status=none |
	sha256sum | cut -d' ' -f1)
check "read back 2 MiB (4 KiB requests, O_DIRECT) matches" test "$got" = "$want"
peer=$(ctl sum "$size")
check "target's /dev/ram0 holds the pattern" test "$peer" = "$want"

if [ "$MOD" = rrxe ]; then
	fr=$(counter fast_reg_mrs)
	li=$(counter local_invalidates)
	ri=$(counter remote_invalidates)
	echo "# fast_reg_mrs=$fr local_invalidates=$li remote_invalidates=$ri"
	check "Fast Register WQEs executed" test "$((fr - fr0))" -gt 0
	check "registrations invalidated (local or by Send with Invalidate)" test "$((li + ri))" -gt 0
else
	skip "Fast Register WQEs executed" "rrxe's counter, host on $DEV"
	skip "registrations invalidated" "rrxe's counters, host on $DEV"
fi

check "disconnect" sh -c 'echo 1 >/sys/class/nvme/nvme0/delete_controller'
check "controller gone" wait_for 30 sh -c '! test -e /sys/class/nvme/nvme0'
ctl bye >/dev/null
exec 3>&-
rdma statistic show link "$DEV/1" | sed 's/^/# /'
check "rdma link delete $DEV" rdma link delete "$DEV"
check "rmmod $MOD" rmmod "$MOD"
tap_end
