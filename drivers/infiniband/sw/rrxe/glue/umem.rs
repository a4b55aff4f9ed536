// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).

use super::bindings;
use super::rdma::{Device, Driver};
use core::ptr::NonNull;
use kernel::error::from_err_ptr;
use kernel::prelude::*;

/// User pages pinned for an MR; dropping it unpins them.
pub(crate) struct Umem(NonNull<bindings::ib_umem>);

// SAFETY: a umem is a plain description of pinned pages, usable from any thread.
unsafe impl Send for Umem {}
// SAFETY: as above; it is never mutated after creation.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of the calling process's memory at `addr` for `access`
    /// (`IB_ACCESS_*`).
    pub(crate) fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: i32,
    ) -> Result<Self> {
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: called in the context of the process whose memory is pinned (a uverbs
        // call); the device is live. Returns an ERR_PTR on failure.
        let raw = from_err_ptr(unsafe { bindings::ib_umem_get(dev.as_raw(), addr, len, access) })?;
        NonNull::new(raw).map(Self).ok_or(ENOMEM)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the umem came from ib_umem_get and is released once.
        unsafe { bindings::ib_umem_release(self.0.as_ptr()) };
    }
}
