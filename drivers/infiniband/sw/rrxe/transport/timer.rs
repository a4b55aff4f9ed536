// SPDX-License-Identifier: GPL-2.0

//! Encoded timer values of the RC transport.
//!
//! Two 5-bit codes travel in QP attributes and on the wire and must be turned
//! into durations: the minimum RNR NAK timer (the value field of an RNR NAK
//! AETH syndrome, encoded per IBA table 45) and the local ACK timeout (the
//! Local ACK Timeout attribute of Modify QP, IBA chapter 11, which arms the
//! requester's transport timer of IBA 9.7.6). Durations are returned in
//! nanoseconds, the unit of kernel `ktime`, and only computed here, never
//! waited on.

/// The earlier of two optional deadlines (ns), `None` only if both are: a
/// QP's next deadline is the earliest of its timers'. Written out rather than
/// as an iterator's `min`: the engine is asked a few times a packet.
#[inline]
#[must_use]
pub fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Nanoseconds in the 10 µs unit that the RNR timer table is expressed in.
const RNR_UNIT_NS: u64 = 10_000;

/// IBA table 45, in units of 10 µs. The encoding is roughly logarithmic with
/// two steps per doubling; code 0 is the longest delay rather than the
/// shortest so that an all-zero field errs on the side of backing off.
const RNR_DELAY_10US: [u32; 32] = [
    65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
];

/// Minimum RNR NAK timer code (IBA table 45): how long a requester must wait
/// after an RNR NAK before retrying.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct RnrTimer(u8);

impl RnrTimer {
    /// Largest valid code.
    pub const MAX_CODE: u8 = 31;

    /// Builds a timer code, or `None` if `code` does not fit in 5 bits.
    #[inline]
    #[must_use]
    pub const fn new(code: u8) -> Option<Self> {
        if code > Self::MAX_CODE {
            None
        } else {
            Some(Self(code))
        }
    }

    /// Builds a timer code from the low 5 bits of `raw`, as found in the
    /// AETH syndrome.
    #[inline]
    #[must_use]
    pub const fn from_bits(raw: u8) -> Self {
        Self(raw & Self::MAX_CODE)
    }

    /// The 5-bit code.
    #[inline]
    #[must_use]
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The delay this code stands for, in nanoseconds.
    #[inline]
    #[must_use]
    pub const fn delay_ns(self) -> u64 {
        RNR_DELAY_10US[self.0 as usize] as u64 * RNR_UNIT_NS
    }

    /// The code with the shortest delay that is at least `delay_ns`, so a
    /// responder never advertises less back-off than it needs; saturates at
    /// code 0 (655.36 ms), the longest delay.
    #[must_use]
    pub const fn at_least_ns(delay_ns: u64) -> Self {
        // Codes 1..=31 are in increasing delay order.
        let mut code = 1;
        while code <= Self::MAX_CODE {
            if Self(code).delay_ns() >= delay_ns {
                return Self(code);
            }
            code += 1;
        }
        Self(0)
    }
}

/// Local ACK timeout: the 5-bit QP attribute that sets how long a requester
/// waits for a response before retransmitting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct AckTimeout(u8);

impl AckTimeout {
    /// Largest valid code.
    pub const MAX_CODE: u8 = 31;

    /// Base period of the exponent encoding: 4.096 µs.
    pub const BASE_NS: u64 = 4096;

    /// Builds a timeout code, or `None` if `code` does not fit in 5 bits.
    #[inline]
    #[must_use]
    pub const fn new(code: u8) -> Option<Self> {
        if code > Self::MAX_CODE {
            None
        } else {
            Some(Self(code))
        }
    }

    /// The 5-bit code.
    #[inline]
    #[must_use]
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The timeout, 4.096 µs × 2^code, in nanoseconds; `None` for code 0,
    /// which disables the transport timer (infinite timeout).
    #[inline]
    #[must_use]
    pub const fn timeout_ns(self) -> Option<u64> {
        if self.0 == 0 {
            None
        } else {
            Some(Self::BASE_NS << self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// IBA table 45 as printed, in µs × 100.
    const TABLE_45_CENTI_US: [u64; 32] = [
        65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
        1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
    ];

    #[test]
    fn rnr_table_spot_values() {
        let delay_ns = |code: u8| RnrTimer::new(code).unwrap().delay_ns();
        assert_eq!(delay_ns(0), 655_360_000);
        assert_eq!(delay_ns(1), 10_000);
        assert_eq!(delay_ns(5), 60_000);
        assert_eq!(delay_ns(14), 1_280_000);
        assert_eq!(delay_ns(31), 491_520_000);
        for (code, centi_us) in TABLE_45_CENTI_US.iter().enumerate() {
            assert_eq!(delay_ns(code as u8), centi_us * 10_000);
        }
    }

    #[test]
    fn rnr_code_range() {
        assert!(RnrTimer::new(32).is_none());
        assert_eq!(RnrTimer::from_bits(0x3F).code(), 31);
    }

    #[test]
    fn rnr_at_least() {
        assert_eq!(RnrTimer::at_least_ns(0).code(), 1);
        assert_eq!(RnrTimer::at_least_ns(10_000).code(), 1);
        assert_eq!(RnrTimer::at_least_ns(10_001).code(), 2);
        assert_eq!(RnrTimer::at_least_ns(491_520_000).code(), 31);
        assert_eq!(RnrTimer::at_least_ns(491_520_001).code(), 0);
        assert_eq!(RnrTimer::at_least_ns(u64::MAX).code(), 0);
    }

    #[test]
    fn ack_timeout_values() {
        assert_eq!(AckTimeout::new(0).unwrap().timeout_ns(), None);
        assert_eq!(AckTimeout::new(1).unwrap().timeout_ns(), Some(8192));
        // 14 is the usual default: 4.096 µs × 16384 ≈ 67.1 ms.
        assert_eq!(AckTimeout::new(14).unwrap().timeout_ns(), Some(67_108_864));
        assert_eq!(
            AckTimeout::new(31).unwrap().timeout_ns(),
            Some(4096 * (1u64 << 31))
        );
        assert!(AckTimeout::new(32).is_none());
    }

    proptest! {
        #[test]
        fn at_least_is_tight(ns in 0u64..=491_520_000) {
            let t = RnrTimer::at_least_ns(ns);
            prop_assert!(t.code() != 0);
            prop_assert!(t.delay_ns() >= ns);
            if t.code() > 1 {
                prop_assert!(RnrTimer::from_bits(t.code() - 1).delay_ns() < ns);
            }
        }
    }
}
