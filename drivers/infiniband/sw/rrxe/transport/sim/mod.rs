// SPDX-License-Identifier: GPL-2.0

//! Deterministic two-endpoint simulation of the QP engine (tests only).
//!
//! Two [`Qp`]s with vector-backed queues and memory are joined by a
//! channel that drops, duplicates, reorders and delays packets according
//! to a seeded xorshift generator. Time is virtual: when neither endpoint
//! has anything to send and no packet is due, the clock jumps to the next
//! packet arrival or QP deadline. A run is a pure function of its seed.

mod cost;
mod credits;
mod hostile;
mod migration;
mod tests;
mod xrc;

use super::aeth::Syndrome;
use super::packet;
use super::psn::Msn;
use super::qp::completion::{AsyncEvent, Completion, WcStatus};
use super::qp::memory::{AtomicOp, LocalError, Memory, PdOf, RKey, RemoteAccess, RemoteError};
use super::qp::wqe::{LocalOp, RecvQueue, RecvWqe, SendQueue, SendWqe, Sge};
use super::qp::{
    AccessFlags, Arrival, Dest, Io, ModifyQp, PKey, PathHandle, Qp, QpState, QpStats, QpType,
    XrcSrq, XrcSrqs, MAX_PACKET_LEN,
};
use std::collections::{BTreeMap, VecDeque};
use std::vec;
use std::vec::Vec;

/// xorshift64*: tiny, seedable, good enough to pick fates for packets.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// The seed of a test: `RRXE_SIM_SEED` if set, else `default`.
pub fn seed_or(default: u64) -> u64 {
    match std::env::var("RRXE_SIM_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = if let Some(hex) = s.strip_prefix("0x") {
                u64::from_str_radix(hex, 16)
            } else {
                s.parse()
            };
            parsed.expect("RRXE_SIM_SEED must be a decimal or 0x-hex u64")
        }
        Err(_) => default,
    }
}

#[derive(Default, Debug)]
pub struct FakeSq {
    pub wqes: Vec<SendWqe>,
    pub consumer: u32,
}

impl SendQueue for FakeSq {
    fn consumer(&self) -> u32 {
        self.consumer
    }
    fn producer(&self) -> u32 {
        self.wqes.len() as u32
    }
    fn get(&self, index: u32) -> Option<SendWqe> {
        self.wqes.get(index as usize).copied()
    }
    fn retire(&mut self, index: u32) {
        assert_eq!(index, self.consumer, "send WQEs must retire in order");
        self.consumer += 1;
    }
    // The fake memory finds a WQE's buffer by its index, not through SGEs.
    fn sge(&self, _index: u32, _i: u32) -> Option<Sge> {
        None
    }
    fn inline_data(&self, _index: u32) -> Option<&[u8]> {
        None
    }
}

#[derive(Default, Debug)]
pub struct FakeRq {
    pub queue: VecDeque<RecvWqe>,
    pub shared: bool,
}

impl RecvQueue for FakeRq {
    fn pop(&mut self) -> Option<RecvWqe> {
        self.queue.pop_front()
    }
    fn posted(&self) -> u32 {
        self.queue.len() as u32
    }
    fn is_shared(&self) -> bool {
        self.shared
    }
    fn sge(&self, _id: u32, _i: u32) -> Option<Sge> {
        None
    }
}

#[derive(Debug)]
pub struct Region {
    pub va: u64,
    pub data: Vec<u8>,
    pub access: AccessFlags,
    pub valid: bool,
    /// The protection domain the region belongs to: an access checked in
    /// an XRC SRQ's PD must name it.
    pub pd: u32,
}

/// An XRC SRQ of the fake table: its WQEs, XRC domain and PD.
#[derive(Default, Debug)]
pub struct FakeXrcSrq {
    pub rq: FakeRq,
    pub xrcd: u32,
    pub pd: u32,
}

/// The XRC SRQs a node's XRC target may deliver to, by SRQN.
#[derive(Default, Debug)]
pub struct FakeXrcSrqs(pub BTreeMap<u32, FakeXrcSrq>);

