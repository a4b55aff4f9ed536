// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring in rdma_rxe's shared format. Userspace maps user CQs and polls
//! them itself; kernel consumers poll through `poll_cq`.

use crate::glue::bindings as b;
use crate::glue::queue::SharedQueue;
use crate::glue::rdma::attr::CqInit;
use crate::glue::rdma::object::{CqHandle, QpHandle, UserWorkCompletion, WcFields, WorkCompletion};
use crate::glue::rdma::udata::UData;
use crate::glue::sync::{IrqSpinLock, LockClass};
use crate::params;
use crate::quota::Charge;
use core::mem::size_of;
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

static CQ_LOCK: LockClass = LockClass::new();

/// Which completions raise the next completion event (IBA 11.4.2.2, Request Completion
/// Notification).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Armed {
    Not,
    /// Only a solicited completion (or an error) fires the event.
    Solicited,
    /// The next completion fires the event; a later solicited-only request cannot narrow it.
    Next,
}

struct CqRing {
    queue: SharedQueue,
    /// The producer index, kept here: the kernel produces into the ring, and the copy in
    /// the shared header is the provider's to read (it may have written anything there).
    producer: u32,
    /// User CQs hold `struct ib_uverbs_wc` entries written for the rxe provider; kernel CQs
    /// hold `struct ib_wc`.
    user: bool,
    armed: Armed,
}

/// State of one rrxe CQ.
pub(crate) struct RrxeCq {
    shared: Arc<CqShared>,
    /// The CQ's place in the device's count.
    _charge: Charge,
}

/// The part of a CQ its QPs reach.
#[pin_data]
pub(crate) struct CqShared {
    /// The CQ's consumer: its completion and event handlers.
    handle: CqHandle,
    #[pin]
    ring: IrqSpinLock<CqRing>,
}

impl RrxeCq {
    /// The part of the CQ a QP keeps.
    pub(crate) fn shared(&self) -> Arc<CqShared> {
        self.shared.clone()
    }
}

/// Creates a CQ; for user CQs, exports the ring and answers rdma_rxe's create response.
pub(crate) fn create(
    handle: CqHandle,
    attr: &CqInit,
    udata: Option<&mut UData>,
    charge: Charge,
) -> Result<(RrxeCq, u32)> {
    check_entries(attr.entries)?;
    let user = udata.is_some();
    let mut queue = new_ring(attr.entries, user)?;
    if let Some(udata) = udata {
        let mi = queue.export(udata)?;
        udata.respond(&b::rxe_create_cq_resp { mi })?;
    }
    let capacity = queue.capacity();
    let shared = Arc::pin_init(
        pin_init!(CqShared {
            handle,
            ring <- IrqSpinLock::new(
                CqRing {
                    queue,
                    producer: 0,
                    user,
                    armed: Armed::Not,
                },
                c_str!("rrxe_cq"),
                &CQ_LOCK,
            ),
        }),
        GFP_KERNEL,
    )?;
    Ok((
        RrxeCq {
            shared,
            _charge: charge,
        },
        capacity,
    ))
}

fn check_entries(entries: u32) -> Result {
    if entries == 0 || entries > params::MAX_CQE {
        return Err(EINVAL);
    }
    Ok(())
}

/// A new ring for `entries` completions in the format its reader expects.
fn new_ring(entries: u32, user: bool) -> Result<SharedQueue> {
    let elem = if user {
        size_of::<UserWorkCompletion>()
    } else {
        size_of::<WorkCompletion>()
    };
    SharedQueue::new(entries, elem)
}

