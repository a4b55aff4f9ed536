#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rrxe in network namespaces, in one VM: two namespaces joined by a veth pair, a device on
# each end added from inside its namespace, and between them rping, ibv_rc_pingpong and
# ib_write_bw over IPv4 and IPv6, and a route changed under a QP; the RoCEv2 sockets (UDP
# 4791) of each namespace open with its first device and close with its last, leaving
# init_net's alone; a netdev unregistered under a device; a namespace deleted under
# devices with live QPs and open user contexts; a namespace deleted under a device on a
# physical netdev lent to it (NETNS_LEND=eth0); devices on tun devices, and the port's data
# counters; the RDMA core's exclusive netns mode, a device moved into a namespace under an
# open user context. Nothing may splat or leak (the harness checks the logs after the boot;
# make check runs it in both boots, on side B: side-b.sh, under the debug kernel's KASAN,
# lockdep and kmemleak, and release-b.sh).
#   scripts/vm.sh --variant debug --module drivers/infiniband/sw/rrxe/rrxe.ko --cmd selftests/rrxe/netns.sh
set -u
here=$(dirname "$0")
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"

tap_begin "rrxe in network namespaces"

SYS=/sys/class/infiniband
LOG=/tmp/netns
mkdir -p "$LOG"
N1=rrxens1 N2=rrxens2
A4=192.0.2.1 B4=192.0.2.2 A6=2001:db8:4e::1 B6=2001:db8:4e::2
TMO=90

# Sockets bound to 4791 (0x12B7) in namespace $1 (- for init_net): /proc/net is the
# reader's namespace's.
socks() {
	local run=()
	[ "$1" = - ] || run=(ip netns exec "$1")
	"${run[@]}" awk '$2 ~ /:12B7$/ { n++ } END { print n + 0 }' /proc/net/udp /proc/net/udp6
}
socks_are() { [ "$(socks "$1")" -eq "$2" ]; }
no_dev() { [ ! -e "$SYS/$1" ]; }
in1() { ip netns exec "$N1" "$@"; }
in2() { ip netns exec "$N2" "$@"; }
closed_lines() { dmesg | grep -c 'rrxe: RoCEv2 UDP port 4791 closed'; }

modprobe rrxe || exit 1
init_socks=$(socks -)
closed0=$(closed_lines)

# Setup goes through `ip -batch`: each process costs seconds in a debug guest under TCG.
ip netns add "$N1"
ip netns add "$N2"
ip link add nsv1 netns "$N1" type veth peer name nsv2 netns "$N2"
veth_up() { # NS DEV ADDR4 ADDR6: lo and DEV up in NS, DEV with both addresses
	ip -n "$1" -batch - <<-EOF
	link set lo up
	addr add $3/24 dev $2
	addr add $4/64 dev $2 nodad
	link set $2 up
	EOF
}
veth_up "$N1" nsv1 "$A4" "$A6"
veth_up "$N2" nsv2 "$B4" "$B6"
dummy_up() { # NS NAME [ADDR/LEN]: a dummy netdev up in NS, with the address if given
	ip -n "$1" -batch - <<-EOF
	link add $2 type dummy
	${3:+addr add $3 dev $2}
	link set $2 up
	EOF
}

# --- devices added from inside their namespaces ------------------------------------------
check "no RoCEv2 socket in $N1 before a device" socks_are "$N1" 0
check_fails "rdma link add from init_net cannot name $N1's netdev" \
	rdma link add nsx type rrxe netdev nsv1
check "ip netns exec $N1 rdma link add nsa netdev nsv1" in1 rdma link add nsa type rrxe netdev nsv1
check "$N1 has UDP 4791 open, IPv4 and IPv6" socks_are "$N1" 2
check "$N2 has none yet" socks_are "$N2" 0
check "ip netns exec $N2 rdma link add nsb netdev nsv2" in2 rdma link add nsb type rrxe netdev nsv2
check "$N2 has UDP 4791 open, IPv4 and IPv6" socks_are "$N2" 2
check "init_net's sockets are untouched" socks_are - "$init_socks"
ip -n "$N2" link add nsd2 type dummy
before=$(dmesg | wc -l)
check_fails "a second device named nsa (in $N2) is refused" \
	in2 rdma link add nsa type rrxe netdev nsd2
