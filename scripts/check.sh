#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make check`: every host and VM test, on the debug kernel. Installs and builds what is
# missing first. Ends with one line `N passed, N failed` counting all tests together.
# `make soak` (RRXE_SOAK=1): the same, with the long variants of the VM tests (every
# impairment of the RC reliability tests on its own, 1,000-message credit rounds, every
# multicast direction, perftest in loopback on the debug kernel, longer SRQ pingpongs);
# make check skips those, each skip naming make soak.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo" || exit 2
export HOME="${HOME:-/root}"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export LIBCLANG_PATH=/usr/lib/llvm-19/lib

results=${RRXE_RESULTS:-$repo/results}
rm -rf "$results"
mkdir -p "$results"

passed=0
failed=0
failures=()

record() { # pass|fail name
	if [ "$1" = pass ]; then
		passed=$((passed + 1))
		echo "PASS: $2"
	else
		failed=$((failed + 1))
		failures+=("$2")
		echo "FAIL: $2"
	fi
}

# A step that is itself one test: its exit status decides.
step() { # name log command...
	local name=$1 log=$2
	shift 2
	if "$@" >"$log" 2>&1; then
		record pass "$name"
	else
		record fail "$name (log: $log)"
		tail -30 "$log" | sed 's/^/    /'
		return 1
	fi
}

# Counts a side's KTAP, as the kselftest runner prints it: each program's result at the top
# (`ok N selftests: rrxe: PROGRAM`, or `not ok ...` with `# exit=N` or `# TIMEOUT`), its own
# checks nested one level below (`# ok N ...`), and the checks of a helper program it runs as
# a subtest one more level down, indented (`#   ok N ...`). Every result counts, a program's
# or a subtest's as one more: one that died without a failing check still fails. Skips are
# reported, not counted. A failed check's detail (the `#   ` lines tap.report writes after it,
# at any level) follows its FAIL line, at most 20 lines: CI's output keeps only what make
# check prints, and a failure that happened once must say why there.
count_tap() { # file label
	local file=$1 label=$2 line detail=0
	[ -f "$file" ] || {
		record fail "$label: no output"
		return
	}
	while IFS= read -r line; do
		line=${line#\# }
		line=${line#"${line%%[! ]*}"}
		if ((detail > 0)) && [[ "$line" == "#   "* ]]; then
			echo "      ${line#\#   }"
			detail=$((detail - 1))
			continue
		fi
		detail=0
		case "$line" in
		"ok "*"# SKIP"*) echo "SKIP: $label: ${line#ok }" ;;
		"ok "*) record pass "$label: ${line#ok }" ;;
		"not ok "*)
			record fail "$label: ${line#not ok }"
			detail=20
			;;
		esac
	done <"$file"
}

echo "== dependencies"
scripts/deps.sh || {
	echo "0 passed, 1 failed"
	exit 1
}

echo "== host: the sans-IO transport core and the userspace provider"
cargo test --workspace --color never >"$results/cargo-test.log" 2>&1
cargo_rc=$?
read -r cp cf < <(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } } END { print p + 0, f + 0 }' "$results/cargo-test.log")
passed=$((passed + cp))
failed=$((failed + cf))
echo "cargo test: $cp passed, $cf failed"
if [ "$cargo_rc" -ne 0 ] && [ "$cf" -eq 0 ]; then
	record fail "cargo test (did not run; log: $results/cargo-test.log)"
	tail -30 "$results/cargo-test.log" | sed 's/^/    /'
fi
grep -E '^test .* FAILED$' "$results/cargo-test.log" | sed 's/^/FAIL: /'
step "the benchmarks' arithmetic: figures, medians, spreads, ratios, round by round" \
	"$results/benchstat.log" tests/benchstat.sh

echo "== lint"
step "cargo clippy (host core and provider) is clean" "$results/clippy.log" \
	cargo clippy --workspace --all-targets --color never -- -D warnings
step "librrxe loads beside libibverbs' private ABI 34 and refuses another" "$results/provider-abi.log" \
	scripts/provider.sh check-abi
step "rustfmt: all Rust sources formatted (kernel .rustfmt.toml)" "$results/rustfmt.log" \
	bash -c 'git ls-files "*.rs" | xargs rustfmt --check --edition 2021 --config-path .rustfmt.toml'

echo "== kernel (debug) and module"
step "debug kernel built (KASAN, lockdep, kmemleak)" "$results/kernel-debug.log" scripts/kernel.sh build debug
step "rrxe.ko builds warning-free with CLIPPY=1 on the debug kernel, no module cycles" \
	"$results/module.log" scripts/lint.sh debug
# The kernel verbs consumer the debug boot loads (selftests/rrxe/kverbs.sh); built after the
# lint, whose clean of the checkout would remove it.
step "the kernel verbs test module builds warning-free" "$results/kverbs-module.log" \
	scripts/build-kverbs-test.sh debug
