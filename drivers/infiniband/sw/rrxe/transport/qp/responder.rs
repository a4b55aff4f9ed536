// SPDX-License-Identifier: GPL-2.0

//! The responder: executes incoming requests and generates responses (IBA
//! 9.7.5 for RC, 9.8.3 for UC, 9.8.2 / 10.2.5 for UD).
//!
//! RC requests are executed strictly at the expected PSN (ePSN). A request
//! behind it is a duplicate: Sends and Writes are re-acknowledged, RDMA
//! Reads re-executed and atomics answered from the responder resources
//! (IBA 9.7.5.1.5), which remember the last max_dest_rd_atomic of them. A
//! request ahead of it means packets were lost: exactly one PSN sequence
//! error NAK is sent, and further out-of-sequence requests are dropped
//! silently until the expected PSN arrives (IBA 9.7.5.1.2, C9-96: no
//! duplicate NAKs).
//!
//! Responses leave in PSN order, which is what lets ACKs be coalesced: an
//! ACK for ePSN - 1 acknowledges everything, so it is only sent once every
//! Read response and atomic ACK before it has been.

use super::super::aeth::{
    CreditCode, NakCode, Syndrome, CREDIT_WATCH_FIRST_NS, CREDIT_WATCH_MAX_NS, CREDIT_WATCH_SPAN_NS,
};
use super::super::headers::{Aeth, AtomicAckEth, Bth, Reth};
use super::super::opcode::{codes, Operation, Position};
use super::super::packet::{ExtHeaders, Packet};
use super::super::psn::{Msn, Psn, PsnClass};
use super::completion::{AsyncEvent, Completion, WcOpcode, WcStatus, WorkQueue};
use super::context::{AccessFlags, QpContext, MAX_RD_ATOMIC};
use super::io::{Dest, Fault, Io, Outputs, Transmit};
use super::memory::{AtomicOp, LocalError, Memory, PdOf, RKey, RemoteAccess, RemoteError};
use super::requester::{write_with, WriteError};
use super::state::Service;
use super::state::{QpState, QpType};
use super::stats::{QpStats, TransportEvent};
use super::wqe::{RecvQueue, RecvWqe};

/// Bytes at the start of a UD receive buffer reserved for the GRH (IBA
/// 11.4.1.2); the glue writes the header there, the payload follows.
pub const UD_GRH_LEN: u32 = 40;

/// Rechecks of the receive queue while the requester has no credits.
#[derive(Clone, Copy, Debug)]
struct CreditWatch {
    next: u64,
    interval: u64,
    until: u64,
}

/// What a responder resource remembers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ResourceKind {
    #[default]
    Free,
    /// An RDMA Read, re-executable from memory.
    Read { va: u64, rkey: RKey, len: u32 },
    /// An executed atomic and the original value it returned.
    Atomic { orig: u64 },
}

/// A responder resource: one Read or atomic and the responses still owed.
#[derive(Clone, Copy, Debug, Default)]
struct Resource {
    kind: ResourceKind,
    first_psn: Psn,
    npkts: u32,
    /// Next response PSN to send.
    next_psn: Psn,
    /// PSN the current (possibly resumed) response sequence started at:
    /// a duplicate Read asking from the middle is answered as a new
    /// request, First .. Last from there (IBA 9.7.5.1.5).
    start_psn: Psn,
    /// The pending responses answer a duplicate request.
    replay: bool,
}

impl Resource {
    fn contains(&self, psn: Psn) -> bool {
        self.npkts > 0 && psn.is_within(self.first_psn, self.first_psn.wrapping_add(self.npkts - 1))
    }
}

/// The message whose middle packets are expected next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum InMessage {
    #[default]
    None,
    Send,
    Write,
}

/// How a request ended, before the transport decides what to answer.
enum Step {
    /// Executed (or legitimately nothing to do).
    Done,
    /// No receive WQE posted.
    Rnr,
    /// Completion ring full: drop without answering; the requester will
    /// retransmit (RC) or the message is lost (UC, UD).
    Busy,
    /// The request failed; NAK with the code, and complete the receive WQE
    /// in progress with the status if one is given.
    Fail(NakCode, Option<WcStatus>),
}

/// The responder half of a QP.
#[derive(Clone, Debug)]
pub(super) struct Responder {
    pub(super) epsn: Psn,
    pub(super) msn: Msn,
    res: [Resource; MAX_RD_ATOMIC],
    res_next: usize,
    /// The resources that owe responses, bit `i` for `res[i]`: most calls
    /// find none (after every packet, on every run), and the one that
    /// answers a Read looks at the owing resources only, not at every one
    /// the QP has (a hundred and twenty-eight at most).
    owed: u128,
    ack_pending: bool,
    nak: Option<(Psn, Syndrome)>,
    nak_sent: bool,
    in_msg: InMessage,
    recv: Option<RecvWqe>,
    recv_offset: u32,
    /// The XRC SRQ the message in progress goes to (XRC targets): every
    /// packet of a message names the same one (IBA Annex A14).
    msg_srqn: u32,
    write_va: u64,
    write_rkey: u32,
    write_remaining: u32,
    write_total: u32,
    uc_drop: bool,
    comm_established: bool,
    /// The pending ACK answers no request: it is the initial credit ACK or
    /// a credit update (IBA 9.7.7.2.4), counted as unsolicited.
    ack_unsolicited: bool,
    /// PSN of the latest positive response sent (ACK, Read response, atomic
    /// ACK): an unsolicited ACK repeats it (IBA 9.7.7.2.4), so the requester
    /// sees a duplicate that only brings credits.
    last_ack_psn: Psn,
    /// How many more receive-consuming messages (Sends, RDMA Writes with
    /// Immediate) the requester may send on the credits we last advertised,
    /// counted down as their receive WQEs are taken: the requester's LSN as
    /// seen from here. `None` once we advertised no credit information. It
    /// errs low (an RDMA Write in progress is charged as if it carried
    /// Immediate), because at zero a newly posted receive is announced with
    /// an unsolicited ACK (see `post_recv`), and a requester that holds
    /// limited messages back waiting for that ACK must never be left
    /// without it.
    credit_allowance: Option<u32>,
    /// The LSN (MSN + credits) the requester was last told, `None` with no
    /// credit information: an unsolicited ACK that would not raise it tells
    /// nothing.
    advertised_lsn: Option<Msn>,
    /// The message in progress was charged to `credit_allowance` when the
    /// allowance was set, so its receive WQE is not charged again.
    in_msg_charged: bool,
    /// A receive WQE took the requester's last credit: the watch starts at
    /// the next call that knows the time (INIT to RTR starts it at once).
    watch_wanted: bool,
    /// The most credits (receive WQEs) an AETH has advertised: the depth the
    /// consumer keeps its receive queue at, which sizes the receive doorbell
    /// (`recv_doorbell_after`).
    credit_high: u32,
    /// Rechecks of the receive queue for new credits: a user QP posts
    /// receives through its shared ring, without a system call, so nothing
    /// else would notice them while the requester holds its Sends back.
    watch: Option<CreditWatch>,
    /// Whether the AETHs of this QP carry credit counts ([`Self::reports_credits`]),
    /// decided at INIT to RTR: nothing that decides it changes until the next RESET (the
    /// QP's type, its creation's choice, whether its receive queue is an SRQ), and it is
    /// asked on every run and every response, the receive queue through a dynamic call.
    credits_on: bool,
    /// Events counted since the glue last drained them; a reset keeps them.
    pub(super) stats: QpStats,
}

