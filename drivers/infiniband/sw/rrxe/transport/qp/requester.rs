// SPDX-License-Identifier: GPL-2.0

//! The requester: turns send WQEs into request packets (IBA 9.7.1 - 9.7.4
//! for RC, 9.8 for UC, 9.8.2 / 9.9 for UD).
//!
//! Each WQE taken from the send queue gets a slot holding its transport
//! state: its SSN, the PSN range its packets (or, for an RDMA Read, its
//! response packets) occupy, and how far its responses have come. A slot
//! lives until the completer retires the WQE, so retransmission can
//! rebuild any packet from the WQE and the PSN alone: nothing is buffered.
//!
//! PSN bookkeeping, all modulo 2^24:
//!
//! ```text
//!   una <= send_psn <= sent_high <= psn_next
//!   una       oldest PSN whose response has not arrived
//!   send_psn  next PSN to put on the wire (moved back to una to retransmit)
//!   sent_high one past the highest PSN ever sent; below it is a retransmission
//!   psn_next  first PSN of the next WQE to start
//! ```

use super::super::aeth::CREDIT_WATCH_MAX_NS;
use super::super::headers::{AtomicEth, Bth, Deth, Ieth, ImmDt, Reth, Xrceth};
use super::super::icrc::ICRC_LEN;
use super::super::opcode::codes;
use super::super::packet::{self, ExtHeaders};
use super::super::psn::{Msn, Psn};
use super::super::timer::earliest;
use super::completion::WcStatus;
use super::context::QpContext;
use super::io::{Dest, Fault, Io, Transmit};
use super::state::Service;
use super::state::{QpState, QpType};
use super::stats::{QpStats, TransportEvent};
use super::wqe::{SendFlags, SendOpcode, SendQueue, SendWqe};

/// Largest message a connected QP sends (IBA 9.4: 2^31 bytes).
pub const MAX_MESSAGE: u32 = 1 << 31;
/// Send WQEs the engine tracks between starting and retiring them; a full
/// table holds new WQEs back.
pub const MAX_INFLIGHT_WQES: usize = 64;

/// Largest doubling of the local ACK timeout on consecutive timeouts (IBA 9.7.6.1.3: the
/// timer may run up to four times the timeout).
pub const MAX_TIMEOUT_SHIFT: u8 = 2;

/// RC packets that may be outstanding (sent, unacknowledged) before the
/// requester waits. The IBA only bounds this by the 2^23 PSN half window;
/// a small window keeps a go-back-N retransmission cheap for a software
/// transport.
pub const MAX_UNACKED_PSNS: u32 = 128;

/// Packets sent without AckReq before one asks for an acknowledgement, so
/// long messages are acknowledged (and their timer restarted) as they go
/// (IBA 9.7.2 leaves the AckReq policy to the requester).
pub const MAX_PKTS_PER_ACK: u32 = 16;

/// Holds in a row that may run out without a credit update before the
/// requester stops expecting updates from the responder and probes at once:
/// one expired hold is more likely a slow receiver (a software one, on a
/// starved CPU) than a responder that does not announce credits, and
/// probing a slow receiver's empty queue draws the RNR NAKs credits exist
/// to avoid.
pub const HOLDS_BEFORE_PROBING: u8 = 3;

/// Longest a credit-limited message is held, whatever the Local ACK Timeout:
/// four of the responder's slowest receive-queue rechecks
/// ([`CREDIT_WATCH_MAX_NS`]). A receiver that has not
/// posted by then is slow, and a probe (at worst one RNR NAK) answers sooner
/// than a wait of one ACK timeout, which consumers set to seconds (rdma-core's
/// rdma_cm test uses timeout 21, 8.6 s: three held Sends stalled it 26 s).
pub const MAX_CREDIT_HOLD_NS: u64 = 4 * CREDIT_WATCH_MAX_NS;

/// Transport state of one started send WQE.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SendSlot {
    /// Send queue index of the WQE.
    pub(super) index: u32,
    /// The WQE as it was when started.
    pub(super) wqe: SendWqe,
    /// Send sequence number (IBA 9.7.7.2); only wire messages get one.
    pub(super) ssn: Msn,
    /// PSN of the first request packet.
    pub(super) first_psn: Psn,
    /// PSNs occupied: request packets, or for a Read its response packets.
    /// Zero for local operations.
    pub(super) npkts: u32,
    /// Read response packets received (1 for an answered atomic).
    pub(super) resp_pkts: u32,
    /// Sent without enough end-to-end credits (IBA 9.7.7.2.4).
    pub(super) limited: bool,
    /// Final status, once the WQE has nothing left to wait for.
    pub(super) done: Option<WcStatus>,
}

impl SendSlot {
    pub(super) const fn last_psn(&self) -> Psn {
        self.first_psn.wrapping_add(self.npkts.saturating_sub(1))
    }

    pub(super) const fn contains(&self, psn: Psn) -> bool {
        self.npkts > 0 && psn.is_within(self.first_psn, self.last_psn())
    }
}

