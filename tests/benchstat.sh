#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The benchmarks' arithmetic (selftests/rrxe/lib/benchstat.sh), on the host: perftest's summary
# rows in, the figures, medians, spreads and ratios that make bench, bench-local and bench-ab
# print out. Each check is one line of KTAP-like output; the exit status is the count of
# failures. Run by make check (scripts/check.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../selftests/rrxe/lib/benchstat.sh
. "$here/../selftests/rrxe/lib/benchstat.sh"

failed=0 n=0
expect() { # NAME WANT GOT
	n=$((n + 1))
	if [ "$2" = "$3" ]; then
		echo "ok $n $1"
	else
		echo "not ok $n $1: want '$2', got '$3'"
		failed=$((failed + 1))
	fi
}

# Five rounds of a bandwidth figure (perftest bw rows: bytes, iterations, peak, average MB/s,
# Mpps) for two builds; B is 4 MB/s ahead each round while both drift up together.
for r in 1 2 3 4 5; do
	add_figure A,bw bw "65536 2000 60.00 $((40 + 2 * r)).00 0.000700" 100 "$r"
	add_figure B,bw bw "65536 2000 60.00 $((44 + 2 * r)).00 0.000700" 100 "$r"
done
expect "the figures are the rows' average bandwidth, in order" "42.00 44.00 46.00 48.00 50.00 " \
	"${fig[A,bw]}"
expect "a figure is kept by round" "48.00" "${byround[B,bw,2]}"
expect "stat: median (min-max)" "46.00 (42.00-50.00)" "$(stat A,bw)"
expect "spread: (max - min) / median" "17%" "$(spread A,bw)"
expect "ratio: of the medians" "1.09" "$(ratio B,bw A,bw)"
expect "paired: every round's ratio, and B the faster in all" \
	"1.09 (1.08-1.10), faster in 5 of 5 rounds" "$(paired B,bw A,bw bw 5)"
expect "paired: the other way round, faster in none" \
	"0.92 (0.91-0.93), faster in 0 of 5 rounds" "$(paired A,bw B,bw bw 5)"

# Latency (lat rows: bytes, iterations, t_min, t_max, t_typical, t_avg us): lower is faster.
# A has no figure in round 3 (perftest's clock), so only four rounds pair; in round 5 the two
# are level, which is no win.
for r in 1 2 3 4 5; do
	[ "$r" = 3 ] || add_figure A,lat lat "2 1000 30.00 90.00 50.00 $((50 + r)).00 5.00" 0 "$r"
	add_figure B,lat lat "2 1000 30.00 90.00 50.00 $((60 - r)).00 5.00" 0 "$r"
done
expect "paired: rounds without both figures left out; level is not faster" \
	"1.08 (1.00-1.16), faster in 0 of 4 rounds" "$(paired B,lat A,lat lat 5)"
expect "paired: a lower latency is the faster" "0.93 (0.86-1.00), faster in 3 of 4 rounds" \
	"$(paired A,lat B,lat lat 5)"
expect "paired: nothing to pair" "-" "$(paired B,none A,lat lat 5)"
expect "stat: no figures" "-" "$(stat B,none)"

# Rate rows: thousands of messages a second from the Mpps column, kernel CPU us a message.
add_figure A,rate rate "64 20000 3.10 2.50 0.041000" 82 1
expect "rate: kmsg/s from Mpps" "41.0 " "${fig[A,rate]}"
hz=$(getconf CLK_TCK)
expect "rate: kernel CPU us a message" \
	"$(awk -v hz="$hz" 'BEGIN { printf "%.2f ", 82 / hz * 1e6 / 20000 }')" "${fig[A,rate,cpu]}"

echo "1..$n"
exit "$failed"
