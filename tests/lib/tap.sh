#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Minimal kselftest-style TAP helpers for the in-VM tests.
#
#   tap_begin NAME          print the TAP header
#   check DESC CMD...       run CMD, report ok/not ok with DESC
#   check_fails DESC CMD... CMD must fail
#   skip DESC REASON        report a skip with its reason
#   tap_end                 print the plan and the totals; exit 1 if anything failed
#   soak                    true in `make soak` (RRXE_SOAK=1), which runs the long variants
#
# A check or check_fails that takes 20 s or more is followed by "# took N s": where the
# time of `make check` goes.

TAP_N=0
TAP_PASS=0
TAP_FAIL=0
TAP_SKIP=0
TAP_LOG=${TAP_LOG:-/tmp/tap-cmd.log}

soak() {
	[ "${RRXE_SOAK:-0}" = 1 ]
}
# Why `make check` skips a soak-only check (tap.py has the same).
SOAK_ONLY="soak only (make soak: RRXE_SOAK=1)"

tap_begin() {
	echo "TAP version 13"
	echo "# $1"
}

_tap_result() { # status desc [detail]
	TAP_N=$((TAP_N + 1))
	if [ "$1" = ok ]; then
		TAP_PASS=$((TAP_PASS + 1))
		echo "ok $TAP_N - $2"
	else
		TAP_FAIL=$((TAP_FAIL + 1))
		echo "not ok $TAP_N - $2"
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
	echo "ok $TAP_N - $1 # SKIP $2"
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

tap_end() {
	echo "1..$TAP_N"
	echo "# totals: $TAP_PASS passed, $TAP_FAIL failed, $TAP_SKIP skipped"
	[ "$TAP_FAIL" -eq 0 ]
}
