#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Memory windows, Local Invalidate and Send with Invalidate through unmodified rdma-core, on
# an rrxe device over eth0 (RC QPs looped back on the device), then rdma-core's own MWTest.
set -u
modprobe rrxe || exit 1
ip link set eth0 up
rdma link add rrxe0 type rrxe netdev eth0 || exit 1
# rdma-core ships its test package compressed; mw.py builds on its RC resources.
tests=$(mktemp -d)
cp -r /usr/share/doc/rdma-core/tests "$tests/"
gunzip -f "$tests"/tests/*.gz
# The link-local GID appears once IPv6 has configured eth0.
for _ in $(seq 50); do
	grep -qv '^0000' /sys/class/infiniband/rrxe0/ports/1/gids/0 2>/dev/null && break
	sleep 0.2
done
PYTHONPATH=$tests:$tests/tests python3 "$(dirname "$0")/mw.py"
rc=$?
echo "# rdma-core test_mr.MWTest"
(cd "$tests/tests" && python3 run_tests.py --dev rrxe0 --gid 0 -v test_mr.MWTest) >"$tests/mwtest.log" 2>&1
mwtest=$?
sed 's/^/# /' "$tests/mwtest.log"
if [ $mwtest -eq 0 ]; then
	echo "ok - rdma-core test_mr.MWTest"
else
	echo "not ok - rdma-core test_mr.MWTest"
	rc=1
fi
rdma link delete rrxe0
rmmod rrxe
exit $rc
