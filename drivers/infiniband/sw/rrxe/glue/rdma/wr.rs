// SPDX-License-Identifier: GPL-2.0

//! Kernel work requests (`struct ib_send_wr`, `struct ib_recv_wr` and the structures around
//! them) as safe views for the driver's post ops.

use super::super::bindings;

/// A scatter/gather element of a kernel work request (`struct ib_sge`): kernel virtual
/// addresses, on a software device.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KernelSge {
    /// Address.
    pub(crate) addr: u64,
    /// Length in bytes.
    pub(crate) length: u32,
    /// L_Key.
    pub(crate) lkey: u32,
}

/// The destination of a kernel UD send (`struct ib_ud_wr`).
pub(crate) struct UdTarget<'a, A> {
    /// The driver's state of the address handle.
    pub(crate) ah: &'a A,
    /// Destination QP.
    pub(crate) remote_qpn: u32,
    /// Q_Key.
    pub(crate) remote_qkey: u32,
    /// P_Key index (GSI only).
    pub(crate) pkey_index: u16,
}

/// A kernel send work request (IBA 11.4.1.1), read from the consumer's `ib_send_wr` and the
/// opcode-specific structure around it.
pub(crate) struct SendWr<'a, A> {
    pub(super) raw: &'a bindings::ib_send_wr,
    /// `enum ib_wr_opcode`.
    pub(crate) opcode: u32,
    /// `IB_SEND_*` flags.
    pub(crate) flags: u32,
    /// Remote address and key (RDMA and atomic operations).
    pub(crate) remote: (u64, u32),
    /// Compare/add and swap operands (atomics).
    pub(crate) atomic: (u64, u64),
    /// Destination (UD and GSI QPs).
    pub(crate) ud: Option<UdTarget<'a, A>>,
    /// What a Fast Register (`IB_WR_REG_MR`) registers.
    pub(crate) reg: Option<RegWr>,
}

/// A Fast Register work request (`struct ib_reg_wr`): the new key and rights, with the
/// range the MR's last `map_mr_sg` set (`ib_mr.iova`, `ib_mr.length`), read at post time.
pub(crate) struct RegWr {
    pub(crate) key: u32,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) length: u64,
}

impl<A> SendWr<'_, A> {
    /// The WR id (or the consumer's `ib_cqe` pointer, carried the same way).
    pub(crate) fn wr_id(&self) -> u64 {
        // SAFETY: both union members are 8 bytes wide; the value is only carried.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// Immediate data or invalidated R_Key, as the raw union bits.
    pub(crate) fn ex(&self) -> u32 {
        // SAFETY: both union members are 4-byte integers.
        unsafe { self.raw.ex.invalidate_rkey }
    }

    /// Number of SGEs.
    pub(crate) fn num_sge(&self) -> usize {
        usize::try_from(self.raw.num_sge).unwrap_or(0)
    }

    /// SGE `i`.
    pub(crate) fn sge(&self, i: usize) -> Option<KernelSge> {
        // SAFETY: the consumer passes `num_sge` SGEs at `sg_list` for the post.
        unsafe { sge_at(self.raw.sg_list, self.num_sge(), i) }
    }

    /// The bytes SGE `i` names, for inline sends: kernel consumers pass kernel virtual
    /// addresses of memory they own for the duration of the post.
    pub(crate) fn inline_bytes(&self, i: usize) -> Option<&[u8]> {
        let s = self.sge(i)?;
        if s.length == 0 {
            return Some(&[]);
        }
        let addr = usize::try_from(s.addr).ok()? as *const u8;
        if addr.is_null() {
            return None;
        }
        // SAFETY: per IB_SEND_INLINE's contract, the SGE names `length` readable bytes of
        // kernel memory until ib_post_send returns.
        Some(unsafe { core::slice::from_raw_parts(addr, s.length as usize) })
    }
}

/// SGE `i` of a work request's list of `n` at `list`.
///
/// # Safety
///
/// A non-null `list` must point at `n` readable `struct ib_sge`s.
unsafe fn sge_at(list: *const bindings::ib_sge, n: usize, i: usize) -> Option<KernelSge> {
    if i >= n || list.is_null() {
        return None;
    }
    // SAFETY: `i < n` and, per the function contract, `list` holds `n` SGEs.
    let s = unsafe { &*list.add(i) };
    Some(KernelSge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    })
}

/// A kernel receive work request (`struct ib_recv_wr`).
pub(crate) struct RecvWr<'a> {
    pub(super) raw: &'a bindings::ib_recv_wr,
}

impl RecvWr<'_> {
    /// The WR id (or `ib_cqe` pointer).
    pub(crate) fn wr_id(&self) -> u64 {
        // SAFETY: both union members are 8 bytes wide.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// Number of SGEs.
    pub(crate) fn num_sge(&self) -> usize {
        usize::try_from(self.raw.num_sge).unwrap_or(0)
    }

    /// SGE `i`.
    pub(crate) fn sge(&self, i: usize) -> Option<KernelSge> {
        // SAFETY: the consumer passes `num_sge` SGEs at `sg_list` for the post.
        unsafe { sge_at(self.raw.sg_list, self.num_sge(), i) }
    }
}
