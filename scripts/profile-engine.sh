#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The transport engine's instructions per message, counted on the host: streams of RDMA Writes
# through the simulation (sim/cost.rs: 64-byte messages, and 64 KiB ones at path MTU 1024) and
# 2-byte RDMA Reads one at a time (ib_read_lat's shape), run under callgrind, once for each of
# the engine's entry points, counting from entry to return (--toggle-collect), callees
# included: attributing inlined code to functions afterwards is not reliable across builds. Instruction counts do not depend on scheduling, so two runs of one
# commit agree and two commits compare directly (Documentation/rrxe/benchmarks.rst).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "profile-engine: no valgrind; make deps installs it" >&2; exit 1; }
bin=$(CARGO_PROFILE_RELEASE_DEBUG=true cargo test --release --lib --no-run --message-format=json 2>/dev/null |
	python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "rrxe_transport":
        print(m["executable"])')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Instructions executed in test $1 ($2 messages) while inside functions matching $3 (callees
# included), per message.
inside() {
	RRXE_COST_MESSAGES=$2 valgrind -q --tool=callgrind --callgrind-out-file="$out" \
		--toggle-collect="$3" "$bin" --exact --test-threads=1 "transport::sim::cost::$1" >/dev/null
	awk -v n="$2" '/^(summary|totals):/ { printf "%.0f", $2 / n; exit }' "$out"
}
# The table for test $1 of $2 messages of $3 request packets each.
table() {
	local total=0 n
	for entry in poll_transmit handle_packet poll_completion; do
		n=$(inside "$1" "$2" "*::qp::Qp::$entry")
		printf '  %-16s %8d\n' "$entry" "$n"
		total=$((total + n))
	done
	printf '  %-16s %8d  (%d a request packet), of which the simulation'"'"'s queues and memory %d\n' \
		"in all" "$total" $((total / $3)) "$(inside "$1" "$2" '*sim::Fake*')"
}
echo "engine instructions per message, requester and responder:"
echo "64-byte RDMA Writes (20,000 messages):"
table a_stream_of_small_writes_lands_in_order 20000 1
echo "64 KiB RDMA Writes at path MTU 1024 (500 messages):"
table a_stream_of_64k_writes_lands_in_order 500 64
echo "2-byte RDMA Reads, one at a time (20,000 Reads; per Read: the request and its response):"
table a_ping_pong_of_small_reads_returns_each_ones_bytes 20000 1
