#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Guest instructions an iteration, by function, from two counts of scripts/qemu-plugin/
insncount.c (scripts/profile-insns.sh): KALLSYMS BASE BIG N [TOP]. Each block's executions
in BIG less those in BASE, times its instructions, divided by N, go to the kernel symbol
(or module symbol, "[module]") the block starts in; blocks in user space to "[user]"."""
import bisect
import collections
import re
import subprocess
import sys

KERNEL_START = 0xFFFF800000000000


def symbols(path):
    syms = []
    with open(path) as f:
        for line in f:
            fields = line.split()
            addr = int(fields[0], 16)
            if addr and fields[1] in "tTwW":
                module = " " + fields[3] if len(fields) > 3 else ""
                syms.append((addr, fields[2] + module))
    syms.sort()
    return syms


def blocks(path):
    runs = collections.Counter()
    with open(path) as f:
        for line in f:
            vaddr, insns, count = line.split()
            runs[(int(vaddr, 16), int(insns))] += int(count)
    return runs


def demangled(names):
    """The names as c++filt reads them (Rust's v0 mangling too), without crate hashes."""
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                             text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return names
    return [re.sub(r"\[[0-9a-f]{16}\]", "", o) for o in out[: len(names)]]


def main():
    kallsyms, base_path, big_path, n = sys.argv[1:5]
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 40
    n = int(n)
    syms = symbols(kallsyms)
    starts = [a for a, _ in syms]
    base = blocks(base_path)
    per = collections.Counter()
    for (vaddr, insns), count in blocks(big_path).items():
        extra = count - base.get((vaddr, insns), 0)
        if vaddr < KERNEL_START:
            name = "[user]"
        else:
            i = bisect.bisect_right(starts, vaddr) - 1
            name = syms[i][1] if i >= 0 else "[unknown]"
        per[name] += extra * insns
    # A function can come out below zero: the boots' own timed loops (the delay loop's
    # and the TSC's calibrations) run as often as their host time allows, in either boot.
    # The kernel's total is its functions' positive counts; the negative ones are shown.
    user = per["[user]"] / n
    kernel = sum(c for name, c in per.items() if name != "[user]" and c > 0) / n
    noise = sum(c for c in per.values() if c < 0) / n
    modules = collections.Counter()
    for name, c in per.items():
        if name.endswith("]") and " [" in name:
            modules[name.rsplit(" ", 1)[1]] += c
    print(f"  {user + kernel:10.0f}  all, of which user space {user:.0f} and the kernel {kernel:.0f}"
          f" (functions below zero, left out: {noise:.0f})")
    for module, c in sorted(modules.items(), key=lambda m: -m[1]):
        if c / n >= 1:
            print(f"  {c / n:10.0f}  module {module}")
    rows = [(name, c) for name, c in per.most_common(top) if c / n >= 1]
    for (name, c), shown in zip(rows, demangled([name for name, _ in rows])):
        print(f"  {c / n:10.0f}  {shown}")


if __name__ == "__main__":
    main()
