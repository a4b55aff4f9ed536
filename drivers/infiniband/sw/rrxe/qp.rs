// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the verbs object around the transport core's [`transport::qp::Qp`].
//!
//! Each QP runs in its own task (a work item, glue/task.rs): received packets are queued to
//! it from the receive path, the doorbell and modify kick it, and its timer queues it at the
//! engine's next deadline. The task feeds the engine, sends what it produces, and posts its
//! completions and events; the engine decides everything else.

use crate::ah;
use crate::cq;
use crate::device::{DeviceShared, RrxeDevice, PORT};
use crate::glue::net::{self, RxPacket};
use crate::glue::qp::{
    transition_is_ok, AddressVector, Qp, QpCaps, QpEvent, QpInit, QpKind, QpModify, QpQuery, QpRef,
};
use crate::glue::qp::{RecvWr, SendWr};
use crate::glue::rdma::{eopnotsupp, Device, UData, WcFields};
use crate::glue::sync::{IrqSpinLock, LockClass};
use crate::glue::task::{now_ns, Task, TaskOwner};
use crate::memory::QpMemory;
use crate::params;
use crate::transport::packet;
use crate::transport::qp::completion::{AsyncEvent, Completion, WcOpcode, WorkQueue};
use crate::transport::qp::wqe::{RecvWqe, SendWqe};
use crate::transport::qp::{
    AccessFlags, Io, ModifyQp, Qp as Engine, QpState, QpType, RecvQueue, SendQueue, MAX_PACKET_LEN,
};
use crate::wq::{RecvRing, RqPoster, SendRing, Service, SqPoster};
use crate::Rrxe;
use core::cell::RefCell;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::c_str;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

static RX_LOCK: LockClass = LockClass::new();
static POST_LOCK: LockClass = LockClass::new();

/// Received packets a QP holds before its task takes them: the queue grows by chunks of
/// `RX_CHUNK` up to `RX_CHUNKS` of them (less one, see [`RxQueue::push`]); beyond that, or
/// when no memory is left in softirq, packets are dropped and counted, as a congested link
/// would drop them. The wire delivers a whole message's packets back to back (a 1 MiB UC
/// message at MTU 1024 is 1024 packets), faster than the task runs under load, and UC and UD
/// have no retry to recover a drop, so the queue must hold a burst of that size.
const RX_CHUNK: usize = 32;
const RX_CHUNKS: usize = 256;
const RX_SLOTS: usize = RX_CHUNK * RX_CHUNKS;

/// Work a task run does before it yields and queues itself again.
const BUDGET: usize = 64;

/// `IB_ACCESS_*` bits of a QP's remote rights.
const IB_ACCESS_LOCAL_WRITE: u32 = 1;
const IB_ACCESS_REMOTE_WRITE: u32 = 2;
const IB_ACCESS_REMOTE_READ: u32 = 4;
const IB_ACCESS_REMOTE_ATOMIC: u32 = 8;

/// State of one rrxe QP.
pub(crate) struct RrxeQp {
    shared: Arc<QpShared>,
}

/// The part of a QP the receive path and the task reach.
#[pin_data]
pub(crate) struct QpShared {
    #[pin]
    task: Task<QpShared>,
    /// The transport state; `None` once the QP is destroyed.
    #[pin]
    state: Mutex<Option<QpContext>>,
    #[pin]
    rx: IrqSpinLock<RxQueue>,
    /// Producer sides of a kernel QP's rings (`None` for user QPs, whose rings userspace
    /// fills); kernel consumers post from any context, so this is a spinlock, not the
    /// task's mutex.
    #[pin]
    posters: IrqSpinLock<Posters>,
    /// The engine's state as of the last modify or task run (`enum ib_qp_state`), for
    /// posting without the mutex.
    ib_state: AtomicU32,
}

/// See [`QpShared::posters`].
struct Posters {
    sq: Option<SqPoster>,
    rq: Option<RqPoster>,
}

