#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Times what the VM tests spend their time on, inside a guest: process spawns, a Python
# start, modprobe with a link add, ibv_devinfo, loopback round trips. It compares kernels
# (Documentation/rrxe/kernel.rst has the debug configuration's figures):
#
#   scripts/vm.sh --variant debug --module drivers/infiniband/sw/rrxe/rrxe.ko \
#           --out /tmp/timing --cmd "$PWD/scripts/vm-timing.sh"
set -u
t0=$(date +%s.%N)
for i in $(seq 20); do /bin/true; done
t1=$(date +%s.%N)
for i in $(seq 10); do ip link show lo >/dev/null; done
t2=$(date +%s.%N)
for i in $(seq 3); do python3 -c pass; done
t3=$(date +%s.%N)
modprobe rrxe
ip link add ub0 type veth peer name ub1
ip link set ub0 up
ip link set ub1 up
ip addr add 198.18.9.1/24 dev ub0
rdma link add rrxe0 type rrxe netdev ub0
sleep 2 # the IPv4 GID
t4=$(date +%s.%N)
for i in $(seq 5); do ibv_devinfo -d rrxe0 >/dev/null; done
t5=$(date +%s.%N)
timeout 120 ibv_rc_pingpong -d rrxe0 -g 1 -n 200 >/dev/null 2>&1 &
sleep 3 # the server listening
timeout 120 ibv_rc_pingpong -d rrxe0 -g 1 -n 200 127.0.0.1 >/dev/null 2>&1
wait
t6=$(date +%s.%N)
rdma link delete rrxe0
rmmod rrxe
t7=$(date +%s.%N)
ip link delete ub0
echo "true x20: $(echo "$t1 - $t0" | bc)"
echo "ip x10: $(echo "$t2 - $t1" | bc)"
echo "python3 x3: $(echo "$t3 - $t2" | bc)"
echo "modprobe+link add: $(echo "$t4 - $t3" | bc)"
echo "ibv_devinfo x5: $(echo "$t5 - $t4" | bc)"
echo "rc_pingpong 200 loopback: $(echo "$t6 - $t5" | bc)"
echo "delete+rmmod: $(echo "$t7 - $t6" | bc)"
