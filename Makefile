# SPDX-License-Identifier: GPL-2.0
#
# rrxe: see README.md. The two commands a user needs are `make run` and `make check`;
# both install what is missing and build what is stale first.

SHELL := /bin/bash
HOME ?= /root
export HOME
export PATH := $(or $(CARGO_HOME),$(HOME)/.cargo)/bin:$(PATH)
export LIBCLANG_PATH := /usr/lib/llvm-19/lib

VARIANT ?= release
KDIR = $(shell scripts/kernel.sh dir $(VARIANT))
KMAKE = $(MAKE) -C $(KDIR) ARCH=x86_64 LLVM=-19 M=$(CURDIR)

.PHONY: all deps kernel module kselftest run check soak bench bench-local bench-ab bench-sweep profile-engine profile-guest profile-insns test-host provider lint clean

all: module

deps:
	@scripts/deps.sh

kernel: deps
	@scripts/kernel.sh build $(VARIANT) >/dev/null

# The module is built against one kernel at a time: a build for the other variant starts clean.
# RRXE_LAYOUT_PAD=1 builds the same code at other addresses, for `make bench-ab` (Kbuild).
module: kernel
	@if [ -f .module-kdir ] && [ "$$(cat .module-kdir)" != "$(KDIR)" ]; then $(KMAKE) clean >/dev/null; fi
	@echo "$(KDIR)" > .module-kdir
	+$(KMAKE) modules

# The in-VM tests as a kselftest target, installed with the kernel's runner into
# build/kselftest (scripts/kselftest.sh; Documentation/rrxe/testing.rst).
kselftest: kernel
	@scripts/kselftest.sh $(VARIANT)

# Host-side checks of the sans-IO transport core, the provider, and the module's lint gate.
test-host: deps
	cargo test --quiet --workspace

# librrxe, the userspace provider (providers/rrxe), as build/provider/librrxe-rdmav34.so.
provider: deps
	@scripts/provider.sh build

lint: kernel
	@scripts/lint.sh $(VARIANT)

run:
	@scripts/run.sh

check:
	@scripts/check.sh

# make check with the long variants of the VM tests (hours, not minutes).
soak:
	@RRXE_SOAK=1 scripts/check.sh

# A benchmark, not a test: perftest on rrxe and rdma_rxe in one boot, with ratios.
bench:
	@scripts/bench.sh

# The same comparison in one VM: loopback on one device and two devices over a veth pair,
# rounds interleaved, with spreads.
bench-local:
	@scripts/bench.sh local

# Builds of rrxe measured against each other in that VM over the veth pair, in one boot:
# make bench-ab AB='old/rrxe.ko new/rrxe.ko [rdma_rxe]'.
bench-ab:
	@scripts/bench.sh ab $(AB)

# The perftest sweep in that VM: message sizes, QP counts, path MTUs.
bench-sweep:
	@BENCH_SWEEP=1 scripts/bench.sh local

# The transport engine's instructions per message on the host, under callgrind: exact, so
# two commits compare without a VM (scripts/profile-engine.sh).
profile-engine: deps
	@scripts/profile-engine.sh

# Where the guest's CPU time goes while perftest runs on rrxe and rdma_rxe in loopback
# (BENCH_PROFILE_PAIR=1: between two devices over a veth pair), sampled by perf in the
# guest (selftests/rrxe/profile-local.sh).
profile-guest:
	@scripts/bench.sh profile

# The guest instructions a perftest iteration costs, function by function, counted by QEMU
# (scripts/profile-insns.sh): exact, on rrxe and rdma_rxe.
profile-insns:
	@scripts/profile-insns.sh

clean:
	@if [ -d "$(KDIR)" ]; then $(KMAKE) clean >/dev/null; fi
	rm -f .module-kdir
	cargo clean 2>/dev/null || true
