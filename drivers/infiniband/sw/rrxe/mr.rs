// SPDX-License-Identifier: GPL-2.0

//! Memory regions: keys, the device's table of them, and the memory behind them as the data
//! path reaches it.
//!
//! Each MR's state ([`MrState`]) is shared: the device's table holds one reference from
//! registration to deregistration, and the data path takes more with [`lookup`] for as long
//! as it works on the memory. Deregistration takes the MR out of the table and marks it
//! invalid; the pinned pages go when the last reference does.
//!
//! Dropping the last reference to a user MR unpins its pages (`ib_umem_release`), which may
//! sleep: the data path must drop the references it holds in process context (it runs in a
//! work item), never in softirq or with a spinlock held.

use crate::device::RrxeDevice;
use crate::glue::bindings as b;
use crate::glue::rdma::{Device, MrRereg, PdId};
use crate::glue::umem::{KernelMemory, MemError, Umem};
use crate::params;
use crate::transport::qp::memory::AtomicOp;
use crate::transport::region;
use crate::Rrxe;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Handle of one rrxe MR, owned by the RDMA core's `struct ib_mr`.
pub(crate) struct RrxeMr {
    state: Arc<MrState>,
}

/// The memory an MR covers.
enum Memory {
    /// Pinned user memory, starting at the MR's iova.
    User(Umem),
    /// All of kernel memory (a DMA MR): addresses are kernel virtual addresses.
    Kernel(KernelMemory),
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
    /// `IB_ACCESS_*` flags it was registered with.
    access: u32,
    /// Address of its first byte in its own address space (user MRs).
    iova: u64,
    /// Length in bytes (user MRs).
    length: u64,
    /// Its L_Key and R_Key.
    key: u32,
    /// Cleared at deregistration; no new access may start afterwards.
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
        if self.access & access.required() != access.required() {
            return Err(MrError::Access);
        }
        let len = u64::try_from(len).map_err(|_| MrError::Bounds)?;
        match self.memory {
            Memory::User(_) => region::offset_in(self.iova, self.length, va, len)
                .map(|_| ())
                .ok_or(MrError::Bounds),
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
        self.access
    }

