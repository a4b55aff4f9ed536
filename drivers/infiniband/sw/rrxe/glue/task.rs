// SPDX-License-Identifier: GPL-2.0

//! Tasks: a work item that runs an object's state machine in process context, and a timer
//! that queues it at a deadline.
//!
//! Ownership is in the types, as with rust/kernel's `Arc` work items: a task is a field of
//! an object always held in an [`Arc`], and every pending callback owns a reference to that
//! object. [`Task::kick`] hands one to the work item it queues (and takes it back if the
//! item was already queued), [`Task::arm`] one to the timer when it arms an idle one; the
//! callback consumes it unless the timer was armed again meanwhile. So the object lives as
//! long as anything can still run on it, whatever the order of events, and "a task
//! outliving its owner" cannot be written.
//!
//! A work item never runs concurrently with itself (all workqueues are non-reentrant), so a
//! task run needs no lock against itself; its scratch space ([`TaskOwner::Scratch`]) is
//! reached only from the run, or by the holder of a claim of the next run ([`Claim`]),
//! which keeps every run from starting meanwhile. Work runs on the driver's own workqueue
//! ([`TaskQueue`]), which module exit destroys, waiting for every run still going.
//!
//! Deadlines use a high-resolution timer, not the timer wheel: an RNR NAK timer is a
//! minimum wait (IBA Table 45, from 10 us), and the wheel counts whole jiffies (the delay
//! rounded down, at least one, plus one for the tick edge), so at HZ=1000 a 0.64 ms RNR
//! timer expired 1-2 ms after arming, and a 1.9 ms one too, early. An hrtimer is on time
//! and never early; slack of an eighth of the delay lets long retransmission deadlines
//! coalesce. Figures: Documentation/rrxe/benchmarks.rst.

use super::bindings;
use super::sync::{IrqSpinLock, LockClass};
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::mem::{offset_of, ManuallyDrop};
use core::ptr;
use core::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// An object driven by a [`Task`] embedded in it.
pub(crate) trait TaskOwner: Send + Sync + Sized + 'static {
    /// Space only the task's run uses (buffers it keeps between runs).
    type Scratch: Send;

    /// Runs the object's pending work (process context, never concurrently with itself):
    /// the work item's run, or, `now`, one made at once by a kick ([`Place::Now`]). Kicks
    /// the run wants made at once go into `chain`: the caller makes them after this run
    /// has ended, so that they may include a kick of this very task.
    fn run(this: &Arc<Self>, scratch: &mut Self::Scratch, now: bool, chain: &mut Kicks);

    /// Whether a kick may run the task in the kicker's context ([`Place::Now`]). Only for
    /// owners whose runs never shut their own task down (a run made there cannot be told
    /// from another thread's, and [`Task::shutdown`] waits for it).
    fn runs_now(&self) -> bool {
        false
    }

    /// A run of the work item started `ns` after the item was queued: what a wake-up of a
    /// worker costs on this host, for owners that weigh it against a spin.
    fn woke(&self, _ns: u64) {}
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
    let ns = unsafe { bindings::ktime_get() };
    // Nanoseconds since boot: never negative.
    ns as u64
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

/// Where a [`Kick`] queues its work item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// On the CPU that fires it, as [`Task::kick`] does.
    Here,
    /// On the next online CPU: the firing CPU is busy with the caller and its application,
    /// and the two runs can overlap. A work item still pending on the firing CPU is moved
    /// there too: left behind it would run after the caller's next run (a cut run kicks
    /// itself here), and two QPs feeding each other would share one CPU for good, as a
    /// 64 KiB Read's responder and requester did (Documentation/rrxe/benchmarks.rst).
    Beside,
    /// At once, in the firing context, if the task is idle and its owner allows it
    /// ([`TaskOwner::runs_now`]); [`Place::Here`] otherwise. Process context, with no lock
    /// held. Runs made so never nest: a run hands the kicks it wants made at once to its
    /// caller, which makes them after it, one after the other, up to [`Kicks::CHAIN`].
    Now,
}