/// Packets waiting for the task, in arrival order: a ring of `RX_SLOTS` positions whose
/// chunks are allocated as packets arrive and freed once the task has taken them all.
struct RxQueue {
    chunks: KVec<Option<KVec<Option<RxPacket>>>>,
    /// A chunk kept from the last one freed, so a steady stream does not allocate.
    spare: Option<KVec<Option<RxPacket>>>,
    head: usize,
    len: usize,
}

impl RxQueue {
    fn new() -> Result<Self> {
        let mut chunks = KVec::with_capacity(RX_CHUNKS, GFP_KERNEL)?;
        for _ in 0..RX_CHUNKS {
            chunks.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            chunks,
            spare: Some(Self::new_chunk(GFP_KERNEL)?),
            head: 0,
            len: 0,
        })
    }

    fn new_chunk(flags: kernel::alloc::Flags) -> Result<KVec<Option<RxPacket>>> {
        let mut c = KVec::with_capacity(RX_CHUNK, flags)?;
        for _ in 0..RX_CHUNK {
            c.push(None, flags)?;
        }
        Ok(c)
    }

    /// Queues a packet (softirq). At most `RX_SLOTS - RX_CHUNK` packets wait, so the chunk
    /// `pop` leaves behind never holds a waiting packet and can be freed.
    fn push(&mut self, pkt: RxPacket) -> core::result::Result<(), RxPacket> {
        if self.len >= RX_SLOTS - RX_CHUNK {
            return Err(pkt);
        }
        let at = (self.head + self.len) % RX_SLOTS;
        let slot = &mut self.chunks[at / RX_CHUNK];
        if slot.is_none() {
            *slot = match self.spare.take() {
                Some(c) => Some(c),
                None => match Self::new_chunk(GFP_ATOMIC) {
                    Ok(c) => Some(c),
                    Err(_) => return Err(pkt),
                },
            };
        }
        if let Some(chunk) = slot {
            chunk[at % RX_CHUNK] = Some(pkt);
        }
        self.len += 1;
        Ok(())
    }

    fn pop(&mut self) -> Option<RxPacket> {
        if self.len == 0 {
            return None;
        }
        let ci = self.head / RX_CHUNK;
        let pkt = self.chunks[ci]
            .as_mut()
            .and_then(|c| c[self.head % RX_CHUNK].take());
        self.head = (self.head + 1) % RX_SLOTS;
        self.len -= 1;
        if self.head % RX_CHUNK == 0 {
            let done = self.chunks[ci].take();
            if self.spare.is_none() {
                self.spare = done;
            }
        }
        pkt
    }
}

/// Everything the task works on, under the QP's mutex.
pub(crate) struct QpContext {
    qp: QpRef<Rrxe>,
    kind: QpKind,
    engine: KBox<Engine>,
    sq: RefCell<SendRing>,
    rq: RefCell<RecvRing>,
    caps: QpCaps,
    /// Primary path of a connected QP.
    path: Option<AddressVector>,
    access: u32,
    sqd_notify: bool,
    tx: KVec<u8>,
    /// This QP's incarnation (see [`QpIncarnation`]).
    incarnation: QpIncarnation,
}

/// Identifies one QP for its whole life, unlike its number, which a later QP may reuse
/// once it is destroyed: a type 2 memory window remembers the QP it was bound through
/// (IBA 10.6.7.2.2), and no successor holding the same number may use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpIncarnation(u64);

impl QpIncarnation {
    /// An incarnation no QP has.
    pub(crate) const NONE: Self = Self(0);

    fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // 64 bits: creating a QP per nanosecond would take centuries to wrap.
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl TaskOwner for QpShared {
    fn task(&self) -> &Task<Self> {
        &self.task
    }

    fn run(&self) {
        let mut guard = self.state.lock();
        let Some(st) = guard.as_mut() else {
            return;
        };
        let more = st.run(&self.rx, &self.task);
        self.ib_state
            .store(state_to_ib(st.engine.state()), Ordering::Release);
        drop(guard);
        if more {
            self.task.kick();
        }
    }
}

fn service(kind: QpKind) -> Service {
    match kind {
        QpKind::Rc => Service::Rc,
        QpKind::Uc => Service::Uc,
        QpKind::Ud | QpKind::Gsi => Service::Ud,
    }
}

fn qp_type(kind: QpKind) -> QpType {
    match kind {
        QpKind::Rc => QpType::Rc,
        QpKind::Uc => QpType::Uc,
        QpKind::Ud | QpKind::Gsi => QpType::Ud,
    }
}

/// A QP engine in RESET, copied from a compile-time template straight into its allocation:
/// it is several kilobytes, too large to build on a kernel stack.
fn new_engine(kind: QpKind) -> Result<KBox<Engine>> {
    const RC: Engine = Engine::new(QpType::Rc, 0);
    const UC: Engine = Engine::new(QpType::Uc, 0);
    const UD: Engine = Engine::new(QpType::Ud, 0);
    let slot = KBox::<Engine>::new_uninit(GFP_KERNEL)?;
    Ok(match qp_type(kind) {
        QpType::Rc => KBox::write(slot, RC),
        QpType::Uc => KBox::write(slot, UC),
        QpType::Ud => KBox::write(slot, UD),
    })
}

/// Creates a user QP with its two shared rings.
pub(crate) fn create(
    dev: &Device<Rrxe>,
    qp: QpRef<Rrxe>,
    init: &mut QpInit<'_, Rrxe>,
    udata: Option<&mut UData>,
) -> Result<(RrxeQp, u32)> {
    let srq = init.srq.map(|s| s.data().shared());
    // Kernel SRQs do not exist (no post_srq_recv), so only user QPs can name one.
    if srq.is_some() && udata.is_none() {
        return Err(eopnotsupp());
    }
    let caps = init.caps;
    let (sq, send_wr, send_sge, inline) = SendRing::new(
        service(init.kind),
        caps.max_send_wr,
        caps.max_send_sge,
        caps.max_inline_data,
        init.signal_all,
        udata.as_deref(),
    )?;
    let (rq, recv_wr, recv_sge) = match srq {
        // IBA 10.2.9: a QP on an SRQ has no receive queue of its own.
        Some(srq) => (RecvRing::from_srq(srq)?, 0, 0),
        None => RecvRing::new(caps.max_recv_wr.max(1), caps.max_recv_sge, udata.as_deref())?,
    };
    let granted = QpCaps {
        max_send_wr: send_wr,
        max_send_sge: send_sge,
        max_inline_data: inline,
        max_recv_wr: recv_wr,
        max_recv_sge: recv_sge,
    };
    let posters = match udata {
        Some(udata) => {
            let sq_mi = sq.mmap_info().unwrap_or_default();
            match rq.mmap_info() {
                Some(rq_mi) => {
                    udata.respond(&crate::glue::bindings::rxe_create_qp_resp { rq_mi, sq_mi })?
                }
                // On an SRQ, rdma_rxe leaves `rq_mi` unwritten; the provider ignores it.
                None => udata.respond_mmap_info_at(
                    core::mem::offset_of!(crate::glue::bindings::rxe_create_qp_resp, sq_mi),
                    core::mem::size_of::<crate::glue::bindings::rxe_create_qp_resp>(),
                    &sq_mi,
                )?,
            }
            Posters { sq: None, rq: None }
        }
        None => Posters {
            sq: Some(sq.poster()?),
            rq: Some(rq.poster()?),
        },
    };
    let tx = KVec::from_elem(0u8, MAX_PACKET_LEN, GFP_KERNEL)?;

    let shared_dev = dev.data().shared();
    let state = QpContext {
        qp,
        kind: init.kind,
        engine: new_engine(init.kind)?,
        sq: RefCell::new(sq),
        rq: RefCell::new(rq),
        caps: granted,
        path: None,
        access: 0,
        sqd_notify: false,
        tx,
        incarnation: QpIncarnation::next(),
    };
    let rx = RxQueue::new()?;
    let shared = Arc::pin_init(
        pin_init!(QpShared {
            task <- Task::new(),
            state <- new_mutex!(None, "rrxe_qp"),
            rx <- IrqSpinLock::new(rx, c_str!("rrxe_qp_rx"), &RX_LOCK),
            posters <- IrqSpinLock::new(posters, c_str!("rrxe_qp_post"), &POST_LOCK),
            ib_state: AtomicU32::new(0),
        }),
        GFP_KERNEL,
    )?;
    // IBA 3.5.1: the GSI QP is QP1.
    let (min, max) = match init.kind {
        QpKind::Gsi => (1, 1),
        _ => (params::MIN_QPN, params::MAX_QPN),
    };
    let qpn = shared_dev.qps.insert(min, max, shared.clone())?;
    {
        let mut st = state;
        st.engine.set_qpn(qpn);
        *shared.state.lock() = Some(st);
    }
    Task::start(&shared);
    init.caps = granted;
    Ok((RrxeQp { shared }, qpn))
}

/// Destroys a QP: unpublishes it, stops its task and frees its rings.
pub(crate) fn destroy(qp: &Qp<Rrxe>) {
    let shared = &qp.data().shared;
    let qpn = QpRef::<Rrxe>::of(qp).qpn();
    let _ = QpRef::<Rrxe>::of(qp)
        .device()
        .data()
        .shared()
        .qps
        .remove(qpn);
    shared.task.shutdown();
    // Taken out under the lock: nothing reaches the rings or the QP handle afterwards.
    let state = shared.state.lock().take();
    drop(state);
}

/// Whether the send queue accepts work in `ib_state` (IBA 10.3.1: not before RTS; in the
/// error states WRs are accepted and flushed).
fn send_allowed(ib_state: u32) -> bool {
    !matches!(
        state_from_ib(ib_state),
        Some(QpState::Reset | QpState::Init | QpState::Rtr)
    )
}

/// Rings the send doorbell (IBA 11.4.1.1; rdma_rxe's ABI posts with no WRs).
pub(crate) fn doorbell(qp: &Qp<Rrxe>) -> Result {
    let shared = &qp.data().shared;
    if !send_allowed(shared.ib_state.load(Ordering::Acquire)) {
        // rdma_rxe refuses too; the WQEs wait in the ring for a later doorbell.
        return Err(EINVAL);
    }
    shared.task.kick();
    Ok(())
}

/// Posts a kernel send WR (IBA 11.4.1.1).
pub(crate) fn post_send(qp: &Qp<Rrxe>, wr: &SendWr<'_, Rrxe>) -> Result {
    let shared = &qp.data().shared;
    if !send_allowed(shared.ib_state.load(Ordering::Acquire)) {
        return Err(EINVAL);
    }
    let ah_num = match &wr.ud {
        Some(ud) => ud.ah.data().num(),
        None => 0,
    };
    let mut posters = shared.posters.lock();
    // User QPs are posted to through their rings only.
    posters.sq.as_mut().ok_or(EINVAL)?.post(wr, ah_num)
}

/// Posts a kernel receive WR (IBA 11.4.1.2): allowed in every state but RESET.
pub(crate) fn post_recv(qp: &Qp<Rrxe>, wr: &RecvWr<'_>) -> Result {
    let shared = &qp.data().shared;
    if state_from_ib(shared.ib_state.load(Ordering::Acquire)) == Some(QpState::Reset) {
        return Err(EINVAL);
    }
    let mut posters = shared.posters.lock();
    posters.rq.as_mut().ok_or(EINVAL)?.post(wr)
}

/// Receive WRs were posted: the task may owe the requester a credit update.
pub(crate) fn recv_doorbell(qp: &Qp<Rrxe>) {
    qp.data().shared.task.kick();
}

fn state_from_ib(v: u32) -> Option<QpState> {
    Some(match v {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        4 => QpState::Sqd,
        5 => QpState::Sqe,
        6 => QpState::Err,
        _ => return None,
    })
}

fn state_to_ib(s: QpState) -> u32 {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Sqd => 4,
        QpState::Sqe => 5,
        QpState::Err => 6,
    }
}

