// SPDX-License-Identifier: GPL-2.0

//! Tasks: a work item that runs an object's state machine in process context, and a timer
//! that queues it at a deadline.
//!
//! Ownership is in the types, as with rust/kernel's `Arc` work items: a task is a field of
//! an object always held in an [`Arc`], and every pending callback owns a reference to that
//! object. [`Task::kick`] hands one to the work item it queues (and takes it back if the
//! item was already queued), [`Task::arm`] one to the timer it arms; the callback consumes
//! it. So the object lives as long as anything can still run on it, whatever the order of
//! events, and "a task outliving its owner" cannot be written.
//!
//! A work item never runs concurrently with itself (all workqueues are non-reentrant), so a
//! task run needs no lock against itself; its scratch space ([`TaskOwner::Scratch`]) is
//! reached only from the run. Work runs on the driver's own workqueue ([`TaskQueue`]),
//! which module exit destroys, waiting for every run still going.
//!
//! Deadlines use the timer wheel: IBA timeouts (4.096 us * 2^n, RNR timers from 10 us) are
//! retransmission deadlines where a jiffy of slack is harmless.

use super::bindings;
use super::sync::{IrqSpinLock, LockClass};
use core::cell::UnsafeCell;
use core::mem::offset_of;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// An object driven by a [`Task`] embedded in it.
pub(crate) trait TaskOwner: Send + Sync + Sized + 'static {
    /// Space only the task's run uses (buffers it keeps between runs).
    type Scratch: Send;

    /// Runs the object's pending work (process context, never concurrently with itself).
    fn run(this: &Arc<Self>, scratch: &mut Self::Scratch);
}

/// Where an object's [`Task`] lives.
///
/// # Safety
///
/// `TASK_OFFSET` must be the byte offset of a field of type `Task<Self>` in `Self`. Use
/// [`impl_has_task!`], which checks the field's type.
pub(crate) unsafe trait HasTask: TaskOwner {
    /// Offset of the task in the object.
    const TASK_OFFSET: usize;

    /// The object's task.
    fn task(&self) -> &Task<Self> {
        // SAFETY: per the trait's contract, the task is a field at this offset.
        unsafe {
            &*ptr::from_ref(self)
                .cast::<u8>()
                .add(Self::TASK_OFFSET)
                .cast::<Task<Self>>()
        }
    }
}

/// Declares the [`Task`] field of an object: `impl_has_task!(Type, field)`.
macro_rules! impl_has_task {
    ($ty:ty, $field:ident) => {
        // SAFETY: the offset is that of `$field`, which the function below checks is a
        // `Task<$ty>`.
        unsafe impl $crate::glue::task::HasTask for $ty {
            const TASK_OFFSET: usize = {
                let _is_task: fn(&$ty) -> &$crate::glue::task::Task<$ty> = |o| &o.$field;
                core::mem::offset_of!($ty, $field)
            };
        }
    };
}
pub(crate) use impl_has_task;

/// The current time for transport deadlines, in nanoseconds (monotonic).
pub(crate) fn now_ns() -> u64 {
    // SAFETY: reading the monotonic clock has no preconditions.
    unsafe { bindings::rrxe_ktime_get_ns() }
}

/// The driver's workqueue, set while a [`TaskQueue`] exists.
static QUEUE: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(ptr::null_mut());

/// The workqueue every task runs on: high priority (the transport's timers are short), and
/// destroyed, draining every run, when this is dropped at module exit.
pub(crate) struct TaskQueue(());

impl TaskQueue {
    /// Creates the workqueue; `EBUSY` if one exists.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: process context (module init).
        let wq = unsafe { bindings::rrxe_alloc_task_queue() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        if QUEUE
            .compare_exchange(ptr::null_mut(), wq, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: created above, never published.
            unsafe { bindings::destroy_workqueue(wq) };
            return Err(EBUSY);
        }
        Ok(Self(()))
    }
}

impl Drop for TaskQueue {
    fn drop(&mut self) {
        let wq = QUEUE.swap(ptr::null_mut(), Ordering::AcqRel);
        if !wq.is_null() {
            // SAFETY: created in `new`; destroy_workqueue drains pending and running work,
            // whose references keep their owners alive until they return.
            unsafe { bindings::destroy_workqueue(wq) };
        }
    }
}

static TIMER_LOCK: LockClass = LockClass::new();

/// A work item and a timer that run [`TaskOwner::run`] of the object they are a field of.
#[pin_data]
pub(crate) struct Task<T: TaskOwner> {
    #[pin]
    work: Opaque<bindings::work_struct>,
    #[pin]
    timer: Opaque<bindings::timer_list>,
    /// Set by [`Task::shutdown`]: the timer is not armed again. Arming happens under the
    /// lock, so no arm can slip between the flag and the timer's shutdown.
    #[pin]
    shut: IrqSpinLock<bool>,
    scratch: UnsafeCell<T::Scratch>,
}

// SAFETY: the work item and timer are driven through their own locked C APIs; the scratch
// is only reached from the (non-reentrant) run, `T::Scratch: Send`.
unsafe impl<T: TaskOwner> Send for Task<T> {}
// SAFETY: as above.
unsafe impl<T: TaskOwner> Sync for Task<T> {}