impl Responder {
    pub(super) const fn new() -> Self {
        Self {
            epsn: Psn::ZERO,
            msn: Msn::ZERO,
            res: [Resource {
                kind: ResourceKind::Free,
                first_psn: Psn::ZERO,
                npkts: 0,
                next_psn: Psn::ZERO,
                start_psn: Psn::ZERO,
                replay: false,
            }; MAX_RD_ATOMIC],
            res_next: 0,
            owed: 0,
            ack_pending: false,
            nak: None,
            nak_sent: false,
            in_msg: InMessage::None,
            recv: None,
            recv_offset: 0,
            msg_srqn: 0,
            write_va: 0,
            write_rkey: 0,
            write_remaining: 0,
            write_total: 0,
            uc_drop: false,
            comm_established: false,
            ack_unsolicited: false,
            last_ack_psn: Psn::ZERO,
            // The requester starts without credits (IBA 9.7.7.2.4).
            credit_allowance: Some(0),
            advertised_lsn: Some(Msn::ZERO),
            in_msg_charged: false,
            watch_wanted: false,
            credit_high: 0,
            watch: None,
            credits_on: false,
            stats: QpStats::ZERO,
        }
    }

    /// Resets in place (entering RESET): with its responder resources a
    /// responder is kilobytes, too large to build fresh on a kernel stack.
    pub(super) fn reset(&mut self) {
        const FRESH: Responder = Responder::new();
        for r in &mut self.res {
            *r = FRESH.res[0];
        }
        // Every other field, named so that a new field cannot be missed.
        let Self {
            epsn,
            msn,
            res: _,
            res_next,
            owed,
            ack_pending,
            nak,
            nak_sent,
            in_msg,
            recv,
            recv_offset,
            msg_srqn,
            write_va,
            write_rkey,
            write_remaining,
            write_total,
            uc_drop,
            comm_established,
            ack_unsolicited,
            last_ack_psn,
            credit_allowance,
            advertised_lsn,
            in_msg_charged,
            watch_wanted,
            credit_high,
            watch,
            credits_on,
            stats: _,
        } = self;
        *epsn = FRESH.epsn;
        *msn = FRESH.msn;
        *res_next = FRESH.res_next;
        *owed = FRESH.owed;
        *ack_pending = FRESH.ack_pending;
        *nak = FRESH.nak;
        *nak_sent = FRESH.nak_sent;
        *in_msg = FRESH.in_msg;
        *recv = FRESH.recv;
        *recv_offset = FRESH.recv_offset;
        *msg_srqn = FRESH.msg_srqn;
        *write_va = FRESH.write_va;
        *write_rkey = FRESH.write_rkey;
        *write_remaining = FRESH.write_remaining;
        *write_total = FRESH.write_total;
        *uc_drop = FRESH.uc_drop;
        *comm_established = FRESH.comm_established;
        *ack_unsolicited = FRESH.ack_unsolicited;
        *last_ack_psn = FRESH.last_ack_psn;
        *credit_allowance = FRESH.credit_allowance;
        *advertised_lsn = FRESH.advertised_lsn;
        *in_msg_charged = FRESH.in_msg_charged;
        *watch_wanted = FRESH.watch_wanted;
        *credit_high = FRESH.credit_high;
        *watch = FRESH.watch;
        *credits_on = FRESH.credits_on;
    }

    /// Loads the ePSN (INIT to RTR). A responder that reports credits
    /// queues the unsolicited ACK carrying its initial credits (IBA
    /// 9.7.7.2.4: PSN ePSN - 1, MSN 0), so the requester need not start with
    /// a credit-limited first packet, and watches its receive queue until an
    /// AETH reports some: the requester starts with none, and holds its
    /// first Send if that ACK reports none. A consumer may post its
    /// receives only after RTR (perftest's server does), through the ring,
    /// unseen: the watch's rechecks find them, where the requester's first
    /// Send waited out its hold (64 ms) and probed.
    pub(super) fn start(&mut self, now: u64, attrs: &QpContext, io: &Io<'_>) {
        self.epsn = attrs.rq_psn;
        self.last_ack_psn = self.epsn.prev();
        self.credits_on = Self::reports_credits(attrs, io);
        if self.credits_on {
            self.queue_unsolicited_ack();
            self.watch_wanted = true;
            self.arm_credit_watch(now);
        }
    }

    /// Whether the AETHs of this QP carry credit counts: RC only (IBA
    /// 9.7.7.2), not on an SRQ, whose WQEs are no one QP's to promise (IBA
    /// 10.2.9.5 lets such QPs report "no credit information"), so not on an
    /// XRC target either, which only has XRC SRQs (IBA Annex A14: credits
    /// 0x1F, and no unsolicited credit ACK), and not when the QP was created
    /// with credit reporting off.
    fn reports_credits(attrs: &QpContext, io: &Io<'_>) -> bool {
        attrs.service() == Service::Rc
            && attrs.advertise_credits
            && !attrs.qp_type.is_xrc()
            && !io.rq.is_shared()
    }