impl XrcSrqs for FakeXrcSrqs {
    fn srq(&mut self, srqn: u32) -> Option<XrcSrq<'_>> {
        self.0.get_mut(&srqn).map(|s| XrcSrq {
            rq: &mut s.rq,
            xrcd: s.xrcd,
            pd: PdOf::XrcSrq(s.pd),
        })
    }
}

#[derive(Default, Debug)]
pub struct FakeMem {
    /// Per send WQE index: gather source, or Read / atomic target.
    pub send_bufs: BTreeMap<u32, Vec<u8>>,
    /// Per receive WQE id.
    pub recv_bufs: BTreeMap<u32, Vec<u8>>,
    /// By R_Key.
    pub regions: BTreeMap<u32, Region>,
    pub atomic_calls: u64,
    pub invalidated: Vec<u32>,
    /// Calls that changed memory (scatters, remote writes, atomics,
    /// invalidations): how a test sees that a packet was acted upon.
    pub writes: u64,
}

impl FakeMem {
    fn region(
        &mut self,
        rkey: RKey,
        va: u64,
        len: usize,
        access: AccessFlags,
    ) -> Result<&mut [u8], RemoteError> {
        let r = self.regions.get_mut(&rkey.key).ok_or(RemoteError::Access)?;
        if !r.valid || !in_pd(rkey, r) || !r.access.contains(access) || va < r.va {
            return Err(RemoteError::Access);
        }
        let start = (va - r.va) as usize;
        let end = start.checked_add(len).ok_or(RemoteError::Access)?;
        r.data.get_mut(start..end).ok_or(RemoteError::Access)
    }
}

/// Whether `rkey` may name region `r`: any region the QP's own PD (the
/// fakes keep one for RC and UC), an XRC SRQ's only its PD's.
fn in_pd(rkey: RKey, r: &Region) -> bool {
    match rkey.pd {
        PdOf::Qp => true,
        PdOf::XrcSrq(pd) => pd == r.pd,
    }
}

fn access_of(access: RemoteAccess) -> AccessFlags {
    match access {
        RemoteAccess::Write => AccessFlags::REMOTE_WRITE,
        RemoteAccess::Read => AccessFlags::REMOTE_READ,
        RemoteAccess::Atomic => AccessFlags::REMOTE_ATOMIC,
    }
}

