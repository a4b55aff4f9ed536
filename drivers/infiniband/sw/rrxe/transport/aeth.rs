// SPDX-License-Identifier: GPL-2.0

//! AETH syndrome and end-to-end credits.
//!
//! The top byte of the ACK Extended Transport Header is the syndrome
//! (IBA 9.7.5.1; table 17-3 of the MindShare InfiniBand book):
//!
//! ```text
//!   bit 7    bits 6..5           bits 4..0
//!   0        00 ACK              credit count (IBA 9.7.7.2; book table 17-8)
//!   0        01 RNR NAK          minimum RNR NAK timer (IBA table 45)
//!   0        10 reserved
//!   0        11 NAK              NAK code
//! ```
//!
//! Anything with bit 7 set, the reserved type, or an undefined NAK code is
//! rejected: a responder must never produce it, and a requester cannot know
//! what it means.

use super::psn::Msn;
use super::timer::RnrTimer;

/// First recheck of its receive queue by a responder that advertised zero
/// credits, so that receives posted later reach the held requester in an
/// unsolicited ACK (IBA 9.7.7.2); each next recheck waits twice as long, up
/// to [`CREDIT_WATCH_MAX_NS`], for [`CREDIT_WATCH_SPAN_NS`] in all. Here
/// because the requester's longest hold is derived from it.
///
/// A consumer polling its CQ reposts soon after the completion, which is
/// delivered at the end of the run that took the last credit: the first
/// recheck is early, and the doubling costs a receiver that sleeps for T
/// only log2(T / 250 us) more runs. (At 1 ms, perftest's `ib_send_bw -r 1`
/// in loopback through rdma-core's provider, which posts without a system
/// call, ran at 0.6 of its rate at 250 us; Documentation/rrxe/benchmarks.rst.)
pub const CREDIT_WATCH_FIRST_NS: u64 = 250_000;
/// Longest wait between rechecks: well under the shortest Local ACK Timeout
/// a requester holding for credits is likely to use (perftest's, 67 ms).
pub const CREDIT_WATCH_MAX_NS: u64 = 16_000_000;
/// How long after its credits ran out a requester may still be waiting.
pub const CREDIT_WATCH_SPAN_NS: u64 = 1_000_000_000;

/// Errors decoding an AETH syndrome byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AethError {
    /// The syndrome uses a reserved encoding (bit 7 set, type `10b`, or a
    /// NAK code above 4). Carries the offending byte.
    ReservedSyndrome(u8),
}

/// Decoded 5-bit credit count of an ACK syndrome (IBA 9.7.7.2 / table 17-8).
///
/// The code is a floating-point-like encoding of the number of receive WQEs
/// the responder has posted beyond the MSN, so large queues can be reported
/// in five bits at the price of precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct CreditCode(u8);

/// Table 17-8: credit value for codes `00000b..=11110b`; `11111b` means the
/// responder does not report credits.
const CREDIT_VALUES: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

impl CreditCode {
    /// Code `11111b`: "no credit information", sent by responders that do
    /// not do end-to-end flow control (allowed for TCAs and for SRQs), which
    /// the requester treats as unlimited credits.
    pub const NO_CREDIT_INFO: Self = Self(0x1F);

    /// Builds a credit code from the low 5 bits of `raw`.
    #[inline]
    #[must_use]
    pub const fn from_bits(raw: u8) -> Self {
        Self(raw & 0x1F)
    }

    /// The 5-bit code.
    #[inline]
    #[must_use]
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The largest code whose value does not exceed `posted_wqes`.
    ///
    /// Rounding down is mandatory: reporting more credits than WQEs are
    /// posted would let the requester send a message the responder must then
    /// RNR NAK, which the credit mechanism exists to avoid.
    ///
    /// Every AETH a responder sends carries one, so it is computed from
    /// the table's shape rather than by searching it: past 4 the values go
    /// 2^k (code 2k) and 1.5 * 2^k (code 2k + 1), up to 2^15 (code 30).
    #[must_use]
    pub const fn from_posted_wqes(posted_wqes: u32) -> Self {
        const TOP: usize = CREDIT_VALUES.len() - 1;
        let code = if posted_wqes <= 4 {
            posted_wqes
        } else if posted_wqes >= CREDIT_VALUES[TOP] {
            TOP as u32
        } else {
            let k = 31 - posted_wqes.leading_zeros();
            2 * k + (posted_wqes >= 3 << (k - 1)) as u32
        };
        Self(code as u8)
    }

