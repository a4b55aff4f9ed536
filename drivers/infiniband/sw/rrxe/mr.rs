// SPDX-License-Identifier: GPL-2.0

//! Memory regions: keys, the device's table of them, and the memory behind them as the data
//! path reaches it.
//!
//! Each MR's state ([`MrState`]) is shared: the device's [`MrTable`] holds one reference from
//! registration to deregistration, and the data path takes more with [`MrTable::lookup`] for
//! as long as it works on the memory. Deregistration takes the MR out of the table and marks it
//! invalid; the pinned pages go when the last reference does.
//!
//! Fast-register MRs (kernel ULPs: `ib_alloc_mr`, `ib_map_mr_sg`, `IB_WR_REG_MR`) stay in the
//! table from allocation to deregistration and alternate between free and valid: a Fast
//! Register WQE validates one under a new key, a Local Invalidate or a Send with Invalidate
//! frees it. While free, `lookup` does not find it, so every access through its keys fails as
//! for an unknown key (a Remote Access Error NAK to a peer, a local protection error for an
//! SGE).
//!
//! Dropping the last reference to a user MR unpins its pages (`ib_umem_release`), which may
//! sleep: the data path must drop the references it holds in process context (it runs in a
//! work item), never in softirq or with a spinlock held.

use crate::glue::bindings as b;
use crate::glue::rdma::attr::MrRereg;
use crate::glue::rdma::object::PdId;
use crate::glue::table::IndexTable;
use crate::glue::umem::{KernelMemory, MemError, Umem, UmemPinner};
use crate::params;
use crate::quota::Charge;
use crate::transport::qp::memory::AtomicOp;
use crate::transport::region;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Handle of one rrxe MR, owned by the RDMA core's `struct ib_mr`.
pub(crate) struct RrxeMr {
    state: Arc<MrState>,
    /// The MR's place in the device's count; none for a kernel PD's all-memory MR, which
    /// is part of its PD (the core tracks it as no MR of its own either).
    _charge: Option<Charge>,
}

/// The memory an MR covers.
enum Memory {
    /// Pinned user memory, starting at the MR's iova.
    User(Umem),
    /// All of kernel memory (a DMA MR): addresses are kernel virtual addresses.
    Kernel(KernelMemory),
    /// A fast-register MR of a kernel PD (the IBA base memory management extensions): a
    /// list of kernel pages set by `map_mr_sg`, which a Fast Register WQE makes reachable
    /// at an iova of the consumer's choosing, until it is invalidated.
    Fast(FastPages),
}

/// The page list of a fast-register MR.
///
/// rrxe is a virtual-DMA device (it registers without a DMA device, so the core's
/// `ib_dma_*` helpers hand out kernel virtual addresses): each entry is the kernel address
/// of one page of `1 << page_shift` bytes. Entries are written by `map_mr_sg` while the MR is
/// free and published to the data path by the Fast Register WQE that validates it, hence
/// atomics (the data path only reads them after seeing the MR valid).
struct FastPages {
    mem: KernelMemory,
    pages: KVec<AtomicU64>,
    npages: AtomicUsize,
    page_shift: AtomicU32,
}

/// An access to MR memory, each needing its own right (IBA 10.6.3.1, 10.6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Gather from a local SGE: always allowed.
    LocalRead,
    /// Scatter into a local SGE: needs Local Write.
    LocalWrite,
    /// RDMA Read by a peer: needs Remote Read.
    RemoteRead,
    /// RDMA Write by a peer: needs Remote Write.
    RemoteWrite,
    /// Atomic by a peer: needs Remote Atomic.
    RemoteAtomic,
}

impl Access {
    /// The `IB_ACCESS_*` bit this access needs, if any.
    pub(crate) fn required(self) -> u32 {
        match self {
            Self::LocalRead => 0,
            Self::LocalWrite => b::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
            Self::RemoteRead => b::ib_access_flags_IB_ACCESS_REMOTE_READ,
            Self::RemoteWrite => b::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
            Self::RemoteAtomic => b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
        }
    }
}

