#!/usr/bin/env bash
# Installs everything rrxe needs on a fresh Debian bookworm machine (run as root).
# Idempotent: a second run finds everything present and does nothing.
set -euo pipefail

PKGS=(
	clang-19 lld-19 llvm-19 libclang-19-dev
	linux-source-6.12
	bc bison flex libelf-dev libssl-dev cpio kmod xz-utils rsync python3
	qemu-system-x86
	rdma-core ibverbs-utils ibverbs-providers perftest rdmacm-utils python3-pyverbs libibverbs-dev
	iproute2 tshark busybox-static procps patch
	valgrind linux-perf
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "deps: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export HOME="${HOME:-/root}"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	echo "deps: rustup component add rust-src"
	rustup component add rust-src
fi
if ! rustup component list --installed 2>/dev/null | grep -q '^clippy'; then
	rustup component add clippy
fi
if ! rustup component list --installed 2>/dev/null | grep -q '^rustfmt'; then
	rustup component add rustfmt
fi
if ! bindgen --version 2>/dev/null | grep -q '0.69.5'; then
	echo "deps: cargo install bindgen-cli@0.69.5"
	cargo install --locked bindgen-cli@0.69.5
fi