/// [`Task`]'s run state: a run (the work item's or one made [`Place::Now`]) is going on, or
/// is claimed ([`Task::claim`]).
const RUNNING: u32 = 1 << 0;
/// The work item found a run made now going on: that run's end queues it again.
const AGAIN: u32 = 1 << 1;
/// [`Task::shutdown`] began: no run starts.
const SHUT: u32 = 1 << 2;
/// A caller of [`Task::run_now_after`] waits for the run going on to end, to make the next
/// itself: that run need not queue the work item for what it leaves ([`Task::awaited`]).
/// Set only while [`RUNNING`] is; every release clears it.
const WAITING: u32 = 1 << 3;

/// A [`Task::kick`] put off until the caller decides where and when: it owns a reference to
/// the task's owner, and queues the work item when fired, or here when dropped unfired, so a
/// kick is never lost. Any context.
pub(crate) struct Kick {
    /// `Arc::into_raw` of the owner, with [`CLAIMED`] set in its (alignment) low bit if the
    /// kick holds the task's next run ([`Task::claim`]): it makes that run, or lets go of
    /// it before it queues the work item. A flag of its own would make a kick half as large
    /// again, and every batch of them moved with it.
    owner: *const c_void,
    /// Queues the owner's work item (unless given no place), or runs it at once adding
    /// the kicks of that run to the batch given ([`Place::Now`]), and consumes the
    /// reference (and the claim, if it holds one); what it did.
    queue: unsafe fn(*const c_void, Option<Place>, &mut Kicks) -> Fired,
}

/// The bit of [`Kick::owner`] that says the kick holds a claim.
const CLAIMED: usize = 1;

/// What firing a [`Kick`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fired {
    /// Queued the work item (or found it queued, or the task shut down).
    Queued,
    /// Moved the work item, pending on this CPU, to the next ([`Place::Beside`]).
    Moved,
    /// Made the run at once ([`Place::Now`]).
    Ran,
}

/// A spin of [`Task::run_now_after`] or [`Task::awaited`]: how long it took (host time,
/// which counts whatever the vCPU was descheduled for), and whether what it waited for
/// came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spin {
    /// From the first look to the last, in ns.
    pub(crate) ns: u64,
    /// The run ended (or the doorbell announced itself) before the bound.
    pub(crate) met: bool,
}

/// What firing a batch of [`Kicks`] did, besides queueing work items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FiredCount {
    /// Work items moved to the next CPU ([`Fired::Moved`]).
    pub(crate) moved: u64,
    /// Runs made at once ([`Fired::Ran`]).
    pub(crate) ran: u64,
}

// SAFETY: the reference is to a `TaskOwner`, which is `Send + Sync`; kicking is allowed in
// any context.
unsafe impl Send for Kick {}

impl Kick {
    /// Queues the work item at `place` (or runs it, [`Place::Now`], and then makes the
    /// kicks that run leaves, as [`Kicks::fire`] does).
    pub(crate) fn fire(self, place: Place) -> Fired {
        if place == Place::Now {
            let mut chain = Kicks::new();
            chain.add(self);
            return if chain.fire(Place::Now).ran > 0 {
                Fired::Ran
            } else {
                Fired::Queued
            };
        }
        self.fire_into(place, &mut Kicks::new())
    }

    /// As [`Kick::fire`], a run made at once adding its kicks to `chain`.
    fn fire_into(self, place: Place, chain: &mut Kicks) -> Fired {
        let this = ManuallyDrop::new(self);
        // SAFETY: `owner` is the reference `deferred` took, consumed here only (`this` is
        // not dropped).
        unsafe { (this.queue)(this.owner, Some(place), chain) }
    }

    /// Whether `other` kicks the same task.
    fn same_task(&self, other: &Kick) -> bool {
        self.owner as usize & !CLAIMED == other.owner as usize & !CLAIMED
    }

    /// Whether the kick holds a claim of the task's next run.
    fn claimed(&self) -> bool {
        self.owner as usize & CLAIMED != 0
    }

    /// Drops the kick unfired, for one that [`Kick::same_task`] says another covers. A
    /// claimed kick covers the others, and is never merged into one.
    fn merge(self) {
        let this = ManuallyDrop::new(self);
        // SAFETY: as in `fire_into`; the thunk only drops the reference, the owner's type
        // being erased here (or, for a claimed kick, which no caller merges, lets go of the
        // claim and queues the work item).
        unsafe { (this.queue)(this.owner, None, &mut Kicks::new()) };
    }
}

