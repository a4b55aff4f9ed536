// SPDX-License-Identifier: GPL-2.0

//! A spin lock that can be taken in one verb and released in another.
//!
//! The extended CQ API polls in three calls (`ibv_start_poll`,
//! `ibv_next_poll`, `ibv_end_poll`) and the extended send API posts in
//! several (`ibv_wr_start` … `ibv_wr_complete`); the queue is the caller's
//! in between, so the lock is held across calls, which a guard-based lock
//! cannot express. Critical sections are a few ring operations, hence a spin
//! lock, as rdma-core's providers use.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through `lock`/`acquire`, which exclude
// each other.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) const fn new(data: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            data: UnsafeCell::new(data),
        }
    }

    /// Takes the lock until `release`; returns the data it protects.
    ///
    /// # Safety
    ///
    /// The caller must call `release` exactly once afterwards, and must not
    /// use the returned reference after that.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn acquire(&self) -> &mut T {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        // SAFETY: the lock is held, so this is the only reference.
        unsafe { &mut *self.data.get() }
    }

    /// Releases the lock `acquire` took.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock, and no reference from `acquire` may be
    /// used afterwards.
    pub(crate) unsafe fn release(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// Runs `f` with the lock held.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: released below, and the reference does not escape f.
        let data = unsafe { self.acquire() };
        let r = f(data);
        // SAFETY: taken above; f has returned.
        unsafe { self.release() };
        r
    }

    /// The data, through exclusive access to the lock itself.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T> SpinLock<T> {
    /// The protected data, for a caller that holds the lock from an earlier
    /// `acquire` and so may use it.
    pub(crate) fn data_ptr(&self) -> *mut T {
        self.data.get()
    }
}
