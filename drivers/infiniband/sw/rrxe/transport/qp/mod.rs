// SPDX-License-Identifier: GPL-2.0

//! The queue-pair transport engine: requester, responder and completer of
//! one QP as a sans-IO state machine.
//!
//! Like a quinn-proto connection, a [`Qp`] performs no I/O and reads no
//! clock. The glue feeds it parsed packets ([`Qp::handle_packet`]),
//! doorbells ([`Qp::post_send`], [`Qp::post_recv`]), timer expiries
//! ([`Qp::handle_timeout`]) and attribute changes ([`Qp::modify`]), each
//! with the current time in nanoseconds, and drains what it produces:
//! packets ([`Qp::poll_transmit`]), completions ([`Qp::poll_completion`]),
//! asynchronous events ([`Qp::poll_event`]) and the next deadline
//! ([`Qp::poll_timeout`]).
//!
//! The engine owns no work queue and no memory: every call that may touch
//! them takes an [`Io`], the glue's implementations of [`SendQueue`],
//! [`RecvQueue`] and [`Memory`]. Its own state is fixed-size.
//!
//! Files: `requester.rs` builds request packets and runs the retry timers,
//! `completer.rs` handles responses and retires send WQEs in order,
//! `responder.rs` executes requests and builds responses.

pub mod completer;
pub mod completion;
pub mod memory;
pub mod requester;
pub mod responder;
pub mod stats;
pub mod wqe;

use super::icrc::ICRC_LEN;
use super::opcode::Transport;
use super::packet::{Mtu, Packet};
use super::psn::Psn;
use super::timer::{AckTimeout, RnrTimer};
use completion::{AsyncEvent, Completion, Ring, WcStatus};
pub use memory::Memory;
use requester::Requester;
use responder::Responder;
pub use stats::{QpStats, TransportEvent};
pub use wqe::{RecvQueue, SendQueue};

/// Capacity of the completion ring between the engine and the glue.
pub const COMPLETION_RING: usize = 32;

/// Capacity of the asynchronous event ring.
pub const EVENT_RING: usize = 8;

/// Buffer size [`Qp::poll_transmit`] needs: a 4096-byte payload plus the
/// largest header stack the engine builds and the ICRC.
pub const MAX_PACKET_LEN: usize = 4096 + 64 + ICRC_LEN;

/// Local ACK timeout before Modify QP sets one: code 14, about 67 ms
/// (evaluated at compile time).
const DEFAULT_ACK_TIMEOUT: AckTimeout = match AckTimeout::new(14) {
    Some(t) => t,
    None => panic!("ACK timeout code out of range"),
};

/// Transport service of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
}

impl QpType {
    const fn transport(self) -> Transport {
        match self {
            Self::Rc => Transport::Rc,
            Self::Uc => Transport::Uc,
            Self::Ud => Transport::Ud,
        }
    }
}

/// QP states (IBA 10.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    /// Reset.
    Reset,
    /// Initialized.
    Init,
    /// Ready to Receive.
    Rtr,
    /// Ready to Send.
    Rts,
    /// Send Queue Drain.
    Sqd,
    /// Send Queue Error (UC and UD only).
    Sqe,
    /// Error.
    Err,
}

/// Remote access rights enabled on the QP (IBA 11.2.4.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessFlags(u8);

impl AccessFlags {
    /// Incoming RDMA Writes allowed.
    pub const REMOTE_WRITE: Self = Self(1);
    /// Incoming RDMA Reads allowed.
    pub const REMOTE_READ: Self = Self(2);
    /// Incoming atomics allowed.
    pub const REMOTE_ATOMIC: Self = Self(4);
    /// All three.
    pub const ALL: Self = Self(7);

    /// The rights of both.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether every right in `other` is enabled.
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

/// Current attributes of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttrs {
    /// Transport service (fixed at creation).
    pub qp_type: QpType,
    /// This QP's number (fixed at creation).
    pub qpn: u32,
    /// State.
    pub state: QpState,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Destination QP (connected services).
    pub dest_qpn: u32,
    /// Starting send PSN.
    pub sq_psn: Psn,
    /// Starting expected receive PSN.
    pub rq_psn: Psn,
    /// Local ACK timeout.
    pub timeout: AckTimeout,
    /// Transport retry count, 0..=7.
    pub retry_cnt: u8,
    /// RNR retry count, 0..=7, 7 meaning infinite.
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer this responder advertises.
    pub min_rnr_timer: RnrTimer,
    /// Reads/atomics this requester may have outstanding.
    pub max_rd_atomic: u8,
    /// Responder resources for incoming Reads/atomics.
    pub max_dest_rd_atomic: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// P_Key placed in the BTH.
    pub pkey: u16,
    /// Remote access rights.
    pub access: AccessFlags,
}

