// SPDX-License-Identifier: GPL-2.0

//! The QP as a verbs object: create, modify, query, post and destroy, around the transport
//! engine ([`Engine`]), which owns the QP context. Modify and Query are translations: the
//! engine validates every transition and attribute; this side resolves what only the device
//! can (address vectors into path handles, P_Key indices into P_Keys, ports).
//!
//! Locking: the engine and the QP's queues are under the QP's mutex, taken by verbs and by
//! the QP's task (`task.rs`); the kernel posters are under an interrupt-safe spinlock
//! (kernel consumers post from any context), together with whether the queues accept work,
//! so a post racing a Modify to RESET either lands before the RESET empties the queues or
//! is refused, never in the QP's next incarnation. Consumers are never called with either
//! held: the task delivers completions and events after letting go (`outbox.rs`).

use super::backlog::{Backlog, Inbox};
use super::outbox::Outbox;
use super::xrc::{XrcSrqLookup, XrcTarget};
use crate::ah::RrxeAh;
use crate::counters::Counters;
use crate::cq::{CqShared, RrxeCq};
use crate::glue::error::eopnotsupp;
use crate::glue::module_param;
use crate::glue::module_param::AnswerWaits;
use crate::glue::net::{Handover, RouteCache, RxPacket, SpareBuffer, TxBatch};
use crate::glue::queue::SharedQueue;
use crate::glue::rcu::RcuSection;
use crate::glue::rdma::attr::{AddressVector, QpAttributes, QpCaps, QpInit, QpModify};
use crate::glue::rdma::object::{PdId, QpHandle, XrcdId};
use crate::glue::rdma::udata::UData;
use crate::glue::rdma::wr::{RecvWr, SendWr};
use crate::glue::sync::{BhSpinLock, IrqSpinLock, LockClass, Mutex};
use crate::glue::table::RcuTable;
use crate::glue::task::{impl_has_task, now_ns, Claim, Fired, Kick, Kicks, Place, Spin, Task};
use crate::incarnation::QpIncarnation;
use crate::memory::{MrCache, QpMemory};
use crate::params;
use crate::quota::Charge;
use crate::shared::DeviceShared;
use crate::srq::{RrxeSrq, SrqShared};
use crate::transport::qp::context::{AltPath, PKey, PathHandle};
use crate::transport::qp::io::{Io, NoXrcSrqs, XrcSrqs};
use crate::transport::qp::state::{QpState, QpType};
use crate::transport::qp::stats::TransportEvent;
use crate::transport::qp::{Qp as Engine, MAX_PACKET_LEN};
use crate::wq::{RecvRing, RqPoster, SendRing, SqPoster};
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

static RX_LOCK: LockClass = LockClass::new();
static POST_LOCK: LockClass = LockClass::new();
static CORE_LOCK: LockClass = LockClass::new();

/// Datagrams a UD QP's doorbell sends before leaving the rest to the task.
const DOORBELL_BUDGET: usize = 64;

/// The GSI QP's number (IBA 3.5.1).
const GSI_QPN: u32 = 1;

/// State of one rrxe QP, held by the core's `struct ib_qp`.
pub(crate) struct RrxeQp {
    shared: Arc<QpShared>,
    /// The QP's place in the device's count.
    _charge: Charge,
}

impl RrxeQp {
    /// The QP number.
    pub(crate) fn qpn(&self) -> u32 {
        self.shared.handle.qpn()
    }
}

/// A QP as its task, the receive path and the verbs reach it. Every reference but the
/// `RrxeQp`'s is a task callback's or a packet delivery's; once destroyed, what is left
/// here drops in any context.
#[pin_data]
pub(crate) struct QpShared {
    #[pin]
    pub(super) task: Task<QpShared>,
    /// The engine and queues; `None` once the QP is destroyed.
    #[pin]
    pub(super) core: Mutex<Option<QpCore>>,
    /// Packets waiting for the task, pushed by the receive softirq and by runs and
    /// doorbells that loop packets back (process context), never in a hard interrupt.
    #[pin]
    pub(super) rx: BhSpinLock<Backlog>,
    /// How many, as the last push or pop left them under `rx`'s lock: a run reads it
    /// without the lock, at its start to skip an empty backlog's lock, at its end to run
    /// again at once for packets that came meanwhile (their own kick, fired elsewhere
    /// while the run went on, reaches this task only through another CPU's worker). A
    /// stale reading only leaves them to that kick, which every push comes with.
    pub(super) waiting: AtomicU32,
    /// The producer sides of a kernel QP's rings, and whether its queues take work.
    #[pin]
    pub(super) posters: IrqSpinLock<Posters>,
    /// [`Posters::sends`] as Modify and destroy last left it under `posters`' lock, for
    /// the send doorbell to read without the lock (once a user QP's Read, 44 ns under
    /// TCG): one racing a Modify either kicks a run, in which the engine's state decides
    /// what is sent, or is refused as if it had come first.
    sends_open: AtomicBool,
    /// Set by destroy before it returns; from then on the task delivers nothing.
    pub(super) destroyed: AtomicBool,
    /// Whether the QP is connected (RC, UC, XRC): its doorbell leaves the send queue to
    /// the task and so never waits for the QP's mutex.
    connected: bool,
    /// Whether a user (a process, through uverbs) is the QP's consumer.
    pub(super) user: bool,
    /// What the task's runs leave for a user doorbell to read without the QP's mutex.
    pub(super) news: RunNews,
    /// The QP's consumer (its number, its event handler), for deliveries.
    pub(super) handle: QpHandle,
    /// The QP's device, for the counters a run adds to after letting go of the mutex
    /// (`core`'s own reference goes with the QP's destroy). The QP's last reference, and
    /// so perhaps the device's, may go in any context: nothing of the device sleeps as it
    /// goes (the core has destroyed the objects in its tables by then).
    pub(super) dev: Arc<DeviceShared>,
    /// Where the QP is in the device's table: its number, but for the GSI QP of a port
    /// other than 1 (see [`QpTable::index_of`]).
    index: u32,
}

