// SPDX-License-Identifier: GPL-2.0

//! The completer: the requester's handling of responses (IBA 9.7.6) and
//! the in-order retirement of send WQEs (IBA 10.8.3.1).
//!
//! A response acknowledges by PSN. ACKs are cumulative (9.7.6.1.1: an ACK
//! for PSN n acknowledges every request up to n, which is what lets the
//! responder coalesce them), a NAK acknowledges everything before its PSN,
//! and RDMA Read responses and atomic ACKs must arrive at exactly the PSN
//! expected: one arriving beyond it is an implied NAK (9.7.6.1.4) meaning
//! the responses in between were lost.

use super::super::aeth::{NakCode, Syndrome};
use super::super::opcode::{Operation, Position};
use super::super::packet::Packet;
use super::completion::{Completion, WcOpcode, WcStatus, WorkQueue};
use super::context::QpContext;
use super::io::{Fault, Io, Outputs};
use super::requester::{Requester, SendSlot};
use super::state::QpState;
use super::state::Service;
use super::stats::TransportEvent;
use super::wqe::{LocalOp, SendFlags, SendOpcode};

impl Requester {
    /// Records the MSN and credits an AETH carries. Only ACKs carry a
    /// credit count; a stale MSN (from a reordered response) is ignored so
    /// the LSN never moves backwards on old information. An ACK that
    /// acknowledges nothing new (the initial one before RTS, or one behind
    /// una) is unsolicited, or a duplicate (IBA 9.7.7.2.4 makes them look
    /// alike): with a credit count it shows the responder announces credits
    /// as receives are posted, whatever holds ran out before.
    ///
    /// A NAK (RNR or other) carries a valid MSN but no credit count: the LSN
    /// it leaves is the last one announced, MSN + credits of the ACK that
    /// announced it (IBA 9.7.7.2.4, table 17-8). Credits are kept relative to
    /// the MSN, so a NAK that moves the MSN on takes as many off them: keeping
    /// the count would move the LSN on by the messages completed since, and
    /// the requester would send that many messages past the responder's
    /// receive queue unannounced (each then refused with an RNR NAK).
    pub(super) fn update_credits(
        &mut self,
        syndrome: Syndrome,
        msn: super::super::psn::Msn,
        unsolicited: bool,
    ) {
        if msn.is_before(self.msn) {
            return;
        }
        let completed = self.msn.distance_to(msn);
        self.msn = msn;
        if let Syndrome::Ack(code) = syndrome {
            self.credits = code.credits();
            if self.credits.is_some() {
                self.peer_reports_credits = true;
                if unsolicited {
                    self.holds_expired = 0;
                }
            }
        } else if let Some(credits) = self.credits.as_mut() {
            *credits = credits.saturating_sub(completed);
        }
    }

    /// Advances una to `psn` after a response proved progress: the retry
    /// counters are reloaded (IBA 9.7.6.1.3, "the retry counter is reset
    /// when a response makes forward progress") and the timer restarted.
    fn progress(&mut self, now: u64, psn: Psn, attrs: &QpContext) {
        if !psn.is_after(self.una) {
            return;
        }
        self.una = psn;
        if self.send_psn.is_before(psn) {
            self.send_psn = psn;
        }
        self.retry_guard = None;
        self.rnr_refused = None;
        self.reload_counters(attrs);
        self.backoff = 0;
        self.ack_deadline = None;
        if self.una.is_before(self.sent_high) {
            self.ack_deadline = self.ack_wait_ns(attrs).map(|t| now.saturating_add(t));
        }
    }

    /// A response beyond the expected Read response or atomic ACK, or a PSN
    /// sequence error NAK: go back to una, counting one retry, unless this
    /// loss was already acted upon. A NAK (`answers_resend`) counts again
    /// once the request at una went again: the responder NAKs once per loss,
    /// so a second NAK means the retransmission was lost too. Out-of-place
    /// responses do not: the answers to requests sent before the go-back
    /// keep arriving after it, and would count one loss many times.
    fn retry(&mut self, now: u64, attrs: &QpContext, answers_resend: bool) -> Result<(), Fault> {
        if self.retry_guard == Some(self.una) && !(answers_resend && self.guard_resent) {
            return Ok(());
        }
        if self.retry_left == 0 {
            return Err(Fault::RetryExhausted { rnr: false });
        }
        self.retry_left -= 1;
        self.go_back(now, attrs);
        Ok(())
    }

    /// A response out of place for the WQE at una (beyond the expected PSN,
    /// or of the wrong kind) implies the requests before it were lost
    /// (IBA 9.7.6.1.4); counted once per loss, as the retry is.
    fn implied_nak(&mut self, now: u64, attrs: &QpContext) -> Result<(), Fault> {
        self.stats.count(if self.retry_guard == Some(self.una) {
            TransportEvent::IgnoredResponse
        } else {
            TransportEvent::ImpliedNak
        });
        self.retry(now, attrs, false)
    }