/// Number of PSNs a WQE occupies at path MTU `mtu`: one per request packet,
/// or one per response packet for an RDMA Read (IBA 9.7.1: the responder
/// numbers READ responses with the PSNs the request reserved).
pub(super) const fn npkts_for(wqe: &SendWqe, mtu: u32) -> u32 {
    match wqe.opcode {
        SendOpcode::Local(_) | SendOpcode::Unsupported => 0,
        SendOpcode::AtomicCmpSwap { .. }
        | SendOpcode::AtomicFetchAdd { .. }
        | SendOpcode::AtomicWrite { .. } => 1,
        _ => {
            if wqe.length == 0 {
                1
            } else {
                wqe.length.div_ceil(mtu)
            }
        }
    }
}

/// The requester half of a QP (plus, in `completer.rs`, its response
/// handling).
#[derive(Clone, Debug)]
pub(super) struct Requester {
    pub(super) slots: [SendSlot; MAX_INFLIGHT_WQES],
    pub(super) head: usize,
    pub(super) len: usize,
    /// Send queue index of the next WQE to start.
    pub(super) sq_next: u32,
    pub(super) next_ssn: Msn,
    pub(super) psn_next: Psn,
    pub(super) send_psn: Psn,
    pub(super) sent_high: Psn,
    pub(super) una: Psn,
    pub(super) retry_left: u8,
    pub(super) rnr_left: u8,
    pub(super) ack_deadline: Option<u64>,
    /// Consecutive local ACK timeouts without progress: each one doubles the next wait, up
    /// to [`MAX_TIMEOUT_SHIFT`].
    pub(super) backoff: u8,
    pub(super) rnr_deadline: Option<u64>,
    /// The PSN the last RNR NAK refused, until the sequence error NAK that
    /// may follow it or a response that makes progress (see
    /// `Requester::nak` in `completer.rs`).
    pub(super) rnr_refused: Option<Psn>,
    /// Latest MSN and credits from the responder; `None` credits means the
    /// responder gives no credit information (unlimited).
    pub(super) msn: Msn,
    pub(super) credits: Option<u32>,
    /// A credit-limited message is waiting for the ACK of this PSN before
    /// anything new is sent.
    pub(super) credit_wait: Option<Psn>,
    /// The responder has reported a credit count: a limited message waits
    /// for new credits (until `credit_hold`) rather than probe into an
    /// empty receive queue and draw an RNR NAK, unless holds keep running
    /// out (`holds_expired`).
    pub(super) peer_reports_credits: bool,
    /// Until when the next message, credit-limited, is held back.
    pub(super) credit_hold: Option<u64>,
    /// The hold ran out without new credits: the limited message probes.
    pub(super) probe_due: bool,
    /// Holds in a row that ran out, none ended by credits since (see
    /// [`HOLDS_BEFORE_PROBING`]).
    pub(super) holds_expired: u8,
    /// una at the last NAK-, implied-NAK- or timeout-triggered go-back;
    /// repeated evidence for the same loss is ignored until progress.
    pub(super) retry_guard: Option<Psn>,
    /// The request at `retry_guard` went again since: a sequence error NAK
    /// for it now answers the retransmission, and counts (IBA 17.2.8 names
    /// repeated NAKs for one request as a cause of exhaustion).
    pub(super) guard_resent: bool,
    pub(super) noack_pkts: u32,
    pub(super) drained_reported: bool,
    /// An RC WQE failed locally behind earlier ones still unacknowledged: it
    /// completes, with its status, once they have, and only then does the QP
    /// enter ERR (see [`Requester::fail_local`]); nothing starts meanwhile.
    pub(super) halted: bool,
    /// Events counted since the glue last drained them; a reset keeps them.
    pub(super) stats: QpStats,
}

/// Outcome of trying to start the next WQE.
enum Start {
    Nothing,
    Local,
    Wire,
}

impl Requester {
    pub(super) const fn new() -> Self {
        Self {
            slots: [SendSlot {
                index: 0,
                wqe: SendWqe {
                    wr_id: 0,
                    opcode: SendOpcode::Send,
                    flags: SendFlags::NONE,
                    length: 0,
                    remote: super::wqe::RemoteAddr { va: 0, rkey: 0 },
                    ud: super::wqe::UdDest {
                        dest_qpn: 0,
                        qkey: 0,
                        ah: 0,
                    },
                    xrc_srqn: 0,
                },
                ssn: Msn::ZERO,
                first_psn: Psn::ZERO,
                npkts: 0,
                resp_pkts: 0,
                limited: false,
                done: None,
            }; MAX_INFLIGHT_WQES],
            head: 0,
            len: 0,
            sq_next: 0,
            // IBA 9.7.7.2: the first WQE has SSN 1, the responder's MSN
            // starts at 0.
            next_ssn: Msn::new(1),
            psn_next: Psn::ZERO,
            send_psn: Psn::ZERO,
            sent_high: Psn::ZERO,
            una: Psn::ZERO,
            retry_left: 0,
            rnr_left: 0,
            ack_deadline: None,
            backoff: 0,
            rnr_deadline: None,
            rnr_refused: None,
            msn: Msn::ZERO,
            // No credits until the responder reports some (IBA 9.7.7.2.4).
            credits: Some(0),
            credit_wait: None,
            peer_reports_credits: false,
            credit_hold: None,
            probe_due: false,
            holds_expired: 0,
            retry_guard: None,
            guard_resent: false,
            noack_pkts: 0,
            drained_reported: false,
            halted: false,
            stats: QpStats::ZERO,
        }
    }