    /// Whether `len` bytes at `va` lie inside it: a window may only be bound within its MR
    /// (IBA 10.6.7.2.4, C10-75).
    pub(crate) fn contains(&self, va: u64, len: u64) -> bool {
        match self.memory {
            Memory::User(_) => region::offset_in(self.iova, self.length, va, len).is_some(),
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

    /// The offset of `len` bytes at `va` in a user MR.
    fn offset(&self, va: u64, len: usize) -> Result<usize, MrError> {
        let len = u64::try_from(len).map_err(|_| MrError::Bounds)?;
        let offset = region::offset_in(self.iova, self.length, va, len).ok_or(MrError::Bounds)?;
        usize::try_from(offset).map_err(|_| MrError::Bounds)
    }

    /// Copies `dst.len()` bytes at `va` out of the MR (after [`MrState::check`]). Does not
    /// sleep: process context or softirq.
    pub(crate) fn copy_out(&self, va: u64, dst: &mut [u8]) -> Result<(), MrError> {
        match &self.memory {
            Memory::User(umem) => Ok(umem.copy_out(self.offset(va, dst.len())?, dst)?),
            Memory::Kernel(mem) => Ok(mem.copy_out(va, dst)?),
        }
    }

    /// Copies `src` into the MR at `va` (after [`MrState::check`]). Does not sleep: process
    /// context or softirq.
    pub(crate) fn copy_in(&self, va: u64, src: &[u8]) -> Result<(), MrError> {
        match &self.memory {
            Memory::User(umem) => Ok(umem.copy_in(self.offset(va, src.len())?, src)?),
            Memory::Kernel(mem) => Ok(mem.copy_in(va, src)?),
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
        }
    }
}

/// The MR that `key` names on `dev`, if it is registered: the whole key must match, not just
/// the table index it carries. Any context; the caller must drop the reference it gets in
/// process context (see the module documentation).
pub(crate) fn lookup(dev: &RrxeDevice, key: u32) -> Option<Arc<MrState>> {
    let mr = dev.mrs().get(region::key_index(key))?;
    (mr.key == key && mr.is_valid()).then_some(mr)
}

fn register(
    dev: &RrxeDevice,
    pd: PdId,
    memory: Memory,
    iova: u64,
    length: u64,
    access: i32,
) -> Result<(RrxeMr, u32)> {
    let reservation = dev.mrs().reserve(1, params::MAX_MR)?;
    let variant = dev.key_variant.fetch_add(1, Ordering::Relaxed);
    let key = region::key(reservation.index(), variant);
    let state = Arc::new(
        MrState {
            pd,
            // Flags are a bit set; the sign bit is no access right.
            access: access as u32,
            iova,
            length,
            key,
            valid: AtomicBool::new(true),
            windows: AtomicU32::new(0),
            memory,
        },
        GFP_KERNEL,
    )?;
    reservation.store(state.clone())?;
    let mr = RrxeMr { state };
    #[cfg(rrxe_selftest)]
    if iova >> 32 == crate::mr_selftest::MAGIC && matches!(mr.state.memory, Memory::User(_)) {
        if let Err(e) = crate::mr_selftest::run(dev, &mr.state, iova, length) {
            // A fresh MR has no windows: deregistration succeeds.
            let _ = dereg(dev, &mr);
            return Err(e);
        }
    }
    Ok((mr, key))
}

/// Registers pinned user memory: `length` bytes, the first at `iova` in the MR's address
/// space (`ibv_reg_mr_iova`: it need not be the user address; offsets are `va - iova`).
pub(crate) fn reg_user(
    dev: &RrxeDevice,
    pd: PdId,
    umem: Umem,
    iova: u64,
    length: u64,
    access: i32,
) -> Result<(RrxeMr, u32)> {
    // The MR's address range must not wrap around.
    iova.checked_add(length).ok_or(EINVAL)?;
    register(dev, pd, Memory::User(umem), iova, length, access)
}

/// Reregisters user MR `mr` (IBA 11.2.8.2) as a new registration: new keys (a fresh table
/// index, so the core's destruction of `mr` afterwards cannot take the new MR's entry), the
/// memory pinned again for the (new) rights. `mr` is invalid from then on; on failure it is
/// left as it was. Process context, in the registering process.
pub(crate) fn rereg_user(dev: &Device<Rrxe>, mr: &RrxeMr, req: &MrRereg) -> Result<(RrxeMr, u32)> {
    let old = &mr.state;
    // Only user MRs come through uverbs; a DMA MR has no translation to keep.
    let Memory::User(umem) = &old.memory else {
        return Err(EINVAL);
    };
    let access = req.access.unwrap_or(old.access as i32);
    let (addr, length, iova) = req.trans.unwrap_or((umem.address(), old.length, old.iova));
    iova.checked_add(length).ok_or(EINVAL)?;
    // Pinned first: a failure here leaves `mr` untouched.
    let umem = Umem::get(dev, addr, length, access)?;
    // An MR with bound windows cannot be reregistered, as it cannot be deregistered (IBA
    // 10.6.7.3): the windows would reach memory the MR no longer describes.
    old.valid.store(false, Ordering::SeqCst);
    if old.windows.load(Ordering::SeqCst) != 0 {
        old.valid.store(true, Ordering::SeqCst);
        return Err(EINVAL);
    }
    register(dev.data(), req.pd, Memory::User(umem), iova, length, access).inspect_err(|_| {
        old.valid.store(true, Ordering::SeqCst);
    })
}

/// Creates the all-memory MR of a kernel PD.
pub(crate) fn dma(
    dev: &RrxeDevice,
    pd: PdId,
    memory: KernelMemory,
    access: i32,
) -> Result<(RrxeMr, u32)> {
    register(dev, pd, Memory::Kernel(memory), 0, 0, access)
}

/// Destroys an MR: its key becomes invalid at once; in-flight users keep the memory until
/// they drop their references (the caller drops `mr` on success). Fails with `EINVAL`, the
/// MR unchanged, while memory windows are bound to it (IBA 10.6.7.3; rdma_rxe's `num_mw`
/// check). Process context.
pub(crate) fn dereg(dev: &RrxeDevice, mr: &RrxeMr) -> Result {
    mr.state.valid.store(false, Ordering::SeqCst);
    if mr.state.windows.load(Ordering::SeqCst) != 0 {
        mr.state.valid.store(true, Ordering::SeqCst);
        return Err(EINVAL);
    }
    // Drops the table's reference (not the last one: `mr` holds another).
    drop(dev.mrs().remove(region::key_index(mr.state.key)));
    Ok(())
}
