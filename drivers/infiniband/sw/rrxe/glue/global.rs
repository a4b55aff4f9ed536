// SPDX-License-Identifier: GPL-2.0

//! Module-lifetime state for C callbacks that carry no context pointer.

use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;

/// A value published at module init and taken back at module exit.
///
/// `rdma_link_ops::newlink` is called with only a device name and a netdev, so the state it
/// needs has to be found through a static.
pub(crate) struct Global<T> {
    ptr: AtomicPtr<T>,
}

impl<T: Sync> Global<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Publishes `value`; fails with `EBUSY` if a value is already published.
    pub(crate) fn publish(&self, value: Pin<KBox<T>>) -> Result {
        // SAFETY: the pointee is never moved out of: `take` rebuilds the same pinned box.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(value) });
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(_) => {
                // SAFETY: `raw` came from `KBox::into_raw` above and was not published.
                drop(unsafe { KBox::from_raw(raw) });
                Err(EBUSY)
            }
        }
    }

    /// Takes the value back, leaving the slot empty.
    ///
    /// Callers must first have unregistered every callback that may call [`Global::get`].
    pub(crate) fn take(&self) -> Option<Pin<KBox<T>>> {
        let raw = self.ptr.swap(ptr::null_mut(), Ordering::AcqRel);
        if raw.is_null() {
            return None;
        }
        // SAFETY: a non-null pointer in the slot came from `KBox::into_raw` in `publish`, and
        // the swap above gave us sole ownership of it.
        Some(unsafe { Pin::new_unchecked(KBox::from_raw(raw)) })
    }

    /// Returns the published value.
    ///
    /// # Safety
    ///
    /// The caller must be a callback whose registration is undone before [`Global::take`] is
    /// called, so that the value outlives every use of the returned reference.
    pub(crate) unsafe fn get(&self) -> Option<Pin<&T>> {
        let raw = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is a live, pinned `T` (from `publish`); the caller
        // guarantees it is not taken while the reference is in use.
        unsafe { raw.as_ref().map(|r| Pin::new_unchecked(r)) }
    }
}