    /// Starts the send queue at `sq_consumer` (RESET to INIT).
    ///
    /// Resets in place: a requester is several kilobytes, too large to build
    /// a fresh one on a kernel stack and copy it over.
    pub(super) fn reset(&mut self, sq_consumer: u32) {
        const FRESH: Requester = Requester::new();
        for slot in &mut self.slots {
            *slot = FRESH.slots[0];
        }
        // Every scalar field, named so that a new field cannot be missed.
        let Self {
            slots: _,
            head,
            len,
            sq_next,
            next_ssn,
            psn_next,
            send_psn,
            sent_high,
            una,
            retry_left,
            rnr_left,
            ack_deadline,
            backoff,
            rnr_deadline,
            rnr_refused,
            msn,
            credits,
            credit_wait,
            peer_reports_credits,
            credit_hold,
            probe_due,
            holds_expired,
            retry_guard,
            guard_resent,
            noack_pkts,
            drained_reported,
            halted,
            stats: _,
        } = self;
        *head = FRESH.head;
        *len = FRESH.len;
        *sq_next = sq_consumer;
        *next_ssn = FRESH.next_ssn;
        *psn_next = FRESH.psn_next;
        *send_psn = FRESH.send_psn;
        *sent_high = FRESH.sent_high;
        *una = FRESH.una;
        *retry_left = FRESH.retry_left;
        *rnr_left = FRESH.rnr_left;
        *ack_deadline = FRESH.ack_deadline;
        *backoff = FRESH.backoff;
        *rnr_deadline = FRESH.rnr_deadline;
        *rnr_refused = FRESH.rnr_refused;
        *msn = FRESH.msn;
        *credits = FRESH.credits;
        *credit_wait = FRESH.credit_wait;
        *peer_reports_credits = FRESH.peer_reports_credits;
        *credit_hold = FRESH.credit_hold;
        *probe_due = FRESH.probe_due;
        *holds_expired = FRESH.holds_expired;
        *retry_guard = FRESH.retry_guard;
        *guard_resent = FRESH.guard_resent;
        *noack_pkts = FRESH.noack_pkts;
        *halted = FRESH.halted;
        *drained_reported = FRESH.drained_reported;
    }

    /// Loads the starting PSN and retry counters (RTR to RTS).
    pub(super) fn start(&mut self, attrs: &QpContext) {
        let psn = attrs.sq_psn;
        self.psn_next = psn;
        self.send_psn = psn;
        self.sent_high = psn;
        self.una = psn;
        self.reload_counters(attrs);
    }

    pub(super) fn reload_counters(&mut self, attrs: &QpContext) {
        self.retry_left = attrs.retry_cnt;
        self.rnr_left = attrs.rnr_retry;
    }

    pub(super) fn slot(&self, i: usize) -> &SendSlot {
        &self.slots[(self.head + i) % MAX_INFLIGHT_WQES]
    }

    pub(super) fn slot_mut(&mut self, i: usize) -> &mut SendSlot {
        &mut self.slots[(self.head + i) % MAX_INFLIGHT_WQES]
    }

    /// Position (from the oldest) of the slot whose PSN range holds `psn`.
    ///
    /// Every packet sent and every ACK looks one up, in a table a stream of
    /// small messages keeps full. The ACKed PSN is mostly in the oldest
    /// slot and the PSN sent in the newest, so those are tried first; then
    /// a binary search for the last slot beginning at or before `psn`.
    /// Slots hold consecutive PSN ranges in posting order (one without
    /// packets an empty range where the next begins): they take their PSNs
    /// from `psn_next`, which only RTR to RTS sets, with no slot in use,
    /// and which each WQE advances by its packets; the window keeps a
    /// table's span far below 2^23.
    pub(super) fn slot_of(&self, psn: Psn) -> Option<usize> {
        let newest = self.len.checked_sub(1)?;
        if self.slot(0).contains(psn) {
            return Some(0);
        }
        if self.slot(newest).contains(psn) {
            return Some(newest);
        }
        let oldest = self.slot(0).first_psn;
        let target = oldest.distance_to(psn);
        let (mut begun, mut after) = (0, self.len);
        while begun < after {
            let mid = (begun + after) / 2;
            if oldest.distance_to(self.slot(mid).first_psn) <= target {
                begun = mid + 1;
            } else {
                after = mid;
            }
        }
        begun
            .checked_sub(1)
            .filter(|&pos| self.slot(pos).contains(psn))
    }

    /// RDMA Reads and atomics started and not yet answered.
    fn outstanding_rd_atomic(&self) -> usize {
        (0..self.len)
            .filter(|&i| {
                let slot = self.slot(i);
                slot.wqe.opcode.is_read_or_atomic() && slot.done.is_none()
            })
            .count()
    }

    /// Receive-consuming messages started beyond the responder's MSN, up
    /// to `upto` slots from the oldest.
    fn consuming_in_flight(&self, upto: usize) -> usize {
        (0..upto)
            .filter(|&i| {
                let slot = self.slot(i);
                slot.wqe.opcode.consumes_recv_wqe() && slot.ssn.is_after(self.msn)
            })
            .count()
    }

    /// Whether one more credit-consuming message fits in the LSN: messages
    /// that need no receive WQE do not count against it (IBA 9.7.7.2.4,
    /// "LSN + 1 for each WQE that does not consume a receive WQE").
    fn has_credit_for_one_more(&self) -> bool {
        let Some(credits) = self.credits else {
            return true;
        };
        (self.consuming_in_flight(self.len) as u64) < u64::from(credits)
    }

