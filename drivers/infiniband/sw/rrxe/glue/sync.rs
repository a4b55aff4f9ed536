// SPDX-License-Identifier: GPL-2.0

//! Locks: a spinlock for state shared with interrupt context, one for state shared with
//! softirqs, and a mutex for state only process context reaches, one [`Lock`] over three
//! [`Backend`]s. Both call the kernel's lock
//! functions themselves: the shim's and the kernel crate's wrappers added a call to every
//! lock and unlock (a call cost 8.4 ns under TCG, and a 2-byte Read took eight such pairs).

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

/// How a kind of kernel lock is set up, taken and let go.
///
/// # Safety
///
/// `lock` must give its caller the lock initialised by `init` exclusively until `unlock`
/// with what `lock` returned.
pub(crate) unsafe trait Backend {
    /// The C lock.
    type State;
    /// What taking it leaves for letting it go (saved interrupt flags).
    type Taken: Copy;

    /// Initialises the lock at `slot` in lockdep class `class` named `name`.
    ///
    /// # Safety
    ///
    /// `slot` is valid for writes and not yet a lock; the name and class are 'static.
    unsafe fn init(slot: *mut Self::State, name: &'static CStr, class: &'static LockClass);

    /// Takes the lock.
    ///
    /// # Safety
    ///
    /// `lock` was initialised by `init`; the context may take it.
    unsafe fn lock(lock: *mut Self::State) -> Self::Taken;

    /// Lets the lock go.
    ///
    /// # Safety
    ///
    /// The caller holds `lock`, taken by `lock` with `taken`.
    unsafe fn unlock(lock: *mut Self::State, taken: Self::Taken);
}

/// `T` under a kernel lock of kind `B`.
#[pin_data]
pub(crate) struct Lock<T, B: Backend> {
    #[pin]
    lock: Opaque<B::State>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through the lock.
unsafe impl<T: Send, B: Backend> Send for Lock<T, B> {}
// SAFETY: as above; the lock serialises all access.
unsafe impl<T: Send, B: Backend> Sync for Lock<T, B> {}

impl<T, B: Backend> Lock<T, B> {
    /// A lock protecting `data`, in lockdep class `class` named `name`.
    pub(crate) fn new(
        data: T,
        name: &'static CStr,
        class: &'static LockClass,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; the name and class are 'static.
            lock <- Opaque::ffi_init(|slot| unsafe { B::init(slot, name, class) }),
            data: UnsafeCell::new(data),
        })
    }

    /// Takes the lock.
    #[inline]
    pub(crate) fn lock(&self) -> Guard<'_, T, B> {
        // SAFETY: the lock was initialised by `new`; each backend's contexts are its
        // users' to keep to (a mutex is never taken in atomic context).
        let taken = unsafe { B::lock(self.lock.get()) };
        Guard { lock: self, taken }
    }
}

/// Holds a [`Lock`]; dropping it lets the lock go.
pub(crate) struct Guard<'a, T, B: Backend> {
    lock: &'a Lock<T, B>,
    taken: B::Taken,
}

impl<T, B: Backend> Deref for Guard<'_, T, B> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T, B: Backend> DerefMut for Guard<'_, T, B> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, so the access is exclusive.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T, B: Backend> Drop for Guard<'_, T, B> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard holds the lock, taken with `taken`.
        unsafe { B::unlock(self.lock.lock.get(), self.taken) };
    }
}

/// A spinlock taken with interrupts disabled (`spin_lock_irqsave`): kernel consumers poll
/// CQs and post work from any context, including hard interrupt handlers.
pub(crate) type IrqSpinLock<T> = Lock<T, IrqSpin>;

/// The [`Backend`] of [`IrqSpinLock`].
pub(crate) struct IrqSpin;

// SAFETY: a spinlock gives its holder exclusive access until it is unlocked.
unsafe impl Backend for IrqSpin {
    type State = bindings::spinlock_t;
    type Taken = kernel::ffi::c_ulong;

