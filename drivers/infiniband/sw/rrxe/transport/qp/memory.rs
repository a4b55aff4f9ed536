// SPDX-License-Identifier: GPL-2.0

//! Access to local and remote memory.
//!
//! Memory regions, protection domains and SGE walking belong to the
//! kernel; the engine only says which bytes move where. Errors are typed so
//! that each maps to exactly one IBA outcome: a [`RemoteError`] becomes a
//! NAK code sent back to the requester (IBA 9.7.5.2), a [`LocalError`] a
//! completion status on a local WQE (IBA 10.10.3 / 11.6.2).

use super::super::aeth::NakCode;
use super::completion::WcStatus;
use super::wqe::{LocalOp, RecvQueue, RecvWqe, SendQueue};

/// Failure touching local buffers named by a WQE's SGEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalError {
    /// L_Key invalid, out of bounds or without the needed rights.
    Protection,
    /// The data does not fit the scatter list.
    Length,
    /// Any other local failure of the WQE.
    Operation,
    /// A Bind Memory Window WQE the CA refused (IBA 10.6.7.2.4: the bind's MW, MR, PD,
    /// rights or range were not acceptable).
    MwBind,
}

impl LocalError {
    /// The completion status a WQE failing this way gets.
    #[must_use]
    pub const fn status(self) -> WcStatus {
        match self {
            Self::Protection => WcStatus::LocProtErr,
            Self::Length => WcStatus::LocLenErr,
            Self::Operation => WcStatus::LocQpOpErr,
            Self::MwBind => WcStatus::MwBindErr,
        }
    }
}

/// Failure of a responder-side access on behalf of the remote requester.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteError {
    /// Bad R_Key, bounds or access rights (NAK Remote Access Error).
    Access,
    /// The request itself is invalid, e.g. a misaligned atomic (NAK Invalid
    /// Request).
    InvalidRequest,
    /// The responder failed for reasons of its own (NAK Remote Operational
    /// Error).
    Operational,
}

impl RemoteError {
    /// The NAK code reporting this error (IBA 9.7.5.2.4 - 9.7.5.2.6).
    #[must_use]
    pub const fn nak_code(self) -> NakCode {
        match self {
            Self::Access => NakCode::RemoteAccessError,
            Self::InvalidRequest => NakCode::InvalidRequest,
            Self::Operational => NakCode::RemoteOperationalError,
        }
    }
}

/// Right needed on a memory region for a remote access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteAccess {
    /// RDMA Write (and write with immediate).
    Write,
    /// RDMA Read.
    Read,
    /// Atomic operation.
    Atomic,
}

/// The protection domain an R_Key must belong to for a remote access: an
/// RC or UC QP's own, or for an XRC target the PD of the XRC SRQ the
/// request names (IBA Annex A14: the SRQ's PD, not the target QP's, governs
/// RDMA and atomic access).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PdOf {
    /// The QP's own protection domain.
    Qp,
    /// The protection domain of an XRC SRQ, as the driver names it in
    /// [`super::io::XrcSrq::pd`] (rrxe names it by the SRQ's number and
    /// resolves it when the key is used).
    XrcSrq(u32),
}

/// An R_Key and the protection domain it must belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RKey {
    /// The R_Key the request carries.
    pub key: u32,
    /// Where it must be valid.
    pub pd: PdOf,
}

/// An 8-byte atomic operation (IBA 9.4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Compare & Swap: store `swap` if the target equals `compare`.
    CompareSwap {
        /// Compare operand.
        compare: u64,
        /// Swap operand.
        swap: u64,
    },
    /// Fetch & Add.
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// Atomic Write: store `value` (native byte order) in one write. Needs
    /// remote write access, not remote atomic (IBA 1.5 memory placement
    /// extensions); the original value is not returned to the requester.
    Write {
        /// The value stored.
        value: u64,
    },
}

/// Memory services the kernel provides to the engine.
///
/// Every call is made at most once per byte range for a given execution:
/// in particular [`Memory::atomic`] is called exactly once per atomic
/// request; duplicates are answered from saved results.
pub trait Memory {
    /// Copies `dst.len()` bytes of send WQE `sq_index`'s gather list (or
    /// inline data), starting `offset` bytes in, into `dst`.
    fn gather(
        &mut self,
        sq: &dyn SendQueue,
        sq_index: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> Result<(), LocalError>;
    /// Stores `src` into send WQE `sq_index`'s scatter list at `offset`:
    /// RDMA Read response data, or the 8-byte original value of an atomic
    /// (native byte order).
    fn scatter_send(
        &mut self,
        sq: &dyn SendQueue,
        sq_index: u32,
        offset: u32,
        src: &[u8],
    ) -> Result<(), LocalError>;
    /// Fills the first 40 bytes of a UD receive WQE's buffer with the
    /// network header of the datagram being delivered (IBA 11.4.1.2: the
    /// GRH area; on RoCEv2 the IP header). Memory that keeps no headers
    /// leaves the area untouched.
    fn write_grh(&mut self, rq: &dyn RecvQueue, wqe: &RecvWqe) -> Result<(), LocalError> {
        let _ = (rq, wqe);
        Ok(())
    }
    /// Stores `src` into a receive WQE's scatter list at `offset`.
    fn scatter_recv(
        &mut self,
        rq: &dyn RecvQueue,
        wqe: &RecvWqe,
        offset: u32,
        src: &[u8],
    ) -> Result<(), LocalError>;
    /// Checks, without touching memory, that `len` bytes at `va` may be
    /// accessed through `rkey` for `access` (done once per message, on the
    /// packet carrying the RETH, so a NAK can be sent before any data moves).
    fn check_remote(
        &mut self,
        rkey: RKey,
        va: u64,
        len: u32,
        access: RemoteAccess,
    ) -> Result<(), RemoteError>;
    /// RDMA Write payload placement.
    fn write_remote(&mut self, rkey: RKey, va: u64, src: &[u8]) -> Result<(), RemoteError>;
    /// RDMA Read source data.
    fn read_remote(&mut self, rkey: RKey, va: u64, dst: &mut [u8]) -> Result<(), RemoteError>;
    /// Executes an atomic on the 8 bytes at `va` and returns their original
    /// value. A `va` that is not 8-byte aligned must fail with
    /// [`RemoteError::InvalidRequest`].
    fn atomic(&mut self, rkey: RKey, va: u64, op: AtomicOp) -> Result<u64, RemoteError>;
    /// Invalidates `rkey` for a Send with Invalidate (IBA 10.6.4.1).
    fn invalidate(&mut self, rkey: RKey) -> Result<(), RemoteError>;
    /// Executes a local operation WQE when it reaches the head of the send
    /// queue.
    fn local_operation(&mut self, op: &LocalOp) -> Result<(), LocalError>;
}
