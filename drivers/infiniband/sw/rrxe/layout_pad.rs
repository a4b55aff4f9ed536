// SPDX-License-Identifier: GPL-2.0

//! Code that does nothing but move the rest of the module's code, built only with
//! `make module RRXE_LAYOUT_PAD=1` (`--cfg rrxe_layout_pad`).
//!
//! Under TCG the same instructions at other addresses take other times: a 2-byte latency
//! moved by up to a fifth, in every round of a boot, between two builds of one tree whose
//! code differed only by its place in the module (Documentation/rrxe/benchmarks.rst,
//! *Comparing two builds*). Whether a difference between two commits follows their code or
//! their layout shows in the same comparison made again with both built padded: rustc
//! lays the crate's functions out in the order of their symbols, and this one's sorts
//! first, so every other function moves by its size (2,064 bytes), no instruction of
//! theirs changed.

/// Never called: kept for its symbol alone. Each step depends on the last through
/// `black_box`, so that none is folded away and the body keeps its size.
#[export_name = "_RAAA_rrxe_layout_pad"]
extern "C" fn layout_pad(mut x: u64) -> u64 {
    macro_rules! steps {
        ($($k:literal)*) => {
            $(x = core::hint::black_box(x).wrapping_mul(0x9E37_79B9_7F4A_7C15 ^ $k) ^ (x >> ($k % 63 + 1));)*
        };
    }
    steps!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30
        31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59
        60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89);
    x
}
