# SPDX-License-Identifier: GPL-2.0
# What both sides of the wire spray test agree on (sourced by selftests/rrxe/spray.sh and
# spray-peer.sh).

# Packets per class (selftests/rrxe/lib/roce_spray.py: six classes); both may be set from the
# environment for a long spray (vm.sh --env on both sides).
SPRAY_N=${SPRAY_N:-150}
# Exchanges of the pingpong the spray aims at: many more than the time the QP phase takes,
# so that the QP is live throughout it (spray-peer.sh checks that it was, and prints both
# durations). 500 took 14.6 s under the spray in a release guest with the table-loop ICRC
# and 3.6 s with the kernel's crc32_le(), which ended before the QP phase had; 2,000 took
# 7.6 s against a QP phase of 2.8 s. 3,000 leave a margin of about four.
SPRAY_PP_N=${SPRAY_PP_N:-3000}
SPRAY_PORT=18800
# selftests/rrxe/reliability.py's control port for the RC traffic beside the pingpong.
SPRAY_TRAFFIC_PORT=18801
# The address no path leads to that the foreign packets claim to come from.
SPRAY_FOREIGN=198.18.0.99