    /// Whether the message in slot `pos` is within the LSN by now: a limited
    /// WQE stops being limited once the LSN reaches its SSN (IBA 9.7.7.2.4).
    fn within_lsn(&self, pos: usize) -> bool {
        let Some(credits) = self.credits else {
            return true;
        };
        (self.consuming_in_flight(pos + 1) as u64) <= u64::from(credits)
    }

    /// Whether a credit-limited message should wait rather than probe: only
    /// against a responder that reports credits and, by all evidence,
    /// announces new ones unsolicited (IBA 9.7.7.2.4 allows it any time; rrxe
    /// does, as receives are posted), and only for one Local ACK Timeout or
    /// [`MAX_CREDIT_HOLD_NS`], whichever is shorter (after which an update was
    /// lost, the receiver is slow, or the responder does not send them: see
    /// [`HOLDS_BEFORE_PROBING`]).
    fn hold_for_credit(&mut self, now: u64, attrs: &QpContext) -> bool {
        if self.probe_due
            || !self.peer_reports_credits
            || self.holds_expired >= HOLDS_BEFORE_PROBING
        {
            return false;
        }
        if self.credit_hold.is_some() {
            return true;
        }
        // With an infinite timeout nothing would end the wait.
        let Some(wait) = attrs.ack_timeout().timeout_ns() else {
            return false;
        };
        self.credit_hold = Some(now.saturating_add(wait.min(MAX_CREDIT_HOLD_NS)));
        self.stats.count(TransportEvent::CreditHeld);
        true
    }

    /// Whether the send queue has nothing in flight (for SQD).
    pub(super) fn is_idle(&self) -> bool {
        self.len == 0
    }

    /// Arms the local ACK timer if it is not running (IBA 9.7.6.1.1: the
    /// transport timer runs while any request is outstanding).
    fn arm_ack_timer(&mut self, now: u64, attrs: &QpContext) {
        if self.ack_deadline.is_none() {
            self.ack_deadline = self.ack_wait_ns(attrs).map(|t| now.saturating_add(t));
        }
    }

    /// How long to wait for an acknowledgement: the QP's Local ACK Timeout, doubled for
    /// each timeout in a row that brought no progress, up to four times it. IBA lets the
    /// timer expire anywhere between the timeout and four times it (9.7.6.1.3); backing off
    /// inside that range keeps a slow responder (a software one on a starved CPU) from being
    /// flooded with retransmitted requests, each of which it must answer again (a duplicate
    /// RDMA Read is re-executed), before it has answered the first.
    pub(super) fn ack_wait_ns(&self, attrs: &QpContext) -> Option<u64> {
        attrs
            .ack_timeout()
            .timeout_ns()
            .map(|t| t << self.backoff.min(MAX_TIMEOUT_SHIFT))
    }

    /// Rewinds transmission to the oldest unacknowledged PSN: RC recovers
    /// from any loss by go-back-N from there (IBA 9.7.6.1.4).
    pub(super) fn go_back(&mut self, now: u64, attrs: &QpContext) {
        self.send_psn = self.una;
        self.retry_guard = Some(self.una);
        self.guard_resent = false;
        self.ack_deadline = None;
        if self.una.is_before(self.sent_high) {
            self.arm_ack_timer(now, attrs);
        }
    }

    /// Starts over on a new path after a migration (IBA 17.2.8): the
    /// counters are reloaded and every unacknowledged request goes again,
    /// now over the new path, with MigReq = 1. Packets in flight on the old
    /// path are lost to the peer once it has migrated (they no longer come
    /// over its path), so waiting for their ACKs would only cost a timeout.
    pub(super) fn restart_on_new_path(&mut self, now: u64, attrs: &QpContext) {
        self.reload_counters(attrs);
        self.backoff = 0;
        self.rnr_deadline = None;
        self.rnr_refused = None;
        self.go_back(now, attrs);
    }

    #[inline]
    pub(super) fn poll_timeout(&self) -> Option<u64> {
        earliest(
            earliest(self.ack_deadline, self.rnr_deadline),
            self.credit_hold,
        )
    }

    /// Transport timer and RNR timer expiry (IBA 9.7.6.1.3, 9.7.5.2.8).
    pub(super) fn handle_timeout(&mut self, now: u64, attrs: &QpContext) -> Result<(), Fault> {
        if matches!(self.credit_hold, Some(d) if d <= now) {
            // No credit update came: probe; after a few in a row, stop
            // expecting updates until the responder sends one unsolicited.
            self.credit_hold = None;
            self.probe_due = true;
            self.holds_expired = self.holds_expired.saturating_add(1);
        }
        if matches!(self.rnr_deadline, Some(d) if d <= now) {
            self.rnr_deadline = None;
            self.send_psn = self.una;
            if self.una.is_before(self.sent_high) {
                self.arm_ack_timer(now, attrs);
            }
        }
        if matches!(self.ack_deadline, Some(d) if d <= now) {
            self.ack_deadline = None;
            if self.una.is_before(self.sent_high) {
                self.stats.count(TransportEvent::AckTimeout);
                // The retry counter counts retries, so retry_cnt = 7 allows
                // seven retransmissions after the first attempt.
                if self.retry_left == 0 {
                    return Err(Fault::RetryExhausted { rnr: false });
                }
                self.retry_left -= 1;
                self.backoff = self.backoff.saturating_add(1).min(MAX_TIMEOUT_SHIFT);
                self.go_back(now, attrs);
            }
        }
        Ok(())
    }