check "... with a message naming the clash" bash -c \
	"dmesg | tail -n +$((before + 1)) | grep -q 'rrxe: nsa: an RDMA device of that name exists'"
ip -n "$N2" link del nsd2
check "nsa's GID table has its namespace's IPv4 address" wait_for 20 gid_index nsa "$A4"
check "... and IPv6 address" wait_for 20 gid_index nsa "$A6"
check "nsb's GID table has its namespace's addresses" \
	wait_for 20 bash -c ". $here/lib/gid.sh; gid_index nsb $B4 && gid_index nsb $B6"
check "the veth carries IP between the namespaces" in1 ping -c 1 -W 5 "$B4"
# Netdev names are per namespace: both have an "nsdup". A device added from inside $N2 on
# "nsdup" is on $N2's, whose address its GID table holds, and not on $N1's.
dummy_up "$N1" nsdup 198.51.102.1/24
dummy_up "$N2" nsdup 198.51.102.2/24
check "a device on nsdup from inside $N2 (both namespaces have a netdev of that name)" \
	in2 rdma link add nsdup2 type rrxe netdev nsdup
dup_is_n2s() { gid_index nsdup2 198.51.102.2 && ! gid_index nsdup2 198.51.102.1; }
check "... on $N2's nsdup: its GID table has $N2's address on it, not $N1's" \
	wait_for 20 dup_is_n2s
check "rdma link delete nsdup2" rdma link delete nsdup2
ip -n "$N1" link del nsdup
ip -n "$N2" link del nsdup

