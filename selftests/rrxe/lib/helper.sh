# SPDX-License-Identifier: GPL-2.0
# The C programs of the VM tests (selftests/rrxe/*.c), sourced after tap.sh.
#
#   helper_build NAME   the program NAME as /tmp/NAME
#
# The kselftest build compiles them on the host (the Makefile's TEST_GEN_FILES, warnings as
# errors), and the install holds them beside the scripts: gcc in a debug guest under TCG
# took 40-110 s a program. A script run from the checkout, which has no binaries, compiles
# the source in the guest with the same flags.
helper_build() {
	local dir
	dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	if [ -x "$dir/$1" ]; then
		cp "$dir/$1" "/tmp/$1"
	else
		gcc -O1 -Wall -Wextra -Werror -D_GNU_SOURCE= -o "/tmp/$1" "$dir/$1.c" -libverbs
	fi
}