    /// Takes the next WQE off the send queue, if transport rules allow.
    fn start_next(&mut self, now: u64, attrs: &QpContext, io: &mut Io<'_>) -> Result<Start, Fault> {
        // An XRC target has no send queue of its own (IBA Annex A14): it
        // only answers.
        if attrs.qp_type == QpType::XrcTgt
            || self.halted
            || self.sq_next == io.sq.producer()
            || self.len == MAX_INFLIGHT_WQES
        {
            return Ok(Start::Nothing);
        }
        let Some(wqe) = io.sq.get(self.sq_next) else {
            return Ok(Start::Nothing);
        };
        let rc = attrs.service() == Service::Rc;
        // IBA 10.8.3.3: a fenced WQE waits for every earlier Read and atomic.
        if wqe.flags.contains(SendFlags::FENCE) && self.outstanding_rd_atomic() > 0 {
            return Ok(Start::Nothing);
        }
        // IBA 9.7.7 (responder resources): no more outstanding Reads and atomics than
        // the responder has resources for (the initiator depth).
        if wqe.opcode.is_read_or_atomic()
            && self.outstanding_rd_atomic() >= usize::from(attrs.max_rd_atomic.max(1))
        {
            return Ok(Start::Nothing);
        }
        let mtu = attrs.path_mtu.bytes() as u32;
        let invalid = match (attrs.service(), wqe.opcode) {
            (_, SendOpcode::Unsupported) => Some(WcStatus::LocQpOpErr),
            (_, SendOpcode::Local(_)) => None,
            // IBA 9.8: UC carries Send and RDMA Write only.
            (Service::Uc, op) if op.is_read_or_atomic() => Some(WcStatus::LocQpOpErr),
            (Service::Uc, SendOpcode::SendWithInv(_)) => Some(WcStatus::LocQpOpErr),
            // IBA 9.8.2: UD carries single-packet Sends only.
            (Service::Ud, SendOpcode::Send | SendOpcode::SendWithImm(_)) => {
                (wqe.length > mtu).then_some(WcStatus::LocLenErr)
            }
            (Service::Ud, _) => Some(WcStatus::LocQpOpErr),
            // An SRQN is 24 bits; IBA Annex A14 defines no XRC opcode for
            // Atomic Write.
            (_, op)
                if attrs.qp_type.is_xrc()
                    && (wqe.xrc_srqn > 0xFF_FFFF
                        || matches!(op, SendOpcode::AtomicWrite { .. })) =>
            {
                Some(WcStatus::LocQpOpErr)
            }
            // An initiator depth of 0 allows no RDMA Read or atomic at all
            // (IBA 11.2.4.2: the number of them this QP may have outstanding).
            (_, op) if op.uses_responder_resource() && attrs.max_rd_atomic == 0 => {
                Some(WcStatus::LocQpOpErr)
            }
            // IBA 9.4 (and the device's max_msg_sz): a message is at most 2^31 bytes; a
            // longer one is a local length error before any byte is read.
            _ if wqe.length > MAX_MESSAGE => Some(WcStatus::LocLenErr),
            _ => None,
        };
        let limited = rc
            && invalid.is_none()
            && wqe.opcode.consumes_recv_wqe()
            && !self.has_credit_for_one_more();
        if limited && self.hold_for_credit(now, attrs) {
            return Ok(Start::Nothing);
        }
        if !limited && self.credit_hold.is_some() {
            // Credits ended the hold: updates do come.
            self.holds_expired = 0;
        }
        self.credit_hold = None;
        if limited {
            self.probe_due = false;
            self.stats.count(TransportEvent::LimitedProbe);
        }
        let npkts = if invalid.is_some() {
            0
        } else {
            npkts_for(&wqe, mtu)
        };
        let ssn = self.next_ssn;
        if npkts > 0 {
            self.next_ssn = self.next_ssn.next();
        }
        let index = self.sq_next;
        self.sq_next = self.sq_next.wrapping_add(1);
        let pos = self.len;
        self.len += 1;
        *self.slot_mut(pos) = SendSlot {
            index,
            wqe,
            ssn,
            first_psn: self.psn_next,
            npkts,
            resp_pkts: 0,
            limited,
            done: invalid,
        };
        if let Some(status) = invalid {
            return self.fail_local(pos, status, attrs);
        }
        if let SendOpcode::Local(op) = wqe.opcode {
            return match io.mem.local_operation(&op) {
                Ok(()) => {
                    self.slot_mut(pos).done = Some(WcStatus::Success);
                    Ok(Start::Local)
                }
                Err(err) => self.fail_local(pos, err.status(), attrs),
            };
        }
        self.psn_next = self.psn_next.wrapping_add(npkts);
        Ok(Start::Wire)
    }

