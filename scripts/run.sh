#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make run`: build everything that is missing, boot two VMs joined by a wire, load rrxe
# in each, create rrxe0 over the wire's NIC, and move data between the two through
# unmodified rdma-core tools (ibv_rc_pingpong, rping over rdma_cm).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export HOME="${HOME:-/root}"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

scripts/deps.sh
scripts/kernel.sh build release >/dev/null
make --no-print-directory -s module VARIANT=release
out=${RRXE_RUN_OUT:-$(mktemp -d /tmp/rrxe-run.XXXXXX)}
exec scripts/vm.sh --variant release --two --out "$out" \
	--module drivers/infiniband/sw/rrxe/rrxe.ko \
	--cmd "scripts/demo.sh" --cmd-b "scripts/demo.sh"