    fn queue_unsolicited_ack(&mut self) {
        if !self.ack_pending {
            self.ack_pending = true;
            self.ack_unsolicited = true;
        }
    }

    /// An ACK is owed to a request: whatever else it tells, it is solicited.
    fn queue_ack(&mut self) {
        self.ack_pending = true;
        self.ack_unsolicited = false;
    }

    /// A receive WQE was posted. An unsolicited ACK (IBA 9.7.7.2.4 allows
    /// one at any time) tells the requester about it when the requester
    /// knows of at most half the WQEs now posted: at once if it has used up
    /// the credits we last advertised (a limited Send would otherwise wait
    /// for it, or probe and draw an RNR NAK), and before a requester kept to
    /// one message in flight by a stale count has to wait a round trip per
    /// message. Otherwise the ACK of its next message carries the count: a
    /// receiver that reposts as it consumes does not double its packets.
    pub(super) fn post_recv(&mut self, attrs: &QpContext, io: &Io<'_>) {
        // The glue calls this on every run of the QP, not only after posts:
        // the cheapest checks come first, and only a higher LSN is news.
        let (Some(known), Some(told)) = (self.credit_allowance, self.advertised_lsn) else {
            return;
        };
        if !self.credits_on || !matches!(attrs.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            return;
        }
        // The queue's count is read once, for the LSN and the comparison alike.
        let posted = io.rq.posted();
        let Some(lsn) = self.credits_for(posted).lsn(self.msn) else {
            return;
        };
        // Only posted WQEs are news: a message that took none (a Read, Write or atomic)
        // raised the MSN, and with it the LSN, and its own response or ACK carries that.
        if lsn.is_after(told) && posted > known && known.saturating_mul(2) <= posted {
            self.queue_unsolicited_ack();
        }
    }

    /// The credit count for an AETH sent now: the receive WQEs posted, and
    /// **(choice)** the one a Send in progress has taken. The requester
    /// counts that Send against the LSN until it completes (its SSN is
    /// beyond the MSN), so the WQEs still posted alone would count it twice:
    /// a receiver keeping two receives posted would hold its requester to
    /// one message in flight. MSN + this count is exactly the last SSN the
    /// receive queue can take.
    fn credit_code(&self, io: &Io<'_>) -> CreditCode {
        if self.credits_on {
            self.credits_for(io.rq.posted())
        } else {
            CreditCode::NO_CREDIT_INFO
        }
    }

    /// [`Self::credit_code`] of a QP that reports credits, with `posted` WQEs
    /// in its receive queue.
    fn credits_for(&self, posted: u32) -> CreditCode {
        let taken = self.in_msg == InMessage::Send && self.recv.is_some();
        CreditCode::from_posted_wqes(posted.saturating_add(u32::from(taken)))
    }

    /// An AETH with `code` went out: the requester's allowance starts
    /// afresh from it. It counts a message in progress as one of its own
    /// (its SSN is beyond the MSN the AETH carries).
    fn advertised(&mut self, code: CreditCode) {
        self.in_msg_charged = self.in_msg != InMessage::None;
        self.advertised_lsn = code.lsn(self.msn);
        self.credit_allowance = code
            .credits()
            .map(|c| c.saturating_sub(u32::from(self.in_msg_charged)));
        if let Some(c) = code.credits() {
            self.credit_high = self.credit_high.max(c);
        }
        if self.credit_allowance != Some(0) {
            self.watch = None;
        }
    }

    /// A receive WQE was taken for a new message.
    fn charge_credit(&mut self) {
        if !self.in_msg_charged {
            self.credit_allowance = self.credit_allowance.map(|a| a.saturating_sub(1));
        }
        if self.credit_allowance == Some(0) {
            self.watch_wanted = true;
        }
    }

    /// Starts watching the receive queue if a receive WQE took the
    /// requester's last credit since the last call.
    pub(super) fn arm_credit_watch(&mut self, now: u64) {
        if core::mem::take(&mut self.watch_wanted) {
            self.watch = Some(CreditWatch {
                next: now.saturating_add(CREDIT_WATCH_FIRST_NS),
                interval: CREDIT_WATCH_FIRST_NS,
                until: now.saturating_add(CREDIT_WATCH_SPAN_NS),
            });
        }
    }

    /// Whether the requester is waiting to hear of receives posted from now
    /// on: the last credits advertised are used up and the receive queue is
    /// watched for new ones (or is about to be).
    pub(super) fn watching_receives(&self) -> bool {
        self.watch.is_some() || self.watch_wanted
    }

    /// While watching, how many receive WQEs the queue should hold before a
    /// doorbell is worth it: the depth the consumer keeps (the most credits
    /// advertised, at least one). A requester held for credits has had all it
    /// was advertised consumed, so a consumer reposting as it consumes is back
    /// at that depth soon, and the update grants the whole window. An update
    /// per repost paced a queue kept eight deep at one message a round trip
    /// (`ib_send_bw -r 8` through librrxe at 0.63 of rdma-core's provider,
    /// which posts unseen and has its batch found by a recheck); one at half
    /// the depth still split the window of a queue kept two deep in two
    /// (`ib_send_bw -r 1` between two VMs: 1,700 of 2,900 updates granted
    /// one credit, against 700 of 2,400 found by rechecks, and each window
    /// costs the requester a wait). Fewer posts are found by the next recheck.
    pub(super) fn recv_doorbell_after(&self) -> Option<u32> {
        self.watching_receives().then(|| self.credit_high.max(1))
    }

    /// When the receive queue is to be rechecked next.
    #[inline]
    pub(super) fn poll_timeout(&self) -> Option<u64> {
        self.watch.map(|w| w.next)
    }

    /// Rechecks the receive queue if due: new receives earn the requester
    /// an unsolicited ACK (`post_recv`); the next check waits twice as long,
    /// until the watch's span is over. Only an AETH that gives the requester
    /// credits ends the watch (`advertised`): an ACK owed to a request, which
    /// a run may find pending with the recheck when both came while it was
    /// waiting for the CPU, can report no credits, and ending the watch then
    /// left the next receive unannounced until the requester's hold ran out.
    pub(super) fn check_credit_watch(&mut self, now: u64, attrs: &QpContext, io: &Io<'_>) {
        let Some(w) = self.watch else {
            return;
        };
        if w.next > now {
            return;
        }
        self.post_recv(attrs, io);
        let interval = w.interval.saturating_mul(2).min(CREDIT_WATCH_MAX_NS);
        let next = now.saturating_add(interval);
        self.watch = (next <= w.until).then_some(CreditWatch {
            next,
            interval,
            ..w
        });
    }