    /// Handles a NAK whose PSN is una, which falls in slot `pos`.
    fn nak(
        &mut self,
        now: u64,
        pos: usize,
        syndrome: Syndrome,
        attrs: &QpContext,
    ) -> Result<(), Fault> {
        let status = match syndrome {
            Syndrome::Ack(_) => return Ok(()),
            Syndrome::RnrNak(timer) => {
                self.rnr_refused = Some(self.una);
                // A duplicate of the RNR NAK being waited out.
                if self.rnr_deadline.is_some() {
                    self.stats.count(TransportEvent::IgnoredResponse);
                    return Ok(());
                }
                // IBA 9.7.5.2.8 / 10.3.1: rnr_retry 7 means retry forever.
                if attrs.rnr_retry != 7 {
                    if self.rnr_left == 0 {
                        return Err(Fault::RetryExhausted { rnr: true });
                    }
                    self.rnr_left -= 1;
                }
                self.stats.count(TransportEvent::RnrNakRcvd);
                self.ack_deadline = None;
                self.send_psn = self.una;
                self.rnr_deadline = Some(now.saturating_add(timer.delay_ns()));
                return Ok(());
            }
            Syndrome::Nak(NakCode::PsnSequenceError) => {
                self.stats.count(TransportEvent::SeqNakRcvd);
                // The requests behind one an RNR NAK refused are out of
                // sequence at the responder until it goes again, and
                // rdma_rxe sends this NAK for the first of them: it repeats
                // the refusal, which the RNR wait answers (IBA 9.7.5.2.8),
                // and reports no loss. Counted, it spent a retry per RNR
                // NAK, and a receiver slower than retry_cnt RNR periods to
                // post a receive failed a QP whose rnr_retry of 7 waits
                // forever.
                if self.rnr_refused.take() == Some(self.una) {
                    return Ok(());
                }
                return self.retry(now, attrs, true);
            }
            Syndrome::Nak(NakCode::InvalidRequest) => WcStatus::RemInvReqErr,
            Syndrome::Nak(NakCode::RemoteAccessError) => WcStatus::RemAccessErr,
            Syndrome::Nak(NakCode::RemoteOperationalError) => WcStatus::RemOpErr,
            Syndrome::Nak(NakCode::InvalidRdRequest) => WcStatus::RemInvRdReqErr,
        };
        // IBA 9.7.5.2.4-6: these NAKs are fatal to the WQE and the QP.
        self.stats.count(TransportEvent::ErrorNakRcvd);
        self.slot_mut(pos).done = Some(status);
        Err(Fault::Error)
    }

