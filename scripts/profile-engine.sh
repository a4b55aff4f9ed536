#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The transport engine's instructions per message, counted on the host: a stream of 64-byte
# RDMA Writes through the simulation (sim/cost.rs) runs under callgrind, once for each of the
# engine's entry points, counting from entry to return (--toggle-collect), callees included:
# attributing inlined code to functions afterwards is not reliable across builds. Instruction
# counts do not depend on scheduling, so two runs of one commit agree and two commits compare
# directly (Documentation/rrxe/benchmarks.rst).
set -euo pipefail
cd "$(dirname "$0")/.."
messages=${RRXE_COST_MESSAGES:-20000}
if ! command -v valgrind >/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi
bin=$(CARGO_PROFILE_RELEASE_DEBUG=true cargo test --release --lib --no-run --message-format=json 2>/dev/null |
	python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "rrxe_transport":
        print(m["executable"])')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Instructions executed while inside functions matching $1 (callees included), per message.
inside() {
	RRXE_COST_MESSAGES=$messages valgrind -q --tool=callgrind --callgrind-out-file="$out" \
		--toggle-collect="$1" "$bin" --exact --test-threads=1 \
		transport::sim::cost::a_stream_of_small_writes_lands_in_order >/dev/null
	awk -v n="$messages" '/^(summary|totals):/ { printf "%8.0f", $2 / n; exit }' "$out"
}
echo "engine instructions per 64-byte RDMA Write ($messages messages, requester and responder):"
total=0
for entry in poll_transmit handle_packet poll_completion; do
	n=$(inside "*::qp::Qp::$entry")
	printf '  %-16s %s\n' "$entry" "$n"
	total=$((total + n))
done
printf '  %-16s %8d, of which the simulation'"'"'s queues and memory %s\n' "in all" "$total" \
	"$(inside '*sim::Fake*' | tr -d ' ')"