impl_has_task!(QpShared, task);

/// How long a doorbell that answers (see `doorbell`) waits for a run going on elsewhere to
/// end, to make the next run in its system call rather than leave it to a worker.
const ANSWER_RUN_WAIT_NS: u64 = 50_000;

/// What a QP's task runs leave for its user doorbell to read without the QP's mutex (each
/// a guess of where the doorbell's run goes best: a stale one only puts it elsewhere), and
/// what the doorbell saw of it last.
#[derive(Default)]
pub(super) struct RunNews {
    /// The responder's MSN, stored after each packet the task takes in.
    pub(super) msn: AtomicU32,
    /// Read responses and atomic ACKs the task took in that left the requester with
    /// nothing outstanding: the data a consumer of a ping-pong of Reads waits for.
    pub(super) answers: AtomicU32,
    /// [`RunNews::msn`] at the last doorbell: whether messages arrived in between.
    doorbell_msn: AtomicU32,
    /// [`RunNews::answers`] at the last doorbell.
    doorbell_answers: AtomicU32,
}

impl QpShared {
    /// Whether the QP's doorbells and task wait for each other (`Task::run_now_after`):
    /// a user QP's whose send ring holds at most one WQE not retired, a ping-pong's answer,
    /// whose poster would only poll until the peer's next message. A stream's poster has
    /// more to post and keeps its ring fuller; its doorbell leaves the run to a worker,
    /// which takes its posts in batches (with a bound of two WQEs, a 64-byte bidirectional
    /// stream's doorbells made 6,800 runs of their own in 200,000, and its rate fell 8-12 %).
    pub(super) fn answer_waits(&self) -> bool {
        self.posters
            .lock()
            .user_sq
            .as_ref()
            .is_some_and(|ring| ring.len_by_header() <= 1)
    }

    /// Whether this answer's doorbell and run spin for each other (`answer_waits`): by
    /// default while the device's spins cost less than its worker wake-ups, which they do
    /// when each vCPU has a host core, and not when guests share cores (Write latency 30 %
    /// worse between two guests on two cores; `transport::wait_gauge`).
    pub(super) fn answer_spins(&self) -> bool {
        let spins = match module_param::answer_waits() {
            AnswerWaits::Never => false,
            AnswerWaits::Always => true,
            AnswerWaits::Measured => self.dev.waits.spins(),
        };
        if !spins {
            self.dev.counters.qp_waits_skipped.inc();
        }
        spins
    }

    /// Counts a spin of an answer's doorbell or run, and gives it to the device's gauge.
    pub(super) fn spun(&self, spin: Spin) {
        let counters = &self.dev.counters;
        counters.qp_waits.inc();
        counters.qp_wait_ns.add(spin.ns);
        self.dev.waits.spun(spin.ns, spin.met);
    }
}

/// The producer sides of a kernel QP's rings (`None` for user QPs, whose rings userspace
/// fills), with whether each queue accepts new WRs (IBA 10.3.1: the send queue from RTS
/// on, the receive queue from INIT on), kept in step with the engine's state by Modify.
pub(super) struct Posters {
    pub(super) sends: bool,
    pub(super) receives: bool,
    sq: Option<SqPoster>,
    rq: Option<RqPoster>,
    /// The send ring of a user QP whose provider may post while a run is going, for
    /// [`QpShared::answer_waits`]: held here, and not by the doorbell's lock-free fields,
    /// so that destroy frees it with the other rings, before the user's context goes.
    user_sq: Option<Arc<SharedQueue>>,
}

/// What the task works on, under the QP's mutex.
pub(super) struct QpCore {
    pub(super) engine: KBox<Engine>,
    pub(super) sq: SendRing,
    pub(super) rq: RecvRing,
    /// The address vectors of the engine's path handles: handle `h` is `paths[h]`.
    pub(super) paths: [Option<AddressVector>; 2],
    pub(super) caps: QpCaps,
    pub(super) dev: Arc<DeviceShared>,
    /// The QP's PD ([`PdId::NONE`] for an XRC target, which uses its SRQs' PDs).
    pub(super) pd: PdId,
    pub(super) incarnation: QpIncarnation,
    /// The CQs (none for an XRC target, whose receives complete to its SRQs' CQs).
    pub(super) send_cq: Option<Arc<CqShared>>,
    pub(super) recv_cq: Option<Arc<CqShared>>,
    /// The receive side of an XRC target.
    pub(super) xrc: Option<XrcTarget>,
    /// A transmit buffer for one packet (in loopback, handed over with the packet and
    /// replaced by one of the device's pool).
    pub(super) tx: KVec<u8>,
    /// Packets looped back and not yet handed over: a run's or a doorbell's sends go to
    /// their QPs together.
    pub(super) handover: Handover,
    /// A loopback buffer kept from the last packet taken in, for the next one sent.
    pub(super) spare: SpareBuffer,
    /// The MRs the engine's last accesses reached, for the next ones of the same use.
    pub(super) mrs: MrCache,
    /// The routes of the paths the QP's packets last took.
    pub(super) routes: RouteCache,
}

