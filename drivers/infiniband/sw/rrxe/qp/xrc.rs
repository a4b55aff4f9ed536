// SPDX-License-Identifier: GPL-2.0

//! The receive side of an XRC target QP (IBA Annex A14). The QP has no receive queue, no
//! PD and no CQ of its own: each message's XRCETH names an XRC SRQ, from which the QP takes
//! the message's receive WQE, against whose PD it checks the keys the message uses, and to
//! whose CQ it completes the receive. The engine decides whether the SRQ may be used (it
//! must belong to the QP's XRC domain); this side finds it by number and lends its WQEs.

use crate::glue::rdma::object::PdId;
use crate::srq::{SrqShared, SrqTable};
use crate::transport::qp::io::{XrcSrq, XrcSrqs};
use crate::transport::qp::memory::PdOf;
use crate::wq::RecvRing;
use core::cell::Cell;
use kernel::prelude::*;
use kernel::sync::Arc;

/// What an XRC target QP keeps between messages (its XRC domain is the engine's, which
/// compares it with each SRQ's).
pub(super) struct XrcTarget {
    /// The receive side, on the SRQ of the latest message (none before the first). A
    /// message's packets all name the same SRQ (the engine refuses others), so the WQE
    /// being filled stays with its SRQ until the message ends.
    ring: RecvRing,
}

impl XrcTarget {
    /// The receive side of a new target QP.
    pub(super) fn new() -> Result<Self> {
        Ok(Self {
            ring: RecvRing::detached()?,
        })
    }

    /// The SRQ numbered `srqn` if it is the one the latest message took from, else as
    /// `srqs` has it now: where a completion the engine reports for it goes.
    pub(super) fn srq(&self, srqs: &SrqTable, srqn: u32) -> Option<Arc<SrqShared>> {
        match self.ring.srq() {
            Some(srq) if srq.num() == srqn => Some(srq.clone()),
            _ => srqs.get(srqn),
        }
    }

    /// Whether [`XrcTarget::take_srq_limit_reached`] has an SRQ to report.
    pub(super) fn srq_limit_pending(&self) -> bool {
        self.ring.srq_limit_pending()
    }

    /// The SRQ owed its limit event by the WQEs taken last, if one is (once).
    pub(super) fn take_srq_limit_reached(&mut self) -> Option<Arc<SrqShared>> {
        if self.ring.take_srq_limit_reached() {
            self.ring.srq().cloned()
        } else {
            None
        }
    }
}

/// The device's XRC SRQs as one engine call of a target QP sees them.
pub(super) struct XrcSrqLookup<'a> {
    pub(super) srqs: &'a SrqTable,
    pub(super) target: &'a mut XrcTarget,
    /// The PD the call checks local keys in (the L_Keys of the SRQ's WQEs): set to the PD
    /// of the SRQ the engine asks for.
    pub(super) pd: &'a Cell<PdId>,
}

impl XrcSrqs for XrcSrqLookup<'_> {
    fn srq(&mut self, srqn: u32) -> Option<XrcSrq<'_>> {
        let srq = self.srqs.get(srqn)?;
        // A basic SRQ has no number an XRCETH may name.
        let xrcd = srq.xrc()?.xrcd;
        self.pd.set(srq.pd());
        let attached = self.target.ring.srq().is_some_and(|s| Arc::ptr_eq(s, &srq));
        if !attached {
            self.target.ring.attach_xrc_srq(srq);
        }
        Some(XrcSrq {
            rq: &mut self.target.ring,
            xrcd: xrcd.0,
            // R_Keys are checked in the SRQ's PD, found again by its number when a Read
            // response or atomic is executed later (`memory.rs`).
            pd: PdOf::XrcSrq(srqn),
        })
    }
}