# --- traffic between the namespaces ---------------------------------------------------------
# Servers in $N2 on nsb, clients in $N1 on nsa; every exchange's data is verified by the
# program (rping -V, ibv_rc_pingpong -c, ib_write_bw's completions). The RoCE family is the
# GIDs' (rdma_cm: the address's); the pingpong and perftest exchange their QP numbers over
# TCP on IPv4 either way (their servers listen on the first address family only).
# A client started before its server listens is refused at once (rping's connect is
# rejected, the pingpong's TCP connect fails), and under TCG a program can take longer than
# any fixed pause to start: a client waits for its server's listener, TCP or rdma_cm.
listens() { listening "$2" "$1" || cm_listening "$2"; } # NS PORT
pair() { # NAME SERVER-CMD -- CLIENT-CMD: the server runs in $N2, the client in $N1
	local name=$1 srv=() cli=()
	shift
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	in2 timeout "$TMO" "${srv[@]}" >"$LOG/$name.server" 2>&1 &
	local spid=$! ok=1
	wait_for 60 listens "$N2" "$(port_of "${srv[@]}")"
	in1 timeout "$TMO" "${cli[@]}" >"$LOG/$name.client" 2>&1 || ok=0
	wait "$spid" || ok=0
	[ $ok = 1 ] || { tail -n 5 "$LOG/$name.server" "$LOG/$name.client"; return 1; }
}
stat_of() { # DEV NAME: a counter of rdma statistic
	rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v n="$2" '$0 == n { getline; print; exit }'
}
gA4=$(gid_index nsa "$A4") gB4=$(gid_index nsb "$B4")
gA6=$(gid_index nsa "$A6") gB6=$(gid_index nsb "$B6")
for fam in 4 6; do
	if [ $fam = 4 ]; then srv=$B4 ga=$gA4 gb=$gB4; else srv=$B6 ga=$gA6 gb=$gB6; fi
	check "IPv$fam: rping -C 5 -V between the namespaces (rdma_cm)" \
		pair "rping$fam" rping -s -a "$srv" -C 5 -V -p "1890$fam" -- \
		rping -c -a "$srv" -C 5 -V -p "1890$fam"
	k0=$(stat_of nsa rx_kicks_to_sender)
	check "IPv$fam: ibv_rc_pingpong -n 100 -c between the namespaces" \
		pair "rc$fam" ibv_rc_pingpong -d nsb -g "$gb" -n 100 -c -p "1891$fam" -- \
		ibv_rc_pingpong -d nsa -g "$ga" -n 100 -c -p "1891$fam" "$B4"
	# The veth hands each packet to its peer in the softirq of the sender's local-out, on
	# the sending CPU: the receiving QP's run is left to the sending run to make, after it
	# (glue/net.rs transmit). 100 messages each way and their ACKs; the counter is the
	# module's, so other traffic can only add to it.
	k1=$(stat_of nsa rx_kicks_to_sender)
	check "IPv$fam: the pingpong's packets went to their QPs' runs through the sending runs (rx_kicks_to_sender +$((${k1:-0} - ${k0:-0})), at least 200)" \
		test "$((${k1:-0} - ${k0:-0}))" -ge 200
	t0=$(stat_of nsa tx_trains) e0=$(stat_of nsb wire_icrc_errors)
	check "IPv$fam: ib_write_bw -n 50 -s 65536 between the namespaces" \
		pair "wbw$fam" ib_write_bw -d nsb -x "$gb" -F -n 50 -s 65536 -p "1892$fam" -- \
		ib_write_bw -d nsa -x "$ga" -F -n 50 -s 65536 -p "1892$fam" "$B4"
	# A run's packets of one path go to the IP stack as one UDP GSO datagram, a train,
	# which the veth passes on whole and nsb's tunnel socket splits back into the packets
	# as built (glue/net.rs Train): a Write's 62 middle packets ride one (50 trains, if no
	# run is cut short of a message), and every packet split from one must pass its ICRC
	# (the IPv4 IDs and lengths restored).
	t1=$(stat_of nsa tx_trains) e1=$(stat_of nsb wire_icrc_errors)
	check "IPv$fam: ... its packets sent in trains (tx_trains +$((${t1:-0} - ${t0:-0})), at least 25)" \
		test "$((${t1:-0} - ${t0:-0}))" -ge 25
	check "IPv$fam: ... none failed its ICRC (wire_icrc_errors +$((${e1:-0} - ${e0:-0})))" \
		test "$((${e1:-0} - ${e0:-0}))" -eq 0
	# A QP keeps its route between packets: a route added under it must take effect.
	check "IPv$fam: a QP's datagrams take a route added under it, and the old one back" \
		python3 "$here/netns_route.py" "$N1" nsa "$ga" nsb "$gb" "$srv" nsv1
done
# A packet received in the softirq of a send has its ICRC checked by the receiving QP's
# run, not in the softirq (glue/net.rs encap_rcv): netem flips a bit in one of twenty of
# nsa's packets, ib_write_bw's Writes to nsb, and the flips in the RoCE part must be
# dropped as ICRC errors (IBA A17.4) by nsb's QP's run, and the Writes retransmitted
# until all complete. One way only: a ping-pong's last ACK, corrupted, would leave its
# peer retrying to a QP that had gone. The counters are the module's.
w0=$(stat_of nsa wire_icrc_errors)
check "netem corrupts one in twenty of nsv1's packets" in1 tc qdisc add dev nsv1 root netem corrupt 5%
check "IPv4: ib_write_bw -n 20 -s 65536 through the corruption" \
	pair wbwbad ib_write_bw -d nsb -x "$gB4" -F -n 20 -s 65536 -p 18925 -- \
	ib_write_bw -d nsa -x "$gA4" -F -n 20 -s 65536 -p 18925 "$B4"
w1=$(stat_of nsa wire_icrc_errors)
check "... the corrupted packets dropped as ICRC errors (wire_icrc_errors +$((${w1:-0} - ${w0:-0})))" \
	test "$((${w1:-0} - ${w0:-0}))" -gt 0