impl Drop for Kick {
    fn drop(&mut self) {
        // SAFETY: as in `fire_into`; `self` is not used again.
        unsafe { (self.queue)(self.owner, Some(Place::Here), &mut Kicks::new()) };
    }
}

/// Tasks a caller owes a kick, each kicked once when the batch is fired (or here, when it is
/// dropped unfired).
pub(crate) struct Kicks {
    /// Dropped by hand ([`Kicks`]' `Drop`): the array's own drop would call the drop of
    /// each place, empty or not (a chain's batches are dropped empty, four calls each).
    pending: ManuallyDrop<[Option<Kick>; Self::CAPACITY]>,
    /// Kicks added since the batch was last fired, merged ones included.
    added: usize,
}

impl Kicks {
    /// Different tasks a batch holds; a kick for a further one is fired at once, here.
    const CAPACITY: usize = 4;

    /// Runs one [`Kicks::fire`] at [`Place::Now`] makes, those its runs add included; the
    /// rest are queued here. A request, its response and the requester taking it in are
    /// three.
    pub(crate) const CHAIN: usize = 4;

    /// An empty batch.
    pub(crate) const fn new() -> Self {
        Self {
            pending: ManuallyDrop::new([const { None }; Self::CAPACITY]),
            added: 0,
        }
    }

    /// Kicks added since the batch was last fired, merged ones included.
    pub(crate) fn added(&self) -> usize {
        self.added
    }

    /// Adds a kick, merged with one already held for the same task.
    pub(crate) fn add(&mut self, kick: Kick) {
        self.added += 1;
        self.insert(kick);
    }

    /// Holds a kick, merged with one already held for the same task.
    #[inline]
    fn insert(&mut self, kick: Kick) {
        // One pass: a kick of the same task, or else the first free place.
        let mut free = None;
        for (i, slot) in self.pending.iter_mut().enumerate() {
            match slot {
                // The claimed kick stays: it holds the run the other would queue.
                Some(k) if k.same_task(&kick) && kick.claimed() => {
                    return core::mem::replace(k, kick).merge();
                }
                Some(k) if k.same_task(&kick) => return kick.merge(),
                Some(_) => {}
                None => {
                    free.get_or_insert(i);
                }
            }
        }
        match free.and_then(|i| self.pending.get_mut(i)) {
            Some(slot) => {
                // Swapped in: the place is empty, and an assignment would call its drop.
                let mut kick = Some(kick);
                core::mem::swap(slot, &mut kick);
                debug_assert!(kick.is_none());
            }
            None => {
                kick.fire(Place::Here);
            }
        }
    }

    /// Adds the kick a task is owed for `packets` packets handed to it, counted in
    /// [`Kicks::added`] as that many kicks.
    pub(crate) fn add_for(&mut self, kick: Kick, packets: usize) {
        self.add(kick);
        self.added += packets.saturating_sub(1);
    }

    /// Moves the kicks of `other` into this batch, with their count.
    pub(crate) fn take_from(&mut self, other: &mut Kicks) {
        // A batch that holds kicks counts them (a run that sent nothing has none).
        if other.added == 0 {
            return;
        }
        if self.pending.iter().all(Option::is_none) {
            // Nothing to merge with (a run's kicks moved into the chain it was made in):
            // swapped place by place, two words each, where a swap of the arrays went
            // through them eight bytes a step (87 instructions a Read), and an assignment
            // would call the drop of the empty place.
            for (to, from) in self.pending.iter_mut().zip(other.pending.iter_mut()) {
                core::mem::swap(to, from);
            }
        } else {
            for kick in other.pending.iter_mut().filter_map(Option::take) {
                self.insert(kick);
            }
        }
        self.added += core::mem::take(&mut other.added);
    }

