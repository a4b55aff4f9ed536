// SPDX-License-Identifier: GPL-2.0

//! What a QP's task owes its consumers: completions for its CQs, asynchronous events for
//! its own handler and its SRQ's. The task collects them while it holds the QP's lock and
//! delivers them after letting go of it, since a consumer's handler may post to, modify or
//! destroy the very QP (IBA 11.6.2 lets event handlers act on the QP; kernel ULPs tear
//! down from completion handlers). A user QP's completions are the exception: they are
//! written into their CQs at once (a poller sees them before the run goes on to build its
//! ACK), and only the CQ's event, if one fires, waits for delivery.

use crate::cq::{self, CqShared};
use crate::glue::rdma::object::{QpEvent, QpHandle, WcFields};
use crate::glue::task::Kicks;
use crate::srq::SrqShared;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Deliveries one task run may collect. A run stops taking work once fewer than
/// [`Outbox::RESERVE`] are free, and goes on in its next run.
const CAPACITY: usize = 256;

/// A QP's send and receive CQs (none for an XRC target).
pub(crate) type Cqs<'a> = (Option<&'a Arc<CqShared>>, Option<&'a Arc<CqShared>>);

/// The CQ of `queue`, of `cqs`.
fn cq_of<'a>(cqs: Cqs<'a>, queue: Queue) -> Option<&'a Arc<CqShared>> {
    match queue {
        Queue::Send => cqs.0,
        Queue::Recv => cqs.1,
    }
}

/// Which CQ a completion goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    /// The send CQ.
    Send,
    /// The receive CQ.
    Recv,
}

/// One call owed to a consumer.
#[derive(Clone)]
enum Delivery {
    /// A work completion, and whether it is solicited (IBA 11.4.2.2).
    Completion(Queue, WcFields, bool),
    /// What a completion written at once owes the consumer of the CQ of the queue.
    Notice(Queue, cq::Notice),
    /// An event for the QP's handler.
    Event(QpEvent),
    /// The SRQ's limit event.
    SrqLimit,
    /// A receive completion of an XRC target, for the CQ of the XRC SRQ it took from.
    XrcCompletion(Arc<SrqShared>, WcFields, bool),
    /// The limit event of an XRC SRQ an XRC target took from.
    XrcSrqLimit(Arc<SrqShared>),
}

/// The deliveries of one task run, and the objects they go to (references taken while the
/// QP's lock was held, when a delivery needs them, dropped at the end of the run).
pub(crate) struct Outbox {
    /// `CAPACITY` places, the first `len` taken.
    items: KVec<Option<Delivery>>,
    len: usize,
    send_cq: Option<Arc<CqShared>>,
    recv_cq: Option<Arc<CqShared>>,
    srq: Option<Arc<SrqShared>>,
    /// Completions are written into their CQs at once ([`Outbox::completion`]).
    at_once: bool,
    /// The QPs this run looped packets back to, kicked once the QP's lock is released.
    pub(crate) kicks: Kicks,
}

impl Outbox {
    /// Free places a run keeps for the work it is in the middle of: everything one
    /// received packet can complete (a coalesced ACK retires up to 64 send WQEs) plus its
    /// events.
    pub(crate) const RESERVE: usize = 80;