/// A run's (or a doorbell's) clock: its readings, and, if it is timed (the `run_times`
/// module parameter), where its time went, in ns, added to the device's counters once at
/// its end rather than packet by packet. Untimed, the clock is read only for the engine:
/// each packet taken in has a reading of its own (a timer it starts must not count from
/// before it arrived), a packet sent counts from the run's latest reading (the packet's
/// taken in just before, if any, as a timed run's first send counts from the run's start)
/// and the timer is armed from it too (a delay counted from earlier in the run ends that
/// much later, never earlier). A timed 2-byte Read reads the clock 11 times, 34 ns each
/// under TCG; an untimed one 3 times.
pub(super) struct Spent {
    /// Whether the run is timed.
    pub(super) timed: bool,
    /// The run's latest clock reading.
    latest: Option<u64>,
    /// Taking in packets.
    pub(super) rx: u64,
    /// Building packets (the engine's `poll_transmit`).
    pub(super) build: u64,
    /// Sending them, and handing looped-back ones over.
    pub(super) send: u64,
    /// The work going on since a clock reading, for the next reading to close
    /// ([`Spent::close`]): a timed run does not read the clock only to end a phase when
    /// the run's own end comes next.
    pub(super) open: Option<(u64, Phase)>,
}

/// Which of [`Spent`]'s times a phase goes to.
#[derive(Clone, Copy)]
pub(super) enum Phase {
    Rx,
    Send,
}

impl Spent {
    /// A clock with no reading yet, timed if `timed`.
    pub(super) fn new(timed: bool) -> Self {
        Self {
            timed,
            latest: None,
            rx: 0,
            build: 0,
            send: 0,
            open: None,
        }
    }

    /// Reads the clock.
    pub(super) fn now(&mut self) -> u64 {
        let now = now_ns();
        self.latest = Some(now);
        now
    }

    /// The run's latest reading, or a new one if it has none.
    pub(super) fn latest(&mut self) -> u64 {
        match self.latest {
            Some(t) => t,
            None => self.now(),
        }
    }

    /// Ends the open phase at `now`, a clock reading.
    pub(super) fn close(&mut self, now: u64) {
        match self.open.take() {
            Some((since, Phase::Rx)) => self.rx += now - since,
            Some((since, Phase::Send)) => self.send += now - since,
            None => {}
        }
    }

    /// Adds the times to `counters`, if the run is timed.
    pub(super) fn add_to(&self, counters: &Counters) {
        if self.timed {
            counters.qp_rx_ns.add(self.rx);
            counters.qp_tx_build_ns.add(self.build);
            counters.qp_tx_send_ns.add(self.send);
        }
    }
}

impl QpCore {
    /// Copies the send WQEs posted since the last call, resolving UD destinations in the
    /// device's AH table (only AHs of the QP's PD: IBA 10.2.3).
    #[inline(always)]
    pub(super) fn snapshot_sends(&mut self) {
        // Most runs find none (two of a Read's three): the look costs less than the call.
        if self.sq.has_new() {
            self.snapshot_new_sends();
        }
    }

    /// [`QpCore::snapshot_sends`] once there are some.
    #[inline(never)]
    fn snapshot_new_sends(&mut self) {
        let (ahs, pd) = (&self.dev.ahs, self.pd);
        self.sq.snapshot(|num| ahs.lookup(pd, num));
    }

    /// Sends up to [`DOORBELL_BUDGET`] of the engine's packets from a doorbell's system call.
    fn transmit_some(&mut self, qpn: u32, kicks: &mut Kicks) {
        let mut spent = Spent::new(module_param::run_times());
        let mut now = spent.now();
        let mut sent = 0;
        let mut batch = TxBatch::new();
        while sent < DOORBELL_BUDGET && self.engine.may_transmit(&self.sq) {
            let Some(built) = self.transmit(qpn, kicks, &mut batch, now, &mut spent) else {
                break;
            };
            now = spent.now();
            if spent.timed {
                spent.send += now - built;
            }
            sent += 1;
        }
        let dropped = batch.close(kicks);
        if dropped > 0 {
            self.dev.counters.tx_errors.add(u64::from(dropped));
        }
        if spent.timed && sent > 0 {
            spent.send += spent.now() - now;
        }
        self.handover.flush(kicks);
        spent.add_to(&self.dev.counters);
    }