in1 tc qdisc del dev nsv1 root

# --- socket lifetime and netdev unregister within a namespace --------------------------------
dummy_up "$N1" nsd1
check "a second device in $N1 (nsc on a dummy)" in1 rdma link add nsc type rrxe netdev nsd1
check "$N1 still has one socket per family" socks_are "$N1" 2
check "rdma link delete nsc" rdma link delete nsc
check "$N1's sockets stay: nsa still uses them" socks_are "$N1" 2
check "nsc again" in1 rdma link add nsc type rrxe netdev nsd1
ip -n "$N1" link del nsd1
check "deleting nsc's netdev in $N1 removes nsc" wait_for 20 no_dev nsc
check "$N1's sockets stay" socks_are "$N1" 2
check "rdma link delete nsa" rdma link delete nsa
check "$N1's sockets closed with its last device" socks_are "$N1" 0
check "... and $N2's stay" socks_are "$N2" 2
check "nsa again" in1 rdma link add nsa type rrxe netdev nsv1
check "nsa's GID table filled again" wait_for 20 gid_index nsa "$A4"

# --- a namespace deleted under live QPs and user contexts --------------------------------------
# netns_hold.py, in init_net, connects an RC QP on nsa to one on nsb and keeps both open.
# Deleting $N2 unregisters nsv2 and with it its veth peer nsv1 in $N1: both devices must go
# without waiting for the holder, whose contexts the core cuts off (disassociate_ucontext:
# IBV_EVENT_DEVICE_FATAL ends each event stream), and both namespaces' sockets with them.
gA4=$(gid_index nsa "$A4")
python3 "$here/netns_hold.py" nsa "$gA4" nsb "$gB4" >"$LOG/hold" 2>&1 &
hold=$!
check "holder: RC traffic between nsa and nsb from init_net, then holds them" \
	wait_for 120 grep -q '^ready' "$LOG/hold"
check "ip netns del $N2 under the holder" ip netns del "$N2"
wait_holder() { ! kill -0 "$hold" 2>/dev/null; }
check "the holder's contexts were both cut off (DEVICE_FATAL), and it closed them" \
	wait_for 150 wait_holder
wait "$hold"
hrc=$?
sed 's/^/# /' "$LOG/hold"
check "holder exited 0" test "$hrc" -eq 0
check "nsb is gone" wait_for 60 no_dev nsb
check "nsa (on the veth peer, in $N1) is gone" wait_for 60 no_dev nsa
check "$N1's sockets closed with its last device" wait_for 20 socks_are "$N1" 0
check "init_net's sockets are still untouched" socks_are - "$init_socks"
check "rrxe logged three closes ($N1's, then $N2's and $N1's)" \
	test "$(($(closed_lines) - closed0))" -eq 3

# --- a namespace deleted under an idle device ------------------------------------------------
ip netns add "$N2"
ip link add nsv3 netns "$N2" type veth peer name nsv4
ip -n "$N2" link set nsv3 up
check "a device in a fresh $N2" in2 rdma link add nsb type rrxe netdev nsv3
check "$N2 has UDP 4791 open" socks_are "$N2" 2
check "ip netns del $N2" ip netns del "$N2"
check "the device goes with the namespace" wait_for 60 no_dev nsb
ip link del nsv4 2>/dev/null

