// SPDX-License-Identifier: GPL-2.0

//! rdma_rxe's work queue element formats, which rdma-core's rxe provider writes into the
//! rings and rrxe's kernel posters write in the same way (Documentation/rrxe/uverbs-abi.rst,
//! sections 5 and 6): field offsets, opcodes and flags, and native-endian field access.

use crate::glue::bindings as b;
use crate::transport::qp::wqe::Sge;

/// Bytes of `struct rxe_send_wqe` before its SGE list / inline data.
pub(crate) const SEND_WQE_HEADER: usize = 208;
/// Bytes of `struct rxe_recv_wqe` before its SGE list.
pub(crate) const RECV_WQE_HEADER: usize = 40;
/// Bytes of one `struct rxe_sge` (addr u64, length u32, lkey u32).
pub(crate) const SGE_LEN: usize = 16;

/// Offsets in a send WQE.
pub(crate) mod send {
    /// `wr.wr_id`.
    pub(crate) const WR_ID: usize = 0;
    /// The remote SRQ number of an XRC initiator's WQE (IBA Annex A14: the XRCETH it
    /// sends), in what rdma_rxe's `struct rxe_send_wr` leaves `reserved` (an rxe provider
    /// without XRC writes 0 there).
    pub(crate) const XRC_SRQN: usize = 8;
    /// `wr.opcode`.
    pub(crate) const OPCODE: usize = 12;
    /// `wr.send_flags`.
    pub(crate) const FLAGS: usize = 16;
    /// `wr.ex`: immediate data (big-endian) or the R_Key to invalidate.
    pub(crate) const EX: usize = 20;
    /// The `wr.wr` union: RDMA, atomic, UD, bind and (rrxe's kernel poster) Fast Register
    /// fields, at these offsets.
    pub(crate) const REMOTE_ADDR: usize = 24;
    /// `wr.rdma.rkey`.
    pub(crate) const RDMA_RKEY: usize = 32;
    /// `wr.atomic.compare_add`.
    pub(crate) const COMPARE_ADD: usize = 32;
    /// `wr.atomic.swap`.
    pub(crate) const SWAP: usize = 40;
    /// `wr.atomic.rkey`.
    pub(crate) const ATOMIC_RKEY: usize = 48;
    /// `wr.ud.remote_qpn`.
    pub(crate) const UD_QPN: usize = 24;
    /// `wr.ud.remote_qkey`.
    pub(crate) const UD_QKEY: usize = 28;
    /// `wr.ud.pkey_index`.
    pub(crate) const UD_PKEY_INDEX: usize = 32;
    /// `wr.ud.ah_num`.
    pub(crate) const UD_AH: usize = 36;
    /// `wr.mw.addr`.
    pub(crate) const MW_ADDR: usize = 24;
    /// `wr.mw.length`.
    pub(crate) const MW_LENGTH: usize = 32;
    /// `wr.mw.mr_lkey`.
    pub(crate) const MW_MR_LKEY: usize = 40;
    /// `wr.mw.mw_rkey`.
    pub(crate) const MW_RKEY: usize = 44;
    /// `wr.mw.rkey`: the new key portion.
    pub(crate) const MW_NEW_RKEY: usize = 48;
    /// `wr.mw.access`.
    pub(crate) const MW_ACCESS: usize = 52;
    /// A Fast Register, as rrxe's kernel poster writes it where rdma_rxe keeps an MR
    /// pointer: iova, key, access, length (no address is ever taken from a ring).
    pub(crate) const REG_IOVA: usize = 24;
    /// See [`REG_IOVA`].
    pub(crate) const REG_KEY: usize = 32;
    /// See [`REG_IOVA`].
    pub(crate) const REG_ACCESS: usize = 36;
    /// See [`REG_IOVA`].
    pub(crate) const REG_LENGTH: usize = 40;
    /// `dma.length`.
    pub(crate) const DMA_LENGTH: usize = 184;
    /// `dma.num_sge`.
    pub(crate) const DMA_NUM_SGE: usize = 196;
}

/// Offsets in a receive WQE.
pub(crate) mod recv {
    /// `wr_id`.
    pub(crate) const WR_ID: usize = 0;
    /// `dma.length`.
    pub(crate) const DMA_LENGTH: usize = 16;
    /// `dma.num_sge`.
    pub(crate) const DMA_NUM_SGE: usize = 28;
}

/// `IB_WR_*` opcodes (shared with `IBV_WR_*`).
pub(crate) mod wr {
    pub(crate) const RDMA_WRITE: u32 = 0;
    pub(crate) const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub(crate) const SEND: u32 = 2;
    pub(crate) const SEND_WITH_IMM: u32 = 3;
    pub(crate) const RDMA_READ: u32 = 4;
    pub(crate) const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub(crate) const ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub(crate) const LOCAL_INV: u32 = 7;
    pub(crate) const BIND_MW: u32 = 8;
    pub(crate) const SEND_WITH_INV: u32 = 9;
    pub(crate) const ATOMIC_WRITE: u32 = 15;
    /// Kernel only (`enum ib_wr_opcode`): rdma-core has no such `IBV_WR_*`.
    pub(crate) const REG_MR: u32 = 0x20;
}

const _: () = assert!(wr::REG_MR == b::ib_wr_opcode_IB_WR_REG_MR);

/// `IB_SEND_*` flags.
pub(crate) mod send_flag {
    pub(crate) const FENCE: u32 = 1;
    pub(crate) const SIGNALED: u32 = 2;
    pub(crate) const SOLICITED: u32 = 4;
    pub(crate) const INLINE: u32 = 8;
}

/// The native-endian `u32` at `at`.
#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(v)
}

/// The native-endian `u64` at `at`.
#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(v)
}

/// The `struct rxe_sge` at `at`.
#[inline]
pub(crate) fn sge_at(b: &[u8], at: usize) -> Sge {
    Sge {
        addr: u64_at(b, at),
        len: u32_at(b, at + 8),
        lkey: u32_at(b, at + 12),
    }
}

/// Writes `v` at `at`.
#[inline]
pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// Writes `v` at `at`.
#[inline]
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// Writes `sge` at `at`.
#[inline]
pub(crate) fn put_sge(b: &mut [u8], at: usize, sge: Sge) {
    put_u64(b, at, sge.addr);
    put_u32(b, at + 8, sge.len);
    put_u32(b, at + 12, sge.lkey);
}