/// Why an access to an MR was refused. The data path maps each to an IBA outcome: a local
/// protection error (or `LocLenErr` for bounds, at its choice) for local accesses, a Remote
/// Access Error NAK for remote ones, except [`MrError::Misaligned`], an Invalid Request NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrError {
    /// The MR was deregistered (or invalidated) since it was looked up.
    Invalid,
    /// The MR belongs to another protection domain.
    Pd,
    /// The MR lacks the right for the access.
    Access,
    /// The range is not inside the MR.
    Bounds,
    /// An atomic's target is not 8-byte aligned.
    Misaligned,
}

impl From<MemError> for MrError {
    fn from(e: MemError) -> Self {
        match e {
            MemError::Bounds => Self::Bounds,
            MemError::Misaligned => Self::Misaligned,
            // Only MRs without write rights are pinned read-only.
            MemError::ReadOnly => Self::Access,
        }
    }
}

/// An MR as the data path sees it.
pub(crate) struct MrState {
    /// The protection domain the MR was registered in.
    pd: PdId,
    /// `IB_ACCESS_*` flags it was registered with (a fast-register MR: of its last Fast
    /// Register).
    access: AtomicU32,
    /// Address of its first byte in its own address space (user and fast-register MRs).
    iova: AtomicU64,
    /// Length in bytes (user and fast-register MRs).
    length: AtomicU64,
    /// Its L_Key and R_Key. The table index (upper 24 bits) never changes; a Fast Register
    /// replaces the low byte, the consumer-owned key portion (`ib_update_fast_reg_key`), so a
    /// stale R_Key of an earlier registration no longer matches.
    key: AtomicU32,
    /// Cleared at deregistration and by invalidation; no new access may start afterwards. A
    /// fast-register MR is allocated free (clear) and set by a Fast Register WQE.
    valid: AtomicBool,
    /// Memory windows bound to it; it cannot be deregistered while any are (IBA 10.6.7.3:
    /// deregistering an MR with bound windows fails).
    windows: AtomicU32,
    memory: Memory,
}

impl MrState {
    /// Whether it is still registered.
    pub(crate) fn is_valid(&self) -> bool {
        self.valid.load(Ordering::Acquire)
    }

    /// Its current L_Key and R_Key.
    pub(crate) fn key(&self) -> u32 {
        self.key.load(Ordering::Acquire)
    }

    fn iova(&self) -> u64 {
        self.iova.load(Ordering::Relaxed)
    }

    fn length(&self) -> u64 {
        self.length.load(Ordering::Relaxed)
    }

    /// Checks that an object of protection domain `pd` may make `access` to `len` bytes at
    /// `va` through this MR (IBA 10.6.3: key validity, PD, rights, bounds).
    pub(crate) fn check(
        &self,
        pd: PdId,
        va: u64,
        len: usize,
        access: Access,
    ) -> Result<(), MrError> {
        if !self.is_valid() {
            return Err(MrError::Invalid);
        }
        if pd != self.pd {
            return Err(MrError::Pd);
        }
        if self.access() & access.required() != access.required() {
            return Err(MrError::Access);
        }
        let len = u64::try_from(len).map_err(|_| MrError::Bounds)?;
        match self.memory {
            Memory::User(_) | Memory::Fast(_) => {
                region::offset_in(self.iova(), self.length(), va, len)
                    .map(|_| ())
                    .ok_or(MrError::Bounds)
            }
            // All of memory: only a range wrapping around the address space is out.
            Memory::Kernel(_) => va.checked_add(len).map(|_| ()).ok_or(MrError::Bounds),
        }
    }

    /// The protection domain it was registered in.
    pub(crate) fn pd(&self) -> PdId {
        self.pd
    }

    /// Its `IB_ACCESS_*` flags.
    pub(crate) fn access(&self) -> u32 {
        self.access.load(Ordering::Relaxed)
    }

    /// Whether `len` bytes at `va` lie inside it: a window may only be bound within its MR
    /// (IBA 10.6.7.2.4, C10-75).
    pub(crate) fn contains(&self, va: u64, len: u64) -> bool {
        match self.memory {
            Memory::User(_) | Memory::Fast(_) => {
                region::offset_in(self.iova(), self.length(), va, len).is_some()
            }
            Memory::Kernel(_) => va.checked_add(len).is_some(),
        }
    }

