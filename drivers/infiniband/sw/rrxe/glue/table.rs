// SPDX-License-Identifier: GPL-2.0

//! Object tables: `u32` indices handed out cyclically, each mapping to an `Arc` of an object
//! (an allocating xarray). [`RcuTable`] is one whose lookups take no lock, in an RCU
//! read-side section.
//!
//! # Locking
//!
//! The xarray's own spinlock guards the table and the cyclic cursor. Lookups happen on the
//! packet receive path (softirq) as well as in process context, so the lock is always taken
//! with interrupts disabled (`XA_FLAGS_LOCK_IRQ`):
//!
//! - [`IndexTable::get`] and [`IndexTable::remove`] take it with `xa_lock_irqsave` and may be
//!   called from any context, including softirq and hard interrupts;
//! - [`IndexTable::reserve`], [`Reservation::store`] and [`IndexTable::insert`] allocate with
//!   `GFP_KERNEL` (`xa_alloc_cyclic_irq`, `xa_store_irq`) and must be called in process
//!   context with interrupts enabled.
//!
//! All tables share one lockdep class (the xarray lock initialised in the C shim): never hold
//! one table's lock while taking another's, which none of the operations here does.
//!
//! `get` takes its reference (clones the `Arc`) under the lock, so an object cannot be freed
//! between being found and being referenced; the table's own reference is dropped by
//! `remove` after the lock is released. Whoever drops the last reference runs `T`'s
//! destructor in their context: objects whose destructor sleeps must only be dropped in
//! process context (see [`crate::mr`]).

use super::bindings;
use super::rcu::{drop_after_grace_period, RcuSection};
use super::sync;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use kernel::error::to_result;
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// A table of `Arc<T>` by index, indices handed out cyclically, so that a freed index (and a
/// key built from it) is not reused until the rest of the range has been.
#[pin_data(PinnedDrop)]
pub(crate) struct IndexTable<T> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    /// Where the cyclic search resumes; updated under the xarray's lock.
    next: UnsafeCell<u32>,
    /// The table owns one reference to each stored object.
    _objects: PhantomData<Arc<T>>,
}

// SAFETY: the xarray has its own lock, which also guards `next`; the table hands out and
// drops `Arc<T>`s from any thread, which needs `T: Send + Sync` (as `Arc<T>: Send` does).
unsafe impl<T: Send + Sync> Send for IndexTable<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for IndexTable<T> {}