    /// Lends the queues and memory to the engine for one call.
    pub(super) fn io<R>(
        &mut self,
        grh: Option<&[u8; 40]>,
        f: impl FnOnce(&mut Engine, &mut Io<'_>, &mut KVec<u8>) -> R,
    ) -> R {
        let pd = Cell::new(self.pd);
        let mut mem = QpMemory::new(&self.dev, &pd, self.incarnation, &mut self.mrs);
        mem.grh = grh;
        let mut lookup;
        let mut none = NoXrcSrqs;
        let xrc: &mut dyn XrcSrqs = match &mut self.xrc {
            Some(target) => {
                lookup = XrcSrqLookup {
                    srqs: &self.dev.srqs,
                    target,
                    pd: &pd,
                };
                &mut lookup
            }
            None => &mut none,
        };
        let mut io = Io {
            sq: &mut self.sq,
            rq: &mut self.rq,
            mem: &mut mem,
            xrc,
        };
        f(&mut self.engine, &mut io, &mut self.tx)
    }
}

/// A device's QPs, by QP number.
#[pin_data]
pub(crate) struct QpTable {
    /// Looked up with no lock by the receive path, in the RCU read-side section it is in:
    /// a destroyed QP's entry goes with a grace period's delay, in softirq, where a QP's
    /// last reference may go anyway.
    #[pin]
    qps: RcuTable<QpShared>,
}

impl QpTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            qps <- RcuTable::new(),
        })
    }

    /// Where a packet for QP `qpn` that arrived on `port` goes in the table: each port has
    /// a GSI QP numbered 1 (IBA 3.5.1), the one of port N at index N; the numbers below
    /// [`params::MIN_QPN`] are no other QP's, and QP0 (the SMI) does not exist on RoCE.
    pub(crate) fn index_of(qpn: u32, port: u8) -> Option<u32> {
        match qpn {
            GSI_QPN => Some(u32::from(port)),
            0 | 2..params::MIN_QPN => None,
            _ => Some(qpn),
        }
    }

    /// Delivers a packet to the QP at table index `index` (see [`Self::index_of`]); returns
    /// the kick its task is owed.
    pub(crate) fn deliver(
        &self,
        dev: &DeviceShared,
        index: u32,
        mut pkt: RxPacket,
        rcu: &RcuSection,
    ) -> Option<Kick> {
        let Some(qp) = self.qps.get(index, rcu) else {
            if pkt.icrc_ok() {
                dev.counters.rx_no_qp.inc();
            }
            pkt.discard();
            return None;
        };
        queue(dev, &qp, pkt).then(|| Task::deferred(qp))
    }

    /// Delivers a packet as [`Self::deliver`] does, one of a batch: the QP the batch's
    /// previous packet went to is kept in `last` for the next ones, and the kick of a QP,
    /// with the number of its packets, goes to `kicks` once the batch moves on to another
    /// QP ([`LastQp::finish`] for the last one).
    #[inline]
    pub(crate) fn deliver_batched(
        &self,
        dev: &DeviceShared,
        index: u32,
        pkt: RxPacket,
        last: &mut LastQp,
        kicks: &mut Kicks,
        rcu: &RcuSection,
    ) {
        if !last.qp.as_ref().is_some_and(|(i, _, _)| *i == index) {
            last.kick(kicks);
            last.qp = self
                .qps
                .get(index, rcu)
                .map(|qp| (index, Receiver::of(qp), 0));
        }
        let Some((_, to, packets)) = last.qp.as_mut() else {
            dev.counters.rx_no_qp.inc();
            return;
        };
        if to.take(dev, pkt) {
            *packets += 1;
        }
    }
}

/// What a QP's task keeps between its runs.
pub(crate) struct RunScratch {
    /// What the run owes the consumers.
    pub(crate) outbox: Outbox,
    /// Packets handed to the run by the hand-over that claimed it, taken in first.
    pub(crate) inbox: Inbox,
}

/// Queues a received packet to `qp`'s task; whether it was (a full backlog drops it).
fn queue(dev: &DeviceShared, qp: &QpShared, pkt: RxPacket) -> bool {
    {
        let mut backlog = qp.rx.lock();
        if let Err(mut pkt) = backlog.push(pkt) {
            drop(backlog);
            // Counted as what it is: the run would not have taken a wrong ICRC's packet in.
            if pkt.icrc_ok() {
                dev.counters.rx_queue_full.inc();
            }
            pkt.discard();
            return false;
        }
        qp.waiting.store(backlog.len() as u32, Ordering::Release);
    }
    dev.counters.rcvd_pkts.inc();
    true
}

/// Where a batch of looped-back packets goes in a QP.
enum Receiver {
    /// Its backlog.
    Backlog(Arc<QpShared>),
    /// The inbox of its next run, claimed (see [`Inbox`]): a ping-pong's packet goes from
    /// one run to the next of the chain with no lock taken, none of the backlog's two
    /// interrupt-saving pairs, and no queueing.
    Inbox(Claim<QpShared>),
}

impl Receiver {
    /// The receiver for packets to `qp`: its next run if its backlog is empty and the run
    /// can be claimed, or its backlog.
    fn of(qp: Arc<QpShared>) -> Self {
        if qp.waiting.load(Ordering::Acquire) != 0 {
            return Self::Backlog(qp);
        }
        match Task::claim(qp) {
            Ok(claim) => Self::Inbox(claim),
            Err(qp) => Self::Backlog(qp),
        }
    }

    /// Gives the QP a packet; whether it took it (a full backlog drops it).
    fn take(&mut self, dev: &DeviceShared, pkt: RxPacket) -> bool {
        match self {
            Self::Backlog(qp) => queue(dev, qp, pkt),
            Self::Inbox(claim) => match claim.scratch().inbox.push(pkt) {
                Ok(()) => {
                    dev.counters.rcvd_pkts.inc();
                    dev.counters.loopback_handed_in.inc();
                    true
                }
                // Behind the inbox's.
                Err(pkt) => queue(dev, claim.owner(), pkt),
            },
        }
    }

