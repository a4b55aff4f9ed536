// SPDX-License-Identifier: GPL-2.0

//! Locks: a spinlock for state shared with interrupt context, and a mutex for state only
//! process context reaches. Both call the kernel's lock functions themselves: the shim's
//! and the kernel crate's wrappers added a call to every lock and unlock (a call cost 8.4
//! ns under TCG, and a 2-byte Read took eight such pairs).

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
    #[inline]
    pub(crate) fn lock(&self) -> IrqSpinLockGuard<'_, T> {
        // SAFETY: the lock was initialised by `new`.
        let flags = unsafe { bindings::_raw_spin_lock_irqsave(raw(self.lock.get())) };
        IrqSpinLockGuard { lock: self, flags }
    }
}

#[cfg(CONFIG_PREEMPT_RT)]
compile_error!("spinlock_t is an rt_mutex under PREEMPT_RT: `raw` would be wrong");

/// The `raw_spinlock_t` of `lock`, which `spin_lock_irqsave()` takes: without PREEMPT_RT a
/// `spinlock_t` is a union whose first member is it (include/linux/spinlock_types.h).
#[inline(always)]
pub(crate) fn raw(lock: *mut bindings::spinlock_t) -> *mut bindings::raw_spinlock_t {
    lock.cast()
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
        unsafe { bindings::_raw_spin_unlock_irqrestore(raw(self.lock.lock.get()), self.flags) };
    }
}

/// A sleeping lock (`struct mutex`) for state only process context reaches.
#[pin_data]
pub(crate) struct Mutex<T> {
    #[pin]
    lock: Opaque<bindings::mutex>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through the lock.
unsafe impl<T: Send> Send for Mutex<T> {}
// SAFETY: as above; the lock serialises all access.
unsafe impl<T: Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    /// A mutex protecting `data`, in lockdep class `class` named `name`.
    pub(crate) fn new(
        data: T,
        name: &'static CStr,
        class: &'static LockClass,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; the name and class are 'static.
            lock <- Opaque::ffi_init(|slot| unsafe {
                bindings::__mutex_init(slot, name.as_char_ptr(), class.0.get())
            }),
            data: UnsafeCell::new(data),
        })
    }

    /// Takes the lock; may sleep.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        // SAFETY: the lock was initialised by `new`. With lockdep's lock tracking,
        // `mutex_lock()` is this function at subclass 0; without, the function itself.
        #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
        unsafe {
            bindings::mutex_lock_nested(self.lock.get(), 0)
        };
        // SAFETY: as above.
        #[cfg(not(CONFIG_DEBUG_LOCK_ALLOC))]
        unsafe {
            bindings::mutex_lock(self.lock.get())
        };
        MutexGuard { lock: self }
    }
}

/// Holds a [`Mutex`]; dropping it unlocks.
pub(crate) struct MutexGuard<'a, T> {
    lock: &'a Mutex<T>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, so the access is exclusive.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard holds the lock, taken by this task.
        unsafe { bindings::mutex_unlock(self.lock.lock.get()) };
    }
}