# --- a physical netdev lent to a namespace ---------------------------------------------------
# A netdev without rtnl_link_ops of its own (virtio-net's eth0) is not destroyed with a
# namespace: the namespace's dismantling moves it back to init_net, which unregisters it in
# the namespace first. The device on it must go, the namespace's sockets close (by the
# device's removal or by rrxe's pernet exit, whichever comes first: dmesg names it), and
# init_net's stay. The VM then gets its eth0 back as scripts/vm-init.sh set it up (moving
# resets its addresses and per-device sysctls), so the peer programs after this one use it
# as before. Only with NETNS_LEND=eth0 (side-b.sh and release-b.sh set it; a VM without a
# wire has no netdev to lend).
N3=rrxens3
lend_back() { # restores $1 in init_net as vm-init.sh left it
	local c=/proc/sys/net/ipv6/conf/$1
	echo 0 >"$c/accept_dad" && echo 0 >"$c/router_solicitations" &&
		echo 1 >"$c/keep_addr_on_down" &&
		ip -batch - <<-EOF
		addr replace $RRXE_LOCAL_IP4/24 dev $1
		addr replace $RRXE_LOCAL_IP6/64 dev $1
		link set $1 up
		EOF
}
P=${NETNS_LEND:-}
if [ -z "$P" ] || [ ! -e "/sys/class/net/$P" ] || [ -z "${RRXE_LOCAL_IP4:-}" ]; then
	skip "a device on a physical netdev lent to a namespace that is then deleted" \
		"no netdev to lend (NETNS_LEND names one, with RRXE_LOCAL_IP4/6 to restore it)"
else
	ip netns add "$N3"
	check "lend $P to $N3" ip link set "$P" netns "$N3"
	ip -n "$N3" -batch - <<-EOF
	link set lo up
	addr add 192.0.2.77/24 dev $P
	link set $P up
	EOF
	check "a device nsp on $P from inside $N3" \
		ip netns exec "$N3" rdma link add nsp type rrxe netdev "$P"
	check "$N3 has UDP 4791 open, IPv4 and IPv6" socks_are "$N3" 2
	check "nsp's GID table has $N3's address" wait_for 20 gid_index nsp 192.0.2.77
	before=$(dmesg | wc -l)
	check "ip netns del $N3" ip netns del "$N3"
	check "nsp goes with the namespace" wait_for 60 no_dev nsp
	check "$P comes back to init_net" wait_for 60 test -e "/sys/class/net/$P"
	closes() { dmesg | tail -n +$((before + 1)) | grep 'rrxe: RoCEv2 UDP port 4791 closed'; }
	closed_once() { [ "$(closes | wc -l)" = 1 ]; }
	check "$N3's sockets were closed once" wait_for 20 closed_once
	closes | sed 's/^/# /'
	check "init_net's sockets are untouched" socks_are - "$init_socks"
	check "$P set up again as the VM had it" lend_back "$P"
	works_again() { rdma link add nsq type rrxe netdev "$P" && wait_for 10 gid_index nsq "$RRXE_LOCAL_IP4"; }
	check "a device on $P in init_net again, with its GID" works_again
	check "rdma link delete nsq" rdma link delete nsq
fi

# --- tun devices (L3 only: no link-layer header, no address) -------------------------------
# As in Linux 6.15's rdma_rxe: GIDs are the tun's IP addresses (assigned before the device is
# added: the 6.12 core's GID notifiers watch Ethernet netdevs only), rdma_cm binds to them
# (kernel-patches/0003), and traffic to the device's own address takes the loopback path.
T4=198.51.100.1
ip -n "$N1" -batch - <<EOF
tuntap add mode tun name nst0
tuntap add mode tun name nst1
addr add $T4/24 dev nst0
addr add 198.51.101.1/24 dev nst1
link set nst0 up
link set nst1 up
EOF
check "rdma link add nst on tun nst0 (in $N1)" in1 rdma link add nst type rrxe netdev nst0
check "nst's GID table has the tun's address" wait_for 20 gid_index nst "$T4"
check "a second tun device nsu on nst1" in1 rdma link add nsu type rrxe netdev nst1
check "one socket per family in $N1 for both" socks_are "$N1" 2
loop_rping() { # NAME COUNT PORT: an rping server and client in $N1 on the tun's address
	in1 timeout "$TMO" rping -s -a "$T4" -C "$2" -V -p "$3" >"$LOG/$1.server" 2>&1 &
	local spid=$! ok=1
	wait_for 60 listens "$N1" "$3"
	in1 timeout "$TMO" rping -c -a "$T4" -C "$2" -V -p "$3" >"$LOG/$1.client" 2>&1 || ok=0
	wait "$spid" || ok=0
	[ $ok = 1 ] || { tail -n 5 "$LOG/$1.server" "$LOG/$1.client"; return 1; }
}
check "tun: rping -C 3 -V to the device's own address (rdma_cm, loopback)" loop_rping tun 3 18930
# The port's data counters (PerfMgmt PortCountersExtended, behind sysfs `counters/`, and
# sent_bytes/rcvd_bytes in rdma statistic): a loopback exchange sends what it receives.
C=$SYS/nst/ports/1/counters
read_data() { read -r xd <"$C/port_xmit_data" && read -r rd <"$C/port_rcv_data" &&
	read -r xp <"$C/port_xmit_packets" && read -r rp <"$C/port_rcv_packets"; }
