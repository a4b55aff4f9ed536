#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Guest instructions an iteration, by function, from two counts of scripts/qemu-plugin/
insncount.c (scripts/profile-insns.sh): BASE BIG N [TOP], two run directories holding the
plugin's "blocks" and the boot's "kallsyms". Each block's executions in BIG less those in
BASE, times its instructions, divided by N, go to the kernel symbol (or module symbol,
"[module]") the block starts in; blocks in user space to "[user]". A block is matched
between the two boots by its symbol and its offset in it: a module may load at another
address in each boot (a module's blocks matched by address then went unsubtracted, and
its functions came out (N + base) / N times their cost)."""
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


def located(run):
    """The blocks of the run directory `run`, keyed by (symbol, offset in it, instructions);
    a block in user space by its address, under "[user]"."""
    syms = symbols(f"{run}/kallsyms")
    starts = [a for a, _ in syms]
    runs = collections.Counter()
    for (vaddr, insns), count in blocks(f"{run}/blocks").items():
        if vaddr < KERNEL_START:
            key = ("[user]", vaddr, insns)
        else:
            i = bisect.bisect_right(starts, vaddr) - 1
            if i >= 0:
                key = (syms[i][1], vaddr - syms[i][0], insns)
            else:
                key = ("[unknown]", vaddr, insns)
        runs[key] += count
    return runs


def main():
    base_run, big_run, n = sys.argv[1:4]
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    n = int(n)
    base = located(base_run)
    per = collections.Counter()
    for key, count in located(big_run).items():
        name, _, insns = key
        per[name] += (count - base.get(key, 0)) * insns
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