    /// An empty outbox with room for a run's deliveries (allocated once, with the QP).
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            items: KVec::from_elem(None, CAPACITY, GFP_KERNEL)?,
            len: 0,
            send_cq: None,
            recv_cq: None,
            srq: None,
            at_once: false,
            kicks: Kicks::new(),
        })
    }

    /// Starts a run; `at_once` for a user QP, whose completions are written into the CQs
    /// at once: its consumer is uverbs, whose CQ event handler only queues the event and
    /// wakes a reader. The QP's CQs and SRQ are referenced only by a run that owes them a
    /// delivery: most runs of a user QP owe none.
    pub(crate) fn begin(&mut self, at_once: bool) {
        self.at_once = at_once;
    }

    /// Keeps a reference to the CQ of `queue`, of `cqs` (the QP's send and receive CQs), for
    /// a delivery owed to it.
    fn hold_cq(&mut self, cqs: Cqs<'_>, queue: Queue) {
        let held = match queue {
            Queue::Send => &mut self.send_cq,
            Queue::Recv => &mut self.recv_cq,
        };
        if held.is_none() {
            *held = cq_of(cqs, queue).cloned();
        }
    }

    /// The CQ of `queue`, of the CQs `begin` was given.
    fn cq<'a>(
        send_cq: &'a Option<Arc<CqShared>>,
        recv_cq: &'a Option<Arc<CqShared>>,
        queue: Queue,
    ) -> Option<&'a CqShared> {
        match queue {
            Queue::Send => send_cq.as_deref(),
            Queue::Recv => recv_cq.as_deref(),
        }
    }

    /// Free places.
    pub(crate) fn room(&self) -> usize {
        self.items.len().saturating_sub(self.len)
    }

    fn push(&mut self, d: Delivery) {
        // A run that ignored `room` would lose the delivery rather than allocate.
        if let Some(place) = self.items.get_mut(self.len) {
            *place = Some(d);
            self.len += 1;
        }
    }

    /// Owes a completion of `qp` to the CQ of `queue` (of `cqs`, the QP's send and receive
    /// CQs), or, [`Outbox::begin`] said at once, writes it there now and owes only the CQ's
    /// event, if it fires one. The caller holds the QP's mutex. A completion written at
    /// once is in its CQ before a destroy of the QP returns (destroy waits for the run), as
    /// if it had come just before the destroy: the QP's `destroyed` holds back only what is
    /// delivered.
    pub(crate) fn completion(
        &mut self,
        cqs: Cqs<'_>,
        qp: &QpHandle,
        queue: Queue,
        wc: WcFields,
        solicited: bool,
    ) {
        if !self.at_once {
            self.hold_cq(cqs, queue);
            self.push(Delivery::Completion(queue, wc, solicited));
            return;
        }
        let Some(cq) = cq_of(cqs, queue) else {
            return;
        };
        let notice = cq::write(cq, qp, &wc, solicited);
        if notice != cq::Notice::Quiet {
            self.hold_cq(cqs, queue);
            self.push(Delivery::Notice(queue, notice));
        }
    }

    /// Owes the QP's handler an event.
    pub(crate) fn event(&mut self, event: QpEvent) {
        self.push(Delivery::Event(event));
    }

    /// Owes the handler of `srq` (the QP's SRQ) its limit event.
    pub(crate) fn srq_limit(&mut self, srq: Option<&Arc<SrqShared>>) {
        if self.srq.is_none() {
            self.srq = srq.cloned();
        }
        self.push(Delivery::SrqLimit);
    }

    /// Owes the CQ of XRC SRQ `srq` a receive completion of the XRC target.
    pub(crate) fn xrc_completion(&mut self, srq: Arc<SrqShared>, wc: WcFields, solicited: bool) {
        self.push(Delivery::XrcCompletion(srq, wc, solicited));
    }

    /// Owes XRC SRQ `srq`'s handler its limit event.
    pub(crate) fn xrc_srq_limit(&mut self, srq: Arc<SrqShared>) {
        self.push(Delivery::XrcSrqLimit(srq));
    }

    /// Whether [`Outbox::deliver`] has anything to deliver.
    pub(crate) fn has_deliveries(&self) -> bool {
        self.len > 0
    }

    /// Makes every call owed, in order, then forgets the run's objects. Called without any
    /// QP lock held. `destroyed` is set once the QP is destroyed, possibly by one of these
    /// very calls: nothing more is delivered then (the QP, and with it `qp`, is gone; what
    /// is left concerned it only).
    pub(crate) fn deliver(&mut self, qp: &QpHandle, destroyed: &AtomicBool) {
        for d in self.items[..self.len].iter_mut().filter_map(Option::take) {
            if destroyed.load(Ordering::Acquire) {
                continue;
            }
            match d {
                Delivery::Completion(queue, wc, solicited) => {
                    if let Some(cq) = Self::cq(&self.send_cq, &self.recv_cq, queue) {
                        cq::post(cq, qp, &wc, solicited);
                    }
                }
                Delivery::Notice(queue, notice) => {
                    if let Some(cq) = Self::cq(&self.send_cq, &self.recv_cq, queue) {
                        cq::notify(cq, notice);
                    }
                }
                Delivery::Event(event) => qp.dispatch_event(event),
                Delivery::SrqLimit => {
                    if let Some(srq) = &self.srq {
                        srq.limit_reached();
                    }
                }
                Delivery::XrcCompletion(srq, wc, solicited) => srq.complete_xrc(qp, &wc, solicited),
                Delivery::XrcSrqLimit(srq) => srq.limit_reached(),
            }
        }
        self.len = 0;
        self.send_cq = None;
        self.recv_cq = None;
        self.srq = None;
    }
}
