// SPDX-License-Identifier: GPL-2.0

//! 24-bit sequence-number arithmetic.
//!
//! Packet Sequence Numbers (IBA 9.7.1) and the message sequence numbers of
//! RC end-to-end flow control (SSN, MSN and LSN, IBA 9.7.7.2) all live in a
//! 24-bit space that wraps around. Ordering is only meaningful inside half
//! of that space: IBA 9.7.1 splits the PSNs around a reference point into
//! the 2^23 values behind it and the 2^23 values ahead of it, which is what
//! lets a responder tell a retransmitted (duplicate) request from one that
//! arrived out of sequence. None of these types implements `PartialOrd`,
//! because a modular order is not transitive; use [`Psn::is_before`] and
//! friends instead.

use core::fmt;

/// Number of distinct values of a 24-bit sequence number.
pub const SEQ_MODULUS: u32 = 1 << 24;

/// Mask selecting the 24 significant bits of a sequence number.
pub const SEQ_MASK: u32 = SEQ_MODULUS - 1;

/// Half of the sequence space: the size of the duplicate region behind an
/// ePSN and the largest forward distance still considered "after".
pub const SEQ_HALF_WINDOW: u32 = 1 << 23;

macro_rules! seq24 {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[repr(transparent)]
        pub struct $name(u32);

        impl $name {
            /// Sequence number zero.
            pub const ZERO: Self = Self(0);

            /// Largest sequence number, `0xFFFFFF`, which is one before zero.
            pub const MAX: Self = Self(SEQ_MASK);

            /// Builds a sequence number from the low 24 bits of `raw`,
            /// discarding the upper byte (which on the wire belongs to a
            /// neighbouring field).
            #[inline]
            #[must_use]
            pub const fn new(raw: u32) -> Self {
                Self(raw & SEQ_MASK)
            }

            /// Builds a sequence number, or `None` if `raw` does not fit in
            /// 24 bits.
            #[inline]
            #[must_use]
            pub const fn try_new(raw: u32) -> Option<Self> {
                if raw > SEQ_MASK {
                    None
                } else {
                    Some(Self(raw))
                }
            }

            /// The value, always below 2^24.
            #[inline]
            #[must_use]
            pub const fn get(self) -> u32 {
                self.0
            }

            /// `self + n`, modulo 2^24.
            #[inline]
            #[must_use]
            pub const fn wrapping_add(self, n: u32) -> Self {
                Self::new(self.0.wrapping_add(n))
            }

            /// `self - n`, modulo 2^24.
            #[inline]
            #[must_use]
            pub const fn wrapping_sub(self, n: u32) -> Self {
                Self::new(self.0.wrapping_sub(n))
            }

            /// The following sequence number (`0xFFFFFF` is followed by 0).
            #[inline]
            #[must_use]
            pub const fn next(self) -> Self {
                self.wrapping_add(1)
            }

            /// The preceding sequence number (0 is preceded by `0xFFFFFF`).
            #[inline]
            #[must_use]
            pub const fn prev(self) -> Self {
                self.wrapping_sub(1)
            }

            /// How many steps forward lead from `self` to `later`, in
            /// `0..2^24`.
            #[inline]
            #[must_use]
            pub const fn distance_to(self, later: Self) -> u32 {
                later.0.wrapping_sub(self.0) & SEQ_MASK
            }

            /// Signed difference `self - other`, folded into the half-open
            /// window `-2^23..2^23`.
            ///
            /// A value exactly 2^23 away is reported as -2^23, i.e. as lying
            /// behind, so that it lands in the duplicate region of an ePSN
            /// rather than the invalid one.
            #[inline]
            #[must_use]
            pub const fn diff(self, other: Self) -> i32 {
                // Shift the 24-bit difference into the top of an i32 and
                // back so that the arithmetic shift sign-extends bit 23.
                ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
            }

            /// Whether `self` lies in the half of the sequence space behind
            /// `other`.
            #[inline]
            #[must_use]
            pub const fn is_before(self, other: Self) -> bool {
                self.diff(other) < 0
            }

            /// Whether `self` lies strictly less than 2^23 steps ahead of
            /// `other`.
            #[inline]
            #[must_use]
            pub const fn is_after(self, other: Self) -> bool {
                self.diff(other) > 0
            }

            /// Whether `self` is `first`, `last` or between them walking
            /// forward from `first`; `first..=last` may wrap through zero.
            #[inline]
            #[must_use]
            pub const fn is_within(self, first: Self, last: Self) -> bool {
                first.distance_to(self) <= first.distance_to(last)
            }
        }

        impl From<$name> for u32 {
            #[inline]
            fn from(seq: $name) -> u32 {
                seq.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#08x})"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#08x}", self.0)
            }
        }
    };
}

