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
pub mod context;
pub mod io;
pub mod memory;
pub mod migration;
pub mod requester;
pub mod responder;
pub mod state;
pub mod stats;
pub mod transition;
pub mod wqe;

use super::icrc::ICRC_LEN;
use super::packet::Packet;
use super::ring::Ring;
use super::timer::earliest;
use completion::{AsyncEvent, Completion, WcStatus};
pub use context::{
    AccessFlags, AltPath, MigState, ModifyError, ModifyQp, PKey, Path, PathHandle, QpContext,
    QpQuery,
};
pub use io::{
    Arrival, Dest, Io, NoXrcSrqs, Transmit, XrcSrq, XrcSrqs, COMPLETION_RING, EVENT_RING,
};
use io::{Fault, Outputs};
pub use memory::{Memory, PdOf, RKey};
use migration::{Cause, PathCheck};
use requester::Requester;
use responder::Responder;
pub use state::{QpState, QpType};
pub use stats::{QpStats, TransportEvent};
pub use transition::{AttrMask, TransitionError};
pub use wqe::{RecvQueue, SendQueue};

/// Buffer size [`Qp::poll_transmit`] needs: a 4096-byte payload plus the
/// largest header stack the engine builds and the ICRC.
pub const MAX_PACKET_LEN: usize = 4096 + 64 + ICRC_LEN;

/// One queue pair: its context and the three roles that act on it.
#[derive(Clone, Debug)]
pub struct Qp {
    ctx: QpContext,
    req: Requester,
    resp: Responder,
    out: Outputs,
    responder_turn: bool,
    /// A Path Migration Request Failed event was raised since the QP last
    /// became ARMED: a peer sending over a wrong path does so with every
    /// packet, and one event tells the consumer (the counter counts each).
    mig_failure_reported: bool,
}

impl Qp {
    /// A new QP in the RESET state.
    #[must_use]
    pub const fn new(qp_type: QpType, qpn: u32) -> Self {
        Self {
            ctx: QpContext::new(qp_type, qpn),
            req: Requester::new(),
            resp: Responder::new(),
            out: Outputs {
                completions: Ring::new(),
                events: Ring::new(),
            },
            responder_turn: false,
            mig_failure_reported: false,
        }
    }

    /// Numbers a QP built by [`Qp::new`] before first use, for callers that
    /// build it from a constant (a QP is several kilobytes: kernel callers
    /// copy a compile-time template into its allocation rather than build one
    /// on the stack). Ignored once the QP has left RESET.
    pub fn set_qpn(&mut self, qpn: u32) {
        if self.ctx.state == QpState::Reset {
            self.ctx.qpn = qpn;
        }
    }

    /// Switches this QP's credit reporting (IBA 9.7.7.2) on or off before
    /// first use, as [`Qp::set_qpn`]: off, its responder sends "no credit
    /// information" in every AETH and no unsolicited ACK, as a responder
    /// that does not implement credits would. Ignored once the QP has left
    /// RESET.
    pub fn set_credit_reporting(&mut self, on: bool) {
        if self.ctx.state == QpState::Reset {
            self.ctx.advertise_credits = on;
        }
    }

    /// Places an XRC target QP in XRC domain `xrcd` (the driver's number)
    /// before first use, as [`Qp::set_qpn`]: it delivers only to XRC SRQs
    /// of that domain. Ignored once the QP has left RESET.
    pub fn set_xrcd(&mut self, xrcd: u32) {
        if self.ctx.state == QpState::Reset {
            self.ctx.xrcd = xrcd;
        }
    }

    /// Starts the message sequence numbers at `msn` instead of 0 (the SSN
    /// of the first WQE is then `msn + 1`), so simulations can cross the
    /// 24-bit wrap without sixteen million messages. Both QPs of a pair
    /// must start alike, before any traffic.
    #[cfg(test)]
    pub(crate) fn start_messages_at(&mut self, msn: super::psn::Msn) {
        self.resp.msn = msn;
        self.req.msn = msn;
        self.req.next_ssn = msn.next();
    }

