// SPDX-License-Identifier: GPL-2.0

//! Port counters shown by `rdma statistic` (the core's hw_counters).

use super::bindings;
use kernel::str::CStr;

/// The names of a driver's port counters, in the form the RDMA core takes them
/// (`struct rdma_stat_desc`), built at compile time.
pub(crate) struct CounterNames<const N: usize>([bindings::rdma_stat_desc; N]);

// SAFETY: the descriptors only point at 'static C strings and are never written.
unsafe impl<const N: usize> Sync for CounterNames<N> {}

impl<const N: usize> CounterNames<N> {
    /// Descriptors for `names`, in order.
    pub(crate) const fn new(names: [&'static CStr; N]) -> Self {
        let mut descs = [bindings::rdma_stat_desc {
            name: core::ptr::null(),
            flags: 0,
            priv_: core::ptr::null(),
        }; N];
        let mut i = 0;
        while i < N {
            descs[i].name = names[i].as_char_ptr();
            i += 1;
        }
        Self(descs)
    }

    /// The descriptors.
    pub(crate) const fn descs(&'static self) -> CounterDescs {
        CounterDescs(&self.0)
    }
}

/// A driver's counter descriptors.
#[derive(Clone, Copy)]
pub(crate) struct CounterDescs(pub(super) &'static [bindings::rdma_stat_desc]);