    /// The WQE at `pos`, the newest, failed locally with `status` before any
    /// packet of it left. On UC and UD, and on RC with nothing before it
    /// still in flight, the fault applies now. On RC with earlier WQEs
    /// unacknowledged, those were sent and may well have been executed: the
    /// requester starts nothing more but goes on taking their ACKs (and
    /// retransmitting them), so that they complete with their outcome rather
    /// than flushed, and the failed WQE completes after them, in order
    /// (IBA 10.8.3.1), moving the QP to ERR then ([`Requester::retire`]).
    fn fail_local(
        &mut self,
        pos: usize,
        status: WcStatus,
        attrs: &QpContext,
    ) -> Result<Start, Fault> {
        self.slot_mut(pos).done = Some(status);
        let waiting = (0..pos).any(|i| self.slot(i).done.is_none());
        if attrs.service() == Service::Rc && waiting {
            self.halted = true;
            return Ok(Start::Nothing);
        }
        Err(Fault::local(attrs.service()))
    }

    /// Whether [`Self::poll_transmit`] may have a packet: false only where it
    /// returns nothing before looking at the send queue's WQEs (not in RTS
    /// or SQD, an RNR wait, nothing sent to resend and no WQE to start).
    pub(super) fn may_transmit(&self, attrs: &QpContext, sq: &dyn SendQueue) -> bool {
        if !matches!(attrs.state, QpState::Rts | QpState::Sqd) || self.rnr_deadline.is_some() {
            return false;
        }
        self.send_psn != self.psn_next
            || (attrs.state == QpState::Rts
                && attrs.qp_type != QpType::XrcTgt
                && !self.halted
                && self.len < MAX_INFLIGHT_WQES
                && self.sq_next != sq.producer())
    }

    /// Builds the next request packet, new or retransmitted.
    pub(super) fn poll_transmit(
        &mut self,
        now: u64,
        buf: &mut [u8],
        attrs: &QpContext,
        io: &mut Io<'_>,
    ) -> Result<Option<Transmit>, Fault> {
        if !matches!(attrs.state, QpState::Rts | QpState::Sqd) || self.rnr_deadline.is_some() {
            return Ok(None);
        }
        // Local operations complete without a packet; bound the loop by the
        // slot table so a queue of them cannot spin forever.
        for _ in 0..=MAX_INFLIGHT_WQES {
            if self.send_psn == self.psn_next {
                // SQD (IBA 10.3.1.5) finishes in-flight WQEs but starts none.
                if attrs.state != QpState::Rts || self.blocked_for_new(attrs) {
                    return Ok(None);
                }
                match self.start_next(now, attrs, io)? {
                    Start::Nothing => return Ok(None),
                    Start::Local => continue,
                    Start::Wire => {}
                }
            } else if !self.send_psn.is_before(self.sent_high)
                && attrs.service() == Service::Rc
                && self.una.distance_to(self.sent_high) >= MAX_UNACKED_PSNS
            {
                // The window also bounds a long message's own packets: without
                // it a 1 MiB Send is a 1024-packet burst the responder (a
                // software one, with a bounded receive backlog) drops in part.
                return Ok(None);
            }
            return self.build(now, buf, attrs, io);
        }
        Ok(None)
    }

    /// Whether new (never sent) packets must wait: for an ACK that brings
    /// credits, or for the outstanding window to shrink. Inlined: asked on every
    /// run that may send (three a Read), mostly of a requester with nothing new.
    #[inline(always)]
    fn blocked_for_new(&mut self, attrs: &QpContext) -> bool {
        if self.credit_wait.is_some() && self.held_for_credits() {
            return true;
        }
        attrs.service() == Service::Rc && self.una.distance_to(self.sent_high) >= MAX_UNACKED_PSNS
    }

    /// Whether a limited packet still waits for credits, letting it go if
    /// not: released by the ACK of the limited packet, or by credits (an
    /// unsolicited ACK) that now cover its message.
    #[inline(never)]
    fn held_for_credits(&mut self) -> bool {
        let Some(wait) = self.credit_wait else {
            return false;
        };
        if self.una.is_after(wait) || self.slot_of(wait).is_some_and(|pos| self.within_lsn(pos)) {
            self.credit_wait = None;
            false
        } else {
            true
        }
    }

