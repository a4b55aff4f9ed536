// SPDX-License-Identifier: GPL-2.0

//! Event counters with one copy per CPU, as the kernel's own statistics keep them: an
//! event adds to this CPU's copy with one instruction, no atomic operation and no shared
//! cache line; reading sums the copies. Under TCG an atomic add cost 8.8 ns and a per-CPU
//! one 2.3 (Documentation/rrxe/benchmarks.rst), and a looped-back 2-byte Read counted some
//! 25 events.

use super::bindings;
use core::sync::atomic::{AtomicU64, Ordering};

/// A 64-bit event count: per CPU (`alloc_percpu`), or, when that allocation failed, one
/// shared atomic, so that a count never goes missing.
pub(crate) enum PerCpuU64 {
    /// This CPU's copy is at `%gs:` plus the pointer (the kernel's per-CPU offset cookie,
    /// which the C side owns and frees).
    PerCpu(*mut u64),
    /// One count for all CPUs.
    Shared(AtomicU64),
}

// SAFETY: the per-CPU copies are reached only by per-CPU operations (each CPU its own, in
// one instruction) and summed with plain 64-bit loads; the allocation can be freed from any
// context.
unsafe impl Send for PerCpuU64 {}
// SAFETY: as above.
unsafe impl Sync for PerCpuU64 {}

impl Default for PerCpuU64 {
    /// A zero count. Process context (the per-CPU allocator may sleep).
    fn default() -> Self {
        // SAFETY: process context (the contract above); NULL on failure.
        let p = unsafe { bindings::rrxe_percpu_u64_alloc() };
        if p.is_null() {
            Self::Shared(AtomicU64::new(0))
        } else {
            Self::PerCpu(p)
        }
    }
}

impl PerCpuU64 {
    /// Adds `n`. Any context: the add is a single instruction on this CPU's copy, which
    /// neither an interrupt nor a migration can split.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        match self {
            Self::PerCpu(p) => this_cpu_add(*p, n),
            Self::Shared(a) => {
                a.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// The count: the sum of the CPUs' copies (each read whole; events being added as it
    /// reads may or may not be in it).
    pub(crate) fn get(&self) -> u64 {
        match self {
            // SAFETY: `p` came from `rrxe_percpu_u64_alloc` and is freed only on drop.
            Self::PerCpu(p) => unsafe { bindings::rrxe_percpu_u64_sum(*p) },
            Self::Shared(a) => a.load(Ordering::Relaxed),
        }
    }
}

impl Drop for PerCpuU64 {
    fn drop(&mut self) {
        if let Self::PerCpu(p) = self {
            // SAFETY: allocated in `default`, freed once; free_percpu may be called from any
            // context.
            unsafe { bindings::rrxe_percpu_u64_free(*p) };
        }
    }
}

/// `this_cpu_add(*p, n)`: on x86-64 one `add` to `%gs:p`, as the kernel's own macro emits
/// it (the GS base is this CPU's per-CPU area, and `p` the offset cookie of the copies).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn this_cpu_add(p: *mut u64, n: u64) {
    // SAFETY: `p` is a live per-CPU allocation of a u64 (`PerCpuU64::PerCpu`), so `%gs:p` is
    // this CPU's copy, which only such single-instruction adds and summing reads touch.
    unsafe {
        core::arch::asm!(
            "add qword ptr gs:[{p}], {n}",
            p = in(reg) p,
            n = in(reg) n,
            options(nostack)
        )
    };
}

/// `this_cpu_add(*p, n)`, through the C side on other architectures.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn this_cpu_add(p: *mut u64, n: u64) {
    // SAFETY: `p` is a live per-CPU allocation of a u64 (`PerCpuU64::PerCpu`).
    unsafe { bindings::rrxe_percpu_u64_add(p, n) };
}