fn access_from_ib(v: u32) -> Result<AccessFlags> {
    let known = IB_ACCESS_LOCAL_WRITE
        | IB_ACCESS_REMOTE_WRITE
        | IB_ACCESS_REMOTE_READ
        | IB_ACCESS_REMOTE_ATOMIC;
    if v & !known != 0 {
        return Err(EINVAL);
    }
    let mut a = AccessFlags::default();
    for (bit, flag) in [
        (IB_ACCESS_REMOTE_WRITE, AccessFlags::REMOTE_WRITE),
        (IB_ACCESS_REMOTE_READ, AccessFlags::REMOTE_READ),
        (IB_ACCESS_REMOTE_ATOMIC, AccessFlags::REMOTE_ATOMIC),
    ] {
        if v & bit != 0 {
            a = a.union(flag);
        }
    }
    Ok(a)
}

/// Applies a Modify QP (IBA 11.2.4.2): the transport validates the transition and values.
pub(crate) fn modify(qp: &Qp<Rrxe>, m: &QpModify) -> Result {
    let shared = &qp.data().shared;
    let mut guard = shared.state.lock();
    let st = guard.as_mut().ok_or(EINVAL)?;
    let current = st.engine.state();
    if let Some(cur) = m.cur_state {
        if state_from_ib(cur) != Some(current) {
            return Err(EINVAL);
        }
    }
    let next = m.state.unwrap_or(state_to_ib(current));
    if !transition_is_ok(state_to_ib(current), next, st.kind, m.mask) {
        return Err(EINVAL);
    }
    if m.port.is_some_and(|p| p != PORT) {
        return Err(EINVAL);
    }
    if m.pkey_index.is_some_and(|i| i >= params::PKEY_TABLE_LEN) {
        return Err(EINVAL);
    }
    if let Some(caps) = m.cap {
        // No resizing: only a request the QP already satisfies is accepted.
        let c = st.caps;
        if caps.max_send_wr > c.max_send_wr
            || caps.max_recv_wr > c.max_recv_wr
            || caps.max_send_sge > c.max_send_sge
            || caps.max_recv_sge > c.max_recv_sge
            || caps.max_inline_data > c.max_inline_data
        {
            return Err(EINVAL);
        }
    }
    if let Some(av) = &m.av {
        if !av.roce_v2 {
            return Err(EINVAL);
        }
    }
    let to = match m.state {
        Some(v) => Some(state_from_ib(v).ok_or(EINVAL)?),
        None => None,
    };
    let connected = matches!(st.kind, QpKind::Rc | QpKind::Uc);
    // IBA 11.2.4.2 (INIT to RTR of a connected QP): the primary path is required.
    if connected && current == QpState::Init && to == Some(QpState::Rtr) && m.av.is_none() {
        return Err(EINVAL);
    }
    let access = match m.access {
        Some(v) => Some(access_from_ib(v)?),
        None => None,
    };
    let req = ModifyQp {
        state: to,
        path_mtu: m.path_mtu.map(|v| v.min(255) as u8),
        dest_qpn: m.dest_qpn,
        sq_psn: m.sq_psn,
        rq_psn: m.rq_psn,
        timeout: m.timeout,
        retry_cnt: m.retry_cnt,
        rnr_retry: m.rnr_retry,
        min_rnr_timer: m.min_rnr_timer,
        max_rd_atomic: m.max_rd_atomic,
        max_dest_rd_atomic: m.max_dest_rd_atomic,
        qkey: m.qkey,
        pkey: None,
        access,
    };
    st.modify(&req).map_err(|e| {
        pr_debug!(
            "qp {}: modify refused: {:?}\n",
            QpRef::<Rrxe>::of(qp).qpn(),
            e
        );
        EINVAL
    })?;
    if to == Some(QpState::Reset) {
        st.sq.get_mut().drain();
        st.rq.get_mut().drain();
    }
    if let Some(av) = m.av {
        st.path = Some(av);
    }
    if let Some(v) = m.access {
        st.access = v;
    }
    if let Some(v) = m.sqd_notify {
        st.sqd_notify = v;
    }
    shared
        .ib_state
        .store(state_to_ib(st.engine.state()), Ordering::Release);
    drop(guard);
    // Flush completions (ERR), a drained SQ event (SQD), or sends waiting since before RTS.
    shared.task.kick();
    Ok(())
}

