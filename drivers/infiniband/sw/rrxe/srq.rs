// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (IBA 10.2.9): one ring of receive WQEs in rdma_rxe's format
//! (Documentation/rrxe/uverbs-abi.rst, section 6) from which many QPs take.
//!
//! The provider posts into the ring without a system call. A QP takes a WQE from its own
//! task, under the SRQ's lock, copying it once into the QP's private storage (wq.rs
//! `RecvRing`); the consumer index advances at that moment, not at completion, so the slot
//! is free for the provider again while the QP is still filling the buffers it names.
//!
//! An XRC SRQ (IBA 11.2.3.1, Annex A14) also belongs to an XRC domain and has a CQ of its
//! own: no QP is attached to it; an XRC target QP of its domain takes from it for each
//! message whose XRCETH names its number, and completes the receive to its CQ.

use crate::abi::{RECV_WQE_HEADER, SGE_LEN};
use crate::cq::{self, CqShared, RrxeCq};
use crate::glue::error::eopnotsupp;
use crate::glue::queue::{SharedQueue, UserMmapInfo};
use crate::glue::rdma::attr::{SrqAttr, SrqModify, XrcSrqInit};
use crate::glue::rdma::object::{PdId, QpHandle, SrqEvent, SrqHandle, WcFields, XrcdId};
use crate::glue::rdma::udata::UData;
use crate::glue::sync::{IrqSpinLock, LockClass};
use crate::glue::table::IndexTable;
use crate::params;
use crate::quota::Charge;
use kernel::c_str;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

static SRQ_LOCK: LockClass = LockClass::new();
static SRQ_LIVE_LOCK: LockClass = LockClass::new();

/// Most WRs per SRQ (rdma_rxe's RXE_MAX_SRQ_WR).
pub(crate) const MAX_SRQ_WR: u32 = 1 << 20;
/// Most SGEs per SRQ WQE (rdma_rxe's RXE_MAX_SRQ_SGE).
pub(crate) const MAX_SRQ_SGE: u32 = 27;

/// State of one rrxe SRQ.
pub(crate) struct RrxeSrq {
    shared: Arc<SrqShared>,
    num: u32,
    /// The SRQ's place in the device's count.
    _charge: Charge,
}

/// What makes an SRQ an XRC SRQ.
pub(crate) struct XrcSrqBinding {
    /// Its XRC domain: only target QPs of this domain take from it.
    pub(crate) xrcd: XrcdId,
    /// Where its receives complete.
    pub(crate) cq: Arc<CqShared>,
}

/// The part of an SRQ the QPs attached to it reach.
#[pin_data]
pub(crate) struct SrqShared {
    srq: SrqHandle,
    /// Its number (SRQN).
    num: u32,
    /// Its protection domain: an XRC target checks the L_Keys of the SRQ's WQEs and the
    /// R_Keys of requests into it against this PD (IBA Annex A14).
    pd: PdId,
    /// Present on an XRC SRQ.
    xrc: Option<XrcSrqBinding>,
    /// Fixed at creation: a resize keeps the element size (IBA 11.2.3.3 changes only the
    /// number of WRs).
    max_sge: u32,
    #[pin]
    ring: IrqSpinLock<SrqRing>,
    /// Whether the SRQ still exists for its consumer. An XRC SRQ has no QP attached to keep
    /// it (the core counts none), so a target QP's task may still hold it when it is
    /// destroyed: deliveries to its consumer and its CQ run under this lock while it is
    /// set, and destroy clears it, waiting for a delivery in progress.
    #[pin]
    live: IrqSpinLock<bool>,
    /// Serialises Modify SRQ calls (uverbs runs them under a shared object lock), so that a
    /// resize checks and replaces the ring it copied from.
    #[pin]
    modify: Mutex<()>,
}

struct SrqRing {
    queue: SharedQueue,
    /// The consumer index, kept here: the copy in the shared header is the provider's to
    /// read, and it may have written anything there.
    consumer: u32,
    /// The armed limit; 0 when disarmed.
    limit: u32,
}

impl SrqRing {
    fn count(&self) -> u32 {
        self.queue.producer().wrapping_sub(self.consumer) & self.queue.capacity()
    }
}

fn new_queue(max_wr: u32, max_sge: u32) -> Result<SharedQueue> {
    SharedQueue::new(max_wr, wqe_len(max_sge))
}

fn wqe_len(max_sge: u32) -> usize {
    RECV_WQE_HEADER + max_sge as usize * SGE_LEN
}