impl Memory for FakeMem {
    fn gather(
        &mut self,
        _sq: &dyn SendQueue,
        sq_index: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> Result<(), LocalError> {
        let buf = self
            .send_bufs
            .get(&sq_index)
            .ok_or(LocalError::Protection)?;
        let src = buf
            .get(offset as usize..offset as usize + dst.len())
            .ok_or(LocalError::Length)?;
        dst.copy_from_slice(src);
        Ok(())
    }
    fn scatter_send(
        &mut self,
        _sq: &dyn SendQueue,
        sq_index: u32,
        offset: u32,
        src: &[u8],
    ) -> Result<(), LocalError> {
        let buf = self
            .send_bufs
            .get_mut(&sq_index)
            .ok_or(LocalError::Protection)?;
        let dst = buf
            .get_mut(offset as usize..offset as usize + src.len())
            .ok_or(LocalError::Length)?;
        dst.copy_from_slice(src);
        self.writes += 1;
        Ok(())
    }
    fn scatter_recv(
        &mut self,
        _rq: &dyn RecvQueue,
        wqe: &RecvWqe,
        offset: u32,
        src: &[u8],
    ) -> Result<(), LocalError> {
        let buf = self
            .recv_bufs
            .get_mut(&wqe.id)
            .ok_or(LocalError::Protection)?;
        let dst = buf
            .get_mut(offset as usize..offset as usize + src.len())
            .ok_or(LocalError::Length)?;
        dst.copy_from_slice(src);
        self.writes += 1;
        Ok(())
    }
    fn check_remote(
        &mut self,
        rkey: RKey,
        va: u64,
        len: u32,
        access: RemoteAccess,
    ) -> Result<(), RemoteError> {
        self.region(rkey, va, len as usize, access_of(access))
            .map(|_| ())
    }
    fn write_remote(&mut self, rkey: RKey, va: u64, src: &[u8]) -> Result<(), RemoteError> {
        self.region(rkey, va, src.len(), AccessFlags::REMOTE_WRITE)?
            .copy_from_slice(src);
        self.writes += 1;
        Ok(())
    }
    fn read_remote(&mut self, rkey: RKey, va: u64, dst: &mut [u8]) -> Result<(), RemoteError> {
        dst.copy_from_slice(self.region(rkey, va, dst.len(), AccessFlags::REMOTE_READ)?);
        Ok(())
    }
    fn atomic(&mut self, rkey: RKey, va: u64, op: AtomicOp) -> Result<u64, RemoteError> {
        if va % 8 != 0 {
            return Err(RemoteError::InvalidRequest);
        }
        let access = match op {
            AtomicOp::Write { .. } => AccessFlags::REMOTE_WRITE,
            _ => AccessFlags::REMOTE_ATOMIC,
        };
        let target = self.region(rkey, va, 8, access)?;
        let orig = u64::from_le_bytes(target.try_into().unwrap());
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
            AtomicOp::Write { value } => value,
        };
        target.copy_from_slice(&new.to_le_bytes());
        self.atomic_calls += 1;
        self.writes += 1;
        Ok(orig)
    }
    fn invalidate(&mut self, rkey: RKey) -> Result<(), RemoteError> {
        let r = self
            .regions
            .get_mut(&rkey.key)
            .filter(|r| in_pd(rkey, r))
            .ok_or(RemoteError::InvalidRequest)?;
        r.valid = false;
        self.invalidated.push(rkey.key);
        self.writes += 1;
        Ok(())
    }
    fn local_operation(&mut self, _op: &LocalOp) -> Result<(), LocalError> {
        Ok(())
    }
}

/// A QP with its queues and memory, and everything it reported.
pub struct Node {
    pub qp: Qp,
    pub sq: FakeSq,
    pub rq: FakeRq,
    pub mem: FakeMem,
    /// XRC SRQs (an XRC target's).
    pub xrc: FakeXrcSrqs,
    pub completions: Vec<Completion>,
    pub events: Vec<AsyncEvent>,
    /// Transport events counted so far.
    pub stats: QpStats,
    /// Whether each drain checks that [`Qp::has_completions`] saying no means no
    /// completion (off where instructions are counted, `cost.rs`).
    pub check_has_completions: bool,
    next_recv_id: u32,
}

impl Node {
    pub fn new(qp_type: QpType, qpn: u32) -> Self {
        Self {
            qp: Qp::new(qp_type, qpn),
            sq: FakeSq::default(),
            rq: FakeRq::default(),
            mem: FakeMem::default(),
            xrc: FakeXrcSrqs::default(),
            completions: Vec::new(),
            events: Vec::new(),
            stats: QpStats::ZERO,
            check_has_completions: true,
            next_recv_id: 0,
        }
    }