    /// Processes one RC response packet (IBA 9.7.6).
    pub(super) fn handle_response(
        &mut self,
        now: u64,
        pkt: &Packet<'_>,
        attrs: &QpContext,
        io: &mut Io<'_>,
    ) -> Result<(), Fault> {
        let psn = pkt.bth.psn;
        let aeth = pkt.ext.aeth;
        let running = matches!(attrs.state, QpState::Rts | QpState::Sqd);
        // A responder's AETH speaks for the PSN it answers, and an
        // unsolicited ACK repeats the most recent positive ACK (IBA
        // 9.7.7.2.4, from PSN una - 1 on, the initial one's ePSN - 1
        // included): a response beyond what was sent, or behind that, is a
        // ghost, and its MSN and credits are not the peer's. One forged with
        // an MSN far ahead would otherwise silence every genuine credit
        // count for up to 2^23 messages. Before RTS, when no PSN has been
        // sent, only the initial unsolicited ACK can arrive.
        let in_window = psn.is_within(self.una.prev(), self.sent_high.prev());
        if let Some(aeth) = aeth.filter(|_| !running || in_window) {
            let unsolicited = pkt.info.operation == Operation::Acknowledge
                && (!running || psn.is_before(self.una));
            self.update_credits(aeth.syndrome, aeth.msn, unsolicited);
        }
        let positive_ack = pkt.info.operation == Operation::Acknowledge
            && matches!(aeth.map(|a| a.syndrome), Some(Syndrome::Ack(_)));
        // Before RTS only the credits of the responder's initial ACK matter.
        if !running || attrs.service() != Service::Rc {
            if !(positive_ack && attrs.state == QpState::Rtr) {
                self.stats.count(TransportEvent::NotReady);
            }
            return Ok(());
        }
        // Responses for PSNs never sent are bogus, responses behind una are
        // duplicates (an unsolicited ACK is one: 9.7.5.1.2); either way,
        // nothing beyond the credits above is taken from them. A positive
        // ACK at una - 1 is how a responder announces credits, and is not
        // counted; half the PSN space away, "behind una" and "never sent"
        // meet, and never sent wins.
        let never_sent = !psn.is_before(self.sent_high);
        if never_sent || psn.is_before(self.una) {
            if matches!(
                pkt.info.operation,
                Operation::RdmaReadResponse | Operation::AtomicAcknowledge
            ) {
                self.stats.count(TransportEvent::DuplicateResponse);
            } else if never_sent || !positive_ack || !in_window {
                self.stats.count(TransportEvent::IgnoredResponse);
            }
            return Ok(());
        }
        let syndrome = aeth.map(|a| a.syndrome);
        let op = pkt.info.operation;
        let mtu = attrs.path_mtu.bytes() as u32;
        let is_nak = matches!(syndrome, Some(Syndrome::Nak(_) | Syndrome::RnrNak(_)));
        // Each pass either retires PSNs up to a slot boundary and continues,
        // or handles the packet and returns; slots are finite.
        let una = self.una;
        for _ in 0..=self.len {
            let Some(pos) = self.slot_of(self.una) else {
                if self.una == una {
                    self.stats.count(TransportEvent::IgnoredResponse);
                }
                return Ok(());
            };
            let slot: SendSlot = *self.slot(pos);
            let last = slot.last_psn();
            match slot.wqe.opcode {
                SendOpcode::RdmaRead
                | SendOpcode::AtomicCmpSwap { .. }
                | SendOpcode::AtomicFetchAdd { .. } => {
                    let expected = self.una;
                    if psn != expected {
                        // Beyond the expected response: implied NAK.
                        return self.implied_nak(now, attrs);
                    }
                    if is_nak {
                        return self.nak(
                            now,
                            pos,
                            syndrome.unwrap_or(Syndrome::ACK_NO_CREDIT_INFO),
                            attrs,
                        );
                    }
                    if slot.wqe.opcode == SendOpcode::RdmaRead {
                        if op != Operation::RdmaReadResponse {
                            return self.implied_nak(now, attrs);
                        }
                        let k = slot.resp_pkts;
                        let offset = k * mtu;
                        let want = (slot.wqe.length - offset.min(slot.wqe.length)).min(mtu);
                        // A resumed Read (IBA 9.7.4.1.4) is answered as a new
                        // request, so First may appear past the start; the PSN
                        // check above is what guarantees the data's place.
                        let remaining = slot.npkts - k;
                        let position_ok = match pkt.info.position {
                            Position::Only | Position::Last => remaining == 1,
                            Position::First | Position::Middle => remaining > 1,
                        };
                        // A response that does not fit the request is
                        // silently dropped (9.7.6.1.2, invalid response).
                        if !position_ok || pkt.payload.len() as u32 != want {
                            self.stats.count(TransportEvent::IgnoredResponse);
                            return Ok(());
                        }
                        if let Err(err) =
                            io.mem
                                .scatter_send(&*io.sq, slot.index, offset, pkt.payload)
                        {
                            self.slot_mut(pos).done = Some(err.status());
                            return Err(Fault::Error);
                        }
                        let s = self.slot_mut(pos);
                        s.resp_pkts += 1;
                        if s.resp_pkts == s.npkts {
                            s.done = Some(WcStatus::Success);
                        }
                    } else {
                        if op != Operation::AtomicAcknowledge {
                            return self.implied_nak(now, attrs);
                        }
                        let orig = pkt.ext.atomic_ack_eth.map_or(0, |a| a.orig_remote_data);
                        if let Err(err) =
                            io.mem
                                .scatter_send(&*io.sq, slot.index, 0, &orig.to_ne_bytes())
                        {
                            self.slot_mut(pos).done = Some(err.status());
                            return Err(Fault::Error);
                        }
                        let s = self.slot_mut(pos);
                        s.resp_pkts = 1;
                        s.done = Some(WcStatus::Success);
                    }
                    self.progress(now, psn.next(), attrs);
                    return Ok(());
                }
                _ => {
                    if psn.is_after(last) {
                        // A response to a later request: this whole message
                        // was received (responses come in PSN order).
                        self.slot_mut(pos).done = Some(WcStatus::Success);
                        self.progress(now, last.next(), attrs);
                        continue;
                    }
                    if op != Operation::Acknowledge {
                        // Read data or an atomic ACK at a Send/Write PSN.
                        self.stats.count(TransportEvent::IgnoredResponse);
                        return Ok(());
                    }
                    if is_nak {
                        self.progress(now, psn, attrs);
                        return self.nak(
                            now,
                            pos,
                            syndrome.unwrap_or(Syndrome::ACK_NO_CREDIT_INFO),
                            attrs,
                        );
                    }
                    if psn == last {
                        self.slot_mut(pos).done = Some(WcStatus::Success);
                    }
                    self.progress(now, psn.next(), attrs);
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Marks the WQE holding una with the status of an exhausted retry
    /// counter.
    pub(super) fn fail_unacked(&mut self, status: WcStatus) {
        if let Some(pos) = self.slot_of(self.una) {
            self.slot_mut(pos).done = Some(status);
        }
    }

    /// Retires finished WQEs in order, queueing their completions (IBA
    /// 10.8.3.1: completions are returned in the order WQEs were posted;
    /// unsignaled successful WQEs retire silently, errors always complete).
    /// With `flush` set (QP in ERR, or SQE), unfinished WQEs and those
    /// never started complete with WrFlushErr. Stops when the completion
    /// ring is full; the next call resumes. Returns whether it completed the
    /// WQE a halted requester waited on (see `Requester::fail_local`): the
    /// QP's local error now applies.
    #[inline(always)]
    pub(super) fn retire(&mut self, io: &mut Io<'_>, out: &mut Outputs, flush: bool) -> bool {
        // Every packet built or taken in asks: most find the oldest WQE unfinished.
        if !flush && !self.has_finished() {
            return false;
        }
        self.retire_finished(io, out, flush)
    }

    /// Whether the oldest WQE in flight is finished, and so retires next.
    #[inline]
    pub(super) fn has_finished(&self) -> bool {
        self.len > 0 && self.slot(0).done.is_some()
    }

    /// [`Self::retire`] once there may be something to retire.
    #[inline(never)]
    fn retire_finished(&mut self, io: &mut Io<'_>, out: &mut Outputs, flush: bool) -> bool {
        while self.len > 0 && !out.completions.is_full() {
            let slot = self.slot(0);
            let status = match slot.done {
                Some(status) => status,
                None if flush => WcStatus::WrFlushErr,
                None => break,
            };
            if status != WcStatus::Success || slot.wqe.flags.contains(SendFlags::SIGNALED) {
                let _ = out.completions.push(send_completion(slot, status));
            }
            let index = slot.index;
            io.sq.retire(index);
            self.head = (self.head + 1) % super::requester::MAX_INFLIGHT_WQES;
            self.len -= 1;
            if status != WcStatus::Success && self.halted && !flush {
                self.halted = false;
                return true;
            }
        }
        if !flush {
            return false;
        }
        while self.sq_next != io.sq.producer() && !out.completions.is_full() {
            let index = self.sq_next;
            if let Some(wqe) = io.sq.get(index) {
                let slot = SendSlot {
                    index,
                    wqe,
                    ..SendSlot::default()
                };
                let _ = out
                    .completions
                    .push(send_completion(&slot, WcStatus::WrFlushErr));
            }
            io.sq.retire(index);
            self.sq_next = index.wrapping_add(1);
        }
        false
    }
}

use super::super::psn::Psn;

/// The completion of a send WQE.
fn send_completion(slot: &SendSlot, status: WcStatus) -> Completion {
    let wqe = &slot.wqe;
    let (opcode, imm_data) = match wqe.opcode {
        SendOpcode::Send | SendOpcode::SendWithInv(_) | SendOpcode::Unsupported => {
            (WcOpcode::Send, None)
        }
        SendOpcode::SendWithImm(imm) => (WcOpcode::Send, Some(imm)),
        SendOpcode::RdmaWrite => (WcOpcode::RdmaWrite, None),
        SendOpcode::RdmaWriteWithImm(imm) => (WcOpcode::RdmaWrite, Some(imm)),
        SendOpcode::RdmaRead => (WcOpcode::RdmaRead, None),
        SendOpcode::AtomicCmpSwap { .. } => (WcOpcode::CompSwap, None),
        SendOpcode::AtomicFetchAdd { .. } => (WcOpcode::FetchAdd, None),
        SendOpcode::AtomicWrite { .. } => (WcOpcode::AtomicWrite, None),
        SendOpcode::Local(LocalOp::Invalidate { .. }) => (WcOpcode::LocalInvalidate, None),
        SendOpcode::Local(LocalOp::FastRegister { .. }) => (WcOpcode::FastRegister, None),
        SendOpcode::Local(LocalOp::BindMw { .. }) => (WcOpcode::BindMw, None),
    };
    Completion {
        wr_id: wqe.wr_id,
        status,
        opcode,
        byte_len: wqe.length,
        imm_data,
        invalidated_rkey: None,
        src_qp: 0,
        solicited: false,
        queue: WorkQueue::Send,
        xrc_srqn: None,
    }
}
