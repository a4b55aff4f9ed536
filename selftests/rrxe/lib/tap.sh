#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# KTAP output for the in-VM tests, written through the kernel's kselftest helpers
# (kselftest/ktap_helpers.sh of the install scripts/kselftest.sh made).
#
#   tap_begin NAME          print the KTAP header and NAME
#   check DESC CMD...       run CMD, report ok/not ok with DESC
#   check_fails DESC CMD... CMD must fail
#   skip DESC REASON        report a skip, its reason in the description
#   subtest DESC CMD...     run CMD, a program with a KTAP stream of its own, as a subtest:
#                           its lines indented one level, then one result for it here (ok on
#                           exit 0, a skip on exit 4, KSFT_SKIP, not ok otherwise)
#   tap_end                 print the plan and the totals; return 1 if anything failed
#   soak                    true in `make soak` (RRXE_SOAK=1), which runs the long variants
#   tap_need_peer           a program of two VMs: skip it all (KTAP "1..0 # SKIP", exit 4)
#                           on a VM without a peer (scripts/vm.sh --two sets RRXE_PEER_IP4)
#
# A check or check_fails that takes 20 s or more is followed by "# took N s": where the
# time of `make check` goes.

# The helpers sit at kselftest/ beside the collections of an install (this file being
# rrxe/lib/tap.sh there); a script run from the checkout uses the checkout's install.
_tap_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for _tap_ktap in "$_tap_lib/../../kselftest/ktap_helpers.sh" \
	"$_tap_lib/../../../build/kselftest/kselftest/ktap_helpers.sh"; do
	[ -r "$_tap_ktap" ] && break
done
if [ ! -r "$_tap_ktap" ]; then
	echo "Bail out! no kselftest/ktap_helpers.sh: install the target first (scripts/kselftest.sh)"
	exit 1
fi
# shellcheck source=/dev/null
. "$_tap_ktap"

TAP_N=0
TAP_PASS=0
TAP_FAIL=0
TAP_SKIP=0
TAP_LOG=${TAP_LOG:-/tmp/tap-cmd.log}

# The helpers echo their arguments unquoted: a description's `*` or `?` must not glob.
_ktap() {
	local globbing=1
	case $- in *f*) globbing=0 ;; esac
	set -f
	"$@"
	[ $globbing = 0 ] || set +f
}

tap_need_peer() {
	[ -n "${RRXE_PEER_IP4:-}" ] && return 0
	ktap_print_header
	ktap_skip_all "$(basename "$0") needs a peer VM on the wire (scripts/vm.sh --two); none here"
	exit "$KSFT_SKIP"
}

soak() {
	[ "${RRXE_SOAK:-0}" = 1 ]
}
# Why `make check` skips a soak-only check (tap.py has the same).
SOAK_ONLY="soak only (make soak: RRXE_SOAK=1)"

# One stream a program; a helper's stream nests in it as a subtest (subtest below).
tap_begin() {
	TAP_N=0 TAP_PASS=0 TAP_FAIL=0 TAP_SKIP=0
	KTAP_TESTNO=1 KTAP_CNT_PASS=0 KTAP_CNT_FAIL=0 KTAP_CNT_SKIP=0
	ktap_print_header
	_ktap ktap_print_msg "$1"
}

_tap_result() { # status desc [detail]
	TAP_N=$((TAP_N + 1))
	if [ "$1" = ok ]; then
		TAP_PASS=$((TAP_PASS + 1))
		_ktap ktap_test_pass "$2"
	else
		TAP_FAIL=$((TAP_FAIL + 1))
		_ktap ktap_test_fail "$2"
		[ -n "${3:-}" ] && sed 's/^/#   /' <<<"$3"
	fi
}

_tap_took() { # start (in $SECONDS)
	local t=$((SECONDS - $1))
	[ $t -lt 20 ] || echo "# took $t s"
}

check() {
	local desc=$1 t0=$SECONDS
	shift
	if "$@" >"$TAP_LOG" 2>&1; then
		_tap_result ok "$desc"
	else
		_tap_result fail "$desc" "$(printf '%s\n' "command: $*" "$(tail -20 "$TAP_LOG")")"
	fi
	_tap_took $t0
}

check_fails() {
	local desc=$1 t0=$SECONDS
	shift
	if "$@" >"$TAP_LOG" 2>&1; then
		_tap_result fail "$desc" "command unexpectedly succeeded: $*"
	else
		_tap_result ok "$desc"
	fi
	_tap_took $t0
}

skip() {
	TAP_N=$((TAP_N + 1))
	TAP_SKIP=$((TAP_SKIP + 1))
	# ktap_test_skip takes no reason; the description carries it.
	_ktap ktap_test_skip "$1 (skipped: $2)"
}

# KTAP nesting (Documentation/dev-tools/ktap.rst): a subtest's lines, from its version line
# to its last, are indented by two spaces, and its parent's result line follows them. The
# indenting loop is bash's own: a process costs seconds in a debug guest. stderr is
# indented with the rest ("unknown lines" may be either).
subtest() {
	local desc=$1 t0=$SECONDS line rc
	shift
	"$@" 2>&1 | while IFS= read -r line; do printf '  %s\n' "$line"; done
	rc=${PIPESTATUS[0]}
	case $rc in
	0) _tap_result ok "$desc" ;;
	"$KSFT_SKIP") skip "$desc" "the subtest skipped itself (exit $rc)" ;;
	*) _tap_result fail "$desc" "subtest exit $rc: $*" ;;
	esac
	_tap_took $t0
	[ "$rc" = 0 ] || [ "$rc" = "$KSFT_SKIP" ]
}

# Whether a TCP socket listens on PORT, in namespace NS if given: the servers of the
# pingpong programs and perftest, which exchange their QP numbers over TCP, are ready then.
listening() { # PORT [NS]
	local run=()
	[ -z "${2:-}" ] || run=(ip netns exec "$2")
	"${run[@]}" ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

# The value of ARGS' -p option: the port a pingpong program or perftest listens on.
port_of() { # ARGS...
	while [ $# -gt 1 ]; do [ "$1" = -p ] && { echo "$2"; return; }; shift; done
}

# Whether an rdma_cm ID listens on PORT (rping's server has no TCP socket).
cm_listening() { # PORT
	rdma resource show cm_id | grep LISTEN | grep -q ":$1 "
}

# Polls CMD for up to SECONDS (default 5) until it succeeds.
wait_for() {
	local secs=$1
	shift
	local end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.1
	done
}

# The plan comes last, as TAP allows: a script's checks are not counted beforehand.
# ktap_finished would exit; scripts still clean up after this.
tap_end() {
	ktap_set_plan "$TAP_N"
	ktap_print_totals
	[ "$TAP_FAIL" -eq 0 ]
}