    fn build(
        &mut self,
        now: u64,
        buf: &mut [u8],
        attrs: &QpContext,
        io: &mut Io<'_>,
    ) -> Result<Option<Transmit>, Fault> {
        let psn = self.send_psn;
        let retransmission = psn.is_before(self.sent_high);
        if !retransmission && self.blocked_for_new(attrs) {
            return Ok(None);
        }
        let Some(pos) = self.slot_of(psn) else {
            // Nothing holds this PSN (its WQE was retired meanwhile).
            self.send_psn = self.psn_next;
            return Ok(None);
        };
        let slot = *self.slot(pos);
        let mtu = attrs.path_mtu.bytes() as u32;
        let k = slot.first_psn.distance_to(psn);
        let first = k == 0;
        let last = k + 1 == slot.npkts;
        let offset = k * mtu;
        let wqe = &slot.wqe;
        let mut ext = ExtHeaders::default();
        let mut payload_len = 0;
        let mut next_psn = psn.next();
        let opcode = match wqe.opcode {
            SendOpcode::Send
            | SendOpcode::SendWithImm(_)
            | SendOpcode::SendWithInv(_)
            | SendOpcode::RdmaWrite
            | SendOpcode::RdmaWriteWithImm(_) => {
                payload_len = (wqe.length - offset).min(mtu);
                let write = matches!(
                    wqe.opcode,
                    SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm(_)
                );
                if write && first {
                    ext.reth = Some(Reth {
                        va: wqe.remote.va,
                        rkey: wqe.remote.rkey,
                        dma_len: wqe.length,
                    });
                }
                if last {
                    match wqe.opcode {
                        SendOpcode::SendWithImm(imm) | SendOpcode::RdmaWriteWithImm(imm) => {
                            ext.imm_dt = Some(ImmDt { imm_data: imm });
                        }
                        SendOpcode::SendWithInv(rkey) => ext.ieth = Some(Ieth { rkey }),
                        _ => {}
                    }
                }
                message_opcode(attrs.service(), wqe.opcode, first, last)
            }
            SendOpcode::RdmaRead => {
                // A retransmitted Read asks only for the responses still
                // missing, at their own PSN (IBA 9.7.4.1.4: the responder
                // may resume a READ from any packet boundary).
                ext.reth = Some(Reth {
                    va: wqe.remote.va.wrapping_add(u64::from(offset)),
                    rkey: wqe.remote.rkey,
                    dma_len: wqe.length - offset.min(wqe.length),
                });
                next_psn = slot.last_psn().next();
                codes::RC_RDMA_READ_REQUEST
            }
            SendOpcode::AtomicCmpSwap { compare, swap } => {
                ext.atomic_eth = Some(AtomicEth {
                    va: wqe.remote.va,
                    rkey: wqe.remote.rkey,
                    swap_add: swap,
                    compare,
                });
                codes::RC_COMPARE_SWAP
            }
            SendOpcode::AtomicFetchAdd { add } => {
                ext.atomic_eth = Some(AtomicEth {
                    va: wqe.remote.va,
                    rkey: wqe.remote.rkey,
                    swap_add: add,
                    compare: 0,
                });
                codes::RC_FETCH_ADD
            }
            SendOpcode::AtomicWrite { .. } => {
                payload_len = 8;
                ext.reth = Some(Reth {
                    va: wqe.remote.va,
                    rkey: wqe.remote.rkey,
                    dma_len: 8,
                });
                codes::RC_ATOMIC_WRITE
            }
            SendOpcode::Local(_) | SendOpcode::Unsupported => return Err(Fault::Internal),
        };
        // IBA Annex A14: an XRC request is RC's with the XRC opcode base and
        // an XRCETH naming the remote XRC SRQ, in every packet.
        let opcode = if attrs.qp_type.is_xrc() {
            ext.xrceth = Some(Xrceth {
                xrc_srq: wqe.xrc_srqn,
            });
            codes::XRC_BASE + opcode
        } else {
            opcode
        };
        let (dest_qp, dest) = if attrs.service() == Service::Ud {
            // IBA 10.2.5: a WR Q_Key with the high bit set means "use the
            // QP's own Q_Key".
            let qkey = if wqe.ud.qkey & 0x8000_0000 != 0 {
                attrs.qkey
            } else {
                wqe.ud.qkey
            };
            ext.deth = Some(Deth {
                qkey,
                src_qp: attrs.qpn,
            });
            (wqe.ud.dest_qpn, Dest::Ah(wqe.ud.ah))
        } else {
            // INIT to RTR requires the primary path's address vector.
            let path = attrs.primary.av.ok_or(Fault::Internal)?;
            (attrs.dest_qpn, Dest::Path(path))
        };
        let rc = attrs.service() == Service::Rc;
        let mut ack_req = rc
            && (last || wqe.opcode.is_read_or_atomic() || self.noack_pkts + 1 >= MAX_PKTS_PER_ACK);
        // IBA 9.7.7.2.4: without credits a Send may only send its first
        // packet, with AckReq, and must wait for the ACK; a retransmitted
        // one (after an RNR NAK, a loss or a timeout) asks again, or the
        // responder would take it silently and the rest of the message wait
        // for a timeout. A limited RDMA Write with Immediate needs its
        // receive WQE only at the last packet: it goes whole, and the last
        // packet asks anyway.
        if slot.limited && first && wqe.opcode.consumes_recv_wqe_at_first() {
            ack_req |= rc;
        }
        let solicited =
            last && wqe.flags.contains(SendFlags::SOLICITED) && wqe.opcode.consumes_recv_wqe();
        let bth = Bth {
            opcode,
            solicited_event: solicited,
            mig_req: attrs.mig_req(),
            pkey: attrs.pkey(),
            dest_qp,
            ack_req,
            psn,
            ..Bth::default()
        };
        let len = write_with(buf, &bth, &ext, payload_len as usize, |dst| {
            match wqe.opcode {
                // The value travels in the WQE itself, not in a gather list.
                SendOpcode::AtomicWrite { value } => {
                    for (d, s) in dst.iter_mut().zip(value) {
                        *d = s;
                    }
                    Ok(())
                }
                _ => io.mem.gather(&*io.sq, slot.index, offset, dst),
            }
        });
        let len = match len {
            Ok(len) => len,
            Err(WriteError::Local(err)) => {
                // The first packet of the newest WQE, never sent: the WQE gives its
                // PSNs (and SSN) back, having sent nothing, and fails as one refused
                // at its start does.
                if first && !retransmission && pos + 1 == self.len {
                    self.psn_next = psn;
                    if slot.npkts > 0 {
                        self.next_ssn = slot.ssn;
                    }
                    self.slot_mut(pos).npkts = 0;
                    return self.fail_local(pos, err.status(), attrs).map(|_| None);
                }
                self.slot_mut(pos).done = Some(err.status());
                return Err(Fault::local(attrs.service()));
            }
            Err(WriteError::Packet) => return Err(Fault::Internal),
        };

        self.noack_pkts = if ack_req { 0 } else { self.noack_pkts + 1 };
        self.send_psn = next_psn;
        if self.retry_guard == Some(psn) {
            self.guard_resent = true;
        }
        if !retransmission {
            self.sent_high = next_psn;
            // The packet that takes the receive WQE is the one to wait on:
            // its ACK proves the WQE was there (a Send's remaining packets
            // then need none).
            let takes_wqe = if wqe.opcode.consumes_recv_wqe_at_first() {
                first
            } else {
                last
            };
            if slot.limited && takes_wqe {
                self.credit_wait = Some(psn);
            }
        }
        if rc {
            self.arm_ack_timer(now, attrs);
        } else {
            // IBA 9.8: UC and UD requests are never acknowledged; a WQE is
            // done once its last packet is on the wire.
            self.una = self.sent_high;
            if last {
                self.slot_mut(pos).done = Some(WcStatus::Success);
            }
        }
        Ok(Some(Transmit {
            len,
            dest_qpn: dest_qp,
            dest,
            retransmission,
        }))
    }
}