    /// Counts a window bound to it; fails if it is no longer registered. A deregistration
    /// racing with the bind either sees the window or is seen by it.
    pub(crate) fn attach_window(&self) -> bool {
        self.windows.fetch_add(1, Ordering::SeqCst);
        if self.valid.load(Ordering::SeqCst) {
            true
        } else {
            self.detach_window();
            false
        }
    }

    /// Forgets a window bound by [`MrState::attach_window`].
    pub(crate) fn detach_window(&self) {
        self.windows.fetch_sub(1, Ordering::SeqCst);
    }

    /// Checks that `len` bytes at `va` may be reached through a window bound to it: the MR
    /// must still be registered and hold the range; rights are the window's (IBA 10.6.7.1).
    pub(crate) fn check_window(&self, va: u64, len: usize) -> Result<(), MrError> {
        if !self.is_valid() {
            return Err(MrError::Invalid);
        }
        let len = u64::try_from(len).map_err(|_| MrError::Bounds)?;
        if self.contains(va, len) {
            Ok(())
        } else {
            Err(MrError::Bounds)
        }
    }

    /// The offset of `len` bytes at `va` in a user or fast-register MR.
    fn offset(&self, va: u64, len: usize) -> Result<usize, MrError> {
        let len = u64::try_from(len).map_err(|_| MrError::Bounds)?;
        let offset =
            region::offset_in(self.iova(), self.length(), va, len).ok_or(MrError::Bounds)?;
        usize::try_from(offset).map_err(|_| MrError::Bounds)
    }

    /// Calls `each(kaddr, at, n)` for the pieces of `len` bytes at `va` in a fast-register
    /// MR: `n` bytes at kernel address `kaddr`, `at` bytes into the range. Pages need not be
    /// contiguous, so a range crossing a page boundary comes in several pieces.
    fn fast_pieces(
        &self,
        fast: &FastPages,
        va: u64,
        len: usize,
        mut each: impl FnMut(u64, usize, usize) -> Result<(), MrError>,
    ) -> Result<(), MrError> {
        let offset = self.offset(va, len)? as u64;
        let shift = fast.page_shift.load(Ordering::Relaxed);
        let size = 1u64.checked_shl(shift).ok_or(MrError::Bounds)?;
        let mask = size - 1;
        // The first page holds the MR's first byte at the iova's offset in a page
        // (`ib_sg_to_pages` stores page-aligned addresses and the exact iova).
        let mut pos = (self.iova() & mask)
            .checked_add(offset)
            .ok_or(MrError::Bounds)?;
        let npages = fast.npages.load(Ordering::Acquire);
        let mut done = 0usize;
        while done < len {
            let index = usize::try_from(pos >> shift).map_err(|_| MrError::Bounds)?;
            if index >= npages {
                return Err(MrError::Bounds);
            }
            let page = fast.pages.get(index).ok_or(MrError::Bounds)?;
            let in_page = pos & mask;
            let n = usize::try_from(size - in_page)
                .unwrap_or(usize::MAX)
                .min(len - done);
            let kaddr = page
                .load(Ordering::Relaxed)
                .checked_add(in_page)
                .ok_or(MrError::Bounds)?;
            each(kaddr, done, n)?;
            done += n;
            pos += n as u64;
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes at `va` out of the MR (after [`MrState::check`]). Does not
    /// sleep: process context or softirq.
    pub(crate) fn copy_out(&self, va: u64, dst: &mut [u8]) -> Result<(), MrError> {
        match &self.memory {
            Memory::User(umem) => Ok(umem.copy_out(self.offset(va, dst.len())?, dst)?),
            Memory::Kernel(mem) => Ok(mem.copy_out(va, dst)?),
            Memory::Fast(fast) => self.fast_pieces(fast, va, dst.len(), |kaddr, at, n| {
                Ok(fast.mem.copy_out(kaddr, &mut dst[at..at + n])?)
            }),
        }
    }

    /// Copies `src` into the MR at `va` (after [`MrState::check`]). Does not sleep: process
    /// context or softirq.
    pub(crate) fn copy_in(&self, va: u64, src: &[u8]) -> Result<(), MrError> {
        match &self.memory {
            Memory::User(umem) => Ok(umem.copy_in(self.offset(va, src.len())?, src)?),
            Memory::Kernel(mem) => Ok(mem.copy_in(va, src)?),
            Memory::Fast(fast) => self.fast_pieces(fast, va, src.len(), |kaddr, at, n| {
                Ok(fast.mem.copy_in(kaddr, &src[at..at + n])?)
            }),
        }
    }

    /// Executes an 8-byte atomic at `va` (after [`MrState::check`] for
    /// [`Access::RemoteAtomic`]) and returns the original value, in host byte order. The
    /// target must be 8-byte aligned (IBA 9.4.5). Atomic with respect to every other rrxe
    /// atomic, on any device. Does not sleep.
    pub(crate) fn atomic(&self, va: u64, op: AtomicOp) -> Result<u64, MrError> {
        if va % 8 != 0 {
            return Err(MrError::Misaligned);
        }
        let apply = |old: u64| match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if old == compare {
                    swap
                } else {
                    old
                }
            }
            AtomicOp::FetchAdd { add } => old.wrapping_add(add),
            AtomicOp::Write { value } => value,
        };
        match &self.memory {
            Memory::User(umem) => Ok(umem.atomic(self.offset(va, 8)?, apply)?),
            Memory::Kernel(mem) => Ok(mem.atomic(va, apply)?),
            Memory::Fast(fast) => {
                // Pages are at least 4 KiB and the target 8-byte aligned: one piece, whose
                // kernel address has the alignment of `va` (page addresses are aligned).
                let mut kaddr = None;
                self.fast_pieces(fast, va, 8, |a, _, n| {
                    kaddr = (n == 8).then_some(a);
                    Ok(())
                })?;
                Ok(fast.mem.atomic(kaddr.ok_or(MrError::Bounds)?, apply)?)
            }
        }
    }
}