check "nst has the extended PerfMgmt counters in sysfs" \
	test -r "$C/port_xmit_data" -a -r "$C/unicast_xmit_packets" -a -r "$C/multicast_rcv_packets"
# A run times itself and its parts only with the run_times module parameter, off by
# default (eight clock readings a looped-back Read, 34 ns each under TCG): the
# exchange above ran untimed, the one below is timed.
RT=/sys/module/rrxe/parameters/run_times
runs=$(stat_of nst qp_task_runs) rn=$(stat_of nst qp_run_ns)
check "run_times off by default: $runs runs left qp_run_ns at ${rn:-?}" \
	test "$(cat $RT)" = N -a "${runs:-0}" -gt 0 -a "${rn:-1}" = 0
echo 1 >$RT
read_data
xd0=$xd rd0=$rd xp0=$xp rp0=$rp
check "tun: rping -C 5 -V to its own address again" loop_rping tun2 5 18931
read_data
echo "# port_xmit_data +$((xd - xd0)) port_rcv_data +$((rd - rd0)) (4-octet words), packets +$((xp - xp0)) +$((rp - rp0))"
check "port_xmit_data moved" test "$((xd - xd0))" -gt 0
check "port_xmit_data and port_rcv_data moved alike" test "$((xd - xd0))" -eq "$((rd - rd0))"
check "port_xmit_packets and port_rcv_packets moved alike" test "$((xp - xp0))" -eq "$((rp - rp0))"
sb=$(stat_of nst sent_bytes) rb=$(stat_of nst rcvd_bytes)
read_data
check "rdma statistic: sent_bytes / 4 is port_xmit_data ($sb, $xd)" test "$((sb / 4))" -eq "$xd"
check "rdma statistic: rcvd_bytes / 4 is port_rcv_data ($rb, $rd)" test "$((rb / 4))" -eq "$rd"
# The QP tasks' own profile: the time of every run, and of its parts, each inside a run (a
# user UD QP's doorbell also sends outside runs; this exchange has none).
rn=$(stat_of nst qp_run_ns) parts=0 moved=1
for n in qp_rx_ns qp_tx_build_ns qp_tx_send_ns qp_deliver_ns qp_timer_arm_ns; do
	v=$(stat_of nst $n)
	echo "# $n $v"
	[ "${v:-0}" -gt 0 ] || moved=0
	parts=$((parts + ${v:-0}))
done
check "rdma statistic: qp_run_ns ($rn) and each of its parts moved" test "${rn:-0}" -gt 0 -a "$moved" = 1
check "... the parts add up to no more than the runs ($parts <= $rn)" test "$parts" -le "${rn:-0}"
echo 0 >$RT
check "rdma link delete nsu" rdma link delete nsu
check "$N1's sockets stay while nst exists" socks_are "$N1" 2
ip -n "$N1" link del nst0
check "deleting the tun netdev removes nst" wait_for 20 no_dev nst
check "... and closes $N1's sockets" wait_for 20 socks_are "$N1" 0