    /// The QP context.
    #[must_use]
    pub const fn context(&self) -> &QpContext {
        &self.ctx
    }

    /// Current state.
    #[must_use]
    pub const fn state(&self) -> QpState {
        self.ctx.state
    }

    /// Whether the send queue accepts new work requests (IBA 10.3.1: not
    /// before RTS; in SQD, SQE and ERR they are accepted, and flushed in the
    /// error states).
    #[must_use]
    pub const fn accepts_sends(&self) -> bool {
        !matches!(
            self.ctx.state,
            QpState::Reset | QpState::Init | QpState::Rtr
        )
    }

    /// Whether the receive queue accepts new work requests (every state but
    /// RESET, IBA 10.3.1).
    #[must_use]
    pub const fn accepts_receives(&self) -> bool {
        !matches!(self.ctx.state, QpState::Reset)
    }

    /// Answers Query QP (IBA 11.2.4.3).
    #[must_use]
    pub fn query(&self) -> QpQuery {
        use QpState as S;
        let sq_psn = match self.ctx.state {
            S::Rts | S::Sqd | S::Sqe | S::Err => self.req.psn_next,
            _ => self.ctx.sq_psn,
        };
        let rq_psn = match self.ctx.state {
            S::Reset | S::Init => self.ctx.rq_psn,
            _ => self.resp.epsn,
        };
        let mut q = self.ctx.query(sq_psn, rq_psn);
        q.sq_draining = self.ctx.state == S::Sqd && !self.req.is_idle();
        q
    }

    /// Applies a Modify QP (IBA 11.2.4.2): validates the transition, its
    /// attributes and every value, then applies all of them or none.
    /// Entering ERR flushes every outstanding WQE with WrFlushErr,
    /// delivered through [`Qp::poll_completion`].
    ///
    /// Moving an ARMED QP to MIGRATED migrates it (IBA 17.2.8): the
    /// alternate path becomes the primary one and unacknowledged requests
    /// go again over it, with MigReq = 1.
    pub fn modify(&mut self, now: u64, m: &ModifyQp, io: &mut Io<'_>) -> Result<(), ModifyError> {
        let next = self.ctx.modified(m)?;
        let from = self.ctx.state;
        let to = next.state;
        let commanded =
            self.ctx.mig_state == MigState::Armed && next.mig_state == MigState::Migrated;
        self.ctx = next;
        if commanded {
            self.migrated(now, Cause::Commanded);
        }
        if to == from {
            return Ok(());
        }
        match (from, to) {
            (_, QpState::Reset) => {
                self.req.reset(0);
                self.resp.reset();
                self.out.completions.clear();
                self.out.events.clear();
            }
            (QpState::Reset, QpState::Init) => self.req.reset(io.sq.consumer()),
            (QpState::Init, QpState::Rtr) => self.resp.start(now, &self.ctx, io),
            (QpState::Rtr, QpState::Rts) => self.req.start(&self.ctx),
            (QpState::Rts, QpState::Sqd) => self.req.drained_reported = false,
            (_, QpState::Err) => {
                // enter_error() acts only on a QP not in ERR yet.
                self.ctx.state = from;
                self.enter_error(io);
            }
            _ => {}
        }
        Ok(())
    }

    /// Doorbell: WQEs were posted to the send queue. Returns whether the
    /// QP may now have packets (or, in ERR, flush completions) to give.
    pub fn post_send(&mut self, io: &mut Io<'_>) -> bool {
        let _ = io;
        matches!(self.ctx.state, QpState::Rts | QpState::Err | QpState::Sqe)
    }

    /// The responder's MSN (IBA 9.7.7.2): the request messages it has
    /// received and completed, modulo 2^24 (RC). A consumer that posts
    /// after one arrived may be answering it.
    #[must_use]
    pub fn msn(&self) -> u32 {
        self.resp.msn.get()
    }