/// A device's memory regions, by key index, and the key portions it hands out.
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    mrs: IndexTable<MrState>,
    /// Low byte of the next key.
    key_variant: AtomicU32,
}

impl MrTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            mrs <- IndexTable::new(),
            key_variant: AtomicU32::new(0),
        })
    }

    /// The MR that `key` names, if it is registered: the whole key must match, not just the
    /// table index it carries. Any context; the caller must drop the reference it gets in
    /// process context (see the module documentation).
    #[inline]
    pub(crate) fn lookup(&self, key: u32) -> Option<Arc<MrState>> {
        let mr = self.mrs.get(region::key_index(key))?;
        (mr.is_valid() && mr.key() == key).then_some(mr)
    }

    fn register(
        &self,
        charge: Option<Charge>,
        pd: PdId,
        memory: Memory,
        iova: u64,
        length: u64,
        access: i32,
    ) -> Result<(RrxeMr, u32)> {
        let reservation = self.mrs.reserve(1, params::MAX_MR)?;
        let variant = self.key_variant.fetch_add(1, Ordering::Relaxed);
        let key = region::key(reservation.index(), variant);
        let state = Arc::new(
            MrState {
                pd,
                // Flags are a bit set; the sign bit is no access right.
                access: AtomicU32::new(access as u32),
                iova: AtomicU64::new(iova),
                length: AtomicU64::new(length),
                key: AtomicU32::new(key),
                // A fast-register MR starts free: usable once a Fast Register validates it.
                valid: AtomicBool::new(!matches!(memory, Memory::Fast(_))),
                windows: AtomicU32::new(0),
                memory,
            },
            GFP_KERNEL,
        )?;
        reservation.store(state.clone())?;
        Ok((
            RrxeMr {
                state,
                _charge: charge,
            },
            key,
        ))
    }

    /// Registers pinned user memory: `length` bytes, the first at `iova` in the MR's address
    /// space (`ibv_reg_mr_iova`: it need not be the user address; offsets are `va - iova`).
    pub(crate) fn reg_user(
        &self,
        charge: Charge,
        pd: PdId,
        umem: Umem,
        iova: u64,
        length: u64,
        access: i32,
    ) -> Result<(RrxeMr, u32)> {
        // The MR's address range must not wrap around.
        iova.checked_add(length).ok_or(EINVAL)?;
        self.register(Some(charge), pd, Memory::User(umem), iova, length, access)
    }

    /// Reregisters user MR `mr` (IBA 11.2.8.2) as a new registration: new keys (a fresh
    /// table index, so the core's destruction of `mr` afterwards cannot take the new MR's
    /// entry), the memory pinned again with `pin` for the (new) rights. `mr` is invalid from
    /// then on; on failure it is left as it was. Process context, in the registering
    /// process.
    pub(crate) fn rereg_user(
        &self,
        charge: Charge,
        mr: &RrxeMr,
        req: &MrRereg,
        pin: &UmemPinner,
    ) -> Result<(RrxeMr, u32)> {
        let old = &mr.state;
        // Only user MRs come through uverbs; a DMA MR has no translation to keep.
        let Memory::User(umem) = &old.memory else {
            return Err(EINVAL);
        };
        let access = req.access.unwrap_or(old.access() as i32);
        let (addr, length, iova) = req
            .trans
            .unwrap_or((umem.address(), old.length(), old.iova()));
        iova.checked_add(length).ok_or(EINVAL)?;
        // Pinned first: a failure here leaves `mr` untouched.
        let umem = pin.pin(addr, length, access)?;
        // An MR with bound windows cannot be reregistered, as it cannot be deregistered (IBA
        // 10.6.7.3): the windows would reach memory the MR no longer describes.
        old.valid.store(false, Ordering::SeqCst);
        if old.windows.load(Ordering::SeqCst) != 0 {
            old.valid.store(true, Ordering::SeqCst);
            return Err(EINVAL);
        }
        self.register(
            Some(charge),
            req.pd,
            Memory::User(umem),
            iova,
            length,
            access,
        )
        .inspect_err(|_| {
            old.valid.store(true, Ordering::SeqCst);
        })
    }

    /// Creates the all-memory MR of a kernel PD (`ib_alloc_pd`'s `__internal_mr`), counted
    /// as part of the PD.
    pub(crate) fn dma(&self, pd: PdId, memory: KernelMemory, access: i32) -> Result<(RrxeMr, u32)> {
        self.register(None, pd, Memory::Kernel(memory), 0, 0, access)
    }

    /// Destroys an MR: its key becomes invalid at once; in-flight users keep the memory
    /// until they drop their references (the caller drops `mr` on success). Fails with
    /// `EINVAL`, the MR unchanged, while memory windows are bound to it (IBA 10.6.7.3;
    /// rdma_rxe's `num_mw` check). Process context.
    pub(crate) fn dereg(&self, mr: &RrxeMr) -> Result {
        let was = mr.state.valid.swap(false, Ordering::SeqCst);
        if mr.state.windows.load(Ordering::SeqCst) != 0 {
            mr.state.valid.store(was, Ordering::SeqCst);
            return Err(EINVAL);
        }
        // Drops the table's reference (not the last one: `mr` holds another).
        drop(self.mrs.remove(region::key_index(mr.state.key())));
        Ok(())
    }

    /// Creates a fast-register MR of kernel PD `pd` with room for `max_pages` pages; it
    /// starts free (IBA base memory management extensions: Allocate L_Key). Process context.
    pub(crate) fn alloc_fast(
        &self,
        charge: Charge,
        pd: PdId,
        mem: KernelMemory,
        max_pages: u32,
    ) -> Result<(RrxeMr, u32)> {
        if max_pages == 0 || max_pages > params::MAX_FAST_REG_PAGES {
            return Err(EINVAL);
        }
        let n = max_pages as usize;
        let mut pages = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            pages.push(AtomicU64::new(0), GFP_KERNEL)?;
        }
        let fast = FastPages {
            mem,
            pages,
            npages: AtomicUsize::new(0),
            page_shift: AtomicU32::new(params::PAGE_SHIFT),
        };
        self.register(Some(charge), pd, Memory::Fast(fast), 0, 0, 0)
    }

    /// Executes a Fast Register WQE of a QP of `pd`: the MR `key`'s index names becomes
    /// valid under `key` for `length` bytes at `iova` with `access`. It must be a
    /// fast-register MR of the QP's PD and free (a Fast Register of a valid MR is an error;
    /// the consumer invalidates first), and its page list must hold the range. Remote Write
    /// and Atomic need Local Write (IBA 10.6.3.1, the rule `ib_check_mr_access` applies to
    /// every registration). Any failure is a local operation error for the WQE. Process
    /// context.
    pub(crate) fn fast_register(
        &self,
        pd: PdId,
        key: u32,
        access: u32,
        iova: u64,
        length: u64,
    ) -> Result<(), ()> {
        let mr = self.mrs.get(region::key_index(key)).ok_or(())?;
        let Memory::Fast(fast) = &mr.memory else {
            return Err(());
        };
        if mr.pd != pd || mr.is_valid() {
            return Err(());
        }
        let writes =
            b::ib_access_flags_IB_ACCESS_REMOTE_WRITE | b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
        if access & writes != 0 && access & b::ib_access_flags_IB_ACCESS_LOCAL_WRITE == 0 {
            return Err(());
        }
        // Zero-based and on-demand registrations are not offered.
        if access & (b::ib_access_flags_IB_ZERO_BASED | b::ib_access_flags_IB_ACCESS_ON_DEMAND) != 0
        {
            return Err(());
        }
        let shift = fast.page_shift.load(Ordering::Relaxed);
        let size = 1u64 << shift;
        let npages = fast.npages.load(Ordering::Acquire) as u64;
        let end = (iova & (size - 1)).checked_add(length).ok_or(())?;
        if iova.checked_add(length).is_none() || end > npages << shift {
            return Err(());
        }
        mr.access.store(access, Ordering::Relaxed);
        mr.iova.store(iova, Ordering::Relaxed);
        mr.length.store(length, Ordering::Relaxed);
        mr.key.store(key, Ordering::Release);
        // Publishes the fields above to `lookup` (Acquire); a racing Fast Register of the
        // same MR loses here.
        mr.valid
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| ())
    }

    /// Invalidates the fast-register MR `key` names, for a Local Invalidate or a Send with
    /// Invalidate on a QP of `pd`: the whole key must match a valid fast-register MR of the
    /// QP's PD; MRs registered through the verbs are not invalidatable (o10-32), nor is one
    /// with windows bound. It becomes free; accesses through its R_Key fail from now on (a
    /// Remote Access Error NAK for a peer). Process context.
    pub(crate) fn invalidate(&self, pd: PdId, key: u32) -> Result<(), ()> {
        let mr = self.mrs.get(region::key_index(key)).ok_or(())?;
        if !matches!(mr.memory, Memory::Fast(_)) || mr.pd != pd || mr.key() != key {
            return Err(());
        }
        if mr.windows.load(Ordering::SeqCst) != 0 {
            return Err(());
        }
        mr.valid
            .compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| ())
    }
}

