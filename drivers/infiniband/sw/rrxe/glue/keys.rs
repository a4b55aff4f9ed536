// SPDX-License-Identifier: GPL-2.0

//! Index tables for L_Keys and R_Keys (an allocating xarray).

use super::bindings;
use core::cell::UnsafeCell;
use kernel::error::to_result;
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::types::Opaque;

/// A table of indices handed out cyclically, so that a freed index (and a key built from it)
/// is not reused until the rest of the range has been.
#[pin_data(PinnedDrop)]
pub(crate) struct KeyTable {
    #[pin]
    xa: Opaque<bindings::xarray>,
    /// Where the cyclic search resumes; updated under the xarray's lock.
    next: UnsafeCell<u32>,
}

// SAFETY: the xarray has its own lock, which also guards `next`.
unsafe impl Send for KeyTable {}
// SAFETY: as above.
unsafe impl Sync for KeyTable {}

impl KeyTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes.
            xa <- Opaque::ffi_init(|slot| unsafe { bindings::rrxe_xa_init_alloc(slot) }),
            next: UnsafeCell::new(0),
        })
    }

    /// Reserves a free index in `min..=max`.
    pub(crate) fn reserve(&self, min: u32, max: u32) -> Result<u32> {
        let mut id = 0;
        // SAFETY: the xarray is initialised; `next` is only touched under its lock, which
        // xa_alloc_cyclic takes.
        let ret = unsafe {
            bindings::rrxe_xa_reserve_cyclic(self.xa.get(), &mut id, min, max, self.next.get())
        };
        // 1 means the search wrapped around, which is success.
        to_result(ret.min(0)).map(|()| id)
    }

    /// Frees `index`.
    pub(crate) fn release(&self, index: u32) {
        // SAFETY: the xarray is initialised; erasing an absent index is a no-op.
        unsafe { bindings::xa_erase(self.xa.get(), index as _) };
    }
}

#[pinned_drop]
impl PinnedDrop for KeyTable {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: nothing uses the table any more; this frees its nodes.
        unsafe { bindings::xa_destroy(self.xa.get()) };
    }
}