    /// The kick the QP is owed.
    fn kick(self) -> Kick {
        match self {
            Self::Backlog(qp) => Task::deferred(qp),
            Self::Inbox(claim) => claim.into_kick(),
        }
    }
}

/// The QP a batch of received packets last went to ([`QpTable::deliver_batched`]), with
/// the table index it was found at and the packets given to it since.
pub(crate) struct LastQp {
    qp: Option<(u32, Receiver, usize)>,
}

impl LastQp {
    /// None yet.
    pub(crate) fn new() -> Self {
        Self { qp: None }
    }

    /// Adds the kick the last QP is owed, if it took packets, to `kicks`. A claimed run
    /// that took none is let go (its work item queued: harmless, and rare). Inlined: four
    /// calls a Read otherwise.
    #[inline(always)]
    fn kick(&mut self, kicks: &mut Kicks) {
        if let Some((_, to, packets)) = self.qp.take() {
            if packets > 0 {
                kicks.add_for(to.kick(), packets);
            }
        }
    }

    /// Ends the batch: adds the kick its last QP is owed to `kicks`.
    #[inline]
    pub(crate) fn finish(mut self, kicks: &mut Kicks) {
        self.kick(kicks);
    }
}

/// A QP engine in RESET, copied from a compile-time template straight into its allocation:
/// it is several kilobytes, too large to build on a kernel stack.
fn new_engine(qp_type: QpType, qpn: u32, xrcd: Option<XrcdId>) -> Result<KBox<Engine>> {
    const RC: Engine = Engine::new(QpType::Rc, 0);
    const UC: Engine = Engine::new(QpType::Uc, 0);
    const UD: Engine = Engine::new(QpType::Ud, 0);
    const GSI: Engine = Engine::new(QpType::Gsi, 0);
    const XRC_INI: Engine = Engine::new(QpType::XrcIni, 0);
    const XRC_TGT: Engine = Engine::new(QpType::XrcTgt, 0);
    let slot = KBox::<Engine>::new_uninit(GFP_KERNEL)?;
    let mut engine = match qp_type {
        QpType::Rc => KBox::write(slot, RC),
        QpType::Uc => KBox::write(slot, UC),
        QpType::Ud => KBox::write(slot, UD),
        QpType::Gsi => KBox::write(slot, GSI),
        QpType::XrcIni => KBox::write(slot, XRC_INI),
        QpType::XrcTgt => KBox::write(slot, XRC_TGT),
    };
    engine.set_qpn(qpn);
    if let Some(xrcd) = xrcd {
        engine.set_xrcd(xrcd.0);
    }
    engine.set_credit_reporting(module_param::credits());
    Ok(engine)
}

