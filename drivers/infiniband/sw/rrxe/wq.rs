// SPDX-License-Identifier: GPL-2.0

//! Send and receive queues of user QPs: rings in rdma_rxe's format (Documentation/rrxe/
//! uverbs-abi.rst, section 5), which the provider fills without asking the kernel.
//!
//! rdma_rxe works on WQEs in place, in memory userspace can rewrite at any moment. rrxe
//! copies each WQE once into kernel memory when it first sees it and decodes only the copy:
//! what it validated is what it executes. Indices seen by the engine run freely (u32); the
//! ring's own indices are masked.

use crate::abi::{put_sge, put_u32, put_u64, recv, send, send_flag, sge_at, u32_at, u64_at, wr};
use crate::abi::{RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_LEN};
use crate::glue::queue::{MmapInfo, SharedQueue};
use crate::glue::rdma::attr::AddressVector;
use crate::glue::rdma::udata::UData;
use crate::glue::rdma::wr::{RecvWr, SendWr};
use crate::srq::{SrqShared, MAX_SRQ_SGE};
use crate::transport::qp::state::QpType;
use crate::transport::qp::wqe::{
    LocalOp, RecvQueue, RecvWqe, RemoteAddr, SendFlags, SendOpcode, SendQueue, SendWqe, Sge, UdDest,
};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Most SGEs per WQE (rdma_rxe's RXE_MAX_SGE).
pub(crate) const MAX_SGE: u32 = 32;
/// Most inline bytes per send WQE (rdma_rxe's RXE_MAX_INLINE_DATA).
pub(crate) const MAX_INLINE: u32 = 512;
/// Most WRs per queue (rdma_rxe's RXE_MAX_QP_WR).
pub(crate) const MAX_WR: u32 = 1 << 14;

/// A send queue: the shared ring and the kernel's copies of its WQEs.
pub(crate) struct SendRing {
    ring: Arc<SharedQueue>,
    /// Where userspace maps a user QP's ring.
    mi: Option<MmapInfo>,
    /// Copies of the slots, same layout as the ring.
    copies: KVVec<u8>,
    /// A UD queue's destinations, by slot: the address of each WQE's AH, resolved when
    /// the WQE is copied (empty for connected QPs).
    dests: KVVec<Option<AddressVector>>,
    /// Free-running index of the oldest WQE not retired.
    head: u32,
    /// Free-running index of the next WQE to copy.
    copied: u32,
    qp_type: QpType,
    max_sge: u32,
    max_inline: u32,
    signal_all: bool,
}

impl SendRing {
    /// A send queue for `max_wr` WQEs of up to `max_sge` SGEs or `max_inline` inline bytes.
    /// Returns it with the granted sizes (rdma_rxe's rule: the SGE area is shared with
    /// inline data, so each grows to the larger of the two).
    pub(crate) fn new(
        qp_type: QpType,
        max_wr: u32,
        max_sge: u32,
        max_inline: u32,
        signal_all: bool,
        udata: Option<&UData>,
    ) -> Result<(Self, u32, u32, u32)> {
        if max_wr == 0 || max_wr > MAX_WR || max_sge > MAX_SGE || max_inline > MAX_INLINE {
            return Err(EINVAL);
        }
        let area = (max_sge as usize * SGE_LEN).max(max_inline as usize);
        let mut queue = SharedQueue::new(max_wr, SEND_WQE_HEADER + area)?;
        let mi = udata.map(|u| queue.export(u)).transpose()?;
        let ring = Arc::new(queue, GFP_KERNEL)?;
        let slots = ring.capacity() as usize + 1;
        let copies = KVVec::from_elem(0u8, slots * ring.slot_size(), GFP_KERNEL)?;
        let dests = match qp_type {
            QpType::Ud | QpType::Gsi => KVVec::from_elem(None, slots, GFP_KERNEL)?,
            _ => KVVec::new(),
        };
        let granted_wr = ring.capacity();
        let sge = (area / SGE_LEN) as u32;
        let inline = area as u32;
        Ok((
            Self {
                ring,
                copies,
                dests,
                head: 0,
                copied: 0,
                qp_type,
                mi,
                max_sge: sge,
                max_inline: inline,
                signal_all,
            },
            granted_wr,
            sge,
            inline,
        ))
    }

    /// Where userspace maps the ring of a user QP.
    pub(crate) fn mmap_info(&self) -> Option<MmapInfo> {
        self.mi
    }

    /// The producer side of the ring, for kernel consumers that post work requests.
    pub(crate) fn poster(&self) -> Result<SqPoster> {
        let scratch = KVec::from_elem(0u8, self.ring.slot_size(), GFP_KERNEL)?;
        Ok(SqPoster {
            ring: self.ring.clone(),
            max_sge: self.max_sge,
            max_inline: self.max_inline,
            scratch,
        })
    }

    fn mask(&self) -> u32 {
        self.ring.capacity()
    }

    /// Free-running producer index, from the ring's masked one.
    fn producer_index(&self) -> u32 {
        self.free_running(self.ring.producer())
    }

    /// The free-running index of the masked index `masked`, counted from the oldest WQE.
    fn free_running(&self, masked: u32) -> u32 {
        let mask = self.mask();
        self.head
            .wrapping_add(masked.wrapping_sub(self.head & mask) & mask)
    }

    /// Whether the producer index `producer` names WQEs not yet copied. The provider only
    /// moves it forward; one behind the WQEs already copied is the process rewriting its
    /// ring, and names nothing new. (Counting on from there would run the index round 2^32
    /// slots.)
    fn names_new(&self, producer: u32) -> bool {
        producer != self.copied
            && producer.wrapping_sub(self.head) >= self.copied.wrapping_sub(self.head)
    }

    /// Whether the provider of a user QP may post to this ring without a doorbell while a
    /// run is going: a connected QP's, whose WQEs wait in the ring for the run anyway. A UD
    /// QP's doorbell copies its WQEs at once, while their AHs are still the consumer's.
    fn runs_read_posts(&self) -> bool {
        self.mi.is_some() && self.qp_type.is_connected()
    }

    /// The ring of a user QP whose provider may post to it while a run is going, for the
    /// QP's doorbell to look at without the QP's mutex.
    pub(crate) fn user_ring(&self) -> Option<Arc<SharedQueue>> {
        self.runs_read_posts().then(|| self.ring.clone())
    }

    /// At the start of a run of the QP's task, before [`Self::snapshot`]: tells the
    /// provider the run will look at the ring again before it ends ([`Self::settle`]), so
    /// posts need no doorbell meanwhile (Documentation/rrxe/uverbs-abi.rst).
    pub(crate) fn run_begins(&self) {
        if self.runs_read_posts() {
            self.ring.set_run_pending(true);
        }
    }

    /// At the end of a run that leaves nothing for another: withdraws what
    /// [`Self::run_begins`] told the provider, and returns whether WQEs were posted since
    /// the run's snapshot. Those may have had no doorbell: the caller queues another run,
    /// for which the word stays up.
    pub(crate) fn settle(&self) -> bool {
        if !self.runs_read_posts() {
            return false;
        }
        let producer = self.free_running(self.ring.end_run_pending());
        let unseen = self.names_new(producer);
        if unseen {
            self.ring.set_run_pending(true);
        }
        unseen
    }

    /// Whether [`Self::snapshot`] would find WQEs to copy.
    #[inline]
    pub(crate) fn has_new(&self) -> bool {
        self.names_new(self.producer_index())
    }

    /// Copies the WQEs posted since the last call, resolving each UD WQE's AH number with
    /// `resolve` there and then: the AH is the one named when the WQE was posted, even if
    /// the consumer destroys it before the send goes out (mckey does, right after posting).
    /// Returns whether there were any.
    pub(crate) fn snapshot(&mut self, resolve: impl Fn(u32) -> Option<AddressVector>) -> bool {
        let producer = self.producer_index();
        if !self.names_new(producer) {
            return false;
        }
        let size = self.ring.slot_size();
        while self.copied != producer {
            let slot = (self.copied & self.mask()) as usize;
            let dst = &mut self.copies[slot * size..(slot + 1) * size];
            self.ring.read_slot_bytes(self.copied, dst);
            let ah = u32_at(dst, send::UD_AH);
            if let Some(dest) = self.dests.get_mut(slot) {
                *dest = resolve(ah);
            }
            self.copied = self.copied.wrapping_add(1);
        }
        true
    }

    /// The destination of UD WQE `handle` (the handle its decoded WQE carries as its AH),
    /// as resolved when it was copied.
    pub(crate) fn dest(&self, handle: u32) -> Option<AddressVector> {
        self.dests.get(handle as usize).copied().flatten()
    }

    /// Drops every posted WQE without completing it (IBA 10.3.1: entering RESET empties
    /// the work queues); the provider keeps its own producer index.
    pub(crate) fn drain(&mut self) {
        self.snapshot(|_| None);
        self.head = self.copied;
        self.ring.set_consumer(self.head);
    }

    fn copy(&self, index: u32) -> &[u8] {
        let size = self.ring.slot_size();
        let slot = (index & self.mask()) as usize;
        &self.copies[slot * size..(slot + 1) * size]
    }

    /// Decodes WQE `index`; WQEs the QP cannot execute decode as
    /// [`SendOpcode::Unsupported`] and complete with a local QP operation error.
    fn decode(&self, index: u32) -> SendWqe {
        let b = self.copy(index);
        let flags_raw = u32_at(b, send::FLAGS);
        let ex = u32::from_be(u32_at(b, send::EX));
        let mut flags = SendFlags::NONE;
        if self.signal_all || flags_raw & send_flag::SIGNALED != 0 {
            flags = flags.union(SendFlags::SIGNALED);
        }
        if flags_raw & send_flag::SOLICITED != 0 {
            flags = flags.union(SendFlags::SOLICITED);
        }
        if flags_raw & send_flag::FENCE != 0 {
            flags = flags.union(SendFlags::FENCE);
        }
        let inline = flags_raw & send_flag::INLINE != 0;
        if inline {
            flags = flags.union(SendFlags::INLINE);
        }
        let mut wqe = SendWqe {
            wr_id: u64_at(b, send::WR_ID),
            flags,
            ..Default::default()
        };
        // The length is recomputed from what will be moved, never taken from the
        // provider's `dma.length` for SGE lists.
        let length = if inline {
            let len = u32_at(b, send::DMA_LENGTH);
            (len <= self.max_inline).then_some(len)
        } else {
            let n = u32_at(b, send::DMA_NUM_SGE);
            (n <= self.max_sge)
                .then(|| {
                    (0..n).try_fold(0u32, |sum, i| {
                        sum.checked_add(sge_at(b, SEND_WQE_HEADER + i as usize * SGE_LEN).len)
                    })
                })
                .flatten()
        };
        let Some(length) = length else {
            wqe.opcode = SendOpcode::Unsupported;
            return wqe;
        };
        wqe.length = length;
        let rdma = RemoteAddr {
            va: u64_at(b, send::REMOTE_ADDR),
            rkey: u32_at(b, send::RDMA_RKEY),
        };
        let opcode = u32_at(b, send::OPCODE);
        let allowed = match self.qp_type {
            // An XRC initiator sends what an RC requester does (Annex A14).
            QpType::Rc | QpType::XrcIni => true,
            // IBA 10.7.2.1: UC has no Reads or atomics; UD only Sends. Local Invalidate is
            // taken on RC only, as rdma_rxe does (rxe_wr_opcode_info); Atomic Write exists
            // for RC only (IBA 1.5 memory placement extensions).
            QpType::Uc => !matches!(
                opcode,
                wr::RDMA_READ
                    | wr::ATOMIC_CMP_AND_SWP
                    | wr::ATOMIC_FETCH_AND_ADD
                    | wr::ATOMIC_WRITE
                    | wr::LOCAL_INV
                    | wr::REG_MR
            ),
            QpType::Ud | QpType::Gsi => matches!(opcode, wr::SEND | wr::SEND_WITH_IMM),
            // An XRC target has no send queue.
            QpType::XrcTgt => false,
        };
        wqe.opcode = match opcode {
            _ if !allowed => SendOpcode::Unsupported,
            wr::SEND => SendOpcode::Send,
            wr::SEND_WITH_IMM => SendOpcode::SendWithImm(ex),
            wr::SEND_WITH_INV => SendOpcode::SendWithInv(u32_at(b, send::EX)),
            wr::RDMA_WRITE => SendOpcode::RdmaWrite,
            wr::RDMA_WRITE_WITH_IMM => SendOpcode::RdmaWriteWithImm(ex),
            wr::RDMA_READ => SendOpcode::RdmaRead,
            wr::ATOMIC_CMP_AND_SWP | wr::ATOMIC_FETCH_AND_ADD if inline || length < 8 => {
                SendOpcode::Unsupported
            }
            wr::ATOMIC_CMP_AND_SWP => SendOpcode::AtomicCmpSwap {
                compare: u64_at(b, send::COMPARE_ADD),
                swap: u64_at(b, send::SWAP),
            },
            wr::ATOMIC_FETCH_AND_ADD => SendOpcode::AtomicFetchAdd {
                add: u64_at(b, send::COMPARE_ADD),
            },
            wr::LOCAL_INV => SendOpcode::Local(LocalOp::Invalidate {
                key: u32_at(b, send::EX),
            }),
            wr::BIND_MW => SendOpcode::Local(LocalOp::BindMw {
                mw_rkey: u32_at(b, send::MW_RKEY),
                rkey: u32_at(b, send::MW_NEW_RKEY),
                mr_lkey: u32_at(b, send::MW_MR_LKEY),
                addr: u64_at(b, send::MW_ADDR),
                length: u64_at(b, send::MW_LENGTH),
                access: u32_at(b, send::MW_ACCESS),
            }),
            // rdma_rxe's WQE carries an MR pointer here; rrxe's kernel poster writes the
            // iova and length the consumer's `map_mr_sg` set instead, and the MR is found by
            // its key, so nothing in a ring (which a user QP's owner can write) is ever taken
            // for an address.
            wr::REG_MR => SendOpcode::Local(LocalOp::FastRegister {
                key: u32_at(b, send::REG_KEY),
                access: u32_at(b, send::REG_ACCESS),
                iova: u64_at(b, send::REG_IOVA),
                length: u64_at(b, send::REG_LENGTH),
            }),
            // The rxe provider puts the value in `dma.atomic_wr`, where inline data would go.
            wr::ATOMIC_WRITE => match b
                .get(SEND_WQE_HEADER..SEND_WQE_HEADER + 8)
                .and_then(|v| <[u8; 8]>::try_from(v).ok())
            {
                Some(value) => SendOpcode::AtomicWrite { value },
                None => SendOpcode::Unsupported,
            },
            _ => SendOpcode::Unsupported,
        };
        match wqe.opcode {
            SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm(_) | SendOpcode::RdmaRead => {
                wqe.remote = rdma;
            }
            SendOpcode::AtomicWrite { .. } => {
                wqe.length = 8;
                wqe.remote = rdma;
            }
            SendOpcode::AtomicCmpSwap { .. } | SendOpcode::AtomicFetchAdd { .. } => {
                wqe.length = 8;
                wqe.remote = RemoteAddr {
                    va: u64_at(b, send::REMOTE_ADDR),
                    rkey: u32_at(b, send::ATOMIC_RKEY),
                };
            }
            _ => {}
        }
        if self.qp_type == QpType::XrcIni {
            wqe.xrc_srqn = u32_at(b, send::XRC_SRQN);
        }
        if matches!(self.qp_type, QpType::Ud | QpType::Gsi) {
            wqe.ud = UdDest {
                dest_qpn: u32_at(b, send::UD_QPN) & 0x00ff_ffff,
                qkey: u32_at(b, send::UD_QKEY),
                // The slot: its AH was resolved when it was copied (`dest`).
                ah: index & self.mask(),
            };
        }
        wqe
    }
}

impl SendQueue for SendRing {
    fn consumer(&self) -> u32 {
        self.head
    }

    fn producer(&self) -> u32 {
        self.copied
    }

    fn get(&self, index: u32) -> Option<SendWqe> {
        (index.wrapping_sub(self.head) < self.copied.wrapping_sub(self.head))
            .then(|| self.decode(index))
    }

    fn retire(&mut self, index: u32) {
        self.head = index.wrapping_add(1);
        self.ring.set_consumer(self.head);
    }

    fn sge(&self, index: u32, i: u32) -> Option<Sge> {
        let b = self.copy(index);
        let n = u32_at(b, send::DMA_NUM_SGE);
        if i >= n || n > self.max_sge || u32_at(b, send::FLAGS) & send_flag::INLINE != 0 {
            return None;
        }
        Some(sge_at(b, SEND_WQE_HEADER + i as usize * SGE_LEN))
    }

    fn inline_data(&self, index: u32) -> Option<&[u8]> {
        let b = self.copy(index);
        if u32_at(b, send::FLAGS) & send_flag::INLINE == 0 {
            return None;
        }
        let len = u32_at(b, send::DMA_LENGTH).min(self.max_inline) as usize;
        Some(&b[SEND_WQE_HEADER..SEND_WQE_HEADER + len])
    }
}

/// Where a QP's receive WQEs come from.
enum RecvSource {
    /// The QP's own receive queue.
    Ring(Arc<SharedQueue>),
    /// A shared receive queue (IBA 10.2.9), which other QPs take from too.
    Srq(Arc<SrqShared>),
    /// None: an XRC initiator has no receive queue, and an XRC target takes from the XRC
    /// SRQ each message names (Annex A14), which it attaches for that message
    /// ([`RecvRing::attach_xrc_srq`]).
    Detached,
}

/// A receive queue: the shared ring (or the SRQ) and a copy of the WQE being filled.
pub(crate) struct RecvRing {
    src: RecvSource,
    /// Where userspace maps a user QP's ring.
    mi: Option<MmapInfo>,
    /// Free-running index of the next WQE to take.
    head: u32,
    max_sge: u32,
    /// SGEs of the WQE taken last, with its index (on the heap: QPs are built on the
    /// stack of the create verb).
    current: KVec<Sge>,
    current_len: usize,
    current_id: u32,
    scratch: KVec<u8>,
    /// Taking a WQE from the SRQ brought it below its armed limit: the SRQ's consumer is
    /// owed the limit event, which the QP delivers outside its lock.
    srq_limit_reached: bool,
}

impl RecvRing {
    /// A receive queue for `max_wr` WQEs of up to `max_sge` SGEs; returns it with the
    /// granted number of WRs.
    pub(crate) fn new(
        max_wr: u32,
        max_sge: u32,
        udata: Option<&UData>,
    ) -> Result<(Self, u32, u32)> {
        if max_wr == 0 || max_wr > MAX_WR || max_sge > MAX_SGE {
            return Err(EINVAL);
        }
        let max_sge = max_sge.max(1);
        let slot = RECV_WQE_HEADER + max_sge as usize * SGE_LEN;
        let mut queue = SharedQueue::new(max_wr, slot)?;
        let mi = udata.map(|u| queue.export(u)).transpose()?;
        let ring = Arc::new(queue, GFP_KERNEL)?;
        let granted = ring.capacity();
        Ok((
            Self::with_source(RecvSource::Ring(ring), mi, max_sge, slot)?,
            granted,
            max_sge,
        ))
    }

    /// The receive side of a QP that takes its WQEs from `srq`.
    pub(crate) fn from_srq(srq: Arc<SrqShared>) -> Result<Self> {
        let max_sge = srq.max_sge();
        let len = srq.wqe_len();
        Self::with_source(RecvSource::Srq(srq), None, max_sge, len)
    }

    /// A receive side with no WQEs, with room to take those of any SRQ later
    /// ([`RecvRing::attach_xrc_srq`]).
    pub(crate) fn detached() -> Result<Self> {
        Self::with_source(
            RecvSource::Detached,
            None,
            MAX_SRQ_SGE,
            RECV_WQE_HEADER + MAX_SRQ_SGE as usize * SGE_LEN,
        )
    }

    /// Takes WQEs from `srq` from now on, dropping the WQE being filled (an XRC target
    /// moves to the SRQ of a new message only once the previous message is done). The
    /// storage allocated by [`RecvRing::detached`] fits any SRQ's WQEs.
    pub(crate) fn attach_xrc_srq(&mut self, srq: Arc<SrqShared>) {
        self.max_sge = srq.max_sge().min(MAX_SRQ_SGE);
        self.current_len = 0;
        self.src = RecvSource::Srq(srq);
    }

    /// Where userspace maps the ring of a user QP (none on an SRQ).
    pub(crate) fn mmap_info(&self) -> Option<MmapInfo> {
        self.mi
    }

    /// The producer side of the ring, for kernel consumers.
    pub(crate) fn poster(&self) -> Result<RqPoster> {
        let RecvSource::Ring(ring) = &self.src else {
            // Kernel SRQs (and with them kernel QPs on one) do not exist yet.
            return Err(EINVAL);
        };
        let scratch = KVec::from_elem(0u8, ring.slot_size(), GFP_KERNEL)?;
        Ok(RqPoster {
            ring: ring.clone(),
            max_sge: self.max_sge,
            scratch,
        })
    }

    fn with_source(
        src: RecvSource,
        mi: Option<MmapInfo>,
        max_sge: u32,
        wqe_len: usize,
    ) -> Result<Self> {
        Ok(Self {
            src,
            mi,
            head: 0,
            max_sge,
            current: KVec::from_elem(Sge::default(), max_sge as usize, GFP_KERNEL)?,
            current_len: 0,
            current_id: 0,
            scratch: KVec::from_elem(0u8, wqe_len, GFP_KERNEL)?,
            srq_limit_reached: false,
        })
    }

    /// Drops every posted WQE without completing it (entering RESET). An SRQ keeps its
    /// WQEs for the other QPs (IBA 10.3.1 empties only the QP's own work queues).
    pub(crate) fn drain(&mut self) {
        if let RecvSource::Ring(ring) = &self.src {
            let count = ring.count_from(self.head);
            self.head = self.head.wrapping_add(count);
            ring.set_consumer(self.head);
        }
        self.current_len = 0;
    }

    /// Asks the producer of a user QP's own ring for a receive doorbell once the ring holds
    /// `after` WQEs (the engine's `recv_doorbell_after`; 0: no doorbell). Returns whether
    /// WQEs may have been posted that no doorbell will announce: the ring's producer moved
    /// past `producer`, where it stood when the engine last looked, before the request
    /// became visible.
    pub(crate) fn want_doorbell(&self, after: u32, producer: u32) -> bool {
        match (&self.src, self.mi) {
            (RecvSource::Ring(ring), Some(_)) => {
                ring.want_doorbell(after).is_some_and(|p| p != producer)
            }
            _ => false,
        }
    }

    /// The producer index of the QP's own ring, as the engine looks at it now (0 without
    /// one).
    pub(crate) fn producer(&self) -> u32 {
        match &self.src {
            RecvSource::Ring(ring) => ring.producer(),
            RecvSource::Srq(_) | RecvSource::Detached => 0,
        }
    }

    /// The SRQ this queue takes from, if it is one.
    pub(crate) fn srq(&self) -> Option<&Arc<SrqShared>> {
        match &self.src {
            RecvSource::Srq(srq) => Some(srq),
            RecvSource::Ring(_) | RecvSource::Detached => None,
        }
    }

    /// Whether [`RecvRing::take_srq_limit_reached`] would say so.
    pub(crate) fn srq_limit_pending(&self) -> bool {
        self.srq_limit_reached
    }

    /// Whether the SRQ's limit event is owed (once: the flag is cleared).
    pub(crate) fn take_srq_limit_reached(&mut self) -> bool {
        core::mem::take(&mut self.srq_limit_reached)
    }

    /// Copies the next WQE into `scratch`; returns whether there was one.
    fn take(&mut self) -> bool {
        match &self.src {
            RecvSource::Ring(ring) => {
                // The consumer index is `head`, kept here: the shared header's copy is the
                // provider's to read, and it may have written anything there.
                if ring.count_from(self.head) == 0 {
                    return false;
                }
                ring.read_slot_bytes(self.head, &mut self.scratch);
                ring.set_consumer(self.head.wrapping_add(1));
                true
            }
            RecvSource::Srq(srq) => {
                let len = srq.wqe_len().min(self.scratch.len());
                match srq.take(&mut self.scratch[..len]) {
                    Some(limit_reached) => {
                        self.srq_limit_reached |= limit_reached;
                        true
                    }
                    None => false,
                }
            }
            RecvSource::Detached => false,
        }
    }
}

impl RecvQueue for RecvRing {
    fn pop(&mut self) -> Option<RecvWqe> {
        if !self.take() {
            return None;
        }
        {
            let id = self.head;
            self.head = self.head.wrapping_add(1);
            let b = &self.scratch;
            let n = u32_at(b, recv::DMA_NUM_SGE);
            self.current_len = 0;
            self.current_id = id;
            let wr_id = u64_at(b, recv::WR_ID);
            if n > self.max_sge {
                // A malformed WQE: it still completes (with a length of zero room, so the
                // message fails with a local length error) rather than being guessed at.
                return Some(RecvWqe {
                    wr_id,
                    length: 0,
                    id,
                });
            }
            let mut length = 0u32;
            let mut ok = true;
            for i in 0..n as usize {
                let sge = sge_at(b, RECV_WQE_HEADER + i * SGE_LEN);
                match length.checked_add(sge.len) {
                    Some(l) => length = l,
                    None => ok = false,
                }
                self.current[i] = sge;
            }
            if ok {
                self.current_len = n as usize;
            } else {
                length = 0;
            }
            Some(RecvWqe { wr_id, length, id })
        }
    }

    fn posted(&self) -> u32 {
        match &self.src {
            RecvSource::Ring(ring) => ring.count_from(self.head),
            RecvSource::Srq(srq) => srq.posted(),
            RecvSource::Detached => 0,
        }
    }

    fn is_shared(&self) -> bool {
        matches!(self.src, RecvSource::Srq(_))
    }

    fn sge(&self, id: u32, i: u32) -> Option<Sge> {
        if id != self.current_id {
            return None;
        }
        self.current[..self.current_len].get(i as usize).copied()
    }
}

/// Claims the slot at the producer index of `ring`, or fails with `ENOMEM` when the ring
/// is full (IBA 11.4.1.1: posting to a full work queue is an immediate error).
fn claim(ring: &SharedQueue) -> Result<u32> {
    let producer = ring.producer();
    if ring.next(producer) == ring.consumer() {
        return Err(ENOMEM);
    }
    Ok(producer)
}

/// Posts kernel send WRs into a send queue's ring, in the format userspace would write, so
/// the requester handles kernel and user WQEs alike. Callers serialise posts (the QP's
/// poster lock).
pub(crate) struct SqPoster {
    ring: Arc<SharedQueue>,
    max_sge: u32,
    max_inline: u32,
    scratch: KVec<u8>,
}

impl SqPoster {
    /// Writes one WR; `ah_num` is the number of its AH (UD).
    pub(crate) fn post<A>(&mut self, wr: &SendWr<'_, A>, ah_num: u32) -> Result {
        let slot = claim(&self.ring)?;
        let b = &mut self.scratch[..];
        b.fill(0);
        put_u64(b, send::WR_ID, wr.wr_id());
        put_u32(b, send::OPCODE, wr.opcode);
        put_u32(b, send::FLAGS, wr.flags);
        put_u32(b, send::EX, wr.ex());
        match wr.opcode {
            wr::ATOMIC_CMP_AND_SWP | wr::ATOMIC_FETCH_AND_ADD => {
                put_u64(b, send::REMOTE_ADDR, wr.remote.0);
                put_u64(b, send::COMPARE_ADD, wr.atomic.0);
                put_u64(b, send::SWAP, wr.atomic.1);
                put_u32(b, send::ATOMIC_RKEY, wr.remote.1);
            }
            wr::REG_MR => {
                let reg = wr.reg.as_ref().ok_or(EINVAL)?;
                put_u64(b, send::REG_IOVA, reg.iova);
                put_u32(b, send::REG_KEY, reg.key);
                put_u32(b, send::REG_ACCESS, reg.access);
                put_u64(b, send::REG_LENGTH, reg.length);
            }
            _ => {
                put_u64(b, send::REMOTE_ADDR, wr.remote.0);
                put_u32(b, send::RDMA_RKEY, wr.remote.1);
            }
        }
        if let Some(ud) = &wr.ud {
            put_u32(b, send::UD_QPN, ud.remote_qpn);
            put_u32(b, send::UD_QKEY, ud.remote_qkey);
            b[send::UD_PKEY_INDEX..send::UD_PKEY_INDEX + 2]
                .copy_from_slice(&ud.pkey_index.to_ne_bytes());
            put_u32(b, send::UD_AH, ah_num);
        }
        let n = wr.num_sge();
        if wr.flags & send_flag::INLINE != 0 {
            let mut at = SEND_WQE_HEADER;
            for i in 0..n {
                let data = wr.inline_bytes(i).ok_or(EINVAL)?;
                let end = at + data.len();
                if end > SEND_WQE_HEADER + self.max_inline as usize {
                    return Err(EINVAL);
                }
                b[at..end].copy_from_slice(data);
                at = end;
            }
            put_u32(b, send::DMA_LENGTH, (at - SEND_WQE_HEADER) as u32);
        } else {
            if n > self.max_sge as usize {
                return Err(EINVAL);
            }
            let mut length = 0u32;
            for i in 0..n {
                let sge = wr.sge(i).ok_or(EINVAL)?;
                put_sge(
                    b,
                    SEND_WQE_HEADER + i * SGE_LEN,
                    Sge {
                        addr: sge.addr,
                        len: sge.length,
                        lkey: sge.lkey,
                    },
                );
                length = length.wrapping_add(sge.length);
            }
            put_u32(b, send::DMA_LENGTH, length);
            put_u32(b, send::DMA_NUM_SGE, n as u32);
        }
        self.ring.write_slot_bytes(slot, b);
        self.ring.set_producer(self.ring.next(slot));
        Ok(())
    }
}

/// Posts kernel receive WRs into a receive queue's ring.
pub(crate) struct RqPoster {
    ring: Arc<SharedQueue>,
    max_sge: u32,
    scratch: KVec<u8>,
}

impl RqPoster {
    /// Writes one WR.
    pub(crate) fn post(&mut self, wr: &RecvWr<'_>) -> Result {
        let n = wr.num_sge();
        if n > self.max_sge as usize {
            return Err(EINVAL);
        }
        let slot = claim(&self.ring)?;
        let b = &mut self.scratch[..];
        b.fill(0);
        put_u64(b, recv::WR_ID, wr.wr_id());
        let mut length = 0u32;
        for i in 0..n {
            let sge = wr.sge(i).ok_or(EINVAL)?;
            put_sge(
                b,
                RECV_WQE_HEADER + i * SGE_LEN,
                Sge {
                    addr: sge.addr,
                    len: sge.length,
                    lkey: sge.lkey,
                },
            );
            length = length.wrapping_add(sge.length);
        }
        put_u32(b, recv::DMA_LENGTH, length);
        put_u32(b, recv::DMA_NUM_SGE, n as u32);
        self.ring.write_slot_bytes(slot, b);
        self.ring.set_producer(self.ring.next(slot));
        Ok(())
    }
}