    /// Runs `f` with the QP and an [`Io`] over this node's fakes.
    pub fn with<R>(&mut self, f: impl FnOnce(&mut Qp, &mut Io<'_>) -> R) -> R {
        let mut io = Io {
            sq: &mut self.sq,
            rq: &mut self.rq,
            mem: &mut self.mem,
            xrc: &mut self.xrc,
        };
        f(&mut self.qp, &mut io)
    }

    /// Applies `m` at time `now`.
    pub fn modify(&mut self, now: u64, m: ModifyQp) {
        self.with(|qp, io| qp.modify(now, &m, io)).expect("modify");
    }

    /// Posts a send WQE with `data` as its local buffer; returns its index.
    pub fn post_send(&mut self, wqe: SendWqe, data: Vec<u8>) -> u32 {
        let index = self.sq.wqes.len() as u32;
        self.sq.wqes.push(wqe);
        self.mem.send_bufs.insert(index, data);
        self.with(|qp, io| qp.post_send(io));
        index
    }

    /// Posts a receive WQE of `len` bytes and rings the doorbell, as a
    /// kernel consumer's `ib_post_recv` does; returns its id.
    pub fn post_recv(&mut self, wr_id: u64, len: u32) -> u32 {
        let id = self.post_recv_quietly(wr_id, len);
        self.with(|qp, io| qp.post_recv(io));
        id
    }

    /// Posts a receive WQE of `len` bytes without telling the QP, as a user
    /// QP does through its shared ring; returns its id.
    pub fn post_recv_quietly(&mut self, wr_id: u64, len: u32) -> u32 {
        let id = self.next_recv_id;
        self.next_recv_id += 1;
        self.mem.recv_bufs.insert(id, vec![0; len as usize]);
        self.rq.queue.push_back(RecvWqe {
            wr_id,
            length: len,
            id,
        });
        id
    }

    pub fn add_region(&mut self, rkey: u32, va: u64, data: Vec<u8>) {
        self.add_region_in(rkey, va, 0, data);
    }

    /// A region of protection domain `pd`, with every remote right.
    pub fn add_region_in(&mut self, rkey: u32, va: u64, pd: u32, data: Vec<u8>) {
        self.mem.regions.insert(
            rkey,
            Region {
                va,
                data,
                access: AccessFlags::ALL,
                valid: true,
                pd,
            },
        );
    }

    fn drain(&mut self) {
        // As the kernel's task polls: only while the QP says it may have completions. Every
        // scenario checks that one saying no has none.
        while self.qp.has_completions() {
            match self.with(|qp, io| qp.poll_completion(io)) {
                Some(c) => self.completions.push(c),
                None => break,
            }
        }
        if self.check_has_completions {
            assert!(
                self.with(|qp, io| qp.poll_completion(io)).is_none(),
                "a QP without completions by has_completions had one"
            );
        }
        while let Some(e) = self.qp.poll_event() {
            self.events.push(e);
        }
        self.stats.add(&self.qp.take_stats());
    }

    pub fn send_completions(&self) -> Vec<Completion> {
        self.completions
            .iter()
            .filter(|c| c.queue == super::qp::completion::WorkQueue::Send)
            .copied()
            .collect()
    }

    pub fn recv_completions(&self) -> Vec<Completion> {
        self.completions
            .iter()
            .filter(|c| c.queue == super::qp::completion::WorkQueue::Recv)
            .copied()
            .collect()
    }

    /// The send completions as (wr_id, status), what most tests compare.
    pub fn send_outcomes(&self) -> Vec<(u64, WcStatus)> {
        outcomes(&self.send_completions())
    }

    /// The receive completions as (wr_id, status).
    pub fn recv_outcomes(&self) -> Vec<(u64, WcStatus)> {
        outcomes(&self.recv_completions())
    }
}

fn outcomes(c: &[Completion]) -> Vec<(u64, WcStatus)> {
    c.iter().map(|c| (c.wr_id, c.status)).collect()
}

/// Channel impairments, per packet and independent per direction.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    pub loss: f64,
    pub dup: f64,
    pub reorder: f64,
    /// One-way latency, ns.
    pub latency: u64,
    /// Time a packet occupies the sender's side of the link, ns: packets
    /// leave one after another, so a message's packets arrive spread out.
    pub gap: u64,
}

impl Link {
    pub const PERFECT: Self = Self {
        loss: 0.0,
        dup: 0.0,
        reorder: 0.0,
        latency: 2_000,
        gap: 0,
    };
}

struct Flight {
    at: u64,
    seq: u64,
    to: usize,
    /// The path (wire) it travels: its arrival at the other end.
    path: PathHandle,
    bytes: Vec<u8>,
}

/// Connection parameters of [`Pair::connect`].
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub qp_type: QpType,
    pub mtu: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub rd_atomic: u8,
    pub sq_psn: [u32; 2],
}