/// Reports a QP's attributes (IBA 11.2.4.3).
pub(crate) fn query(qp: &Qp<Rrxe>) -> Result<QpQuery> {
    let guard = qp.data().shared.state.lock();
    let st = guard.as_ref().ok_or(EINVAL)?;
    let a = st.engine.attrs();
    Ok(QpQuery {
        state: state_to_ib(a.state),
        path_mtu: a.path_mtu as u32,
        qkey: a.qkey,
        rq_psn: a.rq_psn.get(),
        sq_psn: a.sq_psn.get(),
        dest_qpn: a.dest_qpn,
        access: st.access,
        caps: st.caps,
        av: st.path,
        pkey_index: 0,
        sqd_notify: st.sqd_notify,
        sq_draining: a.state == QpState::Sqd,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer.code(),
        timeout: a.timeout.code(),
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
    })
}

/// Queues a received packet to QP `qpn` of `dev` and kicks its task (softirq context).
pub(crate) fn deliver(dev: &DeviceShared, qpn: u32, pkt: RxPacket) {
    let Some(qp) = dev.qps.get(qpn) else {
        dev.counters.rx_no_qp.inc();
        return;
    };
    if qp.rx.lock().push(pkt).is_err() {
        dev.counters.rx_queue_full.inc();
        return;
    }
    dev.counters.rcvd_pkts.inc();
    qp.task.kick();
}

