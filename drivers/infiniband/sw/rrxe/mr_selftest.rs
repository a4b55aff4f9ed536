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
//!
//! The full run then exercises a fast-register MR in the same PD over a kernel buffer of its
//! own ([`fast`]): the page list, Fast Register and its refusals, the walk across
//! non-contiguous pages, and invalidation (after which lookups fail: the data path answers a
//! peer with a Remote Access Error NAK and a local SGE with a protection error).

use crate::device::RrxeDevice;
use crate::glue::bindings as b;
use crate::glue::rdma::PdId;
use crate::glue::umem;
use crate::mr::{self, lookup, Access, FastRegRequest, MrError, MrState};
use crate::transport::qp::memory::AtomicOp;
use crate::transport::region;
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

    fast(dev, mr.pd(), key)?;

    pr_info!("MR self-test passed (key {:#x}, {} bytes)\n", key, len);
    Ok(())
}

/// Page size of the fast-register test.
const PAGE: usize = 4096;

/// Exercises a fast-register MR of `pd` over a kernel buffer; `user_key` is a user MR of
/// that PD, which must not be invalidatable.
fn fast(dev: &RrxeDevice, pd: PdId, user_key: u32) -> Result {
    // Five pages, so that four page-aligned ones fit whatever kmalloc's alignment.
    let buf = KVec::from_elem(0u8, 5 * PAGE, GFP_KERNEL)?;
    let base = (buf.as_ptr() as u64).next_multiple_of(PAGE as u64);
    // The page list, out of order: the walk must not assume contiguity.
    let list = [base + 2 * PAGE as u64, base, base + 3 * PAGE as u64];
    let (frmr, key0) = mr::alloc_fast(dev, pd, umem::selftest_memory(), 3)?;
    let result = fast_checks(dev, pd, user_key, &frmr, key0, &list, &buf);
    // Deregistered before `buf` goes: nothing reaches the pages afterwards.
    let dereg = mr::dereg(dev, &frmr);
    result.and(dereg)
}

