// SPDX-License-Identifier: GPL-2.0

//! Locks for state shared with interrupt context.

use super::bindings;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::types::Opaque;

/// A lockdep class for locks of one kind; must live in a `static`.
pub(crate) struct LockClass(Opaque<bindings::lock_class_key>);

// SAFETY: lock_class_key is designed for concurrent use by lockdep and has its own locking.
unsafe impl Sync for LockClass {}

impl LockClass {
    /// A class for a `static`: lockdep accepts statically allocated, uninitialised keys.
    pub(crate) const fn new() -> Self {
        Self(Opaque::uninit())
    }
}

/// A spinlock taken with interrupts disabled (`spin_lock_irqsave`): kernel consumers poll
/// CQs and post work from any context, including hard interrupt handlers.
#[pin_data]
pub(crate) struct IrqSpinLock<T> {
    #[pin]
    lock: Opaque<bindings::spinlock_t>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through the lock.
unsafe impl<T: Send> Send for IrqSpinLock<T> {}
// SAFETY: as above; the lock serialises all access.
unsafe impl<T: Send> Sync for IrqSpinLock<T> {}

impl<T> IrqSpinLock<T> {
    /// A lock protecting `data`, in lockdep class `class` named `name`.
    pub(crate) fn new(
        data: T,
        name: &'static CStr,
        class: &'static LockClass,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; the name and class are 'static.
            lock <- Opaque::ffi_init(|slot| unsafe {
                bindings::rrxe_spin_lock_init(slot, name.as_char_ptr(), class.0.get())
            }),
            data: UnsafeCell::new(data),
        })
    }

    /// Takes the lock with interrupts disabled.
    pub(crate) fn lock(&self) -> IrqSpinLockGuard<'_, T> {
        // SAFETY: the lock was initialised by `new`.
        let flags = unsafe { bindings::rrxe_spin_lock_irqsave(self.lock.get()) };
        IrqSpinLockGuard { lock: self, flags }
    }
}

/// Holds an [`IrqSpinLock`]; dropping it unlocks and restores the interrupt state.
pub(crate) struct IrqSpinLockGuard<'a, T> {
    lock: &'a IrqSpinLock<T>,
    flags: kernel::ffi::c_ulong,
}

impl<T> Deref for IrqSpinLockGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for IrqSpinLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, so the access is exclusive.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for IrqSpinLockGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the lock is held with the flags saved by `lock`.
        unsafe { bindings::rrxe_spin_unlock_irqrestore(self.lock.lock.get(), self.flags) };
    }
}