    /// No message is in progress any more.
    fn end_message(&mut self) {
        self.in_msg = InMessage::None;
        self.in_msg_charged = false;
    }

    /// Responder resources in use: a QP with none refuses every request
    /// that would need one (see `execute`), so one slot is kept for the
    /// arithmetic.
    fn resource_count(attrs: &QpContext) -> usize {
        usize::from(attrs.max_dest_rd_atomic).clamp(1, MAX_RD_ATOMIC)
    }

    /// Stores a new Read or atomic, evicting the oldest. A requester
    /// honouring max_rd_atomic never needs an evicted entry again; if a
    /// stale duplicate had re-armed it, its replay is simply abandoned.
    /// The new resource owes its responses.
    fn allocate(&mut self, attrs: &QpContext, resource: Resource) {
        let n = Self::resource_count(attrs);
        if self.res_next >= n {
            self.res_next = 0;
        }
        self.res[self.res_next] = resource;
        self.set_owed(self.res_next, true);
        self.res_next = (self.res_next + 1) % n;
    }

    /// Marks resource `i` as owing responses, or not.
    fn set_owed(&mut self, i: usize, owes: bool) {
        let bit = 1u128 << (i % MAX_RD_ATOMIC);
        if owes {
            self.owed |= bit;
        } else {
            self.owed &= !bit;
        }
    }

    /// Processes one request packet addressed to this QP.
    pub(super) fn handle_request(
        &mut self,
        pkt: &Packet<'_>,
        attrs: &QpContext,
        io: &mut Io<'_>,
        out: &mut Outputs,
    ) -> Result<(), Fault> {
        // IBA 10.3.1: requests are processed from RTR on, and still in SQD
        // and SQE, whose errors concern the send queue only.
        if !matches!(
            attrs.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            self.stats.count(TransportEvent::NotReady);
            return Ok(());
        }
        if attrs.state == QpState::Rtr && !self.comm_established {
            self.comm_established = true;
            let _ = out.events.push(AsyncEvent::CommEstablished);
        }
        match attrs.service() {
            Service::Rc => self.rc(pkt, attrs, io, out),
            Service::Uc => {
                self.uc(pkt, attrs, io, out);
                Ok(())
            }
            Service::Ud => {
                self.ud(pkt, attrs, io, out);
                Ok(())
            }
        }
    }

    fn rc(
        &mut self,
        pkt: &Packet<'_>,
        attrs: &QpContext,
        io: &mut Io<'_>,
        out: &mut Outputs,
    ) -> Result<(), Fault> {
        let psn = pkt.bth.psn;
        match PsnClass::of_request(self.epsn, psn) {
            PsnClass::Duplicate => {
                self.stats.count(TransportEvent::DuplicateRequest);
                self.duplicate(pkt);
                return Ok(());
            }
            PsnClass::Invalid => {
                self.stats.count(TransportEvent::OutOfSeqRequest);
                if !self.nak_sent {
                    self.nak_sent = true;
                    self.nak = Some((self.epsn, Syndrome::Nak(NakCode::PsnSequenceError)));
                }
                return Ok(());
            }
            PsnClass::Expected => {}
        }
        match self.execute(pkt, attrs, io, out) {
            Step::Done => {
                // The sequence recovered: a NAK not yet sent is obsolete.
                self.nak_sent = false;
                if matches!(
                    self.nak,
                    Some((
                        _,
                        Syndrome::Nak(NakCode::PsnSequenceError) | Syndrome::RnrNak(_)
                    ))
                ) {
                    self.nak = None;
                }
                // Reads and atomics are acknowledged by their responses.
                let answered = matches!(
                    pkt.info.operation,
                    Operation::RdmaReadRequest | Operation::CompareSwap | Operation::FetchAdd
                );
                if pkt.bth.ack_req && !answered {
                    self.queue_ack();
                }
                Ok(())
            }
            Step::Busy => {
                self.stats.count(TransportEvent::NoResources);
                Ok(())
            }
            Step::Rnr => {
                // IBA 9.7.5.2.8: RNR NAK at this PSN with our minimum timer;
                // later packets of the burst are dropped like
                // out-of-sequence ones until it is retransmitted.
                self.nak_sent = true;
                self.nak = Some((psn, Syndrome::RnrNak(attrs.min_rnr_timer)));
                Ok(())
            }
            Step::Fail(code, recv_status) => {
                self.fail_recv(attrs, recv_status, out);
                self.nak = Some((psn, Syndrome::Nak(code)));
                self.nak_sent = true;
                let event = match code {
                    NakCode::RemoteAccessError => AsyncEvent::QpAccessError,
                    NakCode::RemoteOperationalError => AsyncEvent::QpFatal,
                    _ => AsyncEvent::QpRequestError,
                };
                let _ = out.events.push(event);
                // IBA 9.7.5.2.4-6: these errors are fatal to the responder
                // QP too; the NAK still goes out from ERR.
                Err(Fault::Error)
            }
        }
    }

    /// Completes the receive WQE in progress with an error status.
    fn fail_recv(&mut self, attrs: &QpContext, status: Option<WcStatus>, out: &mut Outputs) {
        if let (Some(status), Some(wqe)) = (status, self.recv) {
            let c = self.recv_done(attrs, &wqe, status, WcOpcode::Recv, self.recv_offset);
            let _ = out.completions.push(c);
            self.recv = None;
        }
    }

    /// The completion of receive WQE `wqe` taken for the message in
    /// progress, naming its XRC SRQ at an XRC target.
    fn recv_done(
        &self,
        attrs: &QpContext,
        wqe: &RecvWqe,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u32,
    ) -> Completion {
        Completion {
            xrc_srqn: (attrs.qp_type == QpType::XrcTgt).then_some(self.msg_srqn),
            ..recv_completion(wqe, status, opcode, byte_len)
        }
    }