ip netns del "$N1"

# --- the RDMA core's exclusive netns mode ------------------------------------------------------
# The mode changes only while no namespace but init_net exists (the core answers EBUSY), so
# after the deletions above have run. In exclusive mode a device belongs to one namespace:
# init_net, where the core creates every device, even one added from inside a namespace.
# `rdma dev set DEV netns NS` moves it, as a container's tooling does to hand it the device
# of its netdev. The core resets every client for that (its unregistration minus the
# device's removal), so a user context open on the device is cut off
# (disassociate_ucontext: IBV_EVENT_DEVICE_FATAL); afterwards only NS sees the device and
# uses it. Deleting NS deletes its veth, and the device with it.
only_init_net() { rdma system set netns "$1"; }
loop_pp() { # DEV GID PORT: an ibv_rc_pingpong server and client in $N1, on DEV in loopback
	in1 timeout "$TMO" ibv_rc_pingpong -d "$1" -g "$2" -n 100 -c -p "$3" >"$LOG/loop.server" 2>&1 &
	local spid=$! ok=1
	wait_for 60 listens "$N1" "$3"
	in1 timeout "$TMO" ibv_rc_pingpong -d "$1" -g "$2" -n 100 -c -p "$3" 127.0.0.1 \
		>"$LOG/loop.client" 2>&1 || ok=0
	wait "$spid" || ok=0
	[ $ok = 1 ] || { tail -n 5 "$LOG/loop.server" "$LOG/loop.client"; return 1; }
}
M4=203.0.113.1
if check "rdma system set netns exclusive (once the namespaces are gone)" \
	wait_for 60 only_init_net exclusive; then
	ip netns add "$N1"
	ip link add nsv5 netns "$N1" type veth peer name nsv6
	ip link set nsv6 up
	ip -n "$N1" -batch - <<-EOF
	link set lo up
	addr add $M4/24 dev nsv5
	link set nsv5 up
	EOF
	check "a device added from inside $N1" in1 rdma link add nse type rrxe netdev nsv5
	check "init_net sees it (it belongs there)" rdma dev show nse
	check_fails "$N1 does not" in1 rdma dev show nse
	check "nse's GID table has $M4" wait_for 20 gid_index nse "$M4"
	gM=$(gid_index nse "$M4")
	rm -f "$LOG/cut" "$LOG/cut.open"
	python3 "$here/lib/fatal_hold.py" nse "$LOG/cut.open" "$LOG/cut" 120 >"$LOG/cut.log" 2>&1 &
	cut=$!
	check "a process in init_net holds a user context and a PD on nse" \
		wait_for 60 test -e "$LOG/cut.open"
	check "rdma dev set nse netns $N1" rdma dev set nse netns "$N1"
	check "... cut the holder's context off (IBV_EVENT_DEVICE_FATAL)" \
		wait_for 60 grep -q '^event=DEVICE_FATAL ' "$LOG/cut"
	wait "$cut"
	check_fails "init_net no longer sees nse" rdma dev show nse
	check "$N1 does" in1 rdma dev show nse
	check "ibv_devices in $N1 lists nse" bash -c "ip netns exec $N1 ibv_devices | grep -qw nse"
	check "in $N1: ibv_rc_pingpong -n 100 -c on nse in loopback" loop_pp nse "$gM" 18940
	check "ip netns del $N1" ip netns del "$N1"
	ip link add nsv7 type veth peer name nsv8
	check "nse went with $N1's veth: its name is free again (a new nse on nsv7)" \
		wait_for 60 rdma link add nse type rrxe netdev nsv7
	check "rdma link delete the new nse" rdma link delete nse
	ip link del nsv7
	check "rdma system set netns shared again" wait_for 60 only_init_net shared
else
	rdma system set netns shared 2>/dev/null
fi
check "the mode is shared" bash -c "rdma system show | grep -q 'netns shared'"
tap_end