impl Setup {
    pub const fn rc() -> Self {
        Self {
            qp_type: QpType::Rc,
            mtu: 1,
            timeout: 8,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            rd_atomic: 8,
            sq_psn: [100, 0x00FF_FFF0],
        }
    }
}

/// A fault of the wires: true for each packet they lose.
pub type WireFault = std::boxed::Box<dyn Fn(&Wire) -> bool>;

/// Another implementation's habit: for a packet a node sent, the bytes of a
/// packet that peer would send right after it (rdma_rxe follows its RNR
/// NAK with a PSN sequence error NAK), delivered behind it, unimpaired.
pub type FollowUp = std::boxed::Box<dyn Fn(&Wire, &[u8]) -> Option<Vec<u8>>>;

/// A packet as it left a node, for tests that check what went on the wire.
#[derive(Clone, Copy, Debug)]
pub struct Wire {
    /// Time it was sent.
    pub at: u64,
    /// Sending node.
    pub from: usize,
    pub opcode: u8,
    /// A request (else a response).
    pub request: bool,
    pub psn: u32,
    pub ack_req: bool,
    /// BTH MigReq.
    pub mig_req: bool,
    /// The path (wire) it was sent on.
    pub path: PathHandle,
    /// AETH syndrome and MSN.
    pub aeth: Option<(Syndrome, Msn)>,
    /// Receive WQEs posted at the sender when it sent the packet.
    pub rq_posted: u32,
}

pub struct Pair {
    pub nodes: [Node; 2],
    pub now: u64,
    /// Every packet sent, in order.
    pub wire: Vec<Wire>,
    /// Times at which the test wants control back (a receiver's application
    /// reposting, say): the clock stops at each as at a packet or timer.
    pub alarms: Vec<u64>,
    pub rng: XorShift,
    /// Impairments of the A->B and B->A directions.
    pub links: [Link; 2],
    /// The second wire, which path [`ALT_PATH`] takes: A->B and B->A.
    pub alt_links: [Link; 2],
    /// A fault of the wires themselves (a link down, a dead path): a
    /// packet for which it returns true is lost, whatever the link's odds.
    pub wire_fault: Option<WireFault>,
    /// See [`FollowUp`].
    pub follow_up: Option<FollowUp>,
    flights: Vec<Flight>,
    seq: u64,
    /// Packets put on the wire by each node (before impairment).
    pub sent: [u64; 2],
    /// When each node's side of the link is free again (see [`Link::gap`]).
    free_at: [u64; 2],
    pub retransmitted: [u64; 2],
    buf: Vec<u8>,
}

pub const A: usize = 0;
pub const B: usize = 1;
pub const QPN: [u32; 2] = [0x11, 0x22];
pub const QKEY: u32 = 0x1234_5678;
/// The handle of each node's primary path (the first wire).
pub const PATH: PathHandle = PathHandle(0);
/// The handle of each node's alternate path (the second wire).
pub const ALT_PATH: PathHandle = PathHandle(1);

/// The Modify QP calls that bring node `i` of a pair from RESET to RTS,
/// with exactly the attributes the transition table asks of its type.
pub fn connect_steps(setup: Setup, i: usize) -> [ModifyQp; 3] {
    let connected = setup.qp_type.is_connected();
    // RC's requester and responder attributes; an XRC initiator has only
    // the first, an XRC target only the second (and an ACK timeout).
    let rc = setup.qp_type == QpType::Rc;
    let requester = rc || setup.qp_type == QpType::XrcIni;
    let responder = rc || setup.qp_type == QpType::XrcTgt;
    let init = ModifyQp {
        state: Some(QpState::Init),
        pkey: Some(PKey::DEFAULT),
        port: (setup.qp_type != QpType::Gsi).then_some(1),
        qkey: (!connected).then_some(QKEY),
        access: connected.then_some(AccessFlags::ALL),
        ..ModifyQp::default()
    };
    let rtr = if connected {
        ModifyQp {
            state: Some(QpState::Rtr),
            av: Some(PATH),
            path_mtu: Some(setup.mtu),
            dest_qpn: Some(QPN[1 - i]),
            rq_psn: Some(setup.sq_psn[1 - i]),
            max_dest_rd_atomic: responder.then_some(setup.rd_atomic),
            min_rnr_timer: responder.then_some(setup.min_rnr_timer),
            ..ModifyQp::default()
        }
    } else {
        ModifyQp {
            state: Some(QpState::Rtr),
            ..ModifyQp::default()
        }
    };
    let rts = ModifyQp {
        state: Some(QpState::Rts),
        sq_psn: Some(setup.sq_psn[i]),
        timeout: (requester || responder).then_some(setup.timeout),
        retry_cnt: requester.then_some(setup.retry_cnt),
        rnr_retry: requester.then_some(setup.rnr_retry),
        max_rd_atomic: requester.then_some(setup.rd_atomic),
        ..ModifyQp::default()
    };
    [init, rtr, rts]
}