    /// A request behind the ePSN (IBA 9.7.5.1.5).
    fn duplicate(&mut self, pkt: &Packet<'_>) {
        let psn = pkt.bth.psn;
        match pkt.info.operation {
            Operation::RdmaReadRequest => {
                // Re-executed from the saved request, from the PSN asked
                // for: a requester resumes a partially answered Read there.
                if let Some(i) = self
                    .res
                    .iter()
                    .position(|r| matches!(r.kind, ResourceKind::Read { .. }) && r.contains(psn))
                {
                    let r = &mut self.res[i];
                    r.next_psn = psn;
                    r.start_psn = psn;
                    r.replay = true;
                    self.set_owed(i, true);
                }
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                // Never executed twice: the saved original value answers.
                if let Some(i) = self.res.iter().position(|r| {
                    matches!(r.kind, ResourceKind::Atomic { .. }) && r.first_psn == psn
                }) {
                    self.res[i].replay = true;
                    self.set_owed(i, true);
                }
            }
            _ => self.queue_ack(),
        }
    }

    /// Checks and executes a request at the expected PSN (RC and UC).
    fn execute(
        &mut self,
        pkt: &Packet<'_>,
        attrs: &QpContext,
        io: &mut Io<'_>,
        out: &mut Outputs,
    ) -> Step {
        let info = pkt.info;
        let pos = info.position;
        let op = info.operation;
        let mtu = attrs.path_mtu.bytes();
        let plen = pkt.payload.len();
        // IBA 9.7.5.2 (responder opcode sequence checks): the opcode must continue the message in
        // progress, or start a new one if there is none.
        let sequence_ok = match (self.in_msg, pos.starts_message()) {
            (InMessage::None, true) => true,
            (InMessage::Send, false) => op == Operation::Send,
            (InMessage::Write, false) => op == Operation::RdmaWrite,
            _ => false,
        };
        if !sequence_ok {
            return Step::Fail(NakCode::InvalidRequest, None);
        }
        // Remote access must be enabled on the QP (IBA 10.2.4 / 11.2.4.2).
        let allowed = match op {
            Operation::Send => true,
            // An Atomic Write places data like an RDMA Write (IBA 1.5 memory
            // placement extensions) and needs the same right.
            Operation::RdmaWrite | Operation::AtomicWrite => {
                attrs.access.contains(AccessFlags::REMOTE_WRITE)
            }
            // Without responder resources (max_dest_rd_atomic 0, IBA
            // 11.2.4.2) no Read or atomic can be taken either.
            Operation::RdmaReadRequest => {
                attrs.access.contains(AccessFlags::REMOTE_READ) && attrs.max_dest_rd_atomic > 0
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                attrs.access.contains(AccessFlags::REMOTE_ATOMIC) && attrs.max_dest_rd_atomic > 0
            }
            _ => false,
        };
        if !allowed {
            return Step::Fail(NakCode::InvalidRequest, None);
        }
        // IBA 9.7.5.2 length checks: First and Middle carry exactly one
        // MTU, Last between 1 byte and one MTU, Only at most one MTU.
        let length_ok = match pos {
            Position::First | Position::Middle => plen == mtu,
            Position::Last => (1..=mtu).contains(&plen),
            Position::Only => plen <= mtu,
        };
        if !length_ok {
            return Step::Fail(NakCode::InvalidRequest, None);
        }
        let (rq, pd): (&mut dyn RecvQueue, PdOf) = if attrs.qp_type == QpType::XrcTgt {
            let srqn = pkt.ext.xrceth.map_or(0, |x| x.xrc_srq);
            if !pos.starts_message() && srqn != self.msg_srqn {
                return Step::Fail(NakCode::InvalidRequest, None);
            }
            // IBA Annex A14: an XRC target delivers only to XRC SRQs of its
            // own XRC domain. A missing SRQ or one of another domain is an
            // access violation, NAKed Remote Access Error (hns reports its
            // XRC domain violation and invalid XRCETH errors as
            // IB_EVENT_QP_ACCESS_ERR, the event of that NAK's responder
            // error); the requester's WR completes with
            // IB_WC_REM_ACCESS_ERR.
            match io.xrc.srq(srqn) {
                Some(srq) if srq.xrcd == attrs.xrcd => {
                    self.msg_srqn = srqn;
                    (srq.rq, srq.pd)
                }
                _ => {
                    self.stats.count(TransportEvent::XrcSrqRefused);
                    return Step::Fail(NakCode::RemoteAccessError, None);
                }
            }
        } else {
            (&mut *io.rq, PdOf::Qp)
        };
        let rkey = |key| RKey { key, pd };
        let with_imm_write = op == Operation::RdmaWrite && info.has_immediate();
        let needs_recv = (op == Operation::Send && pos.starts_message()) || with_imm_write;
        let completes_recv = (op == Operation::Send && pos.ends_message()) || with_imm_write;
        if completes_recv && out.completions.is_full() {
            return Step::Busy;
        }
        if needs_recv && self.recv.is_none() {
            match rq.pop() {
                Some(wqe) => {
                    self.recv = Some(wqe);
                    self.recv_offset = 0;
                    self.charge_credit();
                }
                None => return Step::Rnr,
            }
        }
        match op {
            Operation::Send => {
                let Some(wqe) = self.recv else {
                    return Step::Fail(NakCode::RemoteOperationalError, None);
                };
                if u64::from(self.recv_offset) + plen as u64 > u64::from(wqe.length) {
                    // IBA 9.7.5.2.5: a message longer than the receive
                    // buffer is an invalid request; locally a length error.
                    return Step::Fail(NakCode::InvalidRequest, Some(WcStatus::LocLenErr));
                }
                if let Err(err) = io
                    .mem
                    .scatter_recv(&*rq, &wqe, self.recv_offset, pkt.payload)
                {
                    let code = match err {
                        LocalError::Length => NakCode::InvalidRequest,
                        _ => NakCode::RemoteOperationalError,
                    };
                    return Step::Fail(code, Some(err.status()));
                }
                self.recv_offset += plen as u32;
            }
            Operation::RdmaWrite => {
                if let Some(reth) = pkt.ext.reth {
                    if let Err(err) =
                        check_reth(io.mem, rkey(reth.rkey), &reth, RemoteAccess::Write)
                    {
                        return Step::Fail(err.nak_code(), None);
                    }
                    self.write_va = reth.va;
                    self.write_rkey = reth.rkey;
                    self.write_remaining = reth.dma_len;
                    self.write_total = reth.dma_len;
                }
                if plen as u64 > u64::from(self.write_remaining)
                    || (pos.ends_message() && plen as u32 != self.write_remaining)
                {
                    return Step::Fail(NakCode::InvalidRequest, None);
                }
                if plen > 0 {
                    if let Err(err) =
                        io.mem
                            .write_remote(rkey(self.write_rkey), self.write_va, pkt.payload)
                    {
                        return Step::Fail(err.nak_code(), None);
                    }
                }
                self.write_va = self.write_va.wrapping_add(plen as u64);
                self.write_remaining -= plen as u32;
            }
            Operation::RdmaReadRequest => {
                let Some(reth) = pkt.ext.reth else {
                    return Step::Fail(NakCode::InvalidRequest, None);
                };
                if let Err(err) = check_reth(io.mem, rkey(reth.rkey), &reth, RemoteAccess::Read) {
                    return Step::Fail(err.nak_code(), None);
                }
                let npkts = if reth.dma_len == 0 {
                    1
                } else {
                    reth.dma_len.div_ceil(mtu as u32)
                };
                let psn = pkt.bth.psn;
                self.allocate(
                    attrs,
                    Resource {
                        kind: ResourceKind::Read {
                            va: reth.va,
                            rkey: rkey(reth.rkey),
                            len: reth.dma_len,
                        },
                        first_psn: psn,
                        npkts,
                        next_psn: psn,
                        start_psn: psn,
                        replay: false,
                    },
                );
                // IBA 9.7.1: the Read reserved one PSN per response packet.
                self.epsn = self.epsn.wrapping_add(npkts);
                self.msn = self.msn.next();
                return Step::Done;
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let Some(a) = pkt.ext.atomic_eth else {
                    return Step::Fail(NakCode::InvalidRequest, None);
                };
                let atomic_op = if op == Operation::CompareSwap {
                    AtomicOp::CompareSwap {
                        compare: a.compare,
                        swap: a.swap_add,
                    }
                } else {
                    AtomicOp::FetchAdd { add: a.swap_add }
                };
                let orig = if a.va % 8 != 0 {
                    Err(RemoteError::InvalidRequest)
                } else {
                    io.mem
                        .check_remote(rkey(a.rkey), a.va, 8, RemoteAccess::Atomic)
                        .and_then(|()| io.mem.atomic(rkey(a.rkey), a.va, atomic_op))
                };
                let orig = match orig {
                    Ok(orig) => orig,
                    Err(err) => return Step::Fail(err.nak_code(), None),
                };
                let psn = pkt.bth.psn;
                self.allocate(
                    attrs,
                    Resource {
                        kind: ResourceKind::Atomic { orig },
                        first_psn: psn,
                        npkts: 1,
                        next_psn: psn,
                        start_psn: psn,
                        replay: false,
                    },
                );
                self.epsn = self.epsn.next();
                self.msn = self.msn.next();
                return Step::Done;
            }
            Operation::AtomicWrite => {
                // IBA 1.5 memory placement extensions: exactly 8 bytes to an
                // 8-byte aligned address, stored as one single-copy-atomic
                // write and acknowledged like an RDMA Write. A duplicate is
                // only re-acknowledged (see `duplicate`): storing again could
                // undo a later write.
                let (Some(reth), Ok(value)) = (pkt.ext.reth, <[u8; 8]>::try_from(pkt.payload))
                else {
                    return Step::Fail(NakCode::InvalidRequest, None);
                };
                let done = if reth.dma_len != 8 || reth.va % 8 != 0 {
                    Err(RemoteError::InvalidRequest)
                } else {
                    let value = u64::from_ne_bytes(value);
                    io.mem
                        .check_remote(rkey(reth.rkey), reth.va, 8, RemoteAccess::Write)
                        .and_then(|()| {
                            io.mem
                                .atomic(rkey(reth.rkey), reth.va, AtomicOp::Write { value })
                        })
                };
                if let Err(err) = done {
                    return Step::Fail(err.nak_code(), None);
                }
            }
            _ => return Step::Fail(NakCode::InvalidRequest, None),
        }
        self.epsn = self.epsn.next();
        if !pos.ends_message() {
            self.in_msg = if op == Operation::Send {
                InMessage::Send
            } else {
                InMessage::Write
            };
            return Step::Done;
        }
        self.end_message();
        self.msn = self.msn.next();
        if completes_recv {
            let Some(wqe) = self.recv.take() else {
                return Step::Done;
            };
            let mut invalidated = None;
            if let Some(ieth) = pkt.ext.ieth {
                if io.mem.invalidate(rkey(ieth.rkey)).is_err() {
                    self.recv = Some(wqe);
                    return Step::Fail(NakCode::InvalidRequest, Some(WcStatus::RemInvReqErr));
                }
                invalidated = Some(ieth.rkey);
            }
            let (opcode, byte_len) = if with_imm_write {
                (WcOpcode::RecvRdmaWithImm, self.write_total)
            } else {
                (WcOpcode::Recv, self.recv_offset)
            };
            let mut c = self.recv_done(attrs, &wqe, WcStatus::Success, opcode, byte_len);
            c.imm_data = pkt.ext.imm_dt.map(|i| i.imm_data);
            c.invalidated_rkey = invalidated;
            c.solicited = pkt.bth.solicited_event;
            let _ = out.completions.push(c);
        }
        Step::Done
    }

