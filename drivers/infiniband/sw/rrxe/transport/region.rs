// SPDX-License-Identifier: GPL-2.0

//! Memory-region arithmetic: L_Key/R_Key layout and bounds.
//!
//! An MR's keys carry the index of the MR in the CA's table in their upper 24 bits and a
//! "key" byte the CA varies per registration in the low 8 bits (IBA 10.6.3.5 leaves that
//! portion to the CA), so a key of a freed MR does not match a later MR on the same index.

/// Largest MR table index a key can carry.
pub const MAX_KEY_INDEX: u32 = (1 << 24) - 1;

/// The L_Key/R_Key of table entry `index` (at most [`MAX_KEY_INDEX`]) in its `variant`-th
/// registration (only the low 8 bits of `variant` count).
#[must_use]
pub const fn key(index: u32, variant: u32) -> u32 {
    (index << 8) | (variant & 0xff)
}

/// The table index a key names.
#[must_use]
pub const fn key_index(key: u32) -> u32 {
    key >> 8
}

/// Where `len` bytes at `va` start in a region of `length` bytes at `iova`, if they lie
/// entirely inside it (IBA 10.6.3.3: access outside an MR's bounds is a protection error).
/// No arithmetic overflows: ranges that wrap around the address space are refused. An empty
/// range is inside if its address is (the end of the region included).
#[must_use]
pub const fn offset_in(iova: u64, length: u64, va: u64, len: u64) -> Option<u64> {
    let Some(offset) = va.checked_sub(iova) else {
        return None;
    };
    let Some(end) = offset.checked_add(len) else {
        return None;
    };
    if end <= length {
        Some(offset)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys() {
        assert_eq!(key(1, 0), 0x100);
        assert_eq!(key(0x12_3456, 0x1_78), 0x1234_5678);
        assert_eq!(key(MAX_KEY_INDEX, 0xff), u32::MAX);
        assert_eq!(key_index(0x1234_5678), 0x12_3456);
    }

    #[test]
    fn bounds() {
        assert_eq!(offset_in(0x1000, 0x100, 0x1000, 0x100), Some(0));
        assert_eq!(offset_in(0x1000, 0x100, 0x10ff, 1), Some(0xff));
        assert_eq!(offset_in(0x1000, 0x100, 0x1100, 0), Some(0x100));
        assert_eq!(offset_in(0x1000, 0x100, 0x1100, 1), None);
        assert_eq!(offset_in(0x1000, 0x100, 0xfff, 1), None);
        assert_eq!(offset_in(0x1000, 0x100, 0x1001, 0x100), None);
        // Wrapping ranges.
        assert_eq!(offset_in(0, u64::MAX, 1, u64::MAX), None);
        assert_eq!(offset_in(u64::MAX - 1, 2, u64::MAX, 1), Some(1));
        assert_eq!(offset_in(u64::MAX - 1, 2, u64::MAX, 2), None);
        assert_eq!(offset_in(0, u64::MAX, u64::MAX, 0), Some(u64::MAX));
    }

    proptest! {
        #[test]
        fn bounds_match_wide_arithmetic(iova: u64, length: u64, va: u64, len: u64) {
            let (iova, length, va, len) =
                (u128::from(iova), u128::from(length), u128::from(va), u128::from(len));
            let inside = va >= iova && va + len <= iova + length;
            let got = offset_in(iova as u64, length as u64, va as u64, len as u64);
            prop_assert_eq!(got.is_some(), inside);
            if let Some(offset) = got {
                prop_assert_eq!(u128::from(offset), va - iova);
            }
        }

        #[test]
        fn bounds_near_edges(iova: u64, length in 0u64..64, dva in 0u64..80, len in 0u64..80) {
            let va = iova.wrapping_add(dva);
            let inside = iova.checked_add(dva).is_some() && dva + len <= length;
            prop_assert_eq!(offset_in(iova, length, va, len).is_some(), inside);
        }

        #[test]
        fn keys_round_trip(index in 0..=MAX_KEY_INDEX, variant: u32) {
            let k = key(index, variant);
            prop_assert_eq!(key_index(k), index);
            prop_assert_eq!(k & 0xff, variant & 0xff);
        }
    }
}