/// Creates a QP of device `dev` in `qps`, with its two rings (shared with userspace for a
/// user QP); returns it with its number.
pub(crate) fn create(
    qps: &QpTable,
    dev: &Arc<DeviceShared>,
    handle: QpHandle,
    init: &mut QpInit<'_, RrxeCq, RrxeSrq>,
    udata: Option<&mut UData>,
    charge: Charge,
) -> Result<(RrxeQp, u32)> {
    let srq = init.srq.map(RrxeSrq::shared);
    // Kernel SRQs do not exist (no post_srq_recv), so only user QPs can name one.
    if srq.is_some() && udata.is_none() {
        return Err(eopnotsupp());
    }
    let tgt = init.qp_type == QpType::XrcTgt;
    match init.qp_type {
        // The core creates every XRC target itself, for uverbs, without udata: it has no
        // rings for a process to map.
        QpType::XrcTgt if udata.is_some() => return Err(EINVAL),
        // A kernel send WR has no field for the remote SRQ number an XRC initiator's
        // requests must carry (Annex A14), so only user initiators exist.
        QpType::XrcIni if udata.is_none() => return Err(eopnotsupp()),
        _ => {}
    }
    let xrc = match (tgt, init.xrcd) {
        (true, Some(_)) => Some(XrcTarget::new()?),
        (true, None) => return Err(EINVAL),
        (false, _) => None,
    };
    let caps = init.caps;
    // An XRC target has no send queue; it keeps the smallest kernel ring instead, which
    // nothing posts to (it has no posters) and the engine never reads.
    let (sq, send_wr, send_sge, inline) = if tgt {
        let (sq, ..) = SendRing::new(init.qp_type, 1, 0, 0, false, None)?;
        (sq, 0, 0, 0)
    } else {
        SendRing::new(
            init.qp_type,
            caps.max_send_wr,
            caps.max_send_sge,
            caps.max_inline_data,
            init.signal_all,
            udata.as_deref(),
        )?
    };
    let (rq, recv_wr, recv_sge) = match srq {
        // IBA 10.2.9: a QP on an SRQ has no receive queue of its own.
        Some(srq) => (RecvRing::from_srq(srq)?, 0, 0),
        // Annex A14: nor has an XRC QP; a target takes from the XRC SRQs (`xrc`).
        None if init.qp_type.is_xrc() => (RecvRing::detached()?, 0, 0),
        None => RecvRing::new(caps.max_recv_wr.max(1), caps.max_recv_sge, udata.as_deref())?,
    };
    let granted = QpCaps {
        max_send_wr: send_wr,
        max_send_sge: send_sge,
        max_inline_data: inline,
        max_recv_wr: recv_wr,
        max_recv_sge: recv_sge,
    };
    let user = udata.is_some();
    let ring = sq.user_ring();
    let (sq_poster, rq_poster) = match udata {
        Some(udata) => {
            let sq_mi = sq.mmap_info().unwrap_or_default();
            match rq.mmap_info() {
                Some(rq_mi) => {
                    udata.respond(&crate::glue::bindings::rxe_create_qp_resp { rq_mi, sq_mi })?
                }
                // On an SRQ, rdma_rxe leaves `rq_mi` unwritten; the provider ignores it.
                None => udata.respond_bytes_at(
                    core::mem::offset_of!(crate::glue::bindings::rxe_create_qp_resp, sq_mi),
                    core::mem::size_of::<crate::glue::bindings::rxe_create_qp_resp>(),
                    &crate::glue::queue::mmap_info_bytes(&sq_mi),
                )?,
            }
            (None, None)
        }
        // An XRC target takes no WRs at all.
        None if tgt => (None, None),
        None => (Some(sq.poster()?), Some(rq.poster()?)),
    };
    // IBA 3.5.1: the GSI QP is QP1, one a port.
    let (min, max) = match init.qp_type {
        QpType::Gsi => {
            let index = QpTable::index_of(GSI_QPN, init.port).ok_or(EINVAL)?;
            dev.ports.get(index).ok_or(EINVAL)?;
            (index, index)
        }
        _ => (params::MIN_QPN, params::MAX_QPN),
    };
    let slot = qps.qps.reserve(min, max)?;
    let index = slot.index();
    let qpn = if init.qp_type == QpType::Gsi {
        GSI_QPN
    } else {
        index
    };
    let core = QpCore {
        engine: new_engine(init.qp_type, qpn, init.xrcd)?,
        sq,
        rq,
        paths: [None; 2],
        caps: granted,
        dev: dev.clone(),
        pd: init.pd.unwrap_or(PdId::NONE),
        incarnation: QpIncarnation::next(),
        send_cq: init.send_cq.map(RrxeCq::shared),
        recv_cq: init.recv_cq.map(RrxeCq::shared),
        xrc,
        tx: KVec::from_elem(0u8, MAX_PACKET_LEN, GFP_KERNEL)?,
        handover: Handover::new()?,
        spare: SpareBuffer::default(),
        mrs: MrCache::default(),
        routes: RouteCache::new(),
    };
    let connected = init.qp_type.is_connected();
    let outbox = Outbox::new()?;
    let backlog = Backlog::new()?;
    let shared = Arc::pin_init(
        pin_init!(QpShared {
            task <- Task::new(RunScratch {
                outbox,
                inbox: Inbox::new(),
            }),
            core <- Mutex::new(Some(core), c_str!("rrxe_qp"), &CORE_LOCK),
            rx <- BhSpinLock::new(backlog, c_str!("rrxe_qp_rx"), &RX_LOCK),
            posters <- IrqSpinLock::new(
                Posters {
                    sends: false,
                    receives: false,
                    sq: sq_poster,
                    rq: rq_poster,
                    user_sq: ring,
                },
                c_str!("rrxe_qp_post"),
                &POST_LOCK
            ),
            sends_open: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
            connected,
            user,
            waiting: AtomicU32::new(0),
            news: RunNews::default(),
            handle,
            dev: dev.clone(),
            index,
        }),
        GFP_KERNEL,
    )?;
    slot.store(shared.clone())?;
    init.caps = granted;
    Ok((
        RrxeQp {
            shared,
            _charge: charge,
        },
        qpn,
    ))
}

/// Destroys a QP: unpublishes it, stops its task and frees its rings. May run from a
/// handler the QP's own task called (see `outbox.rs`).
pub(crate) fn destroy(qps: &QpTable, qp: &RrxeQp) {
    let shared = &qp.shared;
    qps.qps.remove(shared.index);
    shared.destroyed.store(true, Ordering::Release);
    shared.task.shutdown();
    // Taken out in process context, so that whatever may sleep to free (rings, MR
    // references, CQs) goes here and not with the last reference, which a packet
    // delivery may hold in softirq.
    let core = shared.core.lock().take();
    let posters = {
        let mut p = shared.posters.lock();
        p.sends = false;
        shared.sends_open.store(false, Ordering::Release);
        p.receives = false;
        (p.sq.take(), p.rq.take(), p.user_sq.take())
    };
    let backlog = shared.rx.lock().close();
    drop((core, posters, backlog));
}

