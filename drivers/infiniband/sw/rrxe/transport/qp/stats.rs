// SPDX-License-Identifier: GPL-2.0

//! Transport events a QP counts, for the device's `rdma statistic` counters.
//!
//! The engine only counts; the glue drains the counts after each call
//! ([`super::Qp::take_stats`]) into per-device counters, so the engine keeps no
//! totals and needs no atomics.

/// A transport event worth counting. The discriminant indexes [`QpStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum TransportEvent {
    /// The local ACK timer expired with requests outstanding (IBA 9.7.6.1.3).
    AckTimeout,
    /// A PSN sequence error NAK was received (IBA 9.7.5.2.1).
    SeqNakRcvd,
    /// An RNR NAK was received and waited out (IBA 9.7.5.2.8); a repeat of the
    /// one being waited out is not counted again.
    RnrNakRcvd,
    /// A fatal NAK was received: invalid request, remote access or remote
    /// operational error (IBA 9.7.5.2.4-6).
    ErrorNakRcvd,
    /// A Read response or Atomic acknowledge arrived beyond the expected PSN
    /// and was acted upon as an implied NAK (IBA 9.7.6.1.4).
    ImpliedNak,
    /// The transport retry counter ran out (IBA 9.7.6.1.3).
    RetryExceeded,
    /// The RNR retry counter ran out (IBA 9.7.5.2.8).
    RnrRetryExceeded,
    /// A PSN sequence error NAK was sent.
    SeqNakSent,
    /// An RNR NAK was sent: no receive WQE was posted for a message.
    RnrNakSent,
    /// A fatal NAK was sent.
    ErrorNakSent,
    /// A request behind the ePSN arrived (IBA 9.7.5.1.5): re-acknowledged,
    /// a Read re-executed, an Atomic answered from its saved result.
    DuplicateRequest,
    /// A request beyond the ePSN arrived and was dropped (IBA 9.7.5.1.3; the
    /// first of a run also causes a sequence error NAK).
    OutOfSeqRequest,
    /// A Read response or Atomic acknowledge for a PSN already completed, or
    /// never sent, was ignored (IBA 9.7.6.1.2): the answer to a request that
    /// was retransmitted although its first answer was only late.
    DuplicateResponse,
    /// A packet for a connected QP that did not come over its path (its
    /// addresses are not those of the QP's address vector) was dropped
    /// (IBA 9.6.1.1).
    WrongPath,
    /// A packet whose P_Key is not the QP's partition was dropped (IBA
    /// 10.9.3, a P_Key violation).
    PkeyViolation,
    /// A message that needs a receive WQE was held back: the responder's
    /// last credit count did not cover it, and it reports new credits
    /// unsolicited (IBA 9.7.7.2.4). Counted once per wait.
    CreditHeld,
    /// A credit-limited message went out: a Send's first packet alone with
    /// AckReq, or a whole RDMA Write with Immediate asking for its ACK on the
    /// last packet (IBA 9.7.7.2.4).
    LimitedProbe,
    /// An unsolicited ACK was sent: the initial credits at INIT to RTR, or a
    /// credit update when receives were posted (IBA 9.7.7.2.4).
    UnsolicitedAck,
    /// The retry counter ran out with an armed alternate path, and the QP
    /// migrated to it instead of failing (IBA 17.2.8).
    MigratedOnRetryExhaustion,
    /// Software migrated the armed QP (Modify QP to MIGRATED).
    MigratedOnCommand,
    /// The peer's migration request (MigReq = 1 over the alternate path)
    /// migrated the armed QP.
    MigratedOnPeerRequest,
    /// A migration request that did not come over the alternate path was
    /// dropped (IBA 17.2.8, Path Migration Request Failed).
    MigrationRefused,
    /// A packet of another transport service than the QP's (an XRC or UD
    /// opcode at an RC QP, say) was dropped (IBA 9.6.1, BTH OpCode check).
    WrongTransport,
    /// A packet arrived in a state that takes none of its kind and was
    /// dropped (IBA 10.3.1): any packet in RESET, INIT or ERR, a request
    /// before RTR, a response while the requester is not running.
    NotReady,
    /// A response the requester could not act upon was dropped: an ACK or
    /// NAK for a PSN never sent, a NAK behind the oldest unacknowledged PSN,
    /// a positive ACK behind the last PSN acknowledged (a ghost, whose MSN
    /// and credits are not taken: IBA 9.7.7.2.4), a repeat of the RNR NAK
    /// being waited out, a response that does not fit the request at its
    /// PSN (IBA 9.7.6.1.2), or a further out-of-place response of a loss
    /// already acted upon as an implied NAK.
    IgnoredResponse,
    /// A UD datagram whose Q_Key is not the QP's was dropped (IBA 10.2.5).
    QkeyViolation,
    /// A request was dropped for want of a resource: a UD datagram with no
    /// receive WQE posted (IBA 9.8.2), or a request that would complete a
    /// WQE while the completion ring is full (RC retransmits it).
    NoResources,
    /// A UC packet was dropped (IBA 9.8.3): the rest of a message after a
    /// PSN gap, or a request that failed the responder's checks.
    UcDropped,
    /// An XRC request named an XRC SRQ that does not exist or belongs to
    /// another XRC domain than the target QP's, and was refused with NAK
    /// Remote Access Error (IBA Annex A14).
    XrcSrqRefused,
}

