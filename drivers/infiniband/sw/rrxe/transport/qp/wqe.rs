// SPDX-License-Identifier: GPL-2.0

//! Work queue elements and the queues that hold them.
//!
//! The engine never owns a work queue: in the kernel the send and receive
//! queues are rings shared with user space (rdma_rxe's ABI), so the engine
//! reaches them through [`SendQueue`] and [`RecvQueue`], which the glue
//! implements over the rings and the simulation over vectors. WQEs arrive
//! here already decoded and validated (IBA 11.4.1.1 "Post Send Request":
//! opcode, flags and lengths were checked when the WR was posted). Scatter /
//! gather lists stay opaque: the engine names a WQE and a byte offset and
//! [`super::memory::Memory`] walks the SGEs.

/// The remote buffer of an RDMA or atomic operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key authorising the access (IBA 10.6.3).
    pub rkey: u32,
}

/// Destination of a UD send (IBA 10.2.3.1: each UD WR names its target).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdDest {
    /// Destination QP number.
    pub dest_qpn: u32,
    /// Q_Key; a value with bit 31 set selects the QP's own Q_Key (IBA
    /// 10.2.5, C10-15).
    pub qkey: u32,
    /// Opaque address-handle number, handed back in the transmit metadata
    /// so the glue can build the IP/UDP headers.
    pub ah: u32,
}

/// Operation of a send WQE (IBA 10.7.2.1 / verbs `ib_wr_opcode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendOpcode {
    /// Send.
    #[default]
    Send,
    /// Send with immediate data.
    SendWithImm(u32),
    /// Send with invalidate: the responder invalidates this R_Key.
    SendWithInv(u32),
    /// RDMA Write.
    RdmaWrite,
    /// RDMA Write with immediate data (consumes a receive WQE remotely).
    RdmaWriteWithImm(u32),
    /// RDMA Read.
    RdmaRead,
    /// Atomic Compare & Swap of the 8 bytes at the remote address.
    AtomicCmpSwap {
        /// Value compared with the remote data.
        compare: u64,
        /// Value stored if the comparison succeeds.
        swap: u64,
    },
    /// Atomic Fetch & Add on the 8 bytes at the remote address.
    AtomicFetchAdd {
        /// Value added.
        add: u64,
    },
    /// Atomic Write (IBA 1.5 memory placement extensions): the 8 bytes, in
    /// the requester's memory order, stored at the remote address as one
    /// single-copy-atomic write.
    AtomicWrite {
        /// The bytes to store.
        value: [u8; 8],
    },
    /// A local operation (local invalidate, fast register, bind) executed
    /// by the kernel through [`super::memory::Memory::local_operation`] when
    /// the WQE reaches the head of the send queue; the byte is the glue's
    /// own kind, echoed in the completion.
    Local(u8),
    /// A WQE the glue could not decode; it completes with a local QP
    /// operation error rather than being guessed at.
    Unsupported,
}

impl SendOpcode {
    /// Whether the operation is an RDMA Read or an atomic: the requests
    /// bounded by max_rd_atomic and held back by a fence (IBA 10.8.3.3).
    /// An Atomic Write counts too: like rdma_rxe's responder, a responder
    /// may spend one of its resources on it.
    #[must_use]
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(
            self,
            Self::RdmaRead
                | Self::AtomicCmpSwap { .. }
                | Self::AtomicFetchAdd { .. }
                | Self::AtomicWrite { .. }
        )
    }

    /// Whether the operation is an atomic.
    #[must_use]
    pub const fn is_atomic(self) -> bool {
        matches!(
            self,
            Self::AtomicCmpSwap { .. } | Self::AtomicFetchAdd { .. }
        )
    }

    /// Whether the message consumes a receive WQE at the responder and is
    /// therefore subject to end-to-end credits (IBA 9.7.7.2).
    #[must_use]
    pub const fn consumes_recv_wqe(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendWithImm(_) | Self::SendWithInv(_) | Self::RdmaWriteWithImm(_)
        )
    }

    /// Whether the message goes on the wire at all.
    #[must_use]
    pub const fn is_wire(self) -> bool {
        !matches!(self, Self::Local(_) | Self::Unsupported)
    }
}

/// Send WR flags (IBA 11.4.1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags(u8);

impl SendFlags {
    /// No flags.
    pub const NONE: Self = Self(0);
    /// Generate a completion on success (errors always complete).
    pub const SIGNALED: Self = Self(1);
    /// Set the solicited-event bit on the last packet.
    pub const SOLICITED: Self = Self(2);
    /// Wait for earlier RDMA Reads and atomics to complete first.
    pub const FENCE: Self = Self(4);
    /// The payload is inline in the WQE (informational: gather handles it).
    pub const INLINE: Self = Self(8);

    /// Whether every flag of `other` is set.
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Union of two flag sets.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// A decoded, validated send WQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWqe {
    /// Caller's work request id, returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub opcode: SendOpcode,
    /// Flags.
    pub flags: SendFlags,
    /// Total length of the gather list (or of the READ target list; 8 for
    /// atomics).
    pub length: u32,
    /// Remote buffer of RDMA and atomic operations.
    pub remote: RemoteAddr,
    /// Destination of a UD send; ignored on connected QPs.
    pub ud: UdDest,
}

/// A receive WQE taken off an RQ or SRQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// Caller's work request id.
    pub wr_id: u64,
    /// Total length of the scatter list.
    pub length: u32,
    /// Opaque handle by which [`super::memory::Memory`] finds the scatter
    /// list once the WQE has left the ring.
    pub id: u32,
}

/// The send queue as the engine sees it: the ring between the posting
/// consumer (producer index) and the engine (consumer index).
///
/// Indices are free-running `u32`s; only differences are meaningful.
pub trait SendQueue {
    /// Index of the oldest WQE not yet retired (the ring's consumer index).
    fn consumer(&self) -> u32;
    /// One past the newest posted WQE (the ring's producer index).
    fn producer(&self) -> u32;
    /// The WQE at `index`, or `None` if it is not posted.
    fn get(&self, index: u32) -> Option<SendWqe>;
    /// Called once per WQE, in order, when the engine is done with it (its
    /// completion, if any, has been queued); the ring may reuse the slot.
    fn retire(&mut self, index: u32);
}

/// A receive queue or shared receive queue.
pub trait RecvQueue {
    /// Takes the next receive WQE, consumed by the first packet of a Send or
    /// the last packet of an RDMA Write with immediate.
    fn pop(&mut self) -> Option<RecvWqe>;
    /// Number of WQEs posted and not yet taken: the credits an RC responder
    /// advertises (IBA 9.7.7.2).
    fn posted(&self) -> u32;
    /// Whether this is an SRQ. Credits are not reported for SRQs (the AETH
    /// carries "no credit information", allowed by IBA 10.2.9.5), and an SRQ
    /// is not flushed when the QP enters the error state.
    fn is_shared(&self) -> bool {
        false
    }
}