/// Rings the send doorbell (IBA 11.4.1.1; rdma_rxe's ABI posts with no WRs).
/// A run moved beside (see `Place::Beside`), or made at once, is counted in `counters`.
pub(crate) fn doorbell(qp: &RrxeQp, counters: &Counters) -> Result {
    if !qp.shared.sends_open.load(Ordering::Acquire) {
        // rdma_rxe refuses too; the WQEs wait in the ring for a later doorbell.
        return Err(EINVAL);
    }
    let mut place = Place::Here;
    let mut at_once = false;
    if qp.shared.user {
        let shared = &qp.shared;
        // A doorbell after messages arrived from the peer is likely an answer to them, as
        // in a ping-pong, where the process waits for the next one anyway: its run is
        // here, with no other CPU to wake, and made in the system call if the ring holds
        // this post alone, after the run going on (usually the one that wrote the peer's
        // message, still sending its ACK) if need be and if spinning for it pays on this
        // host (`QpShared::answer_spins`): queued, it waited for a worker woken here
        // (2-byte Write latency 31.8 us, 19.3 so, in one guest). One after the response to
        // the QP's last outstanding Read or atomic is likewise the next request of a
        // process that waited for it: its run is made at once, in the system call. Queued
        // on the next CPU, it found that CPU's worker gone idle whenever the response's
        // run ended before the doorbell came, and waking it doubled a 2-byte Read's round
        // trip (to 34 us, from 14); queued here, it waited for the polling process to be
        // preempted (21 us). One with neither in between feeds a stream (or waits on its
        // own requests): its run goes to the next CPU, and the process keeps this one to
        // go on posting (rrxe's 64-byte rate in loopback went from 0.3 to 1.2 of
        // rdma_rxe's; Documentation/rrxe/benchmarks.rst).
        let news = &shared.news;
        let msn = news.msn.load(Ordering::Relaxed);
        let answers = news.answers.load(Ordering::Relaxed);
        // Loads and stores rather than swaps (an atomic exchange costs a 2-byte Read about
        // as much as a call under TCG): two threads ringing one QP's doorbell at once can
        // only make one of them guess where to run wrong.
        let messages = news.doorbell_msn.load(Ordering::Relaxed) != msn;
        let answered = news.doorbell_answers.load(Ordering::Relaxed) != answers;
        news.doorbell_msn.store(msn, Ordering::Relaxed);
        news.doorbell_answers.store(answers, Ordering::Relaxed);
        if !messages {
            place = Place::Beside;
            at_once = answered;
        }
        // A connected QP's WQEs wait in the ring for the task, which takes them at the
        // start of its run: the doorbell does not wait for a run going on the other CPU
        // (the poster of a 64-byte stream spent more time spinning on the QP's mutex than
        // anywhere else in the driver). A UD QP's WQEs are taken now, so each one's AH is
        // resolved while the consumer still holds it, and its datagrams leave now, as
        // rdma_rxe's requester used to send them from the system call: mckey and its like
        // post unsignalled Sends and destroy the QP right away, which discards whatever is
        // still queued. The task, kicked below, delivers their completions.
        if !shared.connected {
            let mut kicks = Kicks::new();
            if let Some(core) = shared.core.lock().as_mut() {
                core.snapshot_sends();
                core.transmit_some(qp.qpn(), &mut kicks);
                core.mrs.clear();
            }
            // Datagrams looped back to QPs of this host, kicked once each.
            kicks.fire(Place::Here);
        }
    }
    let fired = if place == Place::Here && qp.shared.answer_waits() {
        if qp.shared.answer_spins() {
            let (fired, spin) = Task::run_now_after(&qp.shared, ANSWER_RUN_WAIT_NS, place);
            if let Some(spin) = spin {
                qp.shared.spun(spin);
                if !spin.met {
                    counters.qp_doorbell_waits_expired.inc();
                }
            }
            fired
        } else {
            Task::run_now_or(&qp.shared, place)
        }
    } else if at_once {
        Task::run_now_or(&qp.shared, place)
    } else {
        Task::deferred(qp.shared.clone()).fire(place)
    };
    match fired {
        Fired::Moved => counters.qp_runs_moved.inc(),
        Fired::Ran => counters.qp_doorbell_runs.inc(),
        Fired::Queued => {}
    }
    Ok(())
}

/// Posts a kernel send WR (IBA 11.4.1.1).
pub(crate) fn post_send(qp: &RrxeQp, wr: &SendWr<'_, RrxeAh>) -> Result {
    let ah_num = wr.ud.as_ref().map_or(0, |ud| ud.ah.num());
    let mut posters = qp.shared.posters.lock();
    if !posters.sends {
        return Err(EINVAL);
    }
    // User QPs are posted to through their rings only.
    posters.sq.as_mut().ok_or(EINVAL)?.post(wr, ah_num)
}

/// Posts a kernel receive WR (IBA 11.4.1.2).
pub(crate) fn post_recv(qp: &RrxeQp, wr: &RecvWr<'_>) -> Result {
    let mut posters = qp.shared.posters.lock();
    if !posters.receives {
        return Err(EINVAL);
    }
    posters.rq.as_mut().ok_or(EINVAL)?.post(wr)
}