impl SrqShared {
    /// Scatter entries a WQE may have.
    pub(crate) fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Bytes of a WQE with `max_sge` SGEs: what [`Self::take`] copies.
    pub(crate) fn wqe_len(&self) -> usize {
        wqe_len(self.max_sge)
    }

    /// Takes the oldest posted WQE, copying its first `dst.len()` bytes into `dst`; `None`
    /// if there was none, else whether fewer WQEs than the armed limit remain now, in which
    /// case the limit is disarmed and the caller owes the consumer the limit event (IBA
    /// 10.2.9.3, 11.6.3.3 SRQ Limit Reached: one-shot, re-armed by Modify SRQ), which it
    /// raises with [`SrqShared::limit_reached`] once it holds no lock.
    pub(crate) fn take(&self, dst: &mut [u8]) -> Option<bool> {
        let mut ring = self.ring.lock();
        if ring.count() == 0 {
            return None;
        }
        let index = ring.consumer;
        ring.queue.read_slot_bytes(index, dst);
        ring.consumer = ring.queue.next(index);
        ring.queue.set_consumer(ring.consumer);
        let fire = ring.limit != 0 && ring.count() < ring.limit;
        if fire {
            ring.limit = 0;
        }
        Some(fire)
    }

    /// Raises the SRQ limit event [`SrqShared::take`] said is owed. Must not be called with
    /// a QP's lock held: the consumer's handler may act on the SRQ or its QPs.
    pub(crate) fn limit_reached(&self) {
        let live = self.live.lock();
        if *live {
            self.srq.dispatch_event(SrqEvent::LimitReached);
        }
    }

    /// Completes a receive of XRC target QP `qp` to the SRQ's CQ (Annex A14: an XRC
    /// target has no CQ; the SRQ's receives complete to the SRQ's). Dropped if the SRQ
    /// was destroyed meanwhile: its WQEs, and their completions, went with it. Called
    /// without any QP lock held.
    pub(crate) fn complete_xrc(&self, qp: &QpHandle, wc: &WcFields, solicited: bool) {
        let Some(x) = &self.xrc else {
            return;
        };
        let live = self.live.lock();
        if *live {
            cq::post(&x.cq, qp, wc, solicited);
        }
    }

    /// WQEs posted and not yet taken.
    pub(crate) fn posted(&self) -> u32 {
        self.ring.lock().count()
    }

    /// The SRQ's number.
    pub(crate) fn num(&self) -> u32 {
        self.num
    }

    /// The SRQ's protection domain.
    pub(crate) fn pd(&self) -> PdId {
        self.pd
    }

    /// The XRC domain and CQ of an XRC SRQ; `None` for a basic one.
    pub(crate) fn xrc(&self) -> Option<&XrcSrqBinding> {
        self.xrc.as_ref()
    }
}

/// A device's SRQs, by SRQ number.
#[pin_data]
pub(crate) struct SrqTable {
    #[pin]
    srqs: IndexTable<SrqShared>,
}

impl SrqTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            srqs <- IndexTable::new(),
        })
    }

    /// The SRQ numbered `num`, if it exists (any context).
    pub(crate) fn get(&self, num: u32) -> Option<Arc<SrqShared>> {
        self.srqs.get(num)
    }
}

/// Creates a user SRQ in `pd` (an XRC SRQ if `xrc` is given) and exports its ring
/// (`rxe_create_srq_resp`); returns it with its number.
pub(crate) fn create(
    srqs: &SrqTable,
    srq: SrqHandle,
    pd: PdId,
    attr: &mut SrqAttr,
    xrc: Option<XrcSrqInit<'_, RrxeCq>>,
    udata: Option<&mut UData>,
    charge: Charge,
) -> Result<(RrxeSrq, u32)> {
    // Kernel consumers post through post_srq_recv, which rrxe does not offer yet.
    let Some(udata) = udata else {
        return Err(eopnotsupp());
    };
    if attr.max_wr == 0 || attr.max_wr > MAX_SRQ_WR || attr.max_sge > MAX_SRQ_SGE {
        return Err(EINVAL);
    }
    let max_sge = attr.max_sge.max(1);
    let mut queue = new_queue(attr.max_wr, max_sge)?;
    let capacity = queue.capacity();
    // rdma_rxe arms the limit given at creation as it stands.
    let limit = attr.limit;
    let slot = srqs.srqs.reserve(params::MIN_SRQN, params::MAX_SRQN)?;
    let mi = queue.export(udata)?;
    udata.respond(&crate::glue::bindings::rxe_create_srq_resp {
        mi,
        srq_num: slot.index(),
        reserved: 0,
    })?;
    let xrc = xrc.map(|x| XrcSrqBinding {
        xrcd: x.xrcd,
        cq: x.cq.shared(),
    });
    let num = slot.index();
    let shared = Arc::pin_init(
        pin_init!(SrqShared {
            srq,
            num,
            pd,
            xrc,
            max_sge,
            ring <- IrqSpinLock::new(
                SrqRing {
                    queue,
                    consumer: 0,
                    limit,
                },
                c_str!("rrxe_srq"),
                &SRQ_LOCK
            ),
            live <- IrqSpinLock::new(true, c_str!("rrxe_srq_live"), &SRQ_LIVE_LOCK),
            modify <- new_mutex!((), "rrxe_srq_modify"),
        }),
        GFP_KERNEL,
    )?;
    slot.store(shared.clone())?;
    attr.max_wr = capacity;
    attr.max_sge = max_sge;
    Ok((
        RrxeSrq {
            shared,
            num,
            _charge: charge,
        },
        num,
    ))
}