    /// UC (IBA 9.8.3): no responses at all. A PSN gap abandons the message
    /// in progress and everything up to the next First or Only packet; the
    /// receive WQE it had taken is kept for the next message instead of
    /// completing in error (the requester already reported success).
    fn uc(&mut self, pkt: &Packet<'_>, attrs: &QpContext, io: &mut Io<'_>, out: &mut Outputs) {
        let psn = pkt.bth.psn;
        let starts = pkt.info.position.starts_message();
        if psn != self.epsn {
            self.abandon_message();
            self.uc_drop = !starts;
        }
        self.epsn = psn;
        if self.uc_drop {
            if !starts {
                self.stats.count(TransportEvent::UcDropped);
                self.epsn = psn.next();
                return;
            }
            self.uc_drop = false;
        }
        let step = self.execute(pkt, attrs, io, out);
        if !matches!(step, Step::Done) {
            self.stats.count(TransportEvent::UcDropped);
        }
        match step {
            Step::Done => {}
            Step::Fail(_, Some(status)) if status == WcStatus::LocLenErr => {
                self.fail_recv(attrs, Some(status), out);
                self.abandon_message();
                self.uc_drop = !pkt.info.position.ends_message();
                self.epsn = psn.next();
            }
            _ => {
                self.abandon_message();
                self.uc_drop = !pkt.info.position.ends_message();
                self.epsn = psn.next();
            }
        }
    }