    /// Fires the batch's kicks at `place`. At [`Place::Now`], each run made at once may add
    /// kicks to the batch, made in their turn, one after the other (a ping-pong's request,
    /// response and its taking in on one CPU, with no work item queued between them), up
    /// to [`Kicks::CHAIN`] runs.
    pub(crate) fn fire(&mut self, place: Place) -> FiredCount {
        let mut count = FiredCount::default();
        let mut runs = 0;
        while let Some(kick) = self.pending.iter_mut().find_map(Option::take) {
            let place = if place == Place::Now && runs >= Self::CHAIN {
                Place::Here
            } else {
                place
            };
            match kick.fire_into(place, self) {
                Fired::Queued => {}
                Fired::Moved => count.moved += 1,
                Fired::Ran => {
                    count.ran += 1;
                    runs += 1;
                }
            }
        }
        self.added = 0;
        count
    }
}

impl Drop for Kicks {
    /// Kicks still held are fired here (each [`Kick`]'s drop).
    fn drop(&mut self) {
        for kick in self.pending.iter_mut().filter_map(Option::take) {
            drop(kick);
        }
    }
}

/// A task's next run, claimed ([`Task::claim`]): its holder has the run's scratch until it
/// turns the claim into the kick that makes the run ([`Claim::into_kick`]); dropped, it
/// lets go of the run and queues the work item, which makes it.
pub(crate) struct Claim<T: HasTask> {
    /// The reference the kick takes over.
    owner: ManuallyDrop<Arc<T>>,
}

impl<T: HasTask> Claim<T> {
    /// The task's owner.
    pub(crate) fn owner(&self) -> &Arc<T> {
        &self.owner
    }

    /// The claimed run's scratch.
    pub(crate) fn scratch(&mut self) -> &mut T::Scratch {
        // SAFETY: the claim holds `RUNNING`, which keeps every run and every other claim
        // from the scratch; the borrow of `self` ends before the claim is given up.
        unsafe { &mut *self.owner.task().scratch.get() }
    }

    /// The kick that makes the claimed run (at once, fired [`Place::Now`]) or, fired
    /// elsewhere or dropped, lets go of it and queues the work item there.
    pub(crate) fn into_kick(self) -> Kick {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: taken once, `this` not dropped.
        Self::kick_of(unsafe { ManuallyDrop::take(&mut this.owner) })
    }

    /// The claimed kick holding `owner`, the claim's reference.
    fn kick_of(owner: Arc<T>) -> Kick {
        // The owner holds a task, whose atomics align it to more than the bit.
        const { assert!(core::mem::align_of::<T>() > CLAIMED) };
        Kick {
            // The bit is clear in an aligned pointer: adding it sets it.
            owner: Arc::into_raw(owner)
                .cast::<u8>()
                .wrapping_add(CLAIMED)
                .cast(),
            queue: Task::<T>::queue_thunk,
        }
    }
}

impl<T: HasTask> Drop for Claim<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, in the drop.
        let owner = unsafe { ManuallyDrop::take(&mut self.owner) };
        // Lets go of the claim, and queues the work item for what it was given.
        drop(Self::kick_of(owner));
    }
}

static TIMER_LOCK: LockClass = LockClass::new();

/// Shortest delay a deadline is armed with: a deadline already due still leaves the CPU to
/// others for a moment, so that an engine that kept returning one could not spin.
const MIN_DELAY_NS: u64 = 2_000;

/// What [`Task::arm`], the timer's callback and [`Task::shutdown`] agree on.
struct TimerState {
    /// Set by [`Task::shutdown`]: the timer is not armed again.
    shut: bool,
    /// The timer holds a reference to the owner: set by the arm that took it, cleared by
    /// whoever takes it back (the callback of the last arming, or the shutdown).
    holds_ref: bool,
    /// While `holds_ref`: the latest time (`now_ns`) the armed timer fires, its slack
    /// included.
    latest_ns: u64,
    /// While `holds_ref`: the deadline the timer was armed for, its soft expiry.
    deadline_ns: u64,
}

