#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics (RDMA), side B: an nvmet target exporting /dev/ram0 on rrxe0 over eth0,
# and a small TCP control (port 4795) through which side A (selftests/rrxe/nvmeof.sh) learns the
# target is up and has B check the bytes its writes left on the RAM disk. TAP output.
# NVMEOF_TARGET_MOD=rdma_rxe serves from rdma_rxe's rxe0 instead (interoperability).
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
tap_need_peer
nqn=nqn.2014-08.org.rrxe:ram0
cfg=/sys/kernel/config/nvmet
MOD=${NVMEOF_TARGET_MOD:-rrxe}
DEV=${MOD#rdma_}0
tap_begin "rrxe NVMe over Fabrics, target side ($DEV)"
check "modprobe $MOD" modprobe "$MOD"
ip link set eth0 up
check "rdma link add $DEV type ${MOD#rdma_} netdev eth0" rdma link add "$DEV" type "${MOD#rdma_}" netdev eth0
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
check "configfs has nvmet" test -d "$cfg"
setup_target() {
	mkdir "$cfg/subsystems/$nqn" &&
		echo 1 >"$cfg/subsystems/$nqn/attr_allow_any_host" &&
		mkdir "$cfg/subsystems/$nqn/namespaces/1" &&
		echo /dev/ram0 >"$cfg/subsystems/$nqn/namespaces/1/device_path" &&
		echo 1 >"$cfg/subsystems/$nqn/namespaces/1/enable" &&
		mkdir "$cfg/ports/1" &&
		echo rdma >"$cfg/ports/1/addr_trtype" &&
		echo ipv4 >"$cfg/ports/1/addr_adrfam" &&
		echo "$RRXE_LOCAL_IP4" >"$cfg/ports/1/addr_traddr" &&
		echo 4420 >"$cfg/ports/1/addr_trsvcid" &&
		ln -s "$cfg/subsystems/$nqn" "$cfg/ports/1/subsystems/$nqn"
}
check "nvmet subsystem $nqn on rdma $RRXE_LOCAL_IP4:4420" setup_target

# The control: one line per request. "sum LEN" answers the SHA-256 of the first LEN bytes of
# /dev/ram0 (read with O_DIRECT, past any page cache); "bye" ends it. A waits for the
# listener, so it also tells A that the target is configured.
serve() {
	timeout "${NVMEOF_IDLE:-600}" python3 - <<'PY'
import hashlib, os, socket, sys
s = socket.create_server(("0.0.0.0", 4795))
c, _ = s.accept()
f = c.makefile("rw")
for line in f:
    cmd = line.split()
    if cmd[:1] == ["sum"]:
        n = int(cmd[1])
        r = os.popen(f"dd if=/dev/ram0 bs=64k count={n // 65536} iflag=direct status=none | sha256sum")
        f.write(r.read().split()[0] + "\n")
        f.flush()
    elif cmd[:1] == ["bye"]:
        f.write("bye\n")
        f.flush()
        sys.exit(0)
sys.exit(1)
PY
}
check "served side A to the end" serve
rdma statistic show link "$DEV/1" | sed 's/^/# /'
remove_target() {
	rm "$cfg/ports/1/subsystems/$nqn" &&
		rmdir "$cfg/ports/1" &&
		echo 0 >"$cfg/subsystems/$nqn/namespaces/1/enable" &&
		rmdir "$cfg/subsystems/$nqn/namespaces/1" &&
		rmdir "$cfg/subsystems/$nqn"
}
check "nvmet target removed" remove_target
check "rdma link delete $DEV" rdma link delete "$DEV"
check "rmmod $MOD" rmmod "$MOD"
tap_end