/// Replaces the ring with one of room for `entries`, moving the completions it holds.
///
/// rdma_rxe's protocol: the response carries the new ring's `mminfo`; the provider, holding
/// its CQ lock, unmaps the old ring and maps the new one.
pub(crate) fn resize(cq: &RrxeCq, entries: u32, udata: Option<&mut UData>) -> Result<u32> {
    check_entries(entries)?;
    let user = cq.shared.ring.lock().user;
    if user != udata.is_some() {
        return Err(EINVAL);
    }
    // Allocation, export and the copy to userspace may sleep: all before taking the lock.
    let mut queue = new_ring(entries, user)?;
    if let Some(udata) = udata {
        let mi = queue.export(udata)?;
        udata.respond(&b::rxe_resize_cq_resp { mi })?;
    }
    let capacity = queue.capacity();
    let old = {
        let mut ring = cq.shared.ring.lock();
        let consumer = ring.queue.consumer();
        let count = ring.producer.wrapping_sub(consumer) & ring.queue.capacity();
        // Fewer slots than completions waiting would lose some (IBA 11.2.8.2: EINVAL).
        queue.take_entries_from_range(&ring.queue, consumer, count)?;
        ring.producer = count;
        core::mem::replace(&mut ring.queue, queue)
    };
    // Freeing may sleep (vfree, mmap entry removal): after the lock.
    drop(old);
    Ok(capacity)
}

/// Moves completions of a kernel CQ to its consumer.
pub(crate) fn poll(cq: &RrxeCq, wc: &mut [WorkCompletion]) -> Result<usize> {
    let ring = cq.shared.ring.lock();
    if ring.user {
        // A user CQ's ring holds uverbs completions for the provider to read; the
        // POLL_CQ command has nothing valid to return from it.
        return Err(EINVAL);
    }
    let producer = ring.producer;
    let mut consumer = ring.queue.consumer();
    let mut n = 0;
    while n < wc.len() && consumer != producer {
        wc[n] = ring.queue.read_slot(consumer);
        consumer = ring.queue.next(consumer);
        n += 1;
    }
    ring.queue.set_consumer(consumer);
    Ok(n)
}

/// Arms the completion event; reports completions already waiting when asked to.
pub(crate) fn req_notify(cq: &RrxeCq, solicited_only: bool, report_missed: bool) -> bool {
    let mut ring = cq.shared.ring.lock();
    ring.armed = match (ring.armed, solicited_only) {
        (Armed::Next, _) | (_, false) => Armed::Next,
        _ => Armed::Solicited,
    };
    report_missed && ring.producer != ring.queue.consumer()
}

/// Posts a completion of `qp` to `cq` and raises the completion event if it is armed for
/// it. A full CQ loses the completion and reports a CQ error (IBA 11.4.2.1: overrun). Calls
/// the CQ's consumer: must not be called with a QP's lock held.
pub(crate) fn post(cq: &CqShared, qp: &QpHandle, wc: &WcFields, solicited: bool) {
    notify(cq, write(cq, qp, wc, solicited));
}

/// What a completion written by [`write`] owes the CQ's consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notice {
    /// Nothing.
    Quiet,
    /// The completion event, which was armed for it (IBA 11.4.2.2).
    Completion,
    /// The CQ error: the CQ was full and lost the completion (IBA 11.4.2.1).
    Overrun,
}

/// Writes a completion of `qp` into `cq`, where a poller sees it at once, and disarms the
/// completion event if it fires; returns what the consumer is owed, for [`notify`]. Calls
/// no consumer: may be called with a QP's lock held.
pub(crate) fn write(cq: &CqShared, qp: &QpHandle, wc: &WcFields, solicited: bool) -> Notice {
    let mut ring = cq.ring.lock();
    let producer = ring.producer;
    let next = ring.queue.next(producer);
    if next == ring.queue.consumer() {
        return Notice::Overrun;
    }
    if ring.user {
        ring.queue.write_slot(producer, &wc.to_user());
    } else {
        ring.queue.write_slot(producer, &wc.to_kernel(qp));
    }
    ring.producer = next;
    ring.queue.set_producer(next);
    // IBA 11.4.2.2: a solicited-only request fires on a solicited or failed completion.
    let fire = match ring.armed {
        Armed::Next => true,
        Armed::Solicited => solicited || wc.status != 0,
        Armed::Not => false,
    };
    if fire {
        ring.armed = Armed::Not;
        Notice::Completion
    } else {
        Notice::Quiet
    }
}

/// Gives the CQ's consumer what [`write`] said it is owed. Must not be called with a QP's
/// lock held.
pub(crate) fn notify(cq: &CqShared, notice: Notice) {
    match notice {
        Notice::Quiet => {}
        Notice::Completion => cq.handle.completion_event(),
        Notice::Overrun => cq.handle.error_event(),
    }
}