/// Starts a new page list for a fast-register MR (`map_mr_sg`), of pages of `page_size`
/// bytes (a power of two the core checked against our `page_size_cap`).
pub(crate) fn map_begin(mr: &RrxeMr, page_size: u32) -> Result {
    let Memory::Fast(fast) = &mr.state.memory else {
        return Err(EINVAL);
    };
    if !page_size.is_power_of_two() || page_size < (1 << params::PAGE_SHIFT) {
        return Err(EINVAL);
    }
    fast.page_shift
        .store(page_size.trailing_zeros(), Ordering::Relaxed);
    fast.npages.store(0, Ordering::Release);
    Ok(())
}

/// Appends page `addr` (its kernel address: rrxe's DMA addresses are kernel virtual
/// addresses) to a fast-register MR's list; `ENOMEM` once the list is full, which
/// `ib_sg_to_pages` takes as the end of what can be mapped.
pub(crate) fn map_page(mr: &RrxeMr, addr: u64) -> Result {
    let Memory::Fast(fast) = &mr.state.memory else {
        return Err(EINVAL);
    };
    let n = fast.npages.load(Ordering::Relaxed);
    let slot = fast.pages.get(n).ok_or(ENOMEM)?;
    slot.store(addr, Ordering::Relaxed);
    fast.npages.store(n + 1, Ordering::Release);
    Ok(())
}