impl Pair {
    /// Two QPs brought to RTS and pointed at each other.
    pub fn connect(setup: Setup, seed: u64, link: Link) -> Self {
        let mut pair = Self::unconnected(setup, seed, link);
        pair.bring_up(setup);
        pair
    }

    /// Two QPs in RESET, for tests that set them up before connecting.
    pub fn unconnected(setup: Setup, seed: u64, link: Link) -> Self {
        Self {
            nodes: [
                Node::new(setup.qp_type, QPN[A]),
                Node::new(setup.qp_type, QPN[B]),
            ],
            now: 1_000_000,
            wire: Vec::new(),
            alarms: Vec::new(),
            rng: XorShift::new(seed),
            links: [link; 2],
            alt_links: [link; 2],
            wire_fault: None,
            follow_up: None,
            flights: Vec::new(),
            seq: 0,
            sent: [0; 2],
            free_at: [0; 2],
            retransmitted: [0; 2],
            buf: vec![0; MAX_PACKET_LEN],
        }
    }

    /// Brings both QPs from RESET to RTS.
    pub fn bring_up(&mut self, setup: Setup) {
        for i in 0..2 {
            for m in connect_steps(setup, i) {
                self.nodes[i].modify(self.now, m);
            }
        }
    }

    /// Moves every packet either node has to send into the channel.
    fn transmit(&mut self) -> bool {
        let mut any = false;
        for from in 0..2 {
            loop {
                let now = self.now;
                let buf = &mut self.buf;
                let Some(t) = self.nodes[from].with(|qp, io| {
                    let may = qp.may_transmit(io.sq);
                    let t = qp.poll_transmit(now, buf, io);
                    assert!(may || t.is_none(), "may_transmit said no to a packet");
                    t
                }) else {
                    break;
                };
                any = true;
                self.sent[from] += 1;
                if t.retransmission {
                    self.retransmitted[from] += 1;
                }
                let bytes = self.buf[..t.len].to_vec();
                let pkt = packet::parse(&bytes, None).expect("engine emitted a malformed packet");
                let node = &self.nodes[from];
                let path = match t.dest {
                    Dest::Path(h) => h,
                    Dest::Ah(_) => PATH,
                };
                let wire = Wire {
                    at: now,
                    from,
                    opcode: pkt.info.opcode,
                    request: pkt.info.is_request(),
                    psn: pkt.bth.psn.get(),
                    ack_req: pkt.bth.ack_req,
                    mig_req: pkt.bth.mig_req,
                    path,
                    aeth: pkt.ext.aeth.map(|a| (a.syndrome, a.msn)),
                    rq_posted: node.rq.queue.len() as u32,
                };
                self.wire.push(wire);
                if self.wire_fault.as_ref().is_some_and(|fault| fault(&wire)) {
                    continue;
                }
                let link = if path == ALT_PATH {
                    self.alt_links[from]
                } else {
                    self.links[from]
                };
                let departs = now.max(self.free_at[from]);
                self.free_at[from] = departs + link.gap;
                let copies = if self.rng.chance(link.dup) { 2 } else { 1 };
                for _ in 0..copies {
                    if self.rng.chance(link.loss) {
                        continue;
                    }
                    let mut at = departs + link.latency;
                    if self.rng.chance(link.reorder) {
                        at += self.rng.below(4 * link.latency + 1);
                    }
                    self.seq += 1;
                    self.flights.push(Flight {
                        at,
                        seq: self.seq,
                        to: 1 - from,
                        path,
                        bytes: bytes.clone(),
                    });
                }
                if let Some(extra) = self.follow_up.as_ref().and_then(|f| f(&wire, &bytes)) {
                    self.seq += 1;
                    self.flights.push(Flight {
                        at: departs + link.latency,
                        seq: self.seq,
                        to: 1 - from,
                        path,
                        bytes: extra,
                    });
                }
            }
        }
        any
    }