/// A Modify QP request (IBA 11.2.4.2): every attribute is optional, given
/// as the raw value the verbs layer passes, and validated here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModifyQp {
    /// Next state.
    pub state: Option<QpState>,
    /// Path MTU as `enum ib_mtu` (1 = 256 ... 5 = 4096).
    pub path_mtu: Option<u8>,
    /// Destination QP number (24 bits).
    pub dest_qpn: Option<u32>,
    /// Send PSN (24 bits).
    pub sq_psn: Option<u32>,
    /// Expected receive PSN (24 bits).
    pub rq_psn: Option<u32>,
    /// Local ACK timeout code, 0..=31.
    pub timeout: Option<u8>,
    /// Retry count, 0..=7.
    pub retry_cnt: Option<u8>,
    /// RNR retry count, 0..=7.
    pub rnr_retry: Option<u8>,
    /// Minimum RNR NAK timer code, 0..=31.
    pub min_rnr_timer: Option<u8>,
    /// Initiator depth, 0..=[`responder::MAX_RD_ATOMIC`].
    pub max_rd_atomic: Option<u8>,
    /// Responder resources, 0..=[`responder::MAX_RD_ATOMIC`].
    pub max_dest_rd_atomic: Option<u8>,
    /// Q_Key.
    pub qkey: Option<u32>,
    /// P_Key.
    pub pkey: Option<u16>,
    /// Remote access rights.
    pub access: Option<AccessFlags>,
}

/// Why a Modify QP was refused; the QP is left unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModifyError {
    /// IBA 10.3.1 does not allow this transition.
    InvalidTransition {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// A required attribute of the transition is missing.
    MissingAttribute(&'static str),
    /// An attribute is out of range.
    InvalidValue(&'static str),
}

/// Metadata of a packet written by [`Qp::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written: BTH through pad, then a zeroed 4-byte ICRC slot.
    pub len: usize,
    /// Destination QP in the BTH.
    pub dest_qpn: u32,
    /// UD address handle of the WQE; `None` on connected QPs, which use
    /// the QP's path.
    pub ah: Option<u32>,
    /// Whether the packet repeats one sent before (for statistics).
    pub retransmission: bool,
}

/// The glue's work queues and memory, lent to the engine for one call.
pub struct Io<'a> {
    /// Send queue.
    pub sq: &'a mut dyn SendQueue,
    /// Receive queue or SRQ.
    pub rq: &'a mut dyn RecvQueue,
    /// Local and remote memory.
    pub mem: &'a mut dyn Memory,
}

/// Completions and events waiting for the glue.
#[derive(Clone, Copy, Debug)]
struct Outputs {
    completions: Ring<Completion, COMPLETION_RING>,
    events: Ring<AsyncEvent, EVENT_RING>,
}

/// An error a role cannot resolve on its own; [`Qp`] applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
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
    const fn local(qp_type: QpType) -> Self {
        match qp_type {
            QpType::Rc => Self::Error,
            _ => Self::SendQueueError,
        }
    }
}

/// One queue pair.
#[derive(Clone, Debug)]
pub struct Qp {
    attrs: QpAttrs,
    req: Requester,
    resp: Responder,
    out: Outputs,
    responder_turn: bool,
}

impl Qp {
    /// A new QP in the RESET state.
    #[must_use]
    pub const fn new(qp_type: QpType, qpn: u32) -> Self {
        Self {
            attrs: QpAttrs {
                qp_type,
                qpn,
                state: QpState::Reset,
                path_mtu: Mtu::Mtu1024,
                dest_qpn: 0,
                sq_psn: Psn::ZERO,
                rq_psn: Psn::ZERO,
                timeout: DEFAULT_ACK_TIMEOUT,
                retry_cnt: 7,
                rnr_retry: 7,
                min_rnr_timer: RnrTimer::from_bits(12),
                max_rd_atomic: 1,
                max_dest_rd_atomic: 1,
                qkey: 0,
                pkey: 0xFFFF,
                access: AccessFlags(0),
            },
            req: Requester::new(),
            resp: Responder::new(),
            out: Outputs {
                completions: Ring::new(),
                events: Ring::new(),
            },
            responder_turn: false,
        }
    }

