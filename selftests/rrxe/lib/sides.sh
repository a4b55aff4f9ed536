# SPDX-License-Identifier: GPL-2.0
# The choreographies (side-a.sh, side-b.sh, release-a.sh, release-b.sh): each VM of a boot
# runs its list of this collection's programs, in order, through the kernel's kselftest
# runner of the install it sits in. Sourced.
#
#   run_programs PROGRAM...   run_kselftest.sh -t rrxe:PROGRAM ..., its KTAP on stdout, and
#                             after each program's result line "# rrxe: PROGRAM: N s";
#                             returns 1 if a program failed or the runner did not run
#
# make soak (RRXE_SOAK=1) runs the long variants and lifts each program's time limit from
# the settings file's 1800 s to 3 hours.
run_programs() {
	local base runner t args=() line start=$SECONDS failed=0
	base=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	runner=$base/run_kselftest.sh
	if [ ! -x "$runner" ]; then
		echo "Bail out! $runner: the choreographies run from a kselftest install (scripts/kselftest.sh)"
		return 1
	fi
	for t in "$@"; do
		args+=(-t "rrxe:$t")
	done
	[ "${RRXE_SOAK:-0}" = 1 ] && args+=(-o 10800)
	# A pipe, not a process substitution: the guests have no /dev/fd.
	"$runner" "${args[@]}" 2>&1 | {
		while IFS= read -r line; do
			echo "$line"
			case $line in
			"ok "*" selftests: rrxe: "* | "not ok "*" selftests: rrxe: "*)
				t=${line#* selftests: rrxe: }
				echo "# rrxe: ${t%% *}: $((SECONDS - start)) s"
				start=$SECONDS
				case $line in "not ok "*) failed=1 ;; esac
				;;
			esac
		done
		return $failed
	}
}