impl<T: HasTask> Task<T> {
    /// A task with `scratch` for its runs; nothing runs until it is kicked.
    pub(crate) fn new(scratch: T::Scratch) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; the callback only runs once the work is
            // queued, by `kick`, with a reference to the owner.
            work <- Opaque::ffi_init(|slot| unsafe {
                bindings::rrxe_init_work(slot, Some(Self::work_fn))
            }),
            // SAFETY: as above, for `arm`.
            timer <- Opaque::ffi_init(|slot| unsafe {
                bindings::rrxe_timer_setup(slot, Some(Self::timer_fn))
            }),
            shut <- IrqSpinLock::new(false, kernel::c_str!("rrxe_task_timer"), &TIMER_LOCK),
            scratch: UnsafeCell::new(scratch),
        })
    }

    /// The object whose field this task is.
    fn owner_ptr(&self) -> *const T {
        // SAFETY: per `HasTask`, the task is the field at `TASK_OFFSET` of a `T`.
        unsafe {
            ptr::from_ref(self)
                .cast::<u8>()
                .sub(T::TASK_OFFSET)
                .cast::<T>()
        }
    }

    /// Queues the work item now, handing it a reference to `owner`; a no-op while it is
    /// already queued or after [`Task::shutdown`]. Any context.
    pub(crate) fn kick(owner: &Arc<T>) {
        let task = owner.task();
        let wq = QUEUE.load(Ordering::Acquire);
        if wq.is_null() {
            return;
        }
        let raw = Arc::into_raw(owner.clone());
        // SAFETY: the work item was initialised in `new`; queueing a queued or disabled
        // item does nothing and returns false. The queue lives until module exit, after
        // every device (and so every task owner) is gone.
        let queued = unsafe { bindings::rrxe_queue_work_on(wq, task.work.get()) };
        if !queued {
            // SAFETY: not handed over: the reference is still ours.
            drop(unsafe { Arc::from_raw(raw) });
        }
    }

    /// Arms the timer to queue the work item `delay_ns` from now (replacing an earlier
    /// deadline), handing it a reference to `owner` if it was not armed. A no-op after
    /// [`Task::shutdown`]. Any context.
    pub(crate) fn arm(owner: &Arc<T>, delay_ns: u64) {
        let task = owner.task();
        // SAFETY: converting a duration has no preconditions.
        let delta = unsafe { bindings::nsecs_to_jiffies(delay_ns) };
        // SAFETY: as above.
        let expires = unsafe { bindings::rrxe_jiffies() }.wrapping_add(delta.max(1) as _);
        let shut = task.shut.lock();
        if *shut {
            return;
        }
        let raw = Arc::into_raw(owner.clone());
        // SAFETY: the timer was initialised in `new` and is not shut down (checked under
        // the lock `shutdown` takes first). mod_timer returns 1 if it was pending: that
        // arming already holds a reference.
        if unsafe { bindings::mod_timer(task.timer.get(), expires) } != 0 {
            // SAFETY: not handed over: the reference is still ours.
            drop(unsafe { Arc::from_raw(raw) });
        }
        drop(shut);
    }

    /// Stops the task for good: the timer and the work item are disabled, and the
    /// references their pending callbacks held are dropped. Waits for a running timer
    /// callback, and for a running work item unless called from it (an owner's run may
    /// destroy its own object, e.g. a consumer's handler called from it); afterwards neither
    /// starts again, and [`Task::kick`]/[`Task::arm`] do nothing. Process context.
    pub(crate) fn shutdown(&self) {
        {
            let mut shut = self.shut.lock();
            if *shut {
                return;
            }
            *shut = true;
        }
        // The timer first: its callback queues the work item.
        // SAFETY: the timer was initialised in `new`; process context, not the timer's own
        // callback (which only kicks).
        if unsafe { bindings::timer_shutdown_sync(self.timer.get()) } != 0 {
            // SAFETY: the timer was pending, so it held the reference `arm` gave it.
            drop(unsafe { Arc::from_raw(self.owner_ptr()) });
        }
        let work = self.work.get();
        // SAFETY: reading which work item the current worker runs has no preconditions.
        let own = unsafe { bindings::current_work() } == work;
        // SAFETY: the work item was initialised in `new`. From its own run, waiting for it
        // would wait for ourselves: that run holds its own reference and ends on its own.
        let was_pending = unsafe {
            if own {
                bindings::disable_work(work)
            } else {
                bindings::disable_work_sync(work)
            }
        };
        if was_pending {
            // SAFETY: the work item was queued, so it held the reference `kick` gave it.
            drop(unsafe { Arc::from_raw(self.owner_ptr()) });
        }
    }

    /// # Safety
    ///
    /// Called by the workqueue for a work item queued by [`Task::kick`].
    unsafe extern "C" fn work_fn(work: *mut bindings::work_struct) {
        // SAFETY: the work item is the `work` field of a `Task<T>`, itself a field of a `T`
        // kept alive by the reference `kick` handed to this run, which we take back.
        let (task, owner) = unsafe {
            let task = &*work.byte_sub(offset_of!(Self, work)).cast::<Self>();
            (task, Arc::from_raw(task.owner_ptr()))
        };
        // SAFETY: a work item never runs concurrently with itself, and only this function
        // reaches the scratch.
        let scratch = unsafe { &mut *task.scratch.get() };
        T::run(&owner, scratch);
    }

    /// # Safety
    ///
    /// Called by the timer wheel for a timer armed by [`Task::arm`].
    unsafe extern "C" fn timer_fn(timer: *mut bindings::timer_list) {
        // SAFETY: the timer is the `timer` field of a `Task<T>` in a `T` kept alive by the
        // reference `arm` handed to it, which we take back.
        let owner = unsafe {
            let task = &*timer.byte_sub(offset_of!(Self, timer)).cast::<Self>();
            Arc::from_raw(task.owner_ptr())
        };
        Self::kick(&owner);
    }
}