    /// Doorbell: WQEs were posted to the receive queue. An RC responder
    /// whose requester has used up the credits last advertised queues an
    /// unsolicited ACK with the new count.
    pub fn post_recv(&mut self, io: &mut Io<'_>) {
        self.resp.post_recv(&self.ctx, io);
    }

    /// Whether a receive posted now is news the requester waits for: an RC
    /// responder advertised no credits beyond what it has taken and watches
    /// its receive queue, so the next WQE posted earns an unsolicited ACK
    /// (IBA 9.7.7.2.4) as soon as the engine sees it. A consumer that posts
    /// without a system call (a user ring) may be asked for a doorbell then,
    /// and only then, instead of the engine waiting for its next recheck.
    #[must_use]
    pub fn wants_recv_doorbell(&self) -> bool {
        self.recv_doorbell_after().is_some()
    }

    /// While [`Qp::wants_recv_doorbell`], the receive WQEs the queue should
    /// hold before its producer rings: the depth its consumer keeps it at (at
    /// least one), so that the update grants the requester's whole window.
    #[must_use]
    pub fn recv_doorbell_after(&self) -> Option<u32> {
        if !matches!(self.ctx.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            return None;
        }
        self.resp.recv_doorbell_after()
    }

    /// Handles one received packet for this QP, already parsed and its
    /// ICRC checked by the glue; `arrival` says which of the QP's address
    /// vectors its addresses match.
    ///
    /// Dropped and counted, before any state changes: a packet of another
    /// transport service than the QP's (IBA 9.6.1, BTH OpCode checks), one
    /// whose P_Key is not the QP's partition (10.9.3), and on a connected
    /// QP one that did not come over the QP's path (9.6.1.1) or, while
    /// ARMED, a migration request that did not come over its alternate path
    /// (17.2.8). One that did migrates the QP first.
    pub fn handle_packet(&mut self, now: u64, pkt: &Packet<'_>, arrival: Arrival, io: &mut Io<'_>) {
        if pkt.info.transport != self.ctx.qp_type.transport() {
            self.req.stats.count(TransportEvent::WrongTransport);
            return;
        }
        // The GSI QP takes any P_Key of the port's table and leaves the
        // check to the MAD layer, which knows which one a MAD may use.
        if self.ctx.qp_type != QpType::Gsi && !self.ctx.primary.pkey.admits(pkt.bth.pkey) {
            self.req.stats.count(TransportEvent::PkeyViolation);
            return;
        }
        if self.ctx.qp_type.is_connected() {
            // Before INIT to RTR a connected QP has no path and takes no packet at all.
            let Some(check) = self.ctx.check_path(pkt.bth.mig_req, arrival) else {
                self.req.stats.count(TransportEvent::NotReady);
                return;
            };
            match check {
                PathCheck::Accept => {
                    if self.ctx.note_peer_armed(pkt.bth.mig_req) {
                        self.mig_failure_reported = false;
                    }
                }
                PathCheck::Migrate => {
                    self.ctx.migrate();
                    self.migrated(now, Cause::PeerRequest);
                }
                PathCheck::Refuse => {
                    self.req.stats.count(TransportEvent::MigrationRefused);
                    if !self.mig_failure_reported {
                        self.mig_failure_reported = true;
                        let _ = self.out.events.push(AsyncEvent::PathMigrationFailed);
                    }
                    return;
                }
                PathCheck::WrongPath => {
                    self.req.stats.count(TransportEvent::WrongPath);
                    return;
                }
            }
        }
        // An XRC initiator has no receive queue and an XRC target no send
        // queue (IBA Annex A14): neither has a use for the other's packets.
        let unexpected = match self.ctx.qp_type {
            QpType::XrcIni => pkt.info.is_request(),
            QpType::XrcTgt => pkt.info.is_response(),
            _ => false,
        };
        if unexpected {
            self.req.stats.count(TransportEvent::WrongTransport);
            return;
        }
        let result = if pkt.info.is_response() {
            self.req.handle_response(now, pkt, &self.ctx, io)
        } else if pkt.info.is_request() {
            let r = self.resp.handle_request(pkt, &self.ctx, io, &mut self.out);
            self.resp.arm_credit_watch(now);
            r
        } else {
            Ok(())
        };
        self.apply(now, result, io);
        self.retire(io);
    }