/// A work item and a timer that run [`TaskOwner::run`] of the object they are a field of.
#[pin_data]
pub(crate) struct Task<T: TaskOwner> {
    #[pin]
    work: Opaque<bindings::work_struct>,
    #[pin]
    timer: Opaque<bindings::hrtimer>,
    /// Arming, the callback's hand-back and shutdown happen under this lock, so no arm can
    /// slip between the flag and the timer's cancellation, and the timer's reference is
    /// taken and returned exactly once per idle-to-armed transition.
    #[pin]
    state: IrqSpinLock<TimerState>,
    /// [`TimerState::latest_ns`] while the timer holds its reference, 0 while it does not:
    /// written under `state`'s lock, read without it by [`Task::arm`], which leaves an
    /// armed timer that fires in time as it is with no lock taken (most runs of a QP
    /// with a request outstanding). A stale reading is harmless: the expiry that cleared
    /// it kicks the task, whose next run arms again.
    armed_until: AtomicU64,
    /// [`TimerState::deadline_ns`], for the same lock-free look: read only when
    /// `armed_until` is later than a run's own latest time.
    armed_deadline: AtomicU64,
    /// The CPU the work item was last queued on (-1 before its first kick): a kick for
    /// beside moves the item if it is still pending on the kicker's own CPU.
    cpu: AtomicI32,
    /// [`RUNNING`], [`AGAIN`], [`SHUT`] and [`WAITING`]: which of the work item, a run
    /// made [`Place::Now`] and a claim has the scratch.
    runs: AtomicU32,
    /// When the work item was last queued ([`now_ns`]), for [`TaskOwner::woke`]. Stored
    /// before each queueing, including those that find it pending, so a run may see a
    /// later time than its own queueing's: it then reports a shorter wake-up.
    queued_ns: AtomicU64,
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
                bindings::rrxe_hrtimer_setup(slot, Some(Self::timer_fn))
            }),
            state <- IrqSpinLock::new(
                TimerState {
                    shut: false,
                    holds_ref: false,
                    latest_ns: 0,
                    deadline_ns: 0,
                },
                kernel::c_str!("rrxe_task_timer"),
                &TIMER_LOCK
            ),
            armed_until: AtomicU64::new(0),
            queued_ns: AtomicU64::new(0),
            armed_deadline: AtomicU64::new(0),
            cpu: AtomicI32::new(-1),
            runs: AtomicU32::new(0),
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
        Self::deferred(owner.clone()).fire(Place::Here);
    }

    /// Runs `owner`'s task at once, as a kick at [`Place::Now`] does (the kicks its run
    /// leaves are made after it, in turn), if it is idle and its owner allows it; kicks it
    /// at `otherwise` if not: a run going on elsewhere, whose end will look again, is no
    /// reason to wake this CPU's worker, as [`Place::Now`]'s own fallback would. Process
    /// context, with no lock held.
    pub(crate) fn run_now_or(owner: &Arc<T>, otherwise: Place) -> Fired {
        let mut chain = Kicks::new();
        if Self::run_now(owner, &mut chain) {
            chain.fire(Place::Now);
            return Fired::Ran;
        }
        Self::deferred(owner.clone()).fire(otherwise)
    }

    /// As [`Task::run_now_or`], but a run going on elsewhere is waited for, for up to
    /// `wait_ns`, and the next one made here once it ends: the caller would otherwise
    /// leave the work to that run's end, which queues the work item (a worker woken on
    /// this CPU, where the caller's process goes back to polling). The run waited for sees
    /// [`WAITING`] ([`Task::awaited`]) and queues nothing. The wait is bounded: the run may
    /// be a long one, or, in a preemptible kernel, one preempted on this very CPU. Returns
    /// what it did, and its spin if it had to wait (none if it found the task idle).
    /// Process context, with no lock held.
    pub(crate) fn run_now_after(
        owner: &Arc<T>,
        wait_ns: u64,
        otherwise: Place,
    ) -> (Fired, Option<Spin>) {
        let task = owner.task();
        let mut chain = Kicks::new();
        if owner.runs_now() {
            let mut since = None;
            loop {
                if Self::run_now(owner, &mut chain) {
                    let spin = since.map(|start| Spin {
                        ns: now_ns().saturating_sub(start),
                        met: true,
                    });
                    chain.fire(Place::Now);
                    return (Fired::Ran, spin);
                }
                let runs = task.runs.load(Ordering::Relaxed);
                if runs & SHUT != 0 {
                    return (Self::deferred(owner.clone()).fire(otherwise), None);
                }
                // Announced only while a run is going: its release clears the flag, and a
                // run that starts before this one claims sees it no more.
                if runs & (RUNNING | WAITING) == RUNNING
                    && task
                        .runs
                        .compare_exchange(
                            runs,
                            runs | WAITING,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        )
                        .is_err()
                {
                    continue;
                }
                let now = now_ns();
                let spun = now.saturating_sub(*since.get_or_insert(now));
                if spun >= wait_ns {
                    // The run may have seen the flag and left its work to this caller,
                    // whose kick below makes it.
                    task.runs.fetch_and(!WAITING, Ordering::Relaxed);
                    let spin = Spin {
                        ns: spun,
                        met: false,
                    };
                    return (Self::deferred(owner.clone()).fire(otherwise), Some(spin));
                }
                core::hint::spin_loop();
            }
        }
        (Self::deferred(owner.clone()).fire(otherwise), None)
    }

    /// Whether a caller of [`Task::run_now_after`] waits for the run going on to end, to
    /// make the next one: that run, which asks, queues none for what it leaves. Looked at
    /// for up to `wait_ns` (0: once), for a caller known to be on its way; the spin, if
    /// one was needed, is returned too.
    pub(crate) fn awaited(owner: &Arc<T>, wait_ns: u64) -> (bool, Option<Spin>) {
        let runs = &owner.task().runs;
        if runs.load(Ordering::Relaxed) & WAITING != 0 {
            return (true, None);
        }
        if wait_ns == 0 {
            return (false, None);
        }
        let start = now_ns();
        loop {
            core::hint::spin_loop();
            let met = runs.load(Ordering::Relaxed) & WAITING != 0;
            let ns = now_ns().saturating_sub(start);
            if met || ns >= wait_ns {
                return (met, Some(Spin { ns, met }));
            }
        }
    }

    /// A kick of `owner`'s task for later, holding the reference given: see [`Kick`].
    pub(crate) fn deferred(owner: Arc<T>) -> Kick {
        Kick {
            owner: Arc::into_raw(owner).cast(),
            queue: Self::queue_thunk,
        }
    }

    /// Claims `owner`'s next run, if its owner allows runs made at once
    /// ([`TaskOwner::runs_now`]) and no run is going on or claimed: until the claim is let
    /// go, no run starts (a work item that finds it held is queued again when it goes), and
    /// the claim's holder has the run's scratch, to leave the run work (received packets
    /// it takes in before any others, in the order they arrived). Gives `owner` back if
    /// the run could not be claimed. Any context.
    pub(crate) fn claim(owner: Arc<T>) -> core::result::Result<Claim<T>, Arc<T>> {
        if !owner.runs_now() || !owner.task().try_claim() {
            return Err(owner);
        }
        Ok(Claim {
            owner: ManuallyDrop::new(owner),
        })
    }

    /// Takes [`RUNNING`] if no run is going on or claimed; whether it did.
    fn try_claim(&self) -> bool {
        self.runs
            .compare_exchange(0, RUNNING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Lets go of a claim of the run that was not made: a work item that found it held is
    /// left to the caller, which queues it anyway.
    fn release(&self) {
        self.runs.fetch_and(SHUT, Ordering::Release);
    }

    /// Queues the work item of the owner `owner` is a reference to at `place` (nowhere for
    /// `None`), or runs it now ([`Place::Now`]), and drops that reference unless the work
    /// item took it; what it did. A claimed kick makes the run it holds now, or lets go of
    /// it and queues the work item, here if given no place: the claim left the run work.
    ///
    /// # Safety
    ///
    /// `owner` must be `Arc::into_raw` of an `Arc<T>`, not used again, with [`CLAIMED`] set
    /// if it holds the claim of [`Task::claim`], which is then given up here.
    unsafe fn queue_thunk(owner: *const c_void, place: Option<Place>, chain: &mut Kicks) -> Fired {
        let claimed = owner as usize & CLAIMED;
        // SAFETY: per the function contract, once the flag is cleared.
        let owner = unsafe { Arc::<T>::from_raw(owner.cast::<u8>().wrapping_sub(claimed).cast()) };
        let claimed = claimed != 0;
        let place = if claimed {
            if place == Some(Place::Now) {
                Self::run_claimed(&owner, chain);
                return Fired::Ran;
            }
            owner.task().release();
            place.or(Some(Place::Here))
        } else {
            place
        };
        let wq = QUEUE.load(Ordering::Acquire);
        let Some(mut place) = place.filter(|_| !wq.is_null()) else {
            return Fired::Queued;
        };
        if place == Place::Now {
            if Self::run_now(&owner, chain) {
                return Fired::Ran;
            }
            place = Place::Here;
        }
        let task = owner.task();
        let work = task.work.get();
        let cpu = task.cpu.as_ptr();
        task.queued_ns.store(now_ns(), Ordering::Relaxed);
        let raw = Arc::into_raw(owner);
        let mut moved = false;
        // SAFETY: the work item was initialised in `new`; queueing a queued or disabled
        // item does nothing and returns false. The queue lives until module exit, after
        // every device (and so every task owner) is gone. Both places are on the one
        // (per-CPU) workqueue, which keeps a work item from running on two CPUs at once
        // wherever it was queued. `cpu` is the task's own.
        let left = unsafe {
            match place {
                Place::Here | Place::Now => u32::from(!bindings::rrxe_queue_work_on(wq, work, cpu)),
                Place::Beside => bindings::rrxe_queue_work_beside(wq, work, cpu, &mut moved),
            }
        };
        for _ in 0..left {
            // SAFETY: the references left to us: our own if it was not handed over, and
            // the one a pending item held if it was cancelled to be queued beside.
            drop(unsafe { Arc::from_raw(raw) });
        }
        if moved {
            Fired::Moved
        } else {
            Fired::Queued
        }
    }

    /// Runs the task in this context, if its owner allows it and no run is going on,
    /// adding the kicks it wants made at once to `chain`; whether it did. A work item
    /// queued meanwhile that found this run going on is queued again at its end.
    fn run_now(owner: &Arc<T>, chain: &mut Kicks) -> bool {
        if !owner.runs_now() || !owner.task().try_claim() {
            return false;
        }
        Self::run_claimed(owner, chain);
        true
    }

    /// Makes the run whose claim (`RUNNING`) the caller holds, and lets go of it.
    fn run_claimed(owner: &Arc<T>, chain: &mut Kicks) {
        let task = owner.task();
        // SAFETY: `RUNNING`, held by the caller, keeps every other run (the work item's or
        // one made now) and claim from the scratch until it is released below.
        let scratch = unsafe { &mut *task.scratch.get() };
        T::run(owner, scratch, true, chain);
        if task.runs.fetch_and(SHUT, Ordering::Release) & AGAIN != 0 {
            Self::kick(owner);
        }
    }

    /// Has the timer queue the work item `delay_ns` after `now` (a [`now_ns`] reading) at
    /// the latest, with a slack of an eighth of the delay, handing it a reference to `owner`
    /// if it was not armed. An armed timer that fires by then is left as it is: a run it
    /// queues early finds nothing due and arms again for what is left, while restarting an
    /// hrtimer takes its base's lock and may reprogram the clock event device, and a QP
    /// streaming messages moves its retransmission deadline at every run. A timer armed for
    /// the same deadline is left as it is too, although its slack, taken from a longer
    /// delay, may end later than this one's: a deadline that does not move (the recheck
    /// of a receive queue for credits, an RNR wait) otherwise restarted the timer at every
    /// run of a busy QP (300 restarts in 600 runs of a 4 KiB `ib_send_bw`). Returns whether
    /// the timer was (re)started. A no-op after [`Task::shutdown`]. Any context.
    pub(crate) fn arm(owner: &Arc<T>, now: u64, delay_ns: u64) -> bool {
        let task = owner.task();
        let delay = delay_ns.max(MIN_DELAY_NS);
        let deadline = now.saturating_add(delay);
        let latest = deadline.saturating_add(delay / 8);
        let armed = task.armed_until.load(Ordering::Acquire);
        if armed != 0
            && (armed <= latest || task.armed_deadline.load(Ordering::Relaxed) == deadline)
        {
            return false;
        }
        let mut state = task.state.lock();
        if state.shut
            || (state.holds_ref && (state.latest_ns <= latest || state.deadline_ns == deadline))
        {
            return false;
        }
        if !state.holds_ref {
            // Taken back by the callback of the expiry that finds the timer idle, or by
            // `shutdown`.
            core::mem::forget(Arc::clone(owner));
            state.holds_ref = true;
        }
        state.latest_ns = latest;
        state.deadline_ns = deadline;
        task.armed_deadline.store(deadline, Ordering::Relaxed);
        task.armed_until.store(latest.max(1), Ordering::Release);
        // SAFETY: the timer was initialised in `new` and is not cancelled for good (checked
        // under the lock `shutdown` takes first). Restarting a queued timer moves its
        // expiry; one whose callback is running is queued again, and that callback then
        // leaves the reference to this arming.
        unsafe { bindings::rrxe_hrtimer_start(task.timer.get(), delay, delay / 8) };
        true
    }

    /// Stops the task for good: the timer and the work item are disabled, and the
    /// references their pending callbacks held are dropped. Waits for a running timer
    /// callback, and for a running work item unless called from it (an owner's run may
    /// destroy its own object, e.g. a consumer's handler called from it); afterwards neither
    /// starts again, and [`Task::kick`]/[`Task::arm`] do nothing. Process context.
    pub(crate) fn shutdown(&self) {
        {
            let mut state = self.state.lock();
            if state.shut {
                return;
            }
            state.shut = true;
        }
        self.runs.fetch_or(SHUT, Ordering::AcqRel);
        // The timer first: its callback queues the work item.
        // SAFETY: the timer was initialised in `new`; process context, not the timer's own
        // callback (which only kicks). Waits for a running callback; nothing arms it again.
        unsafe { bindings::hrtimer_cancel(self.timer.get()) };
        let held = {
            let mut state = self.state.lock();
            self.armed_until.store(0, Ordering::Release);
            core::mem::take(&mut state.holds_ref)
        };
        if held {
            // SAFETY: the timer was cancelled while armed, so the reference `arm` gave it
            // was never taken back.
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
        // A run made now on another thread (the work item's own is over, or is this one).
        while !own && self.runs.load(Ordering::Acquire) & RUNNING != 0 {
            // SAFETY: process context.
            unsafe { bindings::rrxe_wait_briefly() };
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
        let mut runs = task.runs.load(Ordering::Relaxed);
        loop {
            let next = match runs {
                0 => RUNNING,
                // Shut down meanwhile: nothing more runs.
                r if r & SHUT != 0 => return,
                // A run made now has the scratch: its end queues this item again.
                r => r | AGAIN,
            };
            match task
                .runs
                .compare_exchange(runs, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) if next == RUNNING => break,
                Ok(_) => return,
                Err(r) => runs = r,
            }
        }
        owner.woke(now_ns().saturating_sub(task.queued_ns.load(Ordering::Relaxed)));
        // SAFETY: a work item never runs concurrently with itself, and `RUNNING`, taken
        // above, keeps a run made now from the scratch until it is released below.
        let scratch = unsafe { &mut *task.scratch.get() };
        let mut chain = Kicks::new();
        T::run(&owner, scratch, false, &mut chain);
        task.runs.fetch_and(SHUT, Ordering::Release);
        // After the run has let go of the scratch: the chain may come back to this task.
        chain.fire(Place::Now);
    }

    /// # Safety
    ///
    /// Called in softirq context when a timer armed by [`Task::arm`] expires.
    unsafe extern "C" fn timer_fn(timer: *mut bindings::hrtimer) -> bindings::hrtimer_restart {
        // SAFETY: the timer is the `timer` field of a `Task<T>`, itself a field of a `T`.
        let task = unsafe { &*timer.byte_sub(offset_of!(Self, timer)).cast::<Self>() };
        let owner = {
            let mut state = task.state.lock();
            // SAFETY: an expiring timer holds the reference `arm` gave it (`holds_ref`), and
            // only this callback or `shutdown`, both under the lock, take it back; the
            // callback never runs concurrently with itself.
            let held = ManuallyDrop::new(unsafe { Arc::from_raw(task.owner_ptr()) });
            // SAFETY: the timer was initialised in `new`.
            if unsafe { bindings::rrxe_hrtimer_is_queued(timer) } {
                // Armed again since it expired: that arming keeps the reference.
                Arc::clone(&held)
            } else {
                state.holds_ref = false;
                task.armed_until.store(0, Ordering::Release);
                ManuallyDrop::into_inner(held)
            }
        };
        Self::kick(&owner);
        bindings::hrtimer_restart_HRTIMER_NORESTART
    }
}