impl<T> IndexTable<T> {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes.
            xa <- Opaque::ffi_init(|slot| unsafe { bindings::rrxe_xa_init_alloc_irq(slot) }),
            next: UnsafeCell::new(0),
            _objects: PhantomData,
        })
    }

    /// Reserves a free index in `min..=max`; the index reads as empty until
    /// [`Reservation::store`], and is freed again if the reservation is dropped.
    ///
    /// Process context only (allocates with `GFP_KERNEL`).
    pub(crate) fn reserve(&self, min: u32, max: u32) -> Result<Reservation<'_, T>> {
        self.reserve_in(min, max, false)
    }

    /// [`IndexTable::reserve`] for callers that may not sleep (`atomic`: allocates with
    /// `GFP_ATOMIC` under an irqsave lock).
    fn reserve_in(&self, min: u32, max: u32, atomic: bool) -> Result<Reservation<'_, T>> {
        let mut index = 0;
        // SAFETY: the xarray is initialised; `next` is only touched under its lock, which
        // xa_alloc_cyclic_irq takes.
        let ret = unsafe {
            bindings::rrxe_xa_reserve_cyclic_irq(
                self.xa.get(),
                &mut index,
                min,
                max,
                self.next.get(),
                atomic,
            )
        };
        // 1 means the search wrapped around, which is success.
        to_result(ret.min(0))?;
        Ok(Reservation { table: self, index })
    }

    /// Stores `object` at a free index in `min..=max` and returns the index.
    ///
    /// Process context only (allocates with `GFP_KERNEL`).
    pub(crate) fn insert(&self, min: u32, max: u32, object: Arc<T>) -> Result<u32> {
        let reservation = self.reserve(min, max)?;
        let index = reservation.index();
        reservation.store(object)?;
        Ok(index)
    }

    /// [`IndexTable::insert`] in any context (allocates with `GFP_ATOMIC`).
    pub(crate) fn insert_atomic(&self, min: u32, max: u32, object: Arc<T>) -> Result<u32> {
        let reservation = self.reserve_in(min, max, true)?;
        let index = reservation.index();
        reservation.store(object)?;
        Ok(index)
    }

    /// A new reference to the object at `index`, if there is one. Any context.
    pub(crate) fn get(&self, index: u32) -> Option<Arc<T>> {
        let lock = self.xa_lock();
        // SAFETY: the xarray is initialised (`xa_lock_irqsave()` is this call).
        let flags = unsafe { bindings::_raw_spin_lock_irqsave(lock) };
        // SAFETY: the xarray is initialised; reserved slots read as NULL.
        let entry = unsafe { bindings::xa_load(self.xa.get(), index as usize) };
        let object = (!entry.is_null()).then(|| {
            // SAFETY: every non-NULL entry is an `Arc::into_raw` the table owns, and it cannot
            // be removed (and its reference dropped) while we hold the lock, so taking a new
            // reference from it is sound.
            Arc::from(unsafe { kernel::sync::ArcBorrow::from_raw(entry.cast::<T>().cast_const()) })
        });
        // SAFETY: locked above with these flags.
        unsafe { bindings::_raw_spin_unlock_irqrestore(lock, flags) };
        object
    }

    /// The xarray's lock, as `xa_lock_irqsave()` takes it (with no call of the shim's
    /// between: `get` is a QP's lookup of each MR its packets reach).
    #[inline(always)]
    fn xa_lock(&self) -> *mut bindings::raw_spinlock_t {
        // SAFETY: the xarray lives as long as `self`; only the field's address is taken.
        sync::raw(unsafe { core::ptr::addr_of_mut!((*self.xa.get()).xa_lock) })
    }

    /// Takes the object at `index` out of the table (the index becomes free) and returns the
    /// table's reference to it. Any context, but dropping the returned reference runs `T`'s
    /// destructor if it is the last one. An index held by a live [`Reservation`] is not
    /// the caller's to remove (that would only leak, not corrupt, but is a logic error).
    pub(crate) fn remove(&self, index: u32) -> Option<Arc<T>> {
        let lock = self.xa_lock();
        // SAFETY: the xarray is initialised (`xa_lock_irqsave()` is this call).
        let flags = unsafe { bindings::_raw_spin_lock_irqsave(lock) };
        // SAFETY: the xarray is initialised and locked; erasing an absent index is a no-op,
        // erasing a reserved one returns NULL. Erasing never allocates.
        let entry = unsafe { bindings::__xa_erase(self.xa.get(), index as usize) };
        // SAFETY: locked above with these flags.
        unsafe { bindings::_raw_spin_unlock_irqrestore(lock, flags) };
        // SAFETY: a non-NULL entry was stored by `Reservation::store` from `Arc::into_raw`;
        // it is out of the table now, so its reference passes to us.
        (!entry.is_null()).then(|| unsafe { Arc::from_raw(entry.cast::<T>().cast_const()) })
    }

    /// Frees a reserved index that was never filled.
    fn release(&self, index: u32) {
        // A reservation reads as NULL, so nothing comes back.
        let _ = self.remove(index);
    }
}