impl TransportEvent {
    /// Number of events.
    pub const COUNT: usize = 29;

    /// Every event, in discriminant order.
    pub const ALL: [Self; Self::COUNT] = [
        Self::AckTimeout,
        Self::SeqNakRcvd,
        Self::RnrNakRcvd,
        Self::ErrorNakRcvd,
        Self::ImpliedNak,
        Self::RetryExceeded,
        Self::RnrRetryExceeded,
        Self::SeqNakSent,
        Self::RnrNakSent,
        Self::ErrorNakSent,
        Self::DuplicateRequest,
        Self::OutOfSeqRequest,
        Self::DuplicateResponse,
        Self::WrongPath,
        Self::PkeyViolation,
        Self::CreditHeld,
        Self::LimitedProbe,
        Self::UnsolicitedAck,
        Self::MigratedOnRetryExhaustion,
        Self::MigratedOnCommand,
        Self::MigratedOnPeerRequest,
        Self::MigrationRefused,
        Self::WrongTransport,
        Self::NotReady,
        Self::IgnoredResponse,
        Self::QkeyViolation,
        Self::NoResources,
        Self::UcDropped,
        Self::XrcSrqRefused,
    ];
}

/// Counts of [`TransportEvent`]s since the last drain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpStats {
    counts: [u32; TransportEvent::COUNT],
    /// Whether anything was counted: the driver drains the counts after every task run,
    /// most of which count nothing, and a guest spent a microsecond a run going through the
    /// array to find that out.
    counted: bool,
}

impl QpStats {
    /// No events.
    pub const ZERO: Self = Self {
        counts: [0; TransportEvent::COUNT],
        counted: false,
    };

    /// Counts one `event`.
    pub(super) fn count(&mut self, event: TransportEvent) {
        let c = &mut self.counts[event as usize];
        *c = c.wrapping_add(1);
        self.counted = true;
    }

    /// The count of `event`.
    #[must_use]
    pub const fn get(&self, event: TransportEvent) -> u32 {
        self.counts[event as usize]
    }

    /// Whether nothing was counted.
    #[must_use]
    pub const fn is_zero(&self) -> bool {
        !self.counted
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Self) {
        if !other.counted {
            return;
        }
        for (c, o) in self.counts.iter_mut().zip(other.counts) {
            *c = c.wrapping_add(o);
        }
        self.counted = true;
    }

    /// Returns the counts and starts again from zero.
    pub(super) fn take(&mut self) -> Self {
        core::mem::replace(self, Self::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_discriminant_order() {
        for (i, e) in TransportEvent::ALL.iter().enumerate() {
            assert_eq!(*e as usize, i);
        }
    }

    #[test]
    fn take_drains() {
        let mut s = QpStats::ZERO;
        s.count(TransportEvent::AckTimeout);
        s.count(TransportEvent::AckTimeout);
        s.count(TransportEvent::DuplicateResponse);
        assert!(!s.is_zero());
        let t = s.take();
        assert!(s.is_zero());
        assert_eq!(t.get(TransportEvent::AckTimeout), 2);
        assert_eq!(t.get(TransportEvent::DuplicateResponse), 1);
        let mut sum = QpStats::ZERO;
        sum.add(&t);
        sum.add(&t);
        assert_eq!(sum.get(TransportEvent::AckTimeout), 4);
    }
}