    unsafe fn init(slot: *mut Self::State, name: &'static CStr, class: &'static LockClass) {
        // SAFETY: per the function contract.
        unsafe { bindings::rrxe_spin_lock_init(slot, name.as_char_ptr(), class.0.get()) }
    }

    #[inline(always)]
    unsafe fn lock(lock: *mut Self::State) -> Self::Taken {
        // SAFETY: an initialised spinlock (the function contract); any context.
        unsafe { bindings::_raw_spin_lock_irqsave(raw(lock)) }
    }

    #[inline(always)]
    unsafe fn unlock(lock: *mut Self::State, flags: Self::Taken) {
        // SAFETY: held, with these flags (the function contract).
        unsafe { bindings::_raw_spin_unlock_irqrestore(raw(lock), flags) }
    }
}

/// A spinlock taken with bottom halves disabled (`spin_lock_bh`), for state that process
/// context and softirqs share but no hard interrupt handler reaches: neither is it taken
/// with interrupts disabled, where its unlock would run pending softirqs. Under TCG,
/// restoring the interrupt flag ends the translation block and returns to QEMU's loop to
/// look for interrupts: a received packet's push to its QP's backlog, a few instructions
/// under the lock, took 0.31 us with `spin_lock_irqsave` (Documentation/rrxe/benchmarks.rst).
pub(crate) type BhSpinLock<T> = Lock<T, BhSpin>;

/// The [`Backend`] of [`BhSpinLock`].
pub(crate) struct BhSpin;

// SAFETY: a spinlock gives its holder exclusive access until it is unlocked.
unsafe impl Backend for BhSpin {
    type State = bindings::spinlock_t;
    type Taken = ();

    unsafe fn init(slot: *mut Self::State, name: &'static CStr, class: &'static LockClass) {
        // SAFETY: per the function contract.
        unsafe { bindings::rrxe_spin_lock_init(slot, name.as_char_ptr(), class.0.get()) }
    }

    #[inline(always)]
    unsafe fn lock(lock: *mut Self::State) {
        // SAFETY: an initialised spinlock (the function contract), in process or softirq
        // context with interrupts enabled.
        unsafe { bindings::_raw_spin_lock_bh(raw(lock)) }
    }

    #[inline(always)]
    unsafe fn unlock(lock: *mut Self::State, (): ()) {
        // SAFETY: held (the function contract).
        unsafe { bindings::_raw_spin_unlock_bh(raw(lock)) }
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

/// A sleeping lock (`struct mutex`) for state only process context reaches.
pub(crate) type Mutex<T> = Lock<T, Sleeping>;

/// The [`Backend`] of [`Mutex`].
pub(crate) struct Sleeping;

// SAFETY: a mutex gives its holder exclusive access until it is unlocked.
unsafe impl Backend for Sleeping {
    type State = bindings::mutex;
    type Taken = ();

    unsafe fn init(slot: *mut Self::State, name: &'static CStr, class: &'static LockClass) {
        // SAFETY: per the function contract.
        unsafe { bindings::__mutex_init(slot, name.as_char_ptr(), class.0.get()) }
    }

    #[inline(always)]
    unsafe fn lock(lock: *mut Self::State) {
        // SAFETY: an initialised mutex, taken where sleeping is allowed (the function
        // contract). With lockdep's lock tracking `mutex_lock()` is this function at
        // subclass 0; without, the function itself.
        #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
        unsafe {
            bindings::mutex_lock_nested(lock, 0)
        };
        // SAFETY: as above.
        #[cfg(not(CONFIG_DEBUG_LOCK_ALLOC))]
        unsafe {
            bindings::mutex_lock(lock)
        };
    }

    #[inline(always)]
    unsafe fn unlock(lock: *mut Self::State, (): ()) {
        // SAFETY: held by this task (the function contract).
        unsafe { bindings::mutex_unlock(lock) }
    }
}