    /// Number of credits the code stands for, or `None` for
    /// [`CreditCode::NO_CREDIT_INFO`].
    #[inline]
    #[must_use]
    pub const fn credits(self) -> Option<u32> {
        if self.0 as usize >= CREDIT_VALUES.len() {
            None
        } else {
            Some(CREDIT_VALUES[self.0 as usize])
        }
    }

    /// The Limit Sequence Number: the last SSN the requester may start,
    /// MSN + credits modulo 2^24 (IBA 9.7.7.2); `None` if the responder
    /// gave no credit information.
    #[inline]
    #[must_use]
    pub const fn lsn(self, msn: Msn) -> Option<Msn> {
        match self.credits() {
            Some(credits) => Some(msn.wrapping_add(credits)),
            None => None,
        }
    }
}

/// NAK codes of the AETH syndrome (IBA 9.7.5.1, syndrome `011xxxxxb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NakCode {
    /// A request arrived with a PSN ahead of the ePSN; the requester must
    /// retransmit from the PSN carried in this NAK.
    PsnSequenceError = 0,
    /// Unsupported or malformed request (bad opcode sequence, length, ...).
    InvalidRequest = 1,
    /// R_Key, bounds or access-rights violation on an RDMA/atomic target.
    RemoteAccessError = 2,
    /// The responder failed for a reason unrelated to the request content.
    RemoteOperationalError = 3,
    /// RD only: the request did not match the EE context.
    InvalidRdRequest = 4,
}

impl NakCode {
    /// Decodes a 5-bit NAK code, or `None` for the reserved values 5..=31.
    #[inline]
    #[must_use]
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Self::PsnSequenceError,
            1 => Self::InvalidRequest,
            2 => Self::RemoteAccessError,
            3 => Self::RemoteOperationalError,
            4 => Self::InvalidRdRequest,
            _ => return None,
        })
    }

    /// Whether the requester recovers by retransmitting, as opposed to
    /// completing the WQE in error and moving the QP to the error state.
    #[inline]
    #[must_use]
    pub const fn is_retryable(self) -> bool {
        matches!(self, Self::PsnSequenceError)
    }
}

/// The decoded 8-bit AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement, carrying the responder's credit count.
    Ack(CreditCode),
    /// Receiver Not Ready: no receive WQE was posted; retry after the timer.
    RnrNak(RnrTimer),
    /// Negative acknowledgement.
    Nak(NakCode),
}

const TYPE_MASK: u8 = 0xE0;
const VALUE_MASK: u8 = 0x1F;
const TYPE_ACK: u8 = 0x00;
const TYPE_RNR_NAK: u8 = 0x20;
const TYPE_NAK: u8 = 0x60;

impl Syndrome {
    /// An ACK reporting no credit information.
    pub const ACK_NO_CREDIT_INFO: Self = Self::Ack(CreditCode::NO_CREDIT_INFO);

    /// Decodes a syndrome byte, rejecting reserved encodings.
    pub const fn from_byte(byte: u8) -> Result<Self, AethError> {
        let value = byte & VALUE_MASK;
        match byte & TYPE_MASK {
            TYPE_ACK => Ok(Self::Ack(CreditCode::from_bits(value))),
            TYPE_RNR_NAK => Ok(Self::RnrNak(RnrTimer::from_bits(value))),
            TYPE_NAK => match NakCode::from_code(value) {
                Some(code) => Ok(Self::Nak(code)),
                None => Err(AethError::ReservedSyndrome(byte)),
            },
            _ => Err(AethError::ReservedSyndrome(byte)),
        }
    }