/// Applies a Modify SRQ (IBA 11.2.3.3): a resize, and arming the limit.
pub(crate) fn modify(srq: &RrxeSrq, m: &SrqModify, udata: Option<&mut UData>) -> Result {
    let shared = &srq.shared;
    let _serial = shared.modify.lock();
    let (capacity, limit) = {
        let ring = shared.ring.lock();
        (ring.queue.capacity(), ring.limit)
    };
    if let Some(max_wr) = m.max_wr {
        // IBA 11.2.3.3: a size below the armed limit is refused.
        if max_wr == 0 || max_wr > MAX_SRQ_WR || (limit != 0 && max_wr < limit) {
            return Err(EINVAL);
        }
    }
    if let Some(l) = m.limit {
        if l > MAX_SRQ_WR || l > capacity {
            return Err(EINVAL);
        }
    }
    if let Some(max_wr) = m.max_wr {
        resize(shared, max_wr, m, udata)?;
    }
    if let Some(l) = m.limit {
        shared.ring.lock().limit = l;
    }
    Ok(())
}

/// Replaces the ring with one of room for `max_wr`, moving the WQEs waiting in it to the
/// new ring's first slots.
///
/// rdma_rxe's protocol: the new ring's `mminfo` goes to the caller's `mmap_info_addr`, and
/// the kernel writes the new ring's producer index (the number of WQEs moved); the provider
/// holds its SRQ lock across the call and the remapping, so it posts nothing meanwhile.
fn resize(shared: &SrqShared, max_wr: u32, m: &SrqModify, udata: Option<&mut UData>) -> Result {
    // A kernel SRQ does not exist (see `create`), so a user one always has both.
    let (Some(udata), Some(addr)) = (udata, m.mmap_info_addr) else {
        return Err(EINVAL);
    };
    let out = UserMmapInfo(addr);
    // Allocation, export and the copy to userspace may sleep: all before taking the lock.
    let mut queue = new_queue(max_wr, shared.max_sge)?;
    let mi = queue.export(udata)?;
    out.write(&mi)?;
    let old = {
        let mut ring = shared.ring.lock();
        // IBA 11.2.3.3: fewer slots than WQEs waiting would lose some.
        let count = ring.count();
        queue.take_entries_from_range(&ring.queue, ring.consumer, count)?;
        ring.consumer = 0;
        core::mem::replace(&mut ring.queue, queue)
    };
    // Freeing may sleep (vfree, mmap entry removal): after the lock.
    drop(old);
    Ok(())
}

/// Reports an SRQ's attributes (IBA 11.2.3.2).
pub(crate) fn query(srq: &RrxeSrq) -> Result<SrqAttr> {
    let shared = &srq.shared;
    let ring = shared.ring.lock();
    Ok(SrqAttr {
        max_wr: ring.queue.capacity(),
        max_sge: shared.max_sge,
        limit: ring.limit,
    })
}

/// Destroys an SRQ; the core has checked that no QP is attached to it. An XRC target QP
/// may still hold an XRC SRQ: it finds the number gone from the table for its next message,
/// and nothing more reaches the SRQ's consumer or CQ once this returns.
pub(crate) fn destroy(srqs: &SrqTable, srq: &RrxeSrq) {
    drop(srqs.srqs.remove(srq.num));
    *srq.shared.live.lock() = false;
}

impl RrxeSrq {
    /// The part of the SRQ a QP attached to it keeps.
    pub(crate) fn shared(&self) -> Arc<SrqShared> {
        self.shared.clone()
    }
}