# The VM tests as a kselftest target (selftests/rrxe), installed with the kernel's runner
# into build/kselftest, where the guests (whose root is the host's) run it; its C programs
# are built here rather than in a debug guest under TCG, where gcc took 40-110 s a program.
ksft=$repo/build/kselftest
step "the kselftest target builds (C programs warning-free) and installs; the debug kernel has its config" \
	"$results/kselftest.log" scripts/kselftest.sh debug "$ksft"

# vm_boot VARIANT NAME TITLE CMD-A CMD-B: two VMs joined by a wire run CMD-A and CMD-B (the
# choreographies of the kselftest install); every KTAP result counts, then each guest's
# kernel log is scanned for splats.
vm_boot() {
	local variant=$1 name=$2 title=$3 cmd_a=$4 cmd_b=$5 out="$results/$2" m mods=()
	for m in drivers/infiniband/sw/rrxe/rrxe.ko tests/kverbs/rrxe_kverbs_test.ko; do
		[ -f "$m" ] && mods+=(--module "$m")
	done
	# 5000 s: the guest's command gets 90 % of it less the boot (vm-init.sh), ~4,370 s for the
	# debug boot, and CI's 90 minutes still hold the host steps (~2 min with cached kernels),
	# the kernel log scans and the release boot (~5 min).
	local tmo=5000 soak=()
	[ "${RRXE_SOAK:-0}" = 1 ] && tmo=10800 soak=(--env RRXE_SOAK=1)
	echo "== VM: $title (two $variant VMs joined by a wire)"
	# The debug kernel under TCG is slow: leave room for a loaded machine.
	scripts/vm.sh --variant "$variant" --two --timeout "$tmo" --out "$out" \
		"${mods[@]}" "${soak[@]}" --allow-splat \
		--wires 2 --pcap "$out/wire.pcap" --cmd "$cmd_a" --cmd-b "$cmd_b" >"$results/$name.log" 2>&1
	local vm_rc=$?
	count_tap "$out/a.out" "$name vm-a"
	count_tap "$out/b.out" "$name vm-b"
	case $vm_rc in
	124) record fail "$name VMs finished in time (log: $results/$name.log)" ;;
	125) record fail "$name VMs ended with a status (log: $results/$name.log)" ;;
	esac
	# What vm.sh said of a guest that hung or died (with its console's last lines), not the
	# guests' output it streamed (prefixed [a] and [b]), is all that CI's output keeps of it.
	if ((vm_rc == 124 || vm_rc == 125)); then
		grep -v '^\[[ab]\] ' "$results/$name.log" | tail -n 60 | sed 's/^/    /'
	fi
	local side files f
	for side in a b; do
		files=()
		for f in dmesg kmemleak; do
			[ -f "$out/$side.$f" ] && files+=("$out/$side.$f")
		done
		if ((${#files[@]} == 0)); then
			record fail "$name vm-$side: kernel log captured"
		else
			step "$name vm-$side: no WARN/BUG/KASAN/lockdep/kmemleak report in the kernel log" \
				"$results/splat-$name-$side.log" scripts/vm.sh --check-dmesg "${files[@]}"
		fi
	done
}

if [ -f drivers/infiniband/sw/rrxe/rrxe.ko ]; then
	vm_boot debug foundation "foundation, objects, object limits, MRs, kernel verbs consumer, verbs data path, SRQ, XRC, MW, negative, hostile rings, QP context, UD multicast, path migration, RC reliability, NVMe-oF, teardown under traffic" \
		"$ksft/rrxe/side-a.sh" "$ksft/rrxe/side-b.sh"
	# Interoperability is about the wire protocol, and rdma-core's suite runs 273 tests of
	# mostly the same verbs; the debug kernel has already run every rrxe code path above, so
	# this boot uses the release kernel (its logs are still scanned) and takes minutes rather
	# than an hour. So do the wire proofs of a third sender and of credits (side-a.sh says
	# why; make soak runs them on the debug kernel too).
	if step "release kernel built" "$results/kernel-release.log" scripts/kernel.sh build release &&
		step "rrxe.ko builds for the release kernel" "$results/module-release.log" \
			make --no-print-directory module VARIANT=release &&
		step "the release kernel has the kselftest target's config" "$results/kselftest-release.log" \
			scripts/kselftest.sh release "$ksft"; then
		vm_boot release release "interoperability with rdma_rxe, a third sender on the wire, credits, rdma-core's test suite, rrxe in network namespaces" \
			"$ksft/rrxe/release-a.sh" "$ksft/rrxe/release-b.sh"
		grep -h '^# # suite on' "$results/release/a.out" 2>/dev/null | sed 's/^# # /rdma-core /'
	fi
else
	record fail "VM tests: rrxe.ko was not built"
fi

echo
if ((${#failures[@]})); then
	echo "Failed:"
	printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
