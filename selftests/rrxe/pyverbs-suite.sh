#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own test suite (shipped by python3-pyverbs in /usr/share/doc/rdma-core/tests)
# against one soft-RoCE device: rrxe (default) or rdma_rxe for comparison.
#
#   pyverbs-suite.sh [rrxe|rxe|librrxe] [UNITTEST ARGS...]
#
# librrxe: rrxe through the project's provider (provider/librrxe-rdmav34.so, named in
# RDMAV_DRIVERS) instead of rdma-core's rxe provider. Then the suite's XRC tests must pass
# (the stock provider has no XRC verbs, so they skip there), and when the stock run of the
# same boot left its log (pyverbs-rrxe.log beside this run's), every test that passed
# there must pass here.
#
# Needs one VM; the device runs over eth0 when there is one, else over a veth pair. rdma_rxe
# and rrxe both bind UDP 4791: the script loads its module, runs, and unloads it again.
# Prints the suite's counts and each failing test as TAP comments; the TAP check is that
# no test fails or errors.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"

kind=${1:-rrxe}
shift $(($# > 0 ? 1 : 0))
case $kind in
rrxe) mod=rrxe dev=rrxe0 ;;
rxe) mod=rdma_rxe dev=rxe0 ;;
librrxe)
	mod=rrxe dev=rrxe0
	export RDMAV_DRIVERS=$here/provider/librrxe
	;;
*)
	echo "usage: $0 [rrxe|rxe|librrxe] [unittest args...]" >&2
	exit 2
	;;
esac
SRC=/usr/share/doc/rdma-core/tests
WORK=/tmp/pyverbs-tests # a tmpfs in the VM
LOG=${RRXE_RESULTS:-/tmp}/pyverbs-$kind.log

tap_begin "rdma-core test suite (pyverbs) on $dev ($mod${RDMAV_DRIVERS:+, through librrxe})"
if [ ! -f "$SRC/run_tests.py" ]; then
	skip "rdma-core test suite" "python3-pyverbs is not installed ($SRC)"
	tap_end
	exit
fi
if [ "$kind" = librrxe ] && [ ! -f "$RDMAV_DRIVERS-rdmav34.so" ]; then
	skip "rdma-core test suite through librrxe" "no $RDMAV_DRIVERS-rdmav34.so (scripts/kselftest.sh builds it)"
	tap_end
	exit
fi

if [ -e /sys/class/net/eth0 ]; then
	nd=eth0
	addr=${RRXE_LOCAL_IP4:-}
	ip link set eth0 up
else
	nd=vps0
	addr=198.51.100.1
	ip link add vps0 type veth peer name vps1
	ip addr add "$addr/24" dev vps0
	ip link set vps1 up
	ip link set vps0 up
fi
check "modprobe $mod" modprobe "$mod"
check "rdma link add $dev type ${mod#rdma_} netdev $nd" rdma link add "$dev" type "${mod#rdma_}" netdev "$nd"
wait_for 10 gid_index "$dev" "$addr"
gid=$(gid_index "$dev" "$addr")
check "IPv4 GID index of $addr found ($gid)" test -n "$gid"

rm -rf "$WORK"
cp -r "$SRC" "$WORK"
gunzip -f "$WORK"/*.gz
cd "$WORK" || exit 1
start=$SECONDS
python3 run_tests.py --dev "$dev" --gid "$gid" -v "$@" >"$LOG" 2>&1
rc=$?
secs=$((SECONDS - start))
cd / || exit 1

# unittest -v: "name (module.Class.name) ... ok|FAIL|ERROR|skipped '...'|expected failure"
ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$LOG")
n_ok=$(grep -cE ' \.\.\. ok$' "$LOG")
n_fail=$(grep -cE ' \.\.\. FAIL$' "$LOG")
n_err=$(grep -cE ' \.\.\. ERROR$' "$LOG")
n_skip=$(grep -cE ' \.\.\. skipped' "$LOG")
echo "# suite on $dev: ran ${ran:-?} in ${secs}s: $n_ok passed, $n_fail failed, $n_err errors, $n_skip skipped (exit $rc)"
echo "# last line: $(tail -1 "$LOG")"
grep -E ' \.\.\. (FAIL|ERROR)$' "$LOG" | sed 's/^/#   /'
# A test unittest could not even load also counts as an error.
grep -E '^ERROR: ' "$LOG" | grep -v ' (' | sed 's/^/#   load: /'
# Tests that race the provider's asynchronous completions and fail now and then on both
# soft-RoCE drivers: test_resize_cq posts sends and, without polling, expects the CQ to hold
# all their completions already when it shrinks the CQ (rdma_rxe failed it here too). A
# failure of one of these is reported, not counted.
RACY='test_resize_cq '
n_racy=0
for t in $RACY; do
	if grep -qE "^(FAIL|ERROR): $t" "$LOG"; then
		echo "# known race, not counted: $t (also fails on rdma_rxe; see the script)"
		n_racy=$((n_racy + 1))
	fi
done
check "the suite ran to its summary" test -n "$ran"
check "no test failed or errored on $dev ($n_fail failed, $n_err errors, $n_racy known races)" \
	test "$((n_fail + n_err - n_racy))" = 0

if [ "$kind" = librrxe ]; then
	# rdma-core's XRC tests (XRCResources: a domain on a file, XRC SRQs, XRC_SEND and
	# XRC_RECV QPs) with ibv_post_send, the extended send API and the extended CQ.
	for t in test_xrc_atomic_fetch_and_add test_xrc_atomic_cmp_and_swap test_qp_ex_xrc_send \
		test_qp_ex_xrc_send_imm test_xrc_traffic_cq_ex test_ro_xrc_traffic; do
		check "$t passes through librrxe" grep -qE "^$t \(.*\) \.\.\. ok$" "$LOG"
	done
	stock=${LOG%/*}/pyverbs-rrxe.log
	if [ -f "$stock" ]; then
		# Files, not process substitution: the guests have no /dev/fd.
		passed() { sed -n 's/^\(test_[^ ]*\) (.*) \.\.\. ok$/\1/p' "$1" | sort; }
		passed "$stock" >"$WORK.stock" && passed "$LOG" >"$WORK.ours"
		lost=$(comm -23 "$WORK.stock" "$WORK.ours")
		rm -f "$WORK.stock" "$WORK.ours"
		[ -n "$lost" ] && sed 's/^/#   passed with the stock provider only: /' <<<"$lost"
		check "every test that passed with the stock provider in this boot passes through librrxe" \
			test -z "$lost"
	else
		skip "the stock provider's passes also pass here" "no stock run in this boot ($stock)"
	fi
fi

check "rdma link delete $dev" rdma link delete "$dev"
check "rmmod $mod" rmmod "$mod"
[ "$nd" = vps0 ] && ip link del vps0
tap_end