impl QpContext {
    fn modify(
        &mut self,
        req: &ModifyQp,
    ) -> core::result::Result<(), crate::transport::qp::ModifyError> {
        let dev = self.qp.device().data();
        let mem_ctx = QpMemory::new(dev, self.qp.pd_id(), self.incarnation, &self.sq, &self.rq);
        let mut sqv = SqView(&self.sq);
        let mut rqv = RqView(&self.rq);
        let mut mem = mem_ctx;
        let mut io = Io {
            sq: &mut sqv,
            rq: &mut rqv,
            mem: &mut mem,
        };
        self.engine.modify(req, &mut io)
    }

    /// One task run; returns whether work is left for another.
    fn run(&mut self, rx: &IrqSpinLock<RxQueue>, task: &Task<QpShared>) -> bool {
        let dev = self.qp.device().data();
        let now = now_ns();
        self.sq.get_mut().snapshot();
        let mut sqv = SqView(&self.sq);
        let mut rqv = RqView(&self.rq);
        let mut mem = QpMemory::new(dev, self.qp.pd_id(), self.incarnation, &self.sq, &self.rq);
        // The engine borrows the queues and memory for one call at a time.
        macro_rules! io {
            () => {
                &mut Io {
                    sq: &mut sqv,
                    rq: &mut rqv,
                    mem: &mut mem,
                }
            };
        }
        let mut budget = BUDGET;
        let pmtu = self.engine.attrs().path_mtu.bytes();
        let ud = matches!(self.kind, QpKind::Ud | QpKind::Gsi);
        while budget > 0 {
            let Some(pkt) = rx.lock().pop() else {
                break;
            };
            budget -= 1;
            match packet::parse(pkt.bth_to_icrc(), Some(pmtu)) {
                Ok(p) => {
                    let v4 = pkt.src_ip().is_v4();
                    mem.grh = ud.then(|| grh_of(&pkt));
                    self.engine.handle_packet(now, &p, io!());
                    // Completions now, while the datagram's network type is known.
                    while let Some(c) = self.engine.poll_completion(io!()) {
                        self.complete(&c, ud.then_some(v4));
                    }
                }
                Err(_) => dev.shared().counters.rx_malformed.inc(),
            }
        }
        // Receives may have been posted since the last run (user QPs post without a system
        // call): an RC responder that advertised no credits owes the requester an update.
        self.engine.post_recv(io!());
        if self.engine.poll_timeout().is_some_and(|t| t <= now) {
            self.engine.handle_timeout(now, io!());
        }
        while budget > 0 {
            let Some(t) = self.engine.poll_transmit(now, &mut self.tx, io!()) else {
                break;
            };
            budget -= 1;
            let path = match t.ah {
                Some(ah_num) => ah::lookup(dev, self.qp.pd_id(), ah_num),
                None => self.path,
            };
            if t.retransmission {
                dev.shared().counters.retransmitted_pkts.inc();
            }
            match path {
                Some(av) => send(dev, &av, self.qp.qpn(), &mut self.tx[..t.len]),
                None => dev.shared().counters.tx_no_path.inc(),
            }
        }
        while let Some(c) = self.engine.poll_completion(io!()) {
            self.complete(&c, None);
        }
        while let Some(e) = self.engine.poll_event() {
            let ev = match e {
                AsyncEvent::CommEstablished => Some(QpEvent::CommEstablished),
                AsyncEvent::SqDrained => self.sqd_notify.then_some(QpEvent::SqDrained),
                // IBA 10.3.1 / 11.6.3.1: only a QP on an SRQ reports its last WQE.
                AsyncEvent::LastWqeReached => self
                    .rq
                    .try_borrow()
                    .is_ok_and(|rq| rq.is_shared())
                    .then_some(QpEvent::LastWqeReached),
                AsyncEvent::QpRequestError => Some(QpEvent::RequestError),
                AsyncEvent::QpAccessError => Some(QpEvent::AccessError),
                AsyncEvent::QpFatal => Some(QpEvent::Fatal),
                // The failing WQE's completion reports it.
                AsyncEvent::RetryExhausted { .. } => None,
            };
            if let Some(ev) = ev {
                self.qp.dispatch_event(ev);
            }
        }
        let stats = self.engine.take_stats();
        if !stats.is_zero() {
            dev.shared().counters.add_transport(&stats);
        }
        if let Some(deadline) = self.engine.poll_timeout() {
            task.arm(deadline.saturating_sub(now));
        }
        budget == 0 || rx.lock().len > 0
    }