    /// Numbers a QP built by [`Qp::new`] before first use, for callers that
    /// build it from a constant (a QP is several kilobytes: kernel callers
    /// copy a compile-time template into its allocation rather than build one
    /// on the stack). Ignored once the QP has left RESET.
    pub fn set_qpn(&mut self, qpn: u32) {
        if self.attrs.state == QpState::Reset {
            self.attrs.qpn = qpn;
        }
    }

    /// Current attributes.
    #[must_use]
    pub const fn attrs(&self) -> &QpAttrs {
        &self.attrs
    }

    /// Current state.
    #[must_use]
    pub const fn state(&self) -> QpState {
        self.attrs.state
    }

    /// Applies a Modify QP (IBA 11.2.4.2): validates every given value and
    /// the transition with its required attributes, then applies all of
    /// them or none. Entering ERR flushes every outstanding WQE with
    /// WrFlushErr, delivered through [`Qp::poll_completion`].
    pub fn modify(&mut self, m: &ModifyQp, io: &mut Io<'_>) -> Result<(), ModifyError> {
        let mut a = self.attrs;
        let max = responder::MAX_RD_ATOMIC as u8;
        if let Some(v) = m.path_mtu {
            a.path_mtu = Mtu::from_ib(v).ok_or(ModifyError::InvalidValue("path_mtu"))?;
        }
        if let Some(v) = m.dest_qpn {
            a.dest_qpn = Psn::try_new(v)
                .ok_or(ModifyError::InvalidValue("dest_qpn"))?
                .get();
        }
        if let Some(v) = m.sq_psn {
            a.sq_psn = Psn::try_new(v).ok_or(ModifyError::InvalidValue("sq_psn"))?;
        }
        if let Some(v) = m.rq_psn {
            a.rq_psn = Psn::try_new(v).ok_or(ModifyError::InvalidValue("rq_psn"))?;
        }
        if let Some(v) = m.timeout {
            a.timeout = AckTimeout::new(v).ok_or(ModifyError::InvalidValue("timeout"))?;
        }
        if let Some(v) = m.retry_cnt {
            a.retry_cnt = (v <= 7)
                .then_some(v)
                .ok_or(ModifyError::InvalidValue("retry_cnt"))?;
        }
        if let Some(v) = m.rnr_retry {
            a.rnr_retry = (v <= 7)
                .then_some(v)
                .ok_or(ModifyError::InvalidValue("rnr_retry"))?;
        }
        if let Some(v) = m.min_rnr_timer {
            a.min_rnr_timer = RnrTimer::new(v).ok_or(ModifyError::InvalidValue("min_rnr_timer"))?;
        }
        if let Some(v) = m.max_rd_atomic {
            a.max_rd_atomic = (v <= max)
                .then_some(v)
                .ok_or(ModifyError::InvalidValue("max_rd_atomic"))?;
        }
        if let Some(v) = m.max_dest_rd_atomic {
            a.max_dest_rd_atomic = (v <= max)
                .then_some(v)
                .ok_or(ModifyError::InvalidValue("max_dest_rd_atomic"))?;
        }
        if let Some(v) = m.qkey {
            a.qkey = v;
        }
        if let Some(v) = m.pkey {
            a.pkey = v;
        }
        if let Some(v) = m.access {
            a.access = v;
        }
        let from = self.attrs.state;
        let to = m.state.unwrap_or(from);
        check_transition(self.attrs.qp_type, from, to, m)?;
        self.attrs = a;
        if to == from {
            return Ok(());
        }
        self.attrs.state = to;
        match (from, to) {
            (_, QpState::Reset) => {
                self.req.reset(0);
                self.resp.reset();
                self.out.completions.clear();
                self.out.events.clear();
            }
            (QpState::Reset, QpState::Init) => self.req.reset(io.sq.consumer()),
            (QpState::Init, QpState::Rtr) => self.resp.start(&self.attrs),
            (QpState::Rtr, QpState::Rts) => self.req.start(&self.attrs),
            (QpState::Rts, QpState::Sqd) => self.req.drained_reported = false,
            (_, QpState::Err) => {
                // enter_error() acts only on a QP not in ERR yet.
                self.attrs.state = from;
                self.enter_error();
            }
            _ => {}
        }
        Ok(())
    }

