# SPDX-License-Identifier: GPL-2.0
# The C programs of the VM tests (tests/vm/*.c), sourced after tap.sh.
#
#   helper_build NAME   tests/vm/NAME.c, built warning-free against libibverbs, as
#                       /tmp/NAME
#
# make check builds every tests/vm/*.c on the host first (scripts/check.sh, into
# build/vm-helpers/ with the same gcc flags; the guests see it at the same path, their root
# being the host's): gcc in a debug guest under TCG took 40-110 s a program. A host build
# newer than its source is copied; otherwise the guest compiles the source itself.
helper_build() {
	local src pre
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/vm/$1.c
	pre=${src%/tests/vm/*}/build/vm-helpers/$1
	if [ -x "$pre" ] && [ "$pre" -nt "$src" ]; then
		cp "$pre" "/tmp/$1"
	else
		gcc -O1 -Wall -Wextra -Werror -o "/tmp/$1" "$src" -libverbs
	fi
}