seq24! {
    /// Packet Sequence Number (IBA 9.7.1): 24 bits, wrapping, carried in the
    /// last three bytes of the BTH.
    Psn
}

seq24! {
    /// Message sequence number of RC flow control (IBA 9.7.7.2).
    ///
    /// The requester numbers its WQEs with an SSN, the responder reports
    /// the last completed message as the MSN in every AETH, and MSN plus the
    /// advertised credit count gives the LSN, the last SSN the requester
    /// may send. All three are the same 24-bit space, so one type serves.
    Msn
}

/// How a responder must treat a request PSN compared with its ePSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnClass {
    /// The PSN is the expected one: execute the request.
    Expected,
    /// The PSN is in the 2^23 values behind the ePSN: a retransmission of a
    /// request already executed, which must be re-acknowledged (or the read
    /// response / atomic result replayed) but not executed again.
    Duplicate,
    /// The PSN is ahead of the ePSN: packets were lost in between. An RC
    /// responder answers with a PSN sequence error NAK, a UC one silently
    /// drops the partial message.
    Invalid,
}

impl PsnClass {
    /// Classifies the PSN of a received request against the responder's
    /// expected PSN, per the duplicate / invalid regions of IBA 9.7.1.
    #[inline]
    #[must_use]
    pub const fn of_request(epsn: Psn, psn: Psn) -> Self {
        let diff = psn.diff(epsn);
        if diff == 0 {
            Self::Expected
        } else if diff < 0 {
            Self::Duplicate
        } else {
            Self::Invalid
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::format;

    #[test]
    fn new_masks_to_24_bits() {
        assert_eq!(Psn::new(0x1234_5678).get(), 0x34_5678);
        assert_eq!(Psn::try_new(0x100_0000), None);
        assert_eq!(Psn::try_new(0xFF_FFFF), Some(Psn::MAX));
    }

    #[test]
    fn next_and_prev_wrap() {
        assert_eq!(Psn::MAX.next(), Psn::ZERO);
        assert_eq!(Psn::ZERO.prev(), Psn::MAX);
        assert_eq!(Psn::new(0xFF_FFFE).wrapping_add(5), Psn::new(3));
        assert_eq!(Psn::new(3).wrapping_sub(5), Psn::new(0xFF_FFFE));
    }

    #[test]
    fn ordering_across_zero() {
        assert!(Psn::MAX.is_before(Psn::ZERO));
        assert!(Psn::ZERO.is_after(Psn::MAX));
        assert_eq!(Psn::ZERO.diff(Psn::MAX), 1);
        assert_eq!(Psn::MAX.diff(Psn::ZERO), -1);
        assert_eq!(Psn::ZERO.distance_to(Psn::MAX), SEQ_MASK);
    }

    #[test]
    fn half_window_edge_is_behind() {
        let a = Psn::new(10);
        let b = a.wrapping_add(SEQ_HALF_WINDOW);
        assert_eq!(b.diff(a), -(SEQ_HALF_WINDOW as i32));
        assert!(b.is_before(a));
        assert!(a.is_before(b));
        assert!(!a.is_after(b) && !b.is_after(a));
    }

    #[test]
    fn classify_regions() {
        let epsn = Psn::new(0x10);
        assert_eq!(PsnClass::of_request(epsn, epsn), PsnClass::Expected);
        assert_eq!(
            PsnClass::of_request(epsn, Psn::new(0xF)),
            PsnClass::Duplicate
        );
        assert_eq!(
            PsnClass::of_request(epsn, Psn::new(0x11)),
            PsnClass::Invalid
        );
        // Oldest duplicate: exactly 2^23 behind.
        let oldest = epsn.wrapping_sub(SEQ_HALF_WINDOW);
        assert_eq!(PsnClass::of_request(epsn, oldest), PsnClass::Duplicate);
        assert_eq!(
            PsnClass::of_request(epsn, oldest.next()),
            PsnClass::Duplicate
        );
        assert_eq!(PsnClass::of_request(epsn, oldest.prev()), PsnClass::Invalid);
        // Wrapping: ePSN 0 sees 0xFFFFFF as the previous packet.
        assert_eq!(
            PsnClass::of_request(Psn::ZERO, Psn::MAX),
            PsnClass::Duplicate
        );
    }

    #[test]
    fn within_wrapping_range() {
        let first = Psn::new(0xFF_FFF0);
        let last = Psn::new(0x10);
        assert!(Psn::new(0xFF_FFF0).is_within(first, last));
        assert!(Psn::ZERO.is_within(first, last));
        assert!(Psn::new(0x10).is_within(first, last));
        assert!(!Psn::new(0x11).is_within(first, last));
        assert!(!Psn::new(0xFF_FFEF).is_within(first, last));
        assert!(Psn::new(5).is_within(Psn::new(5), Psn::new(5)));
    }

    #[test]
    fn formatting() {
        assert_eq!(format!("{:?}", Psn::new(0xAB)), "Psn(0x0000ab)");
        assert_eq!(format!("{}", Msn::new(0xAB)), "0x0000ab");
    }

    proptest! {
        #[test]
        fn add_then_sub_roundtrips(raw in 0u32..SEQ_MODULUS, n in any::<u32>()) {
            let p = Psn::new(raw);
            prop_assert_eq!(p.wrapping_add(n).wrapping_sub(n), p);
        }

        #[test]
        fn add_matches_modular_arithmetic(raw in 0u32..SEQ_MODULUS, n in any::<u32>()) {
            let expected = ((u64::from(raw) + u64::from(n)) % u64::from(SEQ_MODULUS)) as u32;
            prop_assert_eq!(Psn::new(raw).wrapping_add(n).get(), expected);
        }

        #[test]
        fn distance_inverts_add(raw in 0u32..SEQ_MODULUS, n in 0u32..SEQ_MODULUS) {
            let p = Psn::new(raw);
            prop_assert_eq!(p.distance_to(p.wrapping_add(n)), n);
        }

        #[test]
        fn diff_is_in_half_window(a in 0u32..SEQ_MODULUS, b in 0u32..SEQ_MODULUS) {
            let d = Psn::new(a).diff(Psn::new(b));
            prop_assert!((-(SEQ_HALF_WINDOW as i32)..SEQ_HALF_WINDOW as i32).contains(&d));
            prop_assert_eq!(Psn::new(b).wrapping_add(d as u32), Psn::new(a));
        }

        #[test]
        fn small_steps_keep_order(raw in 0u32..SEQ_MODULUS, n in 1u32..SEQ_HALF_WINDOW) {
            let p = Psn::new(raw);
            let q = p.wrapping_add(n);
            prop_assert!(q.is_after(p));
            prop_assert!(p.is_before(q));
            prop_assert!(!q.is_before(p));
            prop_assert!(!p.is_after(q));
        }

        #[test]
        fn before_and_after_are_exclusive(a in 0u32..SEQ_MODULUS, b in 0u32..SEQ_MODULUS) {
            let (a, b) = (Psn::new(a), Psn::new(b));
            prop_assert!(!(a.is_before(b) && a.is_after(b)));
            prop_assert_eq!(a == b, !a.is_before(b) && !a.is_after(b));
        }

        #[test]
        fn classification_partitions_space(e in 0u32..SEQ_MODULUS, n in 0u32..SEQ_MODULUS) {
            let epsn = Psn::new(e);
            let psn = epsn.wrapping_add(n);
            let expected = match n {
                0 => PsnClass::Expected,
                n if n < SEQ_HALF_WINDOW => PsnClass::Invalid,
                _ => PsnClass::Duplicate,
            };
            prop_assert_eq!(PsnClass::of_request(epsn, psn), expected);
        }

        #[test]
        fn within_matches_walk(first in 0u32..SEQ_MODULUS, len in 0u32..1024, off in 0u32..2048) {
            let first = Psn::new(first);
            let last = first.wrapping_add(len);
            prop_assert_eq!(first.wrapping_add(off).is_within(first, last), off <= len);
        }
    }
}