    fn abandon_message(&mut self) {
        self.end_message();
        self.recv_offset = 0;
    }

    /// UD (IBA 10.2.5, 9.8.2): single-packet Sends, checked against the
    /// Q_Key; anything that cannot be delivered is dropped without an answer
    /// and counted.
    fn ud(&mut self, pkt: &Packet<'_>, attrs: &QpContext, io: &mut Io<'_>, out: &mut Outputs) {
        // Every UD opcode is a Send carrying a DETH (IBA 9.8.2).
        let (Some(deth), Operation::Send) = (pkt.ext.deth, pkt.info.operation) else {
            self.stats.count(TransportEvent::WrongTransport);
            return;
        };
        // IBA 10.2.5 (Q_Keys): a Q_Key mismatch drops the datagram.
        if deth.qkey != attrs.qkey {
            self.stats.count(TransportEvent::QkeyViolation);
            return;
        }
        if out.completions.is_full() {
            self.stats.count(TransportEvent::NoResources);
            return;
        }
        let Some(wqe) = io.rq.pop() else {
            self.stats.count(TransportEvent::NoResources);
            return;
        };
        let len = pkt.payload.len() as u32;
        let status = if u64::from(len) + u64::from(UD_GRH_LEN) > u64::from(wqe.length) {
            WcStatus::LocLenErr
        } else {
            let placed = io
                .mem
                .write_grh(&*io.rq, &wqe)
                .and_then(|()| io.mem.scatter_recv(&*io.rq, &wqe, UD_GRH_LEN, pkt.payload));
            match placed {
                Ok(()) => WcStatus::Success,
                Err(err) => err.status(),
            }
        };
        let mut c = recv_completion(&wqe, status, WcOpcode::Recv, len + UD_GRH_LEN);
        c.imm_data = pkt.ext.imm_dt.map(|i| i.imm_data);
        c.src_qp = deth.src_qp;
        c.solicited = pkt.bth.solicited_event;
        let _ = out.completions.push(c);
    }

    /// Whether [`Self::poll_transmit`] may have a packet (a response, a NAK or
    /// an ACK). Most calls find nothing: a requester's stream asks at every
    /// packet it sends.
    #[inline]
    pub(super) fn has_output(&self) -> bool {
        self.owed != 0 || self.ack_pending || self.nak.is_some()
    }

    /// The next response packet: owed Read responses and atomic ACKs in
    /// PSN order, then a NAK or the (coalesced) ACK.
    pub(super) fn poll_transmit(
        &mut self,
        buf: &mut [u8],
        attrs: &QpContext,
        io: &mut Io<'_>,
    ) -> Result<Option<Transmit>, Fault> {
        if !self.has_output() || attrs.service() != Service::Rc {
            return Ok(None);
        }
        let in_error = attrs.state == QpState::Err;
        if in_error {
            // Only the NAK reporting the error that caused it leaves ERR.
            if !matches!(self.nak, Some((_, Syndrome::Nak(_)))) {
                return Ok(None);
            }
        } else if !matches!(
            attrs.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            return Ok(None);
        }
        let base = response_base(attrs);
        let bth = Bth {
            mig_req: attrs.mig_req(),
            pkey: attrs.pkey(),
            dest_qp: attrs.dest_qpn,
            ..Bth::default()
        };
        if !in_error && self.owed != 0 {
            // Resources beyond the QP's count are never answered.
            let count = Self::resource_count(attrs);
            if count < MAX_RD_ATOMIC {
                self.owed &= (1u128 << count) - 1;
            }
            // The oldest response first: the one nearest the ePSN.
            let epsn = self.epsn;
            let mut next: Option<usize> = None;
            let mut owing = self.owed;
            while owing != 0 {
                let i = owing.trailing_zeros() as usize;
                owing &= owing - 1;
                let distance = self.res[i].next_psn.diff(epsn);
                if next.map_or(true, |j| distance < self.res[j].next_psn.diff(epsn)) {
                    next = Some(i);
                }
            }
            if let Some(i) = next {
                return self.respond(i, buf, attrs, io, bth);
            }
        }
        let (psn, syndrome) = if let Some(nak) = self.nak.take() {
            self.stats.count(match nak.1 {
                Syndrome::Nak(NakCode::PsnSequenceError) => TransportEvent::SeqNakSent,
                Syndrome::RnrNak(_) => TransportEvent::RnrNakSent,
                Syndrome::Nak(_) | Syndrome::Ack(_) => TransportEvent::ErrorNakSent,
            });
            nak
        } else if self.ack_pending && !in_error {
            let psn = if self.ack_unsolicited {
                self.last_ack_psn
            } else {
                self.epsn.prev()
            };
            // Counted only for a packet that carries it: most calls find
            // nothing to send, and the count reads the receive queue.
            (psn, Syndrome::Ack(self.credit_code(io)))
        } else {
            return Ok(None);
        };
        self.ack_pending = false;
        if let Syndrome::Ack(code) = syndrome {
            if core::mem::take(&mut self.ack_unsolicited) {
                self.stats.count(TransportEvent::UnsolicitedAck);
            }
            self.last_ack_psn = psn;
            self.advertised(code);
        }
        let ext = ExtHeaders {
            aeth: Some(Aeth {
                syndrome,
                msn: self.msn,
            }),
            ..ExtHeaders::default()
        };
        let bth = Bth {
            opcode: base + codes::RC_ACKNOWLEDGE,
            psn,
            ..bth
        };
        let len =
            write_with(buf, &bth, &ext, 0, |_| Ok::<(), ()>(())).map_err(|_| Fault::Internal)?;
        Ok(Some(Transmit {
            len,
            dest_qpn: attrs.dest_qpn,
            dest: Self::dest(attrs)?,
            retransmission: false,
        }))
    }

