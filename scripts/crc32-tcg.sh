#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The ICRC's CRC-32 three ways (scripts/crc32-tcg.c) on the host, then in a release guest
# under TCG, where an instruction's cost is the emulator's and not the CPU's
# (Documentation/rrxe/benchmarks.rst, *The ICRC on the real path*).
set -eu
cd "$(dirname "$0")/.."
mkdir -p build
gcc -O2 -mpclmul -static -o build/crc32-tcg scripts/crc32-tcg.c
echo "host: $(build/crc32-tcg)"
printf '#!/bin/sh\n%s/build/crc32-tcg\n' "$PWD" >build/crc32-tcg.run
chmod +x build/crc32-tcg.run
scripts/vm.sh --variant release --cmd build/crc32-tcg.run | grep '^CRC' | sed 's/^/TCG guest: /'