#[pinned_drop]
impl<T> PinnedDrop for IndexTable<T> {
    fn drop(self: Pin<&mut Self>) {
        let xa = self.xa.get();
        let mut index: kernel::ffi::c_ulong = 0;
        loop {
            // SAFETY: the xarray is initialised; xa_find takes the RCU read lock itself and
            // skips reserved slots.
            let entry = unsafe {
                bindings::xa_find(xa, &mut index, u32::MAX as usize, bindings::RRXE_XA_PRESENT)
            };
            if entry.is_null() {
                break;
            }
            // Erased under the lock (the xarray's lockdep annotations expect it); the table
            // is ours alone, so this is the entry just found. Its reference drops here.
            drop(self.remove(index as u32));
        }
        // SAFETY: nothing uses the table any more; this frees its nodes (and reservations,
        // of which there are none left: they borrow the table).
        unsafe { bindings::xa_destroy(xa) };
    }
}

/// An index reserved in an [`IndexTable`] but not yet filled; dropping it frees the index.
pub(crate) struct Reservation<'a, T> {
    table: &'a IndexTable<T>,
    index: u32,
}

impl<T> Reservation<'_, T> {
    /// The reserved index.
    pub(crate) fn index(&self) -> u32 {
        self.index
    }

    /// Publishes `object` at the reserved index. Any context.
    pub(crate) fn store(self, object: Arc<T>) -> Result {
        let raw = Arc::into_raw(object);
        // SAFETY: the xarray is initialised and the slot reserved, so storing needs no
        // allocation; xa_store_irq takes the lock.
        let ret = unsafe {
            bindings::rrxe_xa_fill_reserved_irq(
                self.table.xa.get(),
                self.index,
                raw.cast_mut().cast(),
            )
        };
        if ret < 0 {
            // SAFETY: not stored, so the reference is still ours.
            drop(unsafe { Arc::from_raw(raw) });
            // Dropping `self` frees the index.
            return to_result(ret);
        }
        // The slot now owns the reference; the index stays taken.
        core::mem::forget(self);
        Ok(())
    }
}

impl<T> Drop for Reservation<'_, T> {
    fn drop(&mut self) {
        self.table.release(self.index);
    }
}

/// An [`IndexTable`] read with no lock, inside an RCU read-side section: the table's
/// reference to an object it no longer holds is dropped only a grace period after the
/// object left ([`drop_after_grace_period`]), so a lookup that found it may take a
/// reference of its own until its section ends. For objects whose last reference may go
/// in any context (the table's may go in softirq). The receive path looks a QP up for
/// every packet, in a section it is in anyway: under TCG the table's lock, taken with
/// interrupts saved, cost 44 ns, twice a looped-back Read.
#[pin_data]
pub(crate) struct RcuTable<T> {
    #[pin]
    table: IndexTable<T>,
}

impl<T: Send + Sync> RcuTable<T> {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            table <- IndexTable::new(),
        })
    }

    /// As [`IndexTable::reserve`].
    pub(crate) fn reserve(&self, min: u32, max: u32) -> Result<Reservation<'_, T>> {
        self.table.reserve(min, max)
    }

    /// A new reference to the object at `index`, if there is one.
    pub(crate) fn get(&self, index: u32, _section: &RcuSection) -> Option<Arc<T>> {
        let xa = self.table.xa.get();
        // SAFETY: the xarray is initialised; xa_load is safe against concurrent changes
        // (it takes the RCU read lock itself); reserved slots read as NULL.
        let entry = unsafe { bindings::xa_load(xa, index as usize) };
        (!entry.is_null()).then(|| {
            // SAFETY: every non-NULL entry is an `Arc::into_raw` the table owns, and the
            // table drops it only a grace period after erasing it (`remove`): we are in a
            // read-side section that began before, so the reference is still alive.
            Arc::from(unsafe { kernel::sync::ArcBorrow::from_raw(entry.cast::<T>().cast_const()) })
        })
    }

    /// Takes the object at `index` out of the table; the table's reference to it is
    /// dropped after a grace period, in softirq. Process context.
    pub(crate) fn remove(&self, index: u32) {
        if let Some(object) = self.table.remove(index) {
            drop_after_grace_period(object);
        }
    }
}