fn fast_checks(
    dev: &RrxeDevice,
    pd: PdId,
    user_key: u32,
    frmr: &mr::RrxeMr,
    key0: u32,
    list: &[u64; 3],
    buf: &KVec<u8>,
) -> Result {
    let other_pd = PdId::none();
    let variant = |n: u32| region::key(region::key_index(key0), key0.wrapping_add(n));
    expect(
        "a fresh fast-register MR is free",
        lookup(dev, key0).is_none(),
        true,
    )?;

    expect(
        "page size below 4 KiB",
        mr::map_begin(frmr, 512),
        Err(EINVAL),
    )?;
    expect("map_begin", mr::map_begin(frmr, PAGE as u32), Ok(()))?;
    for &p in list {
        expect("map_page", mr::map_page(frmr, p), Ok(()))?;
    }
    expect(
        "map_page past max_num_sg",
        mr::map_page(frmr, list[0]),
        Err(ENOMEM),
    )?;

    let all = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE
        | b::ib_access_flags_IB_ACCESS_REMOTE_READ
        | b::ib_access_flags_IB_ACCESS_REMOTE_WRITE
        | b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    let first = 0x100u64;
    let iova = 0x7000_0000_0000u64 + first;
    let len = 3 * PAGE - first as usize;
    let key1 = variant(1);
    let req = |key, access, length| FastRegRequest {
        key,
        access,
        iova,
        length,
    };
    expect(
        "Fast Register from another PD",
        mr::fast_register(dev, other_pd, &req(key1, all, len as u64)),
        Err(()),
    )?;
    expect(
        "Fast Register of Remote Write without Local Write",
        mr::fast_register(
            dev,
            pd,
            &req(key1, b::ib_access_flags_IB_ACCESS_REMOTE_WRITE, len as u64),
        ),
        Err(()),
    )?;
    expect(
        "Fast Register past the page list",
        mr::fast_register(dev, pd, &req(key1, all, len as u64 + 1)),
        Err(()),
    )?;
    expect(
        "Fast Register",
        mr::fast_register(dev, pd, &req(key1, all, len as u64)),
        Ok(()),
    )?;
    expect(
        "Fast Register of a valid MR",
        mr::fast_register(dev, pd, &req(variant(2), all, len as u64)),
        Err(()),
    )?;
    expect("lookup of the old key", lookup(dev, key0).is_none(), true)?;
    let region = lookup(dev, key1).ok_or(EIO)?;
    expect(
        "remote write check",
        region.check(pd, iova, len, Access::RemoteWrite),
        Ok(()),
    )?;
    expect(
        "check past the end",
        region.check(pd, iova, len + 1, Access::RemoteWrite),
        Err(MrError::Bounds),
    )?;
    expect(
        "check below the iova",
        region.check(pd, iova - 1, 1, Access::RemoteRead),
        Err(MrError::Bounds),
    )?;

    // A pattern through the MR, in chunks crossing page boundaries; then the bytes must sit
    // in the listed pages at the iova's offset.
    let mut chunk = [0u8; 1000];
    let mut off = 0;
    while off < len {
        let n = chunk.len().min(len - off);
        for (j, c) in chunk[..n].iter_mut().enumerate() {
            *c = pattern(off + j);
        }
        expect(
            "copy_in",
            region.copy_in(iova + off as u64, &chunk[..n]),
            Ok(()),
        )?;
        off += n;
    }
    let start = buf.as_ptr() as u64;
    for off in (0..len).step_by(97) {
        let pos = first as usize + off;
        let at = (list[pos / PAGE] - start) as usize + pos % PAGE;
        expect("byte in its page", buf[at], pattern(off))?;
    }
    let mut back = [0u8; 300];
    let at = PAGE - first as usize - 100;
    expect(
        "copy_out across a page boundary",
        region.copy_out(iova + at as u64, &mut back),
        Ok(()),
    )?;
    for (j, b) in back.iter().enumerate() {
        expect("byte read back", *b, pattern(at + j))?;
    }
    let va = iova + 2 * PAGE as u64 - first;
    let orig = u64::from_ne_bytes(core::array::from_fn(|j| pattern((va - iova) as usize + j)));
    expect(
        "fetch-add in the last page",
        region.atomic(va, AtomicOp::FetchAdd { add: 1 }),
        Ok(orig),
    )?;

    expect(
        "a user MR is not invalidatable",
        mr::invalidate(dev, pd, user_key),
        Err(()),
    )?;
    expect(
        "invalidate with a stale key",
        mr::invalidate(dev, pd, key0),
        Err(()),
    )?;
    expect(
        "invalidate from another PD",
        mr::invalidate(dev, other_pd, key1),
        Err(()),
    )?;
    expect("invalidate", mr::invalidate(dev, pd, key1), Ok(()))?;
    expect("invalidated key", lookup(dev, key1).is_none(), true)?;
    expect(
        "a reference taken before sees it invalid",
        region.check(pd, iova, 1, Access::RemoteRead),
        Err(MrError::Invalid),
    )?;
    expect("invalidate twice", mr::invalidate(dev, pd, key1), Err(()))?;

    // Registered again under a new key, read-only for peers.
    let key2 = variant(2);
    expect(
        "Fast Register again",
        mr::fast_register(
            dev,
            pd,
            &req(key2, b::ib_access_flags_IB_ACCESS_REMOTE_READ, PAGE as u64),
        ),
        Ok(()),
    )?;
    expect(
        "the earlier key stays dead",
        lookup(dev, key1).is_none(),
        true,
    )?;
    let region = lookup(dev, key2).ok_or(EIO)?;
    expect(
        "remote read",
        region.check(pd, iova, PAGE, Access::RemoteRead),
        Ok(()),
    )?;
    expect(
        "remote write without the right",
        region.check(pd, iova, 1, Access::RemoteWrite),
        Err(MrError::Access),
    )?;
    pr_info!("MR self-test: fast-register MR passed (key {:#x})\n", key2);
    Ok(())
}