    fn complete(&self, c: &Completion, network_v4: Option<bool>) {
        let opcode = match c.opcode {
            WcOpcode::Send => 0,
            WcOpcode::RdmaWrite => 1,
            WcOpcode::RdmaRead => 2,
            WcOpcode::CompSwap => 3,
            WcOpcode::FetchAdd => 4,
            WcOpcode::AtomicWrite => 9,
            WcOpcode::Local(k) => u32::from(k),
            WcOpcode::Recv => 128,
            WcOpcode::RecvRdmaWithImm => 129,
        };
        let wc = WcFields {
            wr_id: c.wr_id,
            status: c.status as u32,
            opcode,
            byte_len: c.byte_len,
            imm_data: c.imm_data,
            invalidated_rkey: c.invalidated_rkey,
            qp_num: self.qp.qpn(),
            src_qp: c.src_qp,
            grh: c.queue == WorkQueue::Recv && matches!(self.kind, QpKind::Ud | QpKind::Gsi),
            network_v4: if c.queue == WorkQueue::Recv {
                network_v4
            } else {
                None
            },
        };
        match c.queue {
            WorkQueue::Send => cq::post(self.qp.send_cq(), &self.qp, &wc, false),
            WorkQueue::Recv => cq::post(self.qp.recv_cq(), &self.qp, &wc, c.solicited),
        }
    }
}