    /// Whether the requester has WQEs started and not yet completed.
    #[must_use]
    pub fn requests_outstanding(&self) -> bool {
        !self.req.is_idle()
    }

    /// Whether [`Qp::poll_transmit`] may have a packet to send: when false it
    /// has none, and a caller with nothing else to ask of it can skip the
    /// call (a run's last one, after its packets). Cheaper than the call,
    /// which most runs make once in vain.
    #[must_use]
    pub fn may_transmit(&self, sq: &dyn SendQueue) -> bool {
        self.resp.has_output() || self.req.may_transmit(&self.ctx, sq)
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
            let result = if !self.responder_turn {
                self.req.poll_transmit(now, buf, &self.ctx, io)
            } else if self.resp.has_output() {
                self.resp.poll_transmit(buf, &self.ctx, io)
            } else {
                Ok(None)
            };
            match result {
                Ok(Some(t)) => {
                    self.retire(io);
                    return Some(t);
                }
                Ok(None) => {}
                Err(fault) => {
                    self.apply(now, Err(fault), io);
                    self.retire(io);
                    // A fatal responder error leaves a NAK to send.
                    return self.resp.poll_transmit(buf, &self.ctx, io).ok().flatten();
                }
            }
        }
        None
    }

    /// The earliest deadline (ns) at which [`Qp::handle_timeout`] must be
    /// called: the local ACK timer, the RNR timer, the end of a hold for
    /// credits, or the next recheck of the receive queue for new credits.
    #[must_use]
    #[inline]
    pub fn poll_timeout(&self) -> Option<u64> {
        let state = self.ctx.state;
        let req = if matches!(state, QpState::Rts | QpState::Sqd) {
            self.req.poll_timeout()
        } else {
            None
        };
        let resp = if matches!(state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            self.resp.poll_timeout()
        } else {
            None
        };
        earliest(req, resp)
    }

    /// Runs the timers that expired at `now`.
    pub fn handle_timeout(&mut self, now: u64, io: &mut Io<'_>) {
        if matches!(self.ctx.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            self.resp.check_credit_watch(now, &self.ctx, io);
        }
        if !matches!(self.ctx.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let result = self.req.handle_timeout(now, &self.ctx);
        self.apply(now, result, io);
        self.retire(io);
    }

    /// Whether [`Qp::poll_completion`] may have work: false means it would return `None`
    /// and change nothing, so a caller that polls after every packet can skip building its
    /// [`Io`] (most packets of a stream complete nothing).
    #[inline]
    #[must_use]
    pub fn has_completions(&self) -> bool {
        !self.out.completions.is_empty()
            || self.req.has_finished()
            || matches!(self.ctx.state, QpState::Err | QpState::Sqe)
            || (self.ctx.state == QpState::Sqd && !self.req.drained_reported)
    }

    /// The next work completion, in order per queue.
    pub fn poll_completion(&mut self, io: &mut Io<'_>) -> Option<Completion> {
        // Retiring stops only at a full ring, so with the ring found empty
        // there is nothing more to retire.
        self.retire(io);
        if let Some(c) = self.out.completions.pop() {
            return Some(c);
        }
        if self.ctx.state == QpState::Err {
            return self.resp.flush_next(&self.ctx, io);
        }
        None
    }

    /// Whether transport events were counted since the last [`Qp::take_stats`].
    #[must_use]
    pub const fn has_stats(&self) -> bool {
        !self.req.stats.is_zero() || !self.resp.stats.is_zero()
    }

    /// The transport events counted since the last call.
    pub fn take_stats(&mut self) -> QpStats {
        let mut s = self.req.stats.take();
        s.add(&self.resp.stats.take());
        s
    }

    /// Whether [`Qp::poll_event`] has an event.
    #[inline]
    #[must_use]
    pub fn has_events(&self) -> bool {
        !self.out.events.is_empty()
    }

    /// The next asynchronous event.
    pub fn poll_event(&mut self) -> Option<AsyncEvent> {
        self.out.events.pop()
    }

    /// Retires what the requester finished (every packet built or taken in asks, and
    /// most find nothing: inlined, the look costs less than the call).
    #[inline(always)]
    fn retire(&mut self, io: &mut Io<'_>) {
        let flush = matches!(self.ctx.state, QpState::Err | QpState::Sqe);
        if self.req.retire(io, &mut self.out, flush) {
            // The local error a halted requester held back, now that the WQEs
            // before it have completed: only RC halts, and RC enters ERR.
            self.enter_error(io);
            self.req.retire(io, &mut self.out, true);
        }
        if self.ctx.state == QpState::Sqd && self.req.is_idle() && !self.req.drained_reported {
            self.req.drained_reported = true;
            // IBA 11.6.3.1: the event is only raised when the consumer asked
            // for it at the transition to SQD.
            if self.ctx.sqd_notify {
                let _ = self.out.events.push(AsyncEvent::SqDrained);
            }
        }
    }

    fn apply(&mut self, now: u64, result: Result<(), Fault>, io: &mut Io<'_>) {
        let Err(fault) = result else {
            return;
        };
        match fault {
            Fault::Error => self.enter_error(io),
            Fault::SendQueueError => {
                if self.ctx.state != QpState::Err {
                    self.ctx.state = QpState::Sqe;
                }
            }
            Fault::RetryExhausted { rnr } => self.retry_exhausted(now, rnr, io),
            Fault::Internal => {
                let _ = self.out.events.push(AsyncEvent::QpFatal);
                self.enter_error(io);
            }
        }
    }

    /// A retry counter ran out (IBA 9.7.6.1.3 / 9.7.5.2.8), whichever
    /// evidence ran it out: local ACK timeouts, PSN sequence error NAKs or
    /// implied NAKs. An ARMED QP migrates to its alternate path and retries
    /// there with a full counter (IBA 17.2.8); RNR retries do not migrate
    /// (the peer is there, only slow). Otherwise the WQE holding the oldest
    /// unacknowledged PSN completes with RetryExcErr or RnrRetryExcErr and
    /// the QP enters ERR, flushing the rest.
    fn retry_exhausted(&mut self, now: u64, rnr: bool, io: &mut Io<'_>) {
        if !rnr && self.ctx.migrate() {
            self.migrated(now, Cause::RetryExhausted);
            return;
        }
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
        self.enter_error(io);
    }

    /// What follows a migration, whatever its cause (IBA 17.2.8): the
    /// event, the count, and the requester starting over on the new path.
    fn migrated(&mut self, now: u64, cause: Cause) {
        self.req.stats.count(match cause {
            Cause::RetryExhausted => TransportEvent::MigratedOnRetryExhaustion,
            Cause::Commanded => TransportEvent::MigratedOnCommand,
            Cause::PeerRequest => TransportEvent::MigratedOnPeerRequest,
        });
        let _ = self.out.events.push(AsyncEvent::PathMigrated);
        if matches!(self.ctx.state, QpState::Rts | QpState::Sqd) {
            self.req.restart_on_new_path(now, &self.ctx);
        }
    }

    fn enter_error(&mut self, io: &mut Io<'_>) {
        if self.ctx.state == QpState::Err {
            return;
        }
        self.ctx.state = QpState::Err;
        self.req.ack_deadline = None;
        self.req.rnr_deadline = None;
        self.req.credit_hold = None;
        // IBA 10.3.1 / 11.6.3.1: a QP on an SRQ reports when it will take no
        // more WQEs from it.
        if io.rq.is_shared() {
            let _ = self.out.events.push(AsyncEvent::LastWqeReached);
        }
    }
}
