#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Kernel verbs consumer tests: loads tests/kverbs/rrxe_kverbs_test.ko against one soft-RoCE
# device in loopback, rrxe (default) or rdma_rxe for comparison, and turns the KTAP lines
# the module prints to the kernel log (see the comment at the top of rrxe_kverbs_test.c)
# into this script's TAP stream; then unloads everything, checking each step, and checks
# the kernel log of the run for splats.
#
#   kverbs.sh [rrxe|rxe]
#
# The module runs all its tests in module_init(), so modprobe returns when they are done.
# The device runs over eth0 when there is one (--two), else over a veth pair. KVERBS_ARGS
# adds module parameters (e.g. KVERBS_ARGS=race_cycles=50). By hand:
#
#   make module VARIANT=debug
#   scripts/build-kverbs-test.sh debug
#   scripts/vm.sh --variant debug --module drivers/infiniband/sw/rrxe/rrxe.ko \
#       --module tests/kverbs/rrxe_kverbs_test.ko --cmd selftests/rrxe/kverbs.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"
. "$here/lib/splats.sh"

case ${1:-rrxe} in
rrxe) mod=rrxe dev=rrxe0 ;;
rxe) mod=rdma_rxe dev=rxe0 ;;
*)
	echo "usage: $0 [rrxe|rxe]" >&2
	exit 2
	;;
esac
tmod=rrxe_kverbs_test
log=/tmp/kverbs-$dev.log
lines_file=/tmp/kverbs-$dev.lines

tap_begin "kernel verbs consumer $tmod on $dev"
if [ -e /sys/class/net/eth0 ]; then
	nd=eth0
	addr=${RRXE_LOCAL_IP4:-}
	ip link set eth0 up
else
	nd=vng0
	addr=198.51.100.1
	ip link add vng0 type veth peer name vng1
	ip addr add "$addr/24" dev vng0
	ip link set vng1 up
	ip link set vng0 up
fi
check "modprobe $mod" modprobe "$mod"
check "rdma link add $dev type ${mod#rdma_} netdev $nd" \
	rdma link add "$dev" type "${mod#rdma_}" netdev "$nd"
check "RoCE v2 GID for $addr on $dev" wait_for 10 gid_index "$dev" "$addr"

# Runs CMD for at most SECS seconds; a command stuck in the kernel (which timeout(1)
# cannot kill) is left behind and counts as a failure.
bounded() { # SECS CMD...
	local secs=$1 pid i
	shift
	"$@" &
	pid=$!
	for ((i = 0; i < secs * 10; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			return
		fi
		sleep 0.1
	done
	echo "still running after $secs s, abandoned: $*"
	return 124
}

# The kernel log from the module's last "KTAP version 1" line on.
run_log() {
	dmesg | awk -v m="$tmod: KTAP version 1" 'index($0, m) { buf = "" } { buf = buf $0 "\n" }
		END { printf "%s", buf }' >"$log"
}
has_totals() {
	run_log
	grep -q "$tmod: # totals:" "$log"
}

t0=$SECONDS
# shellcheck disable=SC2086 # KVERBS_ARGS is a list of parameters
check "modprobe $tmod dev=$dev${KVERBS_ARGS:+ $KVERBS_ARGS}" modprobe "$tmod" dev="$dev" ${KVERBS_ARGS:-}
echo "# the module's tests took $((SECONDS - t0)) s"
check "module printed its totals" wait_for 30 has_totals

# The guest has no /dev/fd: no process substitution.
sed -n "s/^.*$tmod: //p" "$log" >"$lines_file"
plan='' totals='' lines=0
while IFS= read -r line; do
	case $line in
	"ok "*" # SKIP "*)
		desc=${line#ok * - }
		skip "${desc%% # SKIP *}" "${desc#* # SKIP }"
		;;
	"ok "*) _tap_result ok "${line#ok * - }" ;;
	"not ok "*) _tap_result fail "${line#not ok * - }" ;;
	"# totals:"*) totals=${line#\# totals: } ;;
	"#"*) echo "$line" ;;
	"1.."*) plan=${line#1..} ;;
	"KTAP version"*) continue ;;
	*) echo "# $line" ;;
	esac
	case $line in "ok "* | "not ok "*) lines=$((lines + 1)) ;; esac
done <"$lines_file"
echo "# module totals: ${totals:-none}"
check "module's plan (1..${plan:-?}) matches its $lines result lines" test "$plan" = "$lines"

if [[ $totals == *wedged* ]]; then
	_tap_result fail "rmmod $tmod" "not attempted: a test hung, the module pinned itself"
	_tap_result fail "rdma link delete $dev" "not attempted: the test module holds the device"
else
	check "rmmod $tmod" rmmod "$tmod"
	check "rdma link delete $dev" bounded 60 rdma link delete "$dev"
	[ "$nd" = vng0 ] && ip link delete vng0
	check "rmmod $mod" rmmod "$mod"
fi
run_log
check "no kernel splat in the log of the run" rrxe_check_splats -- "$log"
tap_end
