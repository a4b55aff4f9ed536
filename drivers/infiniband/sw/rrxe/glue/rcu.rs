// SPDX-License-Identifier: GPL-2.0

//! RCU: read-side sections as a token a lookup can ask for, and references dropped only
//! after a grace period, for tables read with no lock ([`super::table::RcuTable`]).

use super::bindings;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::sync::atomic::{compiler_fence, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// Proof that the holder is inside an RCU read-side section: what a grace period waits
/// for. Not `Send`: the section is the CPU's (or task's) that entered it.
pub(crate) struct RcuSection {
    /// Whether dropping the token ends the section ([`RcuSection::enter`]).
    entered: bool,
    _not_send: PhantomData<*mut ()>,
}

/// Whether `rcu_read_lock()` and `rcu_read_unlock()` only keep the compiler from moving
/// accesses across them: without preemptible RCU, preemption counting, lockdep (its lock
/// map and RCU's checks) or strict grace periods (an unlock that reports at once) they are
/// `preempt_disable()` and `preempt_enable()` with no count to keep, compiler barriers
/// (include/linux/rcupdate.h, include/linux/preempt.h). The release kernel's case: the
/// shim's calls are left out (two pairs a Read).
const BARRIER_ONLY: bool = cfg!(not(any(
    CONFIG_PREEMPT_RCU,
    CONFIG_PREEMPT_COUNT,
    CONFIG_DEBUG_LOCK_ALLOC,
    CONFIG_RCU_STRICT_GRACE_PERIOD
)));

impl RcuSection {
    /// Enters a read-side section, which ends when the token is dropped. Must not sleep
    /// until then.
    #[inline]
    pub(crate) fn enter() -> Self {
        if BARRIER_ONLY {
            compiler_fence(Ordering::SeqCst);
        } else {
            // SAFETY: paired with the unlock in `drop`; the holder does not sleep meanwhile
            // (the token's contract).
            unsafe { bindings::rrxe_rcu_read_lock() };
        }
        Self {
            entered: true,
            _not_send: PhantomData,
        }
    }

    /// The section the caller is in already.
    ///
    /// # Safety
    ///
    /// The caller must be inside an RCU read-side section (e.g. the UDP receive path's, in
    /// softirq) that outlasts the token.
    pub(crate) unsafe fn assume() -> Self {
        Self {
            entered: false,
            _not_send: PhantomData,
        }
    }
}

impl Drop for RcuSection {
    #[inline]
    fn drop(&mut self) {
        if !self.entered {
            return;
        }
        if BARRIER_ONLY {
            compiler_fence(Ordering::SeqCst);
        } else {
            // SAFETY: entered in `enter`.
            unsafe { bindings::rrxe_rcu_read_unlock() };
        }
    }
}

/// A reference waiting for a grace period before it is dropped.
#[repr(C)]
struct Deferred {
    head: Opaque<bindings::callback_head>,
    /// `Arc::into_raw` of the reference.
    object: *const c_void,
    release: unsafe fn(*const c_void),
}

/// Drops `object` after a grace period: every read-side section that may have found it (in
/// a table it has just left) has ended by then. The drop runs in softirq (an RCU callback),
/// so `T`'s destructor, if this is the last reference, must not sleep. Process context
/// (allocates; if that fails, waits for the grace period here).
pub(crate) fn drop_after_grace_period<T: Send + Sync>(object: Arc<T>) {
    let raw = Arc::into_raw(object).cast::<c_void>();
    let deferred = Deferred {
        head: Opaque::uninit(),
        object: raw,
        release: release::<T>,
    };
    match KBox::new(deferred, GFP_KERNEL) {
        Ok(deferred) => {
            let deferred = KBox::into_raw(deferred);
            // SAFETY: `head` is the first field of a live, leaked `Deferred` (repr(C)), which
            // `run_deferred` takes back once; `rcu_barrier` at module exit waits for it.
            unsafe { bindings::rrxe_call_rcu((*deferred).head.get(), Some(run_deferred)) };
        }
        Err(_) => {
            // SAFETY: process context (this function's contract).
            unsafe { bindings::synchronize_rcu() };
            // SAFETY: `raw` came from `Arc::into_raw` of an `Arc<T>` above, used once.
            unsafe { release::<T>(raw) };
        }
    }
}

/// Drops the reference `object` is.
///
/// # Safety
///
/// `object` must be `Arc::into_raw` of an `Arc<T>`, not used again.
unsafe fn release<T>(object: *const c_void) {
    // SAFETY: per the function contract.
    drop(unsafe { Arc::from_raw(object.cast::<T>()) });
}

/// The RCU callback of [`drop_after_grace_period`].
///
/// # Safety
///
/// `head` must be the `head` of a `Deferred` leaked by it, passed once.
unsafe extern "C" fn run_deferred(head: *mut bindings::callback_head) {
    // SAFETY: `head` is the first field of a `Deferred` (repr(C)) from `KBox::into_raw`.
    let deferred = unsafe { KBox::from_raw(head.cast::<Deferred>()) };
    // SAFETY: the reference `drop_after_grace_period` leaked, released once.
    unsafe { (deferred.release)(deferred.object) };
}

/// Waits, when dropped at module exit, for the callbacks of [`drop_after_grace_period`]
/// still pending: they run the module's code.
pub(crate) struct RcuBarrier(());

impl RcuBarrier {
    /// The barrier, for the module to drop after its last object is gone.
    pub(crate) fn new() -> Self {
        Self(())
    }
}

impl Drop for RcuBarrier {
    fn drop(&mut self) {
        // SAFETY: process context (module exit).
        unsafe { bindings::rrxe_rcu_barrier() };
    }
}