    /// Delivers the earliest due packet; false if none is due.
    fn deliver_one(&mut self) -> bool {
        let Some(i) = self
            .flights
            .iter()
            .enumerate()
            .filter(|(_, f)| f.at <= self.now)
            .min_by_key(|(_, f)| (f.at, f.seq))
            .map(|(i, _)| i)
        else {
            return false;
        };
        let f = self.flights.swap_remove(i);
        let pkt = packet::parse(&f.bytes, None).expect("engine emitted a malformed packet");
        let now = self.now;
        if std::env::var_os("RRXE_SIM_TRACE").is_some() {
            std::eprintln!(
                "{now:>12} {}->{} {:<36} psn {:#08x} ack_req {} aeth {:?} len {}",
                ["A", "B"][1 - f.to],
                ["A", "B"][f.to],
                pkt.info.name,
                pkt.bth.psn.get(),
                pkt.bth.ack_req,
                pkt.ext.aeth.map(|a| (a.syndrome, a.msn.get())),
                pkt.payload.len()
            );
        }
        // A wire joins the same path handle at both ends.
        let arrival = Arrival::NONE.with(f.path);
        self.nodes[f.to].with(|qp, io| {
            qp.handle_packet(now, &pkt, arrival, io);
            // As the kernel's task does at every run, between taking packets in and
            // sending: a user's receives are posted without a call into the engine.
            qp.post_recv(io);
        });
        true
    }

    /// One step: send what can be sent, deliver what is due, else move the
    /// clock to the next event and fire timers. False when nothing can
    /// ever happen again.
    pub fn step(&mut self) -> bool {
        let sent = self.transmit();
        for n in &mut self.nodes {
            n.drain();
        }
        if self.deliver_one() {
            // What the packet completed is visible before the clock moves.
            for n in &mut self.nodes {
                n.drain();
            }
            return true;
        }
        if sent {
            return true;
        }
        let next_flight = self.flights.iter().map(|f| f.at).min();
        let deadlines = self.nodes.iter().filter_map(|n| n.qp.poll_timeout());
        let now = self.now;
        let alarm = self.alarms.iter().copied().filter(|&a| a > now).min();
        let Some(next) = next_flight.into_iter().chain(deadlines).chain(alarm).min() else {
            return false;
        };
        self.now = self.now.max(next);
        let now = self.now;
        for n in &mut self.nodes {
            if matches!(n.qp.poll_timeout(), Some(d) if d <= now) {
                n.with(|qp, io| qp.handle_timeout(now, io));
            }
        }
        true
    }

    /// Steps until `done` holds or nothing can happen; returns whether
    /// `done` held. Panics past `max_steps` (a livelock).
    pub fn run_until(&mut self, max_steps: u64, mut done: impl FnMut(&Self) -> bool) -> bool {
        for _ in 0..max_steps {
            if done(self) {
                return true;
            }
            if !self.step() {
                for n in &mut self.nodes {
                    n.drain();
                }
                return done(self);
            }
        }
        panic!(
            "simulation did not settle within {max_steps} steps: t={} sent={:?} in flight={}",
            self.now,
            self.sent,
            self.flights.len()
        );
    }
}