/// Receive WRs were posted (a user QP rings only when its task asked for a doorbell, see
/// `RecvRing::want_doorbell`): the task may owe the requester a credit update.
///
/// A user's doorbell sends that update itself, from the system call: the requester is
/// held for credits (IBA 9.7.7.2.4) until it arrives, so it is the whole of the receiver's
/// part of a message's round trip, and a work item queued for it waited for a CPU: on the
/// poster's, for the end of the polling consumer's time slice, on another, for that
/// (virtual) CPU to be woken. The doorbell is rare (asked for only while the requester
/// waits, once a batch), so its wait for a run going on elsewhere costs little. A kernel
/// consumer may post from a completion handler, in softirq, where the QP's mutex cannot be
/// taken: its receives are found by the task, as before.
pub(crate) fn recv_doorbell(qp: &RrxeQp, user: bool) {
    let shared = &qp.shared;
    if !user {
        Task::kick(shared);
        return;
    }
    let mut kicks = Kicks::new();
    let (unseen, deadline) = {
        let mut guard = shared.core.lock();
        let Some(core) = guard.as_mut() else {
            return;
        };
        // Only the doorbell the engine asked for is answered here (a provider may ring any
        // QP); any other is the task's, which also collects what its sends complete.
        if !core.engine.wants_recv_doorbell() {
            drop(guard);
            Task::kick(shared);
            return;
        }
        let producer = core.rq.producer();
        core.io(None, |engine, io, _| engine.post_recv(io));
        core.transmit_some(qp.qpn(), &mut kicks);
        // As at the end of a run: ask again if the update was not worth its credits yet,
        // and look once more for a post that raced with the request.
        let after = core.engine.recv_doorbell_after().unwrap_or(0);
        let unseen = core.rq.want_doorbell(after, producer);
        core.mrs.clear();
        let stats = core.engine.take_stats();
        if !stats.is_zero() {
            let counters = &core.dev.counters;
            counters.add_transport(&stats);
            let acks = stats.get(TransportEvent::UnsolicitedAck);
            counters.recv_doorbell_acks.add(u64::from(acks));
        }
        (unseen, core.engine.poll_timeout().is_some())
    };
    // Packets looped back to QPs of this host, kicked once each.
    kicks.fire(Place::Here);
    // What was sent may have started a timer (a requester's packet went too), which only a
    // run arms: one armed from here could replace the later deadline of a run in between.
    if unseen || deadline {
        Task::kick(shared);
    }
}

/// The P_Key at `index` of the port's table: RoCE has the default partition only.
fn pkey_at(index: u16) -> Result<PKey> {
    if index >= params::PKEY_TABLE_LEN {
        return Err(EINVAL);
    }
    Ok(PKey {
        index,
        ..PKey::DEFAULT
    })
}

/// Checks an address vector against the device: RoCEv2, on one of the device's ports.
fn check_av(av: &AddressVector, dev: &DeviceShared) -> Result {
    if !av.roce_v2 || dev.ports.get(u32::from(av.port)).is_none() {
        return Err(EINVAL);
    }
    Ok(())
}

/// Applies a Modify QP (IBA 11.2.4.2): resolves the device's part of the attributes, then
/// the engine validates and applies all of them or none.
pub(crate) fn modify(qp: &RrxeQp, m: &QpModify) -> Result {
    let shared = &qp.shared;
    let mut guard = shared.core.lock();
    let core = guard.as_mut().ok_or(EINVAL)?;
    let mut req = m.attrs;
    let dev = &*core.dev;
    if req
        .port
        .is_some_and(|p| dev.ports.get(u32::from(p)).is_none())
    {
        return Err(EINVAL);
    }
    if let Some(i) = m.pkey_index {
        req.pkey = Some(pkey_at(i)?);
    }
    // The primary path keeps its handle; an alternate path takes the other one, so that
    // loading either never disturbs the path in use.
    let primary = core.engine.context().primary.av.unwrap_or(PathHandle(0));
    let alternate = PathHandle(1 - primary.0);
    if let Some(av) = &m.av {
        check_av(av, dev)?;
        req.av = Some(primary);
    }
    if let Some(alt) = &m.alt_path {
        // IBA 17.2.8: the alternate path may leave over another port of the CA.
        check_av(&alt.av, dev)?;
        if alt.port != alt.av.port {
            return Err(EINVAL);
        }
        req.alt_path = Some(AltPath {
            av: alternate,
            port: alt.port,
            pkey: pkey_at(alt.pkey_index)?,
            timeout: alt.timeout,
        });
    }
    let modified = core.io(None, |engine, io, _| engine.modify(now_ns(), &req, io));
    core.mrs.clear();
    // A reset starts the MSN again.
    shared.news.msn.store(core.engine.msn(), Ordering::Relaxed);
    modified.map_err(|e| {
        pr_debug!("qp {}: modify refused: {:?}\n", shared.handle.qpn(), e);
        EINVAL
    })?;
    if let Some(av) = m.av {
        core.paths[usize::from(primary.0)] = Some(av);
    }
    if let Some(alt) = m.alt_path {
        core.paths[usize::from(alternate.0)] = Some(alt.av);
    }
    let (sends, receives) = (core.engine.accepts_sends(), core.engine.accepts_receives());
    {
        let mut posters = shared.posters.lock();
        posters.sends = sends;
        shared.sends_open.store(sends, Ordering::Release);
        posters.receives = receives;
        // IBA 10.3.1: entering RESET empties the work queues. Under the posters' lock, so a
        // kernel post either landed before (and goes) or sees the queues closed.
        if core.engine.state() == QpState::Reset {
            core.sq.drain();
            core.rq.drain();
        }
    }
    drop(guard);
    // Flush completions (ERR), a drained SQ event (SQD), or sends waiting since before RTS.
    Task::kick(shared);
    Ok(())
}

/// Reports a QP's attributes (IBA 11.2.4.3).
pub(crate) fn query(qp: &RrxeQp) -> Result<QpAttributes> {
    let guard = qp.shared.core.lock();
    let core = guard.as_ref().ok_or(EINVAL)?;
    let query = core.engine.query();
    let path =
        |h: Option<PathHandle>| h.and_then(|h| core.paths.get(usize::from(h.0)).copied().flatten());
    Ok(QpAttributes {
        query,
        av: path(query.av),
        alt_av: path(query.alt_path.map(|p| p.av)),
        caps: core.caps,
    })
}

/// The SRQ a QP core takes from, if any.
pub(super) fn srq_of(core: &QpCore) -> Option<&Arc<SrqShared>> {
    core.rq.srq()
}