/// The GRH area of a UD receive (IBA 11.4.1.2) for a RoCEv2 datagram: the IPv6 header, or
/// the IPv4 header in its last 20 bytes, as the verbs layer reads it back
/// (`ib_get_gids_from_rdma_hdr`: an IPv4 header with a valid checksum).
fn grh_of(pkt: &RxPacket) -> [u8; 40] {
    let mut g = [0u8; 40];
    let src = pkt.src_ip();
    let dst = pkt.dst_ip();
    let udp_len = pkt.bth_to_icrc().len() + 8;
    match (src.v4(), dst.v4()) {
        (Some(s), Some(d)) => {
            let h = &mut g[20..];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&((udp_len + 20) as u16).to_be_bytes());
            h[6] = 0x40; // DF
            h[8] = 64;
            h[9] = 17; // UDP
            h[12..16].copy_from_slice(&s);
            h[16..20].copy_from_slice(&d);
            let mut sum = 0u32;
            for w in h.chunks(2) {
                sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        _ => {
            g[0] = 0x60;
            g[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            g[6] = 17;
            g[7] = 64;
            g[8..24].copy_from_slice(&src.octets());
            g[24..40].copy_from_slice(&dst.octets());
        }
    }
    g
}

/// Sends one packet along `av`; traffic to this device's own address takes the loopback
/// path, everything else the netdev's IP stack.
fn send(dev: &RrxeDevice, av: &AddressVector, qpn: u32, pkt: &mut [u8]) {
    let path = net::TxPath {
        src: net::IpAddr::from_octets(av.sgid),
        dst: net::IpAddr::from_octets(av.dgid),
        src_port: udp_source_port(qpn, av),
        tclass: av.traffic_class,
        hop_limit: av.hop_limit,
    };
    let result = if av.sgid == av.dgid {
        net::loopback::<Rrxe>(dev.netdev(), &path, pkt)
    } else {
        net::transmit(dev.netdev(), &path, pkt)
    };
    match result {
        Ok(()) => dev.shared().counters.sent_pkts.inc(),
        Err(_) => dev.shared().counters.tx_errors.inc(),
    }
}

/// The UDP source port of a QP's packets: RoCEv2 (IBA A17.3) uses it for ECMP entropy and
/// recommends a value per flow from the range 0xC000..=0xFFFF.
fn udp_source_port(qpn: u32, av: &AddressVector) -> u16 {
    let flow = if av.flow_label != 0 {
        av.flow_label
    } else {
        qpn
    };
    let h = flow ^ (flow >> 14);
    0xC000 | (h & 0x3FFF) as u16
}

// The engine's queue views and its memory view share the rings; their borrows never
// overlap (each lasts one call), and a refused borrow degrades to "nothing there" rather than
// a panic.
struct SqView<'a>(&'a RefCell<SendRing>);

impl SendQueue for SqView<'_> {
    fn consumer(&self) -> u32 {
        self.0.try_borrow().map_or(0, |q| q.consumer())
    }
    fn producer(&self) -> u32 {
        self.0.try_borrow().map_or(0, |q| q.producer())
    }
    fn get(&self, index: u32) -> Option<SendWqe> {
        self.0.try_borrow().ok()?.get(index)
    }
    fn retire(&mut self, index: u32) {
        if let Ok(mut q) = self.0.try_borrow_mut() {
            q.retire(index);
        }
    }
}

struct RqView<'a>(&'a RefCell<RecvRing>);

impl RecvQueue for RqView<'_> {
    fn pop(&mut self) -> Option<RecvWqe> {
        self.0.try_borrow_mut().ok()?.pop()
    }
    fn posted(&self) -> u32 {
        self.0.try_borrow().map_or(0, |q| q.posted())
    }
    fn is_shared(&self) -> bool {
        self.0.try_borrow().is_ok_and(|q| q.is_shared())
    }
}
