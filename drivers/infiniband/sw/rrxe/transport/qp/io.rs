// SPDX-License-Identifier: GPL-2.0

//! What passes between the engine and the glue, and between the engine's
//! roles: the queues and memory the glue lends for one call ([`Io`]), the
//! packets it gets back ([`Transmit`]), which path a received packet came
//! over ([`Arrival`]), the completions and events waiting to be polled, and
//! the faults a role hands up to the QP.

use super::super::ring::Ring;
use super::completion::{AsyncEvent, Completion};
use super::context::PathHandle;
use super::memory::{Memory, PdOf};
use super::state::Service;
use super::wqe::{RecvQueue, SendQueue};

/// Capacity of the completion ring between the engine and the glue.
pub const COMPLETION_RING: usize = 32;

/// Capacity of the asynchronous event ring.
pub const EVENT_RING: usize = 8;

/// Where a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// Along a path of the QP (connected QPs): the driver resolves the
    /// handle to an address vector and port.
    Path(PathHandle),
    /// To the address handle a UD WQE named.
    Ah(u32),
}

/// Metadata of a packet written by [`Qp::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written: BTH through pad, then a zeroed 4-byte ICRC slot.
    pub len: usize,
    /// Destination QP in the BTH.
    pub dest_qpn: u32,
    /// Where the packet goes.
    pub dest: Dest,
    /// Whether the packet repeats one sent before (for statistics).
    pub retransmission: bool,
}

/// Which of the QP's loaded address vectors a received packet's addresses
/// match (its source is the vector's destination and its destination the
/// vector's source): the driver compares addresses, the engine decides
/// what the match means for a connected QP (IBA 9.6.1.1 / C9-7: a packet
/// must come from the QP's path; 17.2.8 names the alternate path's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival(u8);

impl Arrival {
    /// Matches no path.
    pub const NONE: Self = Self(0);

    /// Matches the path of `h` too.
    #[must_use]
    pub const fn with(self, h: PathHandle) -> Self {
        Self(self.0 | 1 << (h.0 & 7))
    }

    /// Whether the packet matches the path of `h`.
    #[must_use]
    pub const fn matches(self, h: PathHandle) -> bool {
        self.0 & 1 << (h.0 & 7) != 0
    }
}

/// The glue's work queues and memory, lent to the engine for one call.
pub struct Io<'a> {
    /// Send queue.
    pub sq: &'a mut dyn SendQueue,
    /// Receive queue or SRQ (unused by an XRC target, which has neither).
    pub rq: &'a mut dyn RecvQueue,
    /// Local and remote memory.
    pub mem: &'a mut dyn Memory,
    /// The XRC SRQs an XRC target QP may deliver to.
    pub xrc: &'a mut dyn XrcSrqs,
}

/// An XRC SRQ as an XRC target sees it (IBA Annex A14): its receive WQEs,
/// the XRC domain it belongs to and the protection domain its R_Keys are
/// checked in.
pub struct XrcSrq<'a> {
    /// The SRQ's receive WQEs.
    pub rq: &'a mut dyn RecvQueue,
    /// The driver's number of the SRQ's XRC domain (XRCD).
    pub xrcd: u32,
    /// The SRQ's protection domain, for RDMA and atomic R_Key checks.
    pub pd: PdOf,
}

/// The driver's table of XRC SRQs, by SRQ number (SRQN, what an XRCETH
/// carries).
pub trait XrcSrqs {
    /// The XRC SRQ numbered `srqn`, if there is one. Whether it belongs to
    /// the target QP's XRC domain is the engine's to check.
    fn srq(&mut self, srqn: u32) -> Option<XrcSrq<'_>>;
}

/// A table without XRC SRQs, for QPs of the other types.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoXrcSrqs;

impl XrcSrqs for NoXrcSrqs {
    fn srq(&mut self, _srqn: u32) -> Option<XrcSrq<'_>> {
        None
    }
}

/// Completions and events waiting for the glue.
#[derive(Clone, Copy, Debug)]
pub(super) struct Outputs {
    pub(super) completions: Ring<Completion, COMPLETION_RING>,
    pub(super) events: Ring<AsyncEvent, EVENT_RING>,
}

/// An error a role cannot resolve on its own; [`Qp`] applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fault {
    /// The QP enters ERR (the failing WQE already carries its status).
    Error,
    /// The send queue enters SQE (UC/UD local errors, IBA 10.3.1.6).
    SendQueueError,
    /// A retry counter ran out.
    RetryExhausted {
        /// The RNR counter.
        rnr: bool,
    },
    /// An engine invariant broke; the QP enters ERR with QpFatal.
    Internal,
}

impl Fault {
    /// The fault for a local error on a send WQE: RC QPs enter ERR, UC and
    /// UD only their send queue enters SQE (IBA 10.3.1.6).
    pub(super) const fn local(service: Service) -> Self {
        match service {
            Service::Rc => Self::Error,
            _ => Self::SendQueueError,
        }
    }
}
