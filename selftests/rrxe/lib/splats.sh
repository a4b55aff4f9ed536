# shellcheck shell=bash
# Helpers shared by scripts/vm.sh and the test scripts: sourced, not run.

# Extended regular expression for kernel log lines that mean something went wrong in the
# kernel: warnings, BUGs, sanitizer and lockdep reports, oopses, kmemleak leaks, list
# corruption, atomic-sleep reports and Rust panics.
RRXE_SPLAT_RE='WARNING:|BUG:|KASAN|UBSAN|possible circular locking|possible recursive locking'
RRXE_SPLAT_RE+='|inconsistent lock state|suspicious RCU usage|Oops|general protection fault'
RRXE_SPLAT_RE+='|Call Trace:|unreferenced object|list_add corruption|list_del corruption'
RRXE_SPLAT_RE+='|sleeping function called from invalid context|rust_panic|panicked at'
RRXE_SPLAT_RE+='|Kernel panic'

# rrxe_check_splats [-i REGEX]... FILE...
#
# Prints every line of the FILEs that looks like a kernel splat as FILE:LINE:TEXT (at most
# 20 per file, then a count) on stderr and returns 1 if there was one, 0 if the files are
# clean. A line that also matches one of the -i REGEXes (extended regular expressions) is
# not a splat. A "Call Trace:" within 60 lines after another splat line belongs to that
# one (so ignoring a warning ignores its trace too); only a lone one is a splat. A FILE
# that does not exist is skipped; an empty list of FILEs is clean.
rrxe_check_splats() {
	local ign='' f hits n rc=0
	while (($#)); do
		case "$1" in
		-i)
			ign+="${ign:+|}($2)"
			shift 2
			;;
		--)
			shift
			break
			;;
		*) break ;;
		esac
	done
	for f in "$@"; do
		[ -f "$f" ] || continue
		hits=$(awk -v re="$RRXE_SPLAT_RE" -v ign="$ign" '
			$0 !~ re { next }
			/Call Trace:/ && last && FNR - last <= 60 { next }
			!/Call Trace:/ { last = FNR }
			ign != "" && $0 ~ ign { next }
			{ print FNR ":" $0 }' "$f")
		[ -n "$hits" ] || continue
		rc=1
		n=$(wc -l <<<"$hits")
		echo "rrxe: kernel splat in $f:" >&2
		head -n 20 <<<"$hits" | sed "s|^|  $f:|" >&2
		((n <= 20)) || echo "  ... and $((n - 20)) more matching lines" >&2
	done
	return "$rc"
}