    /// Doorbell: WQEs were posted to the send queue. Returns whether the
    /// QP may now have packets (or, in ERR, flush completions) to give.
    pub fn post_send(&mut self, io: &mut Io<'_>) -> bool {
        let _ = io;
        matches!(self.attrs.state, QpState::Rts | QpState::Err | QpState::Sqe)
    }

    /// Doorbell: WQEs were posted to the receive queue. An RC responder
    /// that last advertised no credits queues an unsolicited ACK with the
    /// new count.
    pub fn post_recv(&mut self, io: &mut Io<'_>) {
        self.resp.post_recv(&self.attrs, io);
    }

    /// Handles one received packet for this QP, already parsed and checked
    /// (ICRC, addressing) by the glue. Packets of another transport
    /// service than the QP's are dropped (IBA 9.6.1, BTH OpCode checks).
    pub fn handle_packet(&mut self, now: u64, pkt: &Packet<'_>, io: &mut Io<'_>) {
        if pkt.info.transport != self.attrs.qp_type.transport() {
            return;
        }
        let result = if pkt.info.is_response() {
            self.req.handle_response(now, pkt, &self.attrs, io)
        } else if pkt.info.is_request() {
            self.resp
                .handle_request(pkt, &self.attrs, io, &mut self.out)
        } else {
            Ok(())
        };
        self.apply(result);
        self.retire(io);
    }

    /// Writes the next packet to send into `buf` (at least
    /// [`MAX_PACKET_LEN`] bytes): BTH to pad, then a zeroed ICRC slot for
    /// the glue to fill. Responses and requests take turns.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8], io: &mut Io<'_>) -> Option<Transmit> {
        if buf.len() < MAX_PACKET_LEN {
            return None;
        }
        for _ in 0..2 {
            self.responder_turn = !self.responder_turn;
            let result = if self.responder_turn {
                self.resp.poll_transmit(buf, &self.attrs, io)
            } else {
                self.req.poll_transmit(now, buf, &self.attrs, io)
            };
            match result {
                Ok(Some(t)) => {
                    self.retire(io);
                    return Some(t);
                }
                Ok(None) => {}
                Err(fault) => {
                    self.apply(Err(fault));
                    self.retire(io);
                    // A fatal responder error leaves a NAK to send.
                    return self.resp.poll_transmit(buf, &self.attrs, io).ok().flatten();
                }
            }
        }
        None
    }

    /// The earliest deadline (ns) at which [`Qp::handle_timeout`] must be
    /// called: the local ACK timer or the RNR timer.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        if matches!(self.attrs.state, QpState::Rts | QpState::Sqd) {
            self.req.poll_timeout()
        } else {
            None
        }
    }

    /// Runs the timers that expired at `now`.
    pub fn handle_timeout(&mut self, now: u64, io: &mut Io<'_>) {
        if !matches!(self.attrs.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let result = self.req.handle_timeout(now, &self.attrs);
        self.apply(result);
        self.retire(io);
    }

    /// The next work completion, in order per queue.
    pub fn poll_completion(&mut self, io: &mut Io<'_>) -> Option<Completion> {
        self.retire(io);
        if let Some(c) = self.out.completions.pop() {
            return Some(c);
        }
        self.retire(io);
        if let Some(c) = self.out.completions.pop() {
            return Some(c);
        }
        if self.attrs.state == QpState::Err {
            return self.resp.flush_next(io);
        }
        None
    }

    /// The transport events counted since the last call.
    pub fn take_stats(&mut self) -> QpStats {
        let mut s = self.req.stats.take();
        s.add(&self.resp.stats.take());
        s
    }

    /// The next asynchronous event.
    pub fn poll_event(&mut self) -> Option<AsyncEvent> {
        self.out.events.pop()
    }

    fn retire(&mut self, io: &mut Io<'_>) {
        let flush = matches!(self.attrs.state, QpState::Err | QpState::Sqe);
        self.req.retire(io, &mut self.out, flush);
        if self.attrs.state == QpState::Sqd && self.req.is_idle() && !self.req.drained_reported {
            self.req.drained_reported = true;
            let _ = self.out.events.push(AsyncEvent::SqDrained);
        }
    }

    fn apply(&mut self, result: Result<(), Fault>) {
        let Err(fault) = result else {
            return;
        };
        match fault {
            Fault::Error => self.enter_error(),
            Fault::SendQueueError => {
                if self.attrs.state != QpState::Err {
                    self.attrs.state = QpState::Sqe;
                }
            }
            Fault::RetryExhausted { rnr } => self.retry_exhausted(rnr),
            Fault::Internal => {
                let _ = self.out.events.push(AsyncEvent::QpFatal);
                self.enter_error();
            }
        }
    }

    /// A retry counter ran out (IBA 9.7.6.1.3 / 9.7.5.2.8). This is the
    /// single place automatic path migration will hook into: with an armed
    /// alternate path it would migrate and retransmit instead. Today the
    /// WQE holding the oldest unacknowledged PSN completes with
    /// RetryExcErr or RnrRetryExcErr and the QP enters ERR, flushing the
    /// rest.
    fn retry_exhausted(&mut self, rnr: bool) {
        self.req.stats.count(if rnr {
            TransportEvent::RnrRetryExceeded
        } else {
            TransportEvent::RetryExceeded
        });
        let _ = self.out.events.push(AsyncEvent::RetryExhausted { rnr });
        self.req.fail_unacked(if rnr {
            WcStatus::RnrRetryExcErr
        } else {
            WcStatus::RetryExcErr
        });
        self.enter_error();
    }

    fn enter_error(&mut self) {
        if self.attrs.state == QpState::Err {
            return;
        }
        self.attrs.state = QpState::Err;
        self.req.ack_deadline = None;
        self.req.rnr_deadline = None;
        // IBA 10.3.1 (QP on an SRQ): it reports its last WQE.
        let _ = self.out.events.push(AsyncEvent::LastWqeReached);
    }
}