/// The Send / RDMA Write opcode for a packet's position in its message.
fn message_opcode(service: Service, op: SendOpcode, first: bool, last: bool) -> u8 {
    use codes::*;
    let rc = match (op, first, last) {
        (SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm(_), true, false) => {
            RC_RDMA_WRITE_FIRST
        }
        (SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm(_), false, false) => {
            RC_RDMA_WRITE_MIDDLE
        }
        (SendOpcode::RdmaWrite, false, true) => RC_RDMA_WRITE_LAST,
        (SendOpcode::RdmaWrite, true, true) => RC_RDMA_WRITE_ONLY,
        (SendOpcode::RdmaWriteWithImm(_), false, true) => RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (SendOpcode::RdmaWriteWithImm(_), true, true) => RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        (_, true, false) => RC_SEND_FIRST,
        (_, false, false) => RC_SEND_MIDDLE,
        (SendOpcode::SendWithImm(_), false, true) => RC_SEND_LAST_WITH_IMMEDIATE,
        (SendOpcode::SendWithImm(_), true, true) => RC_SEND_ONLY_WITH_IMMEDIATE,
        (SendOpcode::SendWithInv(_), false, true) => RC_SEND_LAST_WITH_INVALIDATE,
        (SendOpcode::SendWithInv(_), true, true) => RC_SEND_ONLY_WITH_INVALIDATE,
        (_, false, true) => RC_SEND_LAST,
        (_, true, true) => RC_SEND_ONLY,
    };
    match service {
        Service::Rc => rc,
        Service::Uc => UC_BASE + rc,
        Service::Ud => match op {
            SendOpcode::SendWithImm(_) => UD_SEND_ONLY_WITH_IMMEDIATE,
            _ => UD_SEND_ONLY,
        },
    }
}

/// Why a packet could not be written.
pub(super) enum WriteError<E> {
    /// The payload source failed.
    Local(E),
    /// The headers did not match the opcode or the buffer was too short:
    /// an engine bug, never a peer's doing.
    Packet,
}

/// Writes BTH, extended headers, a `payload_len`-byte payload produced in
/// place by `fill` (so no bounce buffer is needed on the kernel stack),
/// zero pad and a zeroed ICRC slot; returns the packet length.
pub(super) fn write_with<E>(
    buf: &mut [u8],
    bth: &Bth,
    ext: &ExtHeaders,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> Result<usize, WriteError<E>> {
    let pad_count = packet::pad_count(payload_len);
    let bth = Bth { pad_count, ..*bth };
    let header_len = packet::write_headers(buf, &bth, ext).map_err(|_| WriteError::Packet)?;
    let pad = usize::from(pad_count);
    let total = header_len + payload_len + pad + ICRC_LEN;
    let Some(rest) = buf.get_mut(header_len..total) else {
        return Err(WriteError::Packet);
    };
    let (payload, trailer) = rest.split_at_mut(payload_len);
    fill(payload).map_err(WriteError::Local)?;
    trailer.fill(0);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary search finds what a scan of the table finds, for every
    /// PSN around a full table of mixed WQEs (some without packets) that
    /// wraps through PSN 0 and starts anywhere in the ring.
    #[test]
    fn slot_of_agrees_with_a_scan() {
        let sizes = [1, 0, 3, 1, 0, 0, 2, 17, 1, 1, 0, 4];
        for head in [0, 5, MAX_INFLIGHT_WQES - 1] {
            for filled in [0, 1, 2, 7, MAX_INFLIGHT_WQES] {
                let mut r = Requester::new();
                r.head = head;
                let mut next = Psn::new(0xFF_FFF0);
                for pos in 0..filled {
                    let npkts = sizes[pos % sizes.len()];
                    r.len += 1;
                    *r.slot_mut(pos) = SendSlot {
                        first_psn: next,
                        npkts,
                        ..SendSlot::default()
                    };
                    next = next.wrapping_add(npkts);
                }
                let from = Psn::new(0xFF_FF00);
                for k in 0..0x200 {
                    let psn = from.wrapping_add(k);
                    let scanned = (0..r.len).find(|&i| r.slot(i).contains(psn));
                    assert_eq!(r.slot_of(psn), scanned, "head {head} len {filled} {psn:?}");
                }
            }
        }
    }
}
