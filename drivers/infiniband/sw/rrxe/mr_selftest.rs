// SPDX-License-Identifier: GPL-2.0

//! In-kernel self-test of MR memory access, built only with `make module RRXE_SELFTEST=1`
//! (`--cfg rrxe_selftest`), until queue pairs let the data path be tested from userspace.
//!
//! A user MR registered with an iova whose upper 32 bits are [`MAGIC`] is exercised at
//! registration: lookups, checks, a byte pattern written and read back in chunks of varied
//! sizes across page boundaries, and atomics. Registration fails with `EIO` if anything is
//! off; otherwise the buffer holds [`pattern`] except for the 8 bytes at
//! [`atomic_offset`], which hold [`ATOMIC_FINAL`] (host order), for userspace to verify
//! (`tests/vm/mr-selftest.sh`).

use crate::device::RrxeDevice;
use crate::mr::{lookup, Access, MrError, MrState};
use crate::transport::qp::memory::AtomicOp;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Upper 32 bits of the iova of MRs to test.
pub(crate) const MAGIC: u64 = 0x5e1f_7e57;

/// Value left at the atomic target.
const ATOMIC_FINAL: u64 = 0x0123_4567_89ab_cdef;

/// The byte written at MR offset `off`.
fn pattern(off: usize) -> u8 {
    (off.wrapping_mul(13).wrapping_add(5) & 0xff) as u8
}

/// MR offset of the atomic target: the first 8-byte aligned address at least 3 bytes in.
fn atomic_offset(iova: u64) -> usize {
    ((iova + 3).next_multiple_of(8) - iova) as usize
}

fn expect<T: PartialEq + core::fmt::Debug>(what: &str, got: T, want: T) -> Result {
    if got == want {
        return Ok(());
    }
    pr_err!("MR self-test: {}: got {:?}, want {:?}\n", what, got, want);
    Err(EIO)
}

/// Runs the self-test on a freshly registered MR with local write and remote read, write and
/// atomic rights, or (a shorter one) on one without write rights over zeroed memory.
pub(crate) fn run(dev: &RrxeDevice, mr: &Arc<MrState>, iova: u64, length: u64) -> Result {
    let len = usize::try_from(length)?;
    let key = mr.key();
    let pd = mr.pd();

    // Lookups: the whole key must match.
    let found = lookup(dev, key).ok_or(EIO)?;
    expect("lookup finds the MR", Arc::ptr_eq(&found, mr), true)?;
    expect(
        "lookup of another variant",
        lookup(dev, key ^ 1).is_none(),
        true,
    )?;

    // An MR without write rights is pinned read-only: it must refuse writes even to callers
    // that skip the checks (its pages may be shared, e.g. the zero page).
    if mr.check(pd, iova, 1, Access::LocalWrite).is_err() {
        expect(
            "read-only copy_in",
            mr.copy_in(iova, &[1]),
            Err(MrError::Access),
        )?;
        let add = AtomicOp::FetchAdd { add: 1 };
        let va = iova + atomic_offset(iova) as u64;
        expect("read-only atomic", mr.atomic(va, add), Err(MrError::Access))?;
        let mut byte = [0xffu8];
        expect("read-only copy_out", mr.copy_out(iova, &mut byte), Ok(()))?;
        expect("read-only contents", byte[0], 0)?;
        pr_info!("MR self-test passed (read-only, key {:#x})\n", key);
        return Ok(());
    }

    // Checks.
    expect(
        "check all",
        mr.check(pd, iova, len, Access::RemoteWrite),
        Ok(()),
    )?;
    expect(
        "check atomic",
        mr.check(pd, iova, 8, Access::RemoteAtomic),
        Ok(()),
    )?;
    expect(
        "check before",
        mr.check(pd, iova - 1, 1, Access::LocalRead),
        Err(MrError::Bounds),
    )?;
    let end = iova + length;
    expect(
        "check after",
        mr.check(pd, end, 1, Access::LocalRead),
        Err(MrError::Bounds),
    )?;
    expect(
        "check empty at end",
        mr.check(pd, end, 0, Access::LocalRead),
        Ok(()),
    )?;
    expect(
        "check one too long",
        mr.check(pd, iova, len + 1, Access::LocalRead),
        Err(MrError::Bounds),
    )?;
    expect(
        "check wrapping",
        mr.check(pd, u64::MAX, 2, Access::LocalRead),
        Err(MrError::Bounds),
    )?;

    // A pattern in chunks of varied sizes, read back in differently sized chunks.
    let sizes = [1usize, 7, 64, 4095, 4096, 4097, 13, 300];
    let mut buf = KVec::with_capacity(8192, GFP_KERNEL)?;
    for _ in 0..8192 {
        buf.push(0u8, GFP_KERNEL)?;
    }
    let mut off = 0;
    let mut i = 0;
    while off < len {
        let n = sizes[i % sizes.len()].min(len - off);
        for (j, b) in buf[..n].iter_mut().enumerate() {
            *b = pattern(off + j);
        }
        expect("copy_in", mr.copy_in(iova + off as u64, &buf[..n]), Ok(()))?;
        off += n;
        i += 1;
    }
    let (mut off, mut i) = (0, 3);
    while off < len {
        let n = sizes[i % sizes.len()].min(len - off);
        expect(
            "copy_out",
            mr.copy_out(iova + off as u64, &mut buf[..n]),
            Ok(()),
        )?;
        for (j, b) in buf[..n].iter().enumerate() {
            expect("pattern read back", *b, pattern(off + j))?;
        }
        off += n;
        i += 1;
    }
    expect(
        "copy_out past the end",
        mr.copy_out(end - 1, &mut buf[..2]),
        Err(MrError::Bounds),
    )?;
    expect(
        "copy_in before",
        mr.copy_in(iova - 1, &buf[..1]),
        Err(MrError::Bounds),
    )?;

    // Atomics.
    let at = atomic_offset(iova);
    let va = iova + at as u64;
    let mut orig = [0u8; 8];
    for (j, b) in orig.iter_mut().enumerate() {
        *b = pattern(at + j);
    }
    let orig = u64::from_ne_bytes(orig);
    expect(
        "fetch-add",
        mr.atomic(va, AtomicOp::FetchAdd { add: 5 }),
        Ok(orig),
    )?;
    let cas = AtomicOp::CompareSwap {
        compare: orig.wrapping_add(5),
        swap: ATOMIC_FINAL,
    };
    expect("compare-swap", mr.atomic(va, cas), Ok(orig.wrapping_add(5)))?;
    let cas = AtomicOp::CompareSwap {
        compare: 0,
        swap: 1,
    };
    expect("failed compare-swap", mr.atomic(va, cas), Ok(ATOMIC_FINAL))?;
    let add = AtomicOp::FetchAdd { add: 1 };
    expect(
        "misaligned atomic",
        mr.atomic(va + 4, add),
        Err(MrError::Misaligned),
    )?;
    expect(
        "atomic past the end",
        mr.atomic(end, add),
        Err(MrError::Bounds),
    )?;

    pr_info!("MR self-test passed (key {:#x}, {} bytes)\n", key, len);
    Ok(())
}