    /// Responses go back along the QP's path, which INIT to RTR loaded.
    fn dest(attrs: &QpContext) -> Result<Dest, Fault> {
        attrs.primary.av.map(Dest::Path).ok_or(Fault::Internal)
    }

    /// One response packet of resource `i`.
    fn respond(
        &mut self,
        i: usize,
        buf: &mut [u8],
        attrs: &QpContext,
        io: &mut Io<'_>,
        bth: Bth,
    ) -> Result<Option<Transmit>, Fault> {
        let base = response_base(attrs);
        let r = self.res[i];
        let credit = self.credit_code(io);
        let aeth = Some(Aeth {
            syndrome: Syndrome::Ack(credit),
            msn: self.msn,
        });
        let psn = r.next_psn;
        // Atomic ACKs and the First, Last and Only Read responses carry an
        // AETH (IBA 9.3.5), and with it a credit count like any ACK.
        let mut carries_aeth = true;
        let written = match r.kind {
            ResourceKind::Read { va, rkey, len } => {
                let mtu = attrs.path_mtu.bytes() as u32;
                let k = r.first_psn.distance_to(psn);
                let offset = k * mtu;
                let plen = (len - offset.min(len)).min(mtu);
                let last = k + 1 >= r.npkts;
                let opcode = match (psn == r.start_psn, last) {
                    (true, true) => codes::RC_RDMA_READ_RESPONSE_ONLY,
                    (true, false) => codes::RC_RDMA_READ_RESPONSE_FIRST,
                    (false, true) => codes::RC_RDMA_READ_RESPONSE_LAST,
                    (false, false) => codes::RC_RDMA_READ_RESPONSE_MIDDLE,
                };
                carries_aeth = opcode != codes::RC_RDMA_READ_RESPONSE_MIDDLE;
                let ext = ExtHeaders {
                    aeth: if carries_aeth { aeth } else { None },
                    ..ExtHeaders::default()
                };
                let bth = Bth {
                    opcode: base + opcode,
                    psn,
                    ..bth
                };
                let res = write_with(buf, &bth, &ext, plen as usize, |dst| {
                    if dst.is_empty() {
                        // The one empty response of a zero-length Read, whose
                        // key was not checked (`check_reth`).
                        return Ok(());
                    }
                    io.mem
                        .read_remote(rkey, va.wrapping_add(u64::from(offset)), dst)
                });
                self.res[i].next_psn = psn.next();
                self.set_owed(i, !last);
                res
            }
            ResourceKind::Atomic { orig } => {
                let ext = ExtHeaders {
                    aeth,
                    atomic_ack_eth: Some(AtomicAckEth {
                        orig_remote_data: orig,
                    }),
                    ..ExtHeaders::default()
                };
                let bth = Bth {
                    opcode: base + codes::RC_ATOMIC_ACKNOWLEDGE,
                    psn,
                    ..bth
                };
                self.set_owed(i, false);
                write_with(buf, &bth, &ext, 0, |_| Ok::<(), RemoteError>(()))
            }
            ResourceKind::Free => {
                self.set_owed(i, false);
                return Ok(None);
            }
        };
        match written {
            Ok(len) => {
                if carries_aeth {
                    self.last_ack_psn = psn;
                    self.advertised(credit);
                }
                Ok(Some(Transmit {
                    len,
                    dest_qpn: attrs.dest_qpn,
                    dest: Self::dest(attrs)?,
                    retransmission: r.replay,
                }))
            }
            Err(WriteError::Local(_)) => {
                // The region went away under a Read in progress: the
                // responder cannot complete it (NAK Remote Operational
                // Error at the response PSN, then ERR).
                self.set_owed(i, false);
                self.nak = Some((psn, Syndrome::Nak(NakCode::RemoteOperationalError)));
                Err(Fault::Error)
            }
            Err(WriteError::Packet) => Err(Fault::Internal),
        }
    }

    /// The next flushed receive completion once the QP is in ERR (IBA
    /// 10.3.1.7); an SRQ is left alone, and so are an XRC target's SRQs.
    pub(super) fn flush_next(&mut self, attrs: &QpContext, io: &mut Io<'_>) -> Option<Completion> {
        let wqe = match self.recv.take() {
            Some(wqe) => wqe,
            None if io.rq.is_shared() || attrs.qp_type.is_xrc() => return None,
            None => io.rq.pop()?,
        };
        Some(self.recv_done(attrs, &wqe, WcStatus::WrFlushErr, WcOpcode::Recv, 0))
    }
}

/// What the QP's response opcodes add to RC's: XRC responses are RC's with
/// the XRC opcode base (IBA Annex A14).
const fn response_base(attrs: &QpContext) -> u8 {
    if attrs.qp_type.is_xrc() {
        codes::XRC_BASE
    } else {
        0
    }
}

/// A receive completion without immediate data, invalidation or source QP.
fn recv_completion(wqe: &RecvWqe, status: WcStatus, opcode: WcOpcode, byte_len: u32) -> Completion {
    Completion {
        wr_id: wqe.wr_id,
        status,
        opcode,
        byte_len,
        imm_data: None,
        invalidated_rkey: None,
        src_qp: 0,
        solicited: false,
        queue: WorkQueue::Recv,
        xrc_srqn: None,
    }
}

/// Checks the R_Key and VA of an RDMA Write or Read for `access`. C9-88: a
/// zero-length one need not carry a valid R_Key or VA (rsockets leaves them
/// uninitialised in its control messages, zero-length Writes with
/// Immediate), so neither is checked; such a request touches no memory.
fn check_reth(
    mem: &mut dyn Memory,
    rkey: RKey,
    reth: &Reth,
    access: RemoteAccess,
) -> Result<(), RemoteError> {
    if reth.dma_len == 0 {
        return Ok(());
    }
    mem.check_remote(rkey, reth.va, reth.dma_len, access)
}
