// SPDX-License-Identifier: GPL-2.0

//! Tasks: a work item that runs an object's state machine in process context, and a timer
//! that queues it at a deadline.
//!
//! A QP's transport runs in one work item at a time (a work item never runs concurrently
//! with itself), so packets, doorbells and timer expiries are serialised without a lock
//! held across the work. Deadlines use the timer wheel: IBA timeouts (4.096 us * 2^n, RNR
//! timers from 10 us) are retransmission deadlines where a jiffy of slack is harmless.

use super::bindings;
use core::mem::offset_of;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// An object driven by a [`Task`] embedded in it.
pub(crate) trait TaskOwner: Send + Sync + Sized + 'static {
    /// The task embedded in the object.
    fn task(&self) -> &Task<Self>;
    /// Runs the object's pending work (process context, never concurrently with itself).
    fn run(&self);
}

/// The current time for transport deadlines, in nanoseconds (monotonic).
pub(crate) fn now_ns() -> u64 {
    // SAFETY: reading the monotonic clock has no preconditions.
    unsafe { bindings::rrxe_ktime_get_ns() }
}

/// A work item and a timer that run `T::run`.
#[pin_data(PinnedDrop)]
pub(crate) struct Task<T: TaskOwner> {
    #[pin]
    work: Opaque<bindings::work_struct>,
    #[pin]
    timer: Opaque<bindings::timer_list>,
    /// The object this task is embedded in; null until [`Task::start`].
    owner: AtomicPtr<T>,
    /// Set once [`Task::shutdown`] has disabled both callbacks.
    shut: AtomicBool,
}

// SAFETY: the work item and timer are driven through their own locked C APIs; the owner
// pointer is an atomic.
unsafe impl<T: TaskOwner> Send for Task<T> {}
// SAFETY: as above.
unsafe impl<T: TaskOwner> Sync for Task<T> {}

impl<T: TaskOwner> Task<T> {
    /// A task that does nothing until [`Task::start`].
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; the callback only dereferences the owner
            // once `start` has set it.
            work <- Opaque::ffi_init(|slot| unsafe {
                bindings::rrxe_init_work(slot, Some(Self::work_fn))
            }),
            // SAFETY: as above.
            timer <- Opaque::ffi_init(|slot| unsafe {
                bindings::rrxe_timer_setup(slot, Some(Self::timer_fn))
            }),
            owner: AtomicPtr::new(ptr::null_mut()),
            shut: AtomicBool::new(false),
        })
    }

    /// Binds the task to its owner, which must be the object the task is embedded in, so
    /// that the owner lives as long as the task's callbacks can run.
    pub(crate) fn start(owner: &Arc<T>) {
        let task = owner.task();
        // Embedded: the task lies inside the owner's allocation.
        let base = ptr::from_ref::<T>(owner) as usize;
        let at = ptr::from_ref(task) as usize;
        if at < base || at + size_of::<Self>() > base + size_of::<T>() {
            pr_err!("task not embedded in its owner; not started\n");
            return;
        }
        task.owner
            .store(ptr::from_ref::<T>(owner).cast_mut(), Ordering::Release);
    }

    /// Queues the work item now; a no-op while it is already queued or after shutdown.
    pub(crate) fn kick(&self) {
        // SAFETY: the work item was initialised in `new`; queueing a disabled or pending
        // work item is a no-op.
        unsafe { bindings::rrxe_queue_work(self.work.get()) };
    }

    /// Arms the timer to queue the work item `delay_ns` from now (earliest deadline wins
    /// only in the sense that the caller always passes its current earliest one).
    pub(crate) fn arm(&self, delay_ns: u64) {
        // SAFETY: converting a duration has no preconditions.
        let delta = unsafe { bindings::nsecs_to_jiffies(delay_ns) };
        // SAFETY: as above.
        let expires = unsafe { bindings::rrxe_jiffies() }.wrapping_add(delta.max(1) as _);
        // SAFETY: the timer was initialised in `new`; mod_timer on a shut-down timer is a
        // no-op.
        unsafe { bindings::mod_timer(self.timer.get(), expires) };
    }

    /// Disables the timer and the work item and waits for running callbacks: afterwards
    /// neither runs again and [`Task::kick`]/[`Task::arm`] do nothing. Sleeps.
    pub(crate) fn shutdown(&self) {
        if self.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        // The timer first: its callback queues the work item.
        // SAFETY: the timer was initialised in `new`; process context.
        unsafe { bindings::timer_shutdown_sync(self.timer.get()) };
        // SAFETY: the work item was initialised in `new`; process context.
        unsafe { bindings::disable_work_sync(self.work.get()) };
    }

    /// # Safety
    ///
    /// Called by the workqueue for a work item initialised in [`Task::new`].
    unsafe extern "C" fn work_fn(work: *mut bindings::work_struct) {
        // SAFETY: the work item is the `work` field of a live `Task<T>` (a task is shut down,
        // which waits for this callback, before it is freed).
        let task = unsafe { &*work.byte_sub(offset_of!(Self, work)).cast::<Self>() };
        let owner = task.owner.load(Ordering::Acquire);
        // SAFETY: a non-null owner embeds the task (checked in `start`), so it is alive
        // while the task is.
        if let Some(owner) = unsafe { owner.as_ref() } {
            owner.run();
        }
    }

    /// # Safety
    ///
    /// Called by the timer wheel for a timer initialised in [`Task::new`].
    unsafe extern "C" fn timer_fn(timer: *mut bindings::timer_list) {
        // SAFETY: the timer is the `timer` field of a live `Task<T>` (shutdown waits for this
        // callback before the task is freed).
        let task = unsafe { &*timer.byte_sub(offset_of!(Self, timer)).cast::<Self>() };
        task.kick();
    }
}

#[pinned_drop]
impl<T: TaskOwner> PinnedDrop for Task<T> {
    fn drop(self: Pin<&mut Self>) {
        // Owners shut their task down in process context before the last reference can go
        // away in an atomic one; this only catches an owner that did not.
        self.shutdown();
    }
}