/// IBA 10.3.1 transitions (the verbs layer's `ib_modify_qp_is_ok` table)
/// and the attributes each requires.
fn check_transition(
    qp_type: QpType,
    from: QpState,
    to: QpState,
    m: &ModifyQp,
) -> Result<(), ModifyError> {
    use QpState as S;
    let ok = match (from, to) {
        (_, S::Reset | S::Err) => true,
        (S::Reset, S::Init) | (S::Init, S::Init) | (S::Init, S::Rtr) => true,
        (S::Rtr, S::Rts) | (S::Rts, S::Rts) => true,
        (S::Rts, S::Sqd) | (S::Sqd, S::Sqd) | (S::Sqd, S::Rts) => true,
        (S::Sqe, S::Rts) => qp_type != QpType::Rc,
        _ => false,
    };
    if !ok {
        return Err(ModifyError::InvalidTransition { from, to });
    }
    let need = |present: bool, name| {
        if present {
            Ok(())
        } else {
            Err(ModifyError::MissingAttribute(name))
        }
    };
    let rc = qp_type == QpType::Rc;
    let connected = qp_type != QpType::Ud;
    match (from, to) {
        (S::Reset, S::Init) if !connected => need(m.qkey.is_some(), "qkey")?,
        (S::Init, S::Rtr) if connected => {
            need(m.dest_qpn.is_some(), "dest_qpn")?;
            need(m.rq_psn.is_some(), "rq_psn")?;
            need(m.path_mtu.is_some(), "path_mtu")?;
            if rc {
                need(m.max_dest_rd_atomic.is_some(), "max_dest_rd_atomic")?;
                need(m.min_rnr_timer.is_some(), "min_rnr_timer")?;
            }
        }
        (S::Rtr, S::Rts) => {
            need(m.sq_psn.is_some(), "sq_psn")?;
            if rc {
                need(m.timeout.is_some(), "timeout")?;
                need(m.retry_cnt.is_some(), "retry_cnt")?;
                need(m.rnr_retry.is_some(), "rnr_retry")?;
                need(m.max_rd_atomic.is_some(), "max_rd_atomic")?;
            }
        }
        _ => {}
    }
    Ok(())
}
