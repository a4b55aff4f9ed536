// SPDX-License-Identifier: GPL-2.0

//! Work queue elements and the queues that hold them.
//!
//! The engine never owns a work queue: in the kernel the send and receive
//! queues are rings shared with user space (rdma_rxe's ABI), so the engine
//! reaches them through [`SendQueue`] and [`RecvQueue`], which the glue
//! implements over the rings and the simulation over vectors. WQEs arrive
//! here already decoded and validated (IBA 11.4.1.1 "Post Send Request":
//! opcode, flags and lengths were checked when the WR was posted). The
//! engine never walks a scatter/gather list itself: it names a WQE and a
//! byte offset, and [`super::memory::Memory`] walks the WQE's [`Sge`]s,
//! which the queue lends it.

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
    /// A local operation, executed through
    /// [`super::memory::Memory::local_operation`] when the WQE reaches the
    /// head of the send queue, in order with the others.
    Local(LocalOp),
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

    /// Whether the operation takes a responder resource at the peer (IBA
    /// 9.7.5.1.5, 11.2.4.2: what max_rd_atomic and max_dest_rd_atomic
    /// count): an RDMA Read or an atomic. An Atomic Write is acknowledged
    /// like an RDMA Write and takes none.
    #[must_use]
    pub const fn uses_responder_resource(self) -> bool {
        matches!(
            self,
            Self::RdmaRead | Self::AtomicCmpSwap { .. } | Self::AtomicFetchAdd { .. }
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

    /// Whether the responder takes the receive WQE at the first packet (a
    /// Send) rather than at the last (an RDMA Write with Immediate, whose
    /// earlier packets only place data: IBA 9.7.7.2.4).
    #[must_use]
    pub const fn consumes_recv_wqe_at_first(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendWithImm(_) | Self::SendWithInv(_)
        )
    }

    /// Whether the message goes on the wire at all.
    #[must_use]
    pub const fn is_wire(self) -> bool {
        !matches!(self, Self::Local(_) | Self::Unsupported)
    }
}

/// A work request that acts on the CA's own memory protection tables
/// instead of the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalOp {
    /// Local Invalidate (IBA 10.6.6): `key` becomes invalid (a type 2
    /// window or a fast-register MR).
    Invalidate {
        /// The L_Key or R_Key to invalidate.
        key: u32,
    },
    /// Fast Register (the memory management extensions, IBA 10.6.3.5 and
    /// 10.7.2.4): the free MR whose key index `key` names becomes valid for
    /// `length` bytes at `iova` under `key`, with `access`.
    FastRegister {
        /// The new L_Key/R_Key (index and consumer key portion).
        key: u32,
        /// `IB_ACCESS_*` rights.
        access: u32,
        /// First virtual address.
        iova: u64,
        /// Length in bytes.
        length: u64,
    },
    /// Bind Memory Window (IBA 10.6.7.2): window `mw_rkey` is bound to
    /// `length` bytes at `addr` of the MR `mr_lkey`, with `access`, and
    /// takes the key portion of `rkey`.
    BindMw {
        /// The window's current R_Key.
        mw_rkey: u32,
        /// The key whose low byte the bound window takes.
        rkey: u32,
        /// The MR the window is bound to.
        mr_lkey: u32,
        /// First address of the window.
        addr: u64,
        /// Length of the window.
        length: u64,
        /// `IB_ACCESS_*` rights.
        access: u32,
    },
}

/// A scatter/gather element: `len` bytes at `addr` of the region `lkey`
/// names (IBA 10.7.1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// L_Key of the memory region.
    pub lkey: u32,
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
    /// The remote XRC SRQ number (SRQN) an XRC initiator's request goes to,
    /// carried in every packet's XRCETH (IBA Annex A14); ignored by other
    /// QP types.
    pub xrc_srqn: u32,
}

/// A receive WQE taken off an RQ or SRQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// Caller's work request id.
    pub wr_id: u64,
    /// Total length of the scatter list.
    pub length: u32,
    /// The queue's handle of the WQE, by which [`RecvQueue::sge`] finds its
    /// scatter list once the WQE has left the ring.
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
    /// Gather element `i` of the posted WQE at `index`; `None` past its
    /// list, or for a WQE whose data is inline.
    fn sge(&self, index: u32, i: u32) -> Option<Sge>;
    /// The inline data of the posted WQE at `index`, if it has any.
    fn inline_data(&self, index: u32) -> Option<&[u8]>;
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
    /// Scatter element `i` of the receive WQE `id` taken last; `None` past
    /// its list.
    fn sge(&self, id: u32, i: u32) -> Option<Sge>;
}