    /// Encodes the syndrome byte.
    #[inline]
    #[must_use]
    pub const fn to_byte(self) -> u8 {
        match self {
            Self::Ack(credits) => TYPE_ACK | credits.code(),
            Self::RnrNak(timer) => TYPE_RNR_NAK | timer.code(),
            Self::Nak(code) => TYPE_NAK | code as u8,
        }
    }

    /// Whether this is a positive acknowledgement.
    #[inline]
    #[must_use]
    pub const fn is_ack(self) -> bool {
        matches!(self, Self::Ack(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn credit_table_17_8() {
        let expected = [
            0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
            1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
        ];
        for (code, value) in expected.iter().enumerate() {
            assert_eq!(CreditCode::from_bits(code as u8).credits(), Some(*value));
        }
        assert_eq!(CreditCode::from_bits(0b11111).credits(), None);
        assert_eq!(CreditCode::NO_CREDIT_INFO.code(), 0b11111);
    }

    #[test]
    fn credit_encoding_rounds_down() {
        let enc = |n| CreditCode::from_posted_wqes(n).code();
        assert_eq!(enc(0), 0);
        assert_eq!(enc(4), 4);
        assert_eq!(enc(5), 4);
        assert_eq!(enc(6), 5);
        assert_eq!(enc(7), 5);
        assert_eq!(enc(100), 13); // 96
        assert_eq!(enc(32767), 29); // 24576
        assert_eq!(enc(32768), 30);
        assert_eq!(enc(u32::MAX), 30);
    }

    #[test]
    fn encoding_agrees_with_a_search_of_the_table() {
        for n in 0..=2 * CREDIT_VALUES[CREDIT_VALUES.len() - 1] {
            let searched = CREDIT_VALUES.iter().rposition(|&v| v <= n).unwrap();
            assert_eq!(
                CreditCode::from_posted_wqes(n).code() as usize,
                searched,
                "{n}"
            );
        }
    }

    #[test]
    fn lsn_from_msn_and_credits() {
        // Book figure 17-18: MSN 18h + 6 credits = LSN 1Eh.
        let code = CreditCode::from_posted_wqes(6);
        assert_eq!(code.lsn(Msn::new(0x18)), Some(Msn::new(0x1E)));
        assert_eq!(
            CreditCode::from_posted_wqes(8).lsn(Msn::new(0xFF_FFFC)),
            Some(Msn::new(4))
        );
        assert_eq!(CreditCode::NO_CREDIT_INFO.lsn(Msn::ZERO), None);
    }

    #[test]
    fn syndrome_decoding() {
        assert_eq!(Syndrome::from_byte(0x1F), Ok(Syndrome::ACK_NO_CREDIT_INFO));
        assert_eq!(
            Syndrome::from_byte(0x2E),
            Ok(Syndrome::RnrNak(RnrTimer::new(14).unwrap()))
        );
        assert_eq!(
            Syndrome::from_byte(0x60),
            Ok(Syndrome::Nak(NakCode::PsnSequenceError))
        );
        assert_eq!(
            Syndrome::from_byte(0x64),
            Ok(Syndrome::Nak(NakCode::InvalidRdRequest))
        );
        for reserved in [0x40, 0x5F, 0x65, 0x7F, 0x80, 0xFF] {
            assert_eq!(
                Syndrome::from_byte(reserved),
                Err(AethError::ReservedSyndrome(reserved))
            );
        }
    }

    #[test]
    fn only_psn_error_is_retryable() {
        assert!(NakCode::PsnSequenceError.is_retryable());
        assert!(!NakCode::RemoteAccessError.is_retryable());
    }

    proptest! {
        #[test]
        fn encoding_never_over_reports(n in any::<u32>()) {
            let code = CreditCode::from_posted_wqes(n);
            let credits = code.credits().unwrap();
            prop_assert!(credits <= n);
            // The next code up, if any, would over-report.
            if let Some(next) = CreditCode::from_bits(code.code() + 1).credits() {
                prop_assert!(next > n);
            }
        }

        #[test]
        fn syndrome_roundtrips(byte in any::<u8>()) {
            if let Ok(s) = Syndrome::from_byte(byte) {
                prop_assert_eq!(s.to_byte(), byte);
            }
        }
    }
}
