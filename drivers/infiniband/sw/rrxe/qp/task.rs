// SPDX-License-Identifier: GPL-2.0

//! The QP's task: one run feeds the engine the packets that arrived, runs its expired
//! timer, sends what it produces and collects its completions and events, all under the
//! QP's mutex; then, with the mutex released, it delivers those to the consumers and arms
//! the timer at the engine's next deadline. Received packets are queued to it from the
//! receive path, or handed to the run a loopback hand-over claimed (its inbox, taken in
//! first); doorbells and Modify kick it.

use super::backlog::Inbox;
use super::object::{srq_of, Phase, QpCore, QpShared, RunScratch, Spent};
use super::outbox::{Outbox, Queue};
use crate::glue::module_param;
use crate::glue::net::{self, Handover, IpAddr, RouteCache, RxPacket, SpareBuffer, TxBatch};
use crate::glue::rdma::attr::AddressVector;
use crate::glue::rdma::object::{QpEvent, QpHandle, WcFields};
use crate::glue::task::{Fired, Kicks, Place, Task, TaskOwner};
use crate::shared::DeviceShared;
use crate::transport::opcode::Operation;
use crate::transport::packet;
use crate::transport::qp::completion::{AsyncEvent, Completion, WcOpcode, WorkQueue};
use crate::transport::qp::context::PathHandle;
use crate::transport::qp::io::{Arrival, Dest};
use core::sync::atomic::Ordering;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Packets a task run takes in, and sends, before it yields and queues itself again.
const BUDGET: usize = 64;

/// What a task run left for the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Left {
    /// Nothing.
    Nothing,
    /// Packets that arrived during the run, after it had taken all that were there,
    /// receives posted as it asked for a receive doorbell, or sends posted while it ran,
    /// which the provider may have posted without a doorbell.
    Arrived,
    /// Work its budgets stopped it from doing (packets to take in or send, deliveries).
    Cut,
    /// Sends posted while it ran, after it took in messages: likely answers to them (a
    /// ping-pong), whose poster is on another CPU.
    Answered,
}

/// How long a run that found an answer posted (`Left::Answered`) waits for its doorbell to
/// announce itself ([`Task::run_now_after`]) before it queues the next run.
const ANSWER_DOORBELL_WAIT_NS: u64 = 20_000;

/// Packets a run must loop back for their QPs' runs to go to another CPU: handling them
/// there should take longer than waking that CPU (under TCG a wake-up cost a 2-byte Read
/// about 60 us, and taking in a packet 3 us).
const OVERLAP_PACKETS: usize = 16;

impl TaskOwner for QpShared {
    type Scratch = RunScratch;

    fn runs_now(&self) -> bool {
        self.user
    }

    fn woke(&self, ns: u64) {
        let counters = &self.dev.counters;
        counters.qp_wakeups.inc();
        counters.qp_wakeup_ns.add(ns);
        self.dev.waits.woke(ns);
    }

    fn run(this: &Arc<Self>, scratch: &mut RunScratch, now: bool, chain: &mut Kicks) {
        let RunScratch { outbox, inbox } = scratch;
        let mut spent = Spent::new(module_param::run_times());
        let start = spent.timed.then(|| spent.now());
        let dev = &*this.dev;
        let (left, deadline) = {
            let mut guard = this.core.lock();
            let Some(core) = guard.as_mut() else {
                // Destroyed: nothing takes these in.
                inbox.clear();
                return;
            };
            outbox.begin(this.user);
            let left = core.step(dev, this, (outbox, inbox), &mut spent);
            let deadline = core.engine.poll_timeout();
            dev.counters.qp_task_runs.inc();
            (left, deadline)
        };
        if now {
            dev.counters.qp_runs_now.inc();
        }
        // The packets this run looped back are all queued, so their QPs' runs take them in
        // one go, and so are those a netdev of this host looped back as the run sent them
        // (a veth pair's: `net::transmit`). Those go to the next CPU (moved there if queued
        // here), to overlap this one, after a run cut short by its budgets (its next run
        // follows here at once) or one that handed over a batch worth a wake-up. Otherwise they stay on this CPU
        // (waking an idle vCPU doubled a 2-byte Read's round trip), made at once after this
        // run by its caller (a queued run waited for the end of this one), and the runs
        // they kick after them in turn: a Read's response is taken in at once too.
        if left == Left::Cut || outbox.kicks.added() >= OVERLAP_PACKETS {
            let fired = outbox.kicks.fire(Place::Beside);
            dev.counters.qp_runs_moved.add(fired.moved);
        } else {
            chain.take_from(&mut outbox.kicks);
        }
        // A timed run reads the clock again only after work that took time: most runs of a
        // user QP have nothing to deliver (their completions are in the CQ already) and
        // find the timer armed for as long as they would arm it.
        let counters = &dev.counters;
        let mut end = 0;
        if spent.timed {
            end = spent.now();
            spent.close(end);
            spent.add_to(counters);
        }
        let delivering = outbox.has_deliveries();
        outbox.deliver(&this.handle, &this.destroyed);
        if spent.timed && delivering {
            let delivered = spent.now();
            counters.qp_deliver_ns.add(delivered - end);
            end = delivered;
        }
        if let Some(deadline) = deadline {
            let now = spent.latest();
            if Task::arm(this, now, deadline.saturating_sub(now)) {
                counters.qp_timer_arms.inc();
                if spent.timed {
                    let armed = spent.now();
                    counters.qp_timer_arm_ns.add(armed - now);
                    end = armed;
                }
            }
        }
        if let Some(start) = start {
            counters.qp_run_ns.add(end - start);
        }
        // The doorbell of a send posted meanwhile may be waiting for this run's end, to make
        // the next run in its system call (`doorbell`). An answer's poster rings (the stock
        // provider for every post, librrxe for one to an empty ring) and may be on its way:
        // it is given a moment, while the device measures that a spin costs less than the
        // worker the run would wake.
        let wait = if left == Left::Answered && this.answer_waits() && this.answer_spins() {
            ANSWER_DOORBELL_WAIT_NS
        } else {
            0
        };
        let awaited = left != Left::Nothing && {
            let (awaited, spin) = Task::awaited(this, wait);
            if let Some(spin) = spin {
                this.spun(spin);
            }
            awaited
        };
        match left {
            Left::Nothing => {}
            _ if awaited => counters.qp_answers_awaited.inc(),
            // On the next CPU, the poster's (on two CPUs: it posted while this run had this
            // one), where the answer's run starts at once; here it would wait for the end of
            // this run and of the chain it is in (made at once in that chain, it was no
            // faster). librrxe posts without a doorbell while a run is going
            // (uverbs-abi.rst): its 2-byte Write latency went from 27.6 to 24.9 us
            // (Documentation/rrxe/benchmarks.rst).
            Left::Answered => {
                if wait > 0 {
                    counters.qp_answer_waits_expired.inc();
                }
                counters.qp_answers_beside.inc();
                if Task::deferred(this.clone()).fire(Place::Beside) == Fired::Moved {
                    counters.qp_runs_moved.inc();
                }
            }
            _ => Task::kick(this),
        }
    }
}

impl QpCore {
    /// One run's work under the QP's mutex (`dev` is the QP's device), with the run's
    /// clock, which it leaves with where its time went (its last phase open for the run's
    /// end to close); returns what it left for another run.
    fn step(
        &mut self,
        dev: &DeviceShared,
        shared: &QpShared,
        (outbox, inbox): (&mut Outbox, &mut Inbox),
        spent: &mut Spent,
    ) -> Left {
        let (rx, qp) = (&shared.rx, &shared.handle);
        self.sq.run_begins();
        let msn = self.engine.msn();
        self.snapshot_sends();
        let pmtu = self.engine.context().path_mtu.bytes();
        let qp_type = self.engine.context().qp_type;
        let ud = !qp_type.is_connected();
        let mut budget = BUDGET;
        // When the packet before began (its end is the next one's start: one clock read a
        // packet).
        let mut began = None;
        // Whether packets were left in the backlog at the last look: the one that takes the
        // last packet also tells, so the look that would find it empty is not made (packets
        // that arrive later have kicked the task, and the end of the run looks again). The
        // first look is the count the last push or pop left, read without the lock: a
        // doorbell's run usually finds none.
        let mut waiting = shared.waiting.load(Ordering::Acquire) > 0;
        while budget > 0 && outbox.room() >= Outbox::RESERVE {
            // The packets handed to this run came before any in the backlog (see `Inbox`).
            let mut pkt = match inbox.pop() {
                Some(pkt) => pkt,
                None if waiting => {
                    let (pkt, left) = {
                        let mut backlog = rx.lock();
                        let pkt = backlog.pop();
                        let left = backlog.len();
                        shared.waiting.store(left as u32, Ordering::Relaxed);
                        (pkt, left)
                    };
                    let Some(pkt) = pkt else {
                        break;
                    };
                    waiting = left > 0;
                    pkt
                }
                None => break,
            };
            budget -= 1;
            // A packet received in the softirq of a send of this host has its ICRC checked
            // here, on this run's CPU rather than the sender's (`net::encap_rcv`).
            if !pkt.icrc_ok() {
                pkt.discard();
                continue;
            }
            // The packet's own time, not the run's nor the packet before's: it may have
            // arrived after either began, and a timer it starts (an RNR NAK's, IBA
            // 9.7.5.2.8, a minimum) must not count from before its arrival.
            let now = spent.now();
            if let Some(b) = began.replace(now).filter(|_| spent.timed) {
                spent.rx += now - b;
            }
            match packet::parse(pkt.bth_to_icrc(), Some(pmtu)) {
                Ok(p) => {
                    let arrival = self.arrival(&pkt);
                    let grh = ud.then(|| grh_of(&pkt));
                    self.io(grh.as_ref(), |engine, io, _| {
                        engine.handle_packet(now, &p, arrival, io)
                    });
                    // At once, for the doorbell of a consumer answering this message: it may
                    // see the message (its data, its completion) before this run ends.
                    shared.news.msn.store(self.engine.msn(), Ordering::Relaxed);
                    // So is the last outstanding Read's response, which the consumer of a
                    // ping-pong of Reads waits for (see `doorbell`).
                    if matches!(
                        p.info.operation,
                        Operation::RdmaReadResponse | Operation::AtomicAcknowledge
                    ) && !self.engine.requests_outstanding()
                    {
                        shared.news.answers.fetch_add(1, Ordering::Relaxed);
                    }
                    // Completions now, while the datagram's network type is known.
                    self.collect(qp, outbox, ud, Some(pkt.src_ip().is_v4()));
                }
                Err(_) => dev.counters.rx_malformed.inc(),
            }
            // A looped-back packet's buffer goes back to the device's pool.
            dev.buffers.recycle(pkt, &mut self.spare);
        }
        // Receives may have been posted since the last run (user QPs post without a system
        // call): an RC responder that advertised no credits owes the requester an update.
        let producer = self.rq.producer();
        self.io(None, |engine, io, _| engine.post_recv(io));
        // A timed run that took no packets has done nothing since its start worth a clock
        // read of its own: its sends count from the start. One that did reads the clock for
        // its timers and sends, if it has any (one that took in a Read's response has
        // neither: the end of the run closes the packet's time). An untimed run's timers
        // and first send count from its last packet taken in, or from a reading of their
        // own.
        if let Some(b) = began.filter(|_| spent.timed) {
            if self.engine.poll_timeout().is_some() || self.engine.may_transmit(&self.sq) {
                let now = spent.now();
                spent.rx += now - b;
            } else {
                spent.open = Some((b, Phase::Rx));
            }
        }
        if let Some(due) = self.engine.poll_timeout() {
            let now = spent.latest();
            if due <= now {
                self.io(None, |engine, io, _| engine.handle_timeout(now, io));
            }
        }
        let mut sent = 0;
        let mut more = self.may_send(sent, outbox);
        let mut now = if more { spent.latest() } else { 0 };
        let mut batch = TxBatch::new();
        while more {
            let Some(built) = self.transmit(qp.qpn(), &mut outbox.kicks, &mut batch, now, spent)
            else {
                break;
            };
            sent += 1;
            // The next packet's time is when this one left; after the last, the handover
            // and the rest of the run count as sending until the run's end reads the clock.
            more = self.may_send(sent, outbox);
            if more {
                now = spent.now();
                if spent.timed {
                    spent.send += now - built;
                }
            } else if spent.timed {
                spent.open = Some((built, Phase::Send));
            }
        }
        // The packets looped back go to their QPs now, together: by a netdev of this host
        // as the batch closes, by rrxe as the handover flushes.
        let dropped = batch.close(&mut outbox.kicks);
        if dropped > 0 {
            self.dev.counters.tx_errors.add(u64::from(dropped));
        }
        self.handover.flush(&mut outbox.kicks);
        self.collect(qp, outbox, ud, None);
        // While the requester waits for credits, receives a user posts are news: its
        // provider is asked to ring once it has posted a batch worth an update rather than
        // wait for the engine's next recheck of the queue (a busy receiver reposts long
        // before it). A post made as the request went up may have missed it: then this QP
        // runs again to look.
        let after = self.engine.recv_doorbell_after().unwrap_or(0);
        let unseen = self.rq.want_doorbell(after, producer);
        self.mrs.clear();
        if self.engine.has_stats() {
            dev.counters.add_transport(&self.engine.take_stats());
        }
        if budget == 0 || sent == BUDGET || outbox.room() < Outbox::RESERVE {
            Left::Cut
        } else if unseen || shared.waiting.load(Ordering::Relaxed) > 0 || !inbox.is_empty() {
            Left::Arrived
        } else if self.sq.settle() {
            dev.counters.send_ring_rechecks.inc();
            if self.engine.msn() != msn {
                Left::Answered
            } else {
                Left::Arrived
            }
        } else {
            Left::Nothing
        }
    }

    /// Whether a run that sent `sent` packets may send another: its budget and the
    /// outbox's room allow it and the engine may have one.
    fn may_send(&self, sent: usize, outbox: &Outbox) -> bool {
        sent < BUDGET && outbox.room() >= Outbox::RESERVE && self.engine.may_transmit(&self.sq)
    }

    /// Sends the engine's next packet, if it has one, and returns when it was built (the
    /// time its sending took is the caller's to count, from there; `now` if the run is
    /// untimed). `now` is when the packet before left (or a reading of the run's): the
    /// engine counts this packet's retransmission timer from it, the start of the packet's
    /// own building, not of the run. A packet looped back to a QP of this host, by rrxe or
    /// by a netdev, leaves its QP's kick in `kicks` (a netdev's once `batch`, which a packet
    /// for the wire opens, closes). A timed run adds the time building it took to `spent`.
    /// Callers ask the engine's `may_transmit` first: most runs end with a call that would
    /// find nothing, and the look costs less.
    pub(super) fn transmit(
        &mut self,
        qpn: u32,
        kicks: &mut Kicks,
        batch: &mut TxBatch,
        now: u64,
        spent: &mut Spent,
    ) -> Option<u64> {
        let t = self.io(None, |engine, io, tx| engine.poll_transmit(now, tx, io))?;
        let built = if spent.timed {
            let built = spent.now();
            spent.build += built - now;
            built
        } else {
            now
        };
        let path = match t.dest {
            Dest::Ah(handle) => self.sq.dest(handle),
            Dest::Path(h) => self.paths.get(usize::from(h.0)).copied().flatten(),
        };
        if t.retransmission {
            self.dev.counters.retransmitted_pkts.inc();
        }
        match path {
            Some(av) => send(
                &self.dev,
                &av,
                qpn,
                (&mut self.tx, t.len),
                (&mut self.handover, &mut self.spare),
                (kicks, &mut self.routes, batch),
            ),
            None => self.dev.counters.tx_no_path.inc(),
        }
        Some(built)
    }

    /// Which of the QP's paths a packet came over: it arrived on the path's port, its source
    /// is the path's destination and its destination the path's source.
    fn arrival(&self, pkt: &RxPacket) -> Arrival {
        // The addresses as two words each: compared byte by byte they cost a packet some
        // 40 instructions.
        let word = |a: [u8; 16]| u128::from_ne_bytes(a);
        let (src, dst) = (word(pkt.src_ip().octets()), word(pkt.dst_ip().octets()));
        let port = self.dev.ports.of_netdev(pkt.netdev()).map_or(1, |p| p.num);
        let mut a = Arrival::NONE;
        for (h, av) in self.paths.iter().enumerate() {
            if let Some(av) = av {
                if av.port == port && word(av.dgid) == src && word(av.sgid) == dst {
                    a = a.with(PathHandle(h as u8));
                }
            }
        }
        a
    }

    /// Moves the engine's completions and events into the outbox (and the SRQ's limit
    /// event, if taking a WQE owed it), as far as there is room.
    #[inline(always)]
    fn collect(&mut self, qp: &QpHandle, outbox: &mut Outbox, ud: bool, network_v4: Option<bool>) {
        // Most of a run's calls (five a 2-byte Read, over its three runs) find nothing:
        // asking costs less than the call.
        if self.engine.has_completions()
            || self.engine.has_events()
            || self.rq.srq_limit_pending()
            || self.xrc.as_ref().is_some_and(|x| x.srq_limit_pending())
        {
            self.collect_all(qp, outbox, ud, network_v4);
        }
    }

    /// [`QpCore::collect`] once there is something to collect.
    #[inline(never)]
    fn collect_all(
        &mut self,
        qp: &QpHandle,
        outbox: &mut Outbox,
        ud: bool,
        network_v4: Option<bool>,
    ) {
        while outbox.room() > 1 && self.engine.has_completions() {
            let Some(c) = self.io(None, |engine, io, _| engine.poll_completion(io)) else {
                break;
            };
            let (queue, wc, solicited) = completion(&c, qp, ud, network_v4);
            match (c.xrc_srqn, &self.xrc) {
                (Some(srqn), Some(target)) => match target.srq(&self.dev.srqs, srqn) {
                    Some(srq) => outbox.xrc_completion(srq, wc, solicited),
                    // The SRQ was destroyed with its WQEs: no CQ wants the completion.
                    None => self.dev.counters.xrc_completions_dropped.inc(),
                },
                _ => outbox.completion(
                    (self.send_cq.as_ref(), self.recv_cq.as_ref()),
                    qp,
                    queue,
                    wc,
                    solicited,
                ),
            }
        }
        while let Some(e) = self.engine.poll_event() {
            let ev = match e {
                AsyncEvent::CommEstablished => QpEvent::CommEstablished,
                AsyncEvent::SqDrained => QpEvent::SqDrained,
                AsyncEvent::LastWqeReached => QpEvent::LastWqeReached,
                AsyncEvent::QpRequestError => QpEvent::RequestError,
                AsyncEvent::QpAccessError => QpEvent::AccessError,
                AsyncEvent::QpFatal => QpEvent::Fatal,
                AsyncEvent::PathMigrated => QpEvent::PathMigrated,
                AsyncEvent::PathMigrationFailed => QpEvent::PathMigrationFailed,
                // The failing WQE's completion reports it.
                AsyncEvent::RetryExhausted { .. } => continue,
            };
            outbox.event(ev);
        }
        if self.rq.take_srq_limit_reached() {
            outbox.srq_limit(srq_of(self));
        }
        if let Some(srq) = self.xrc.as_mut().and_then(|x| x.take_srq_limit_reached()) {
            outbox.xrc_srq_limit(srq);
        }
    }
}

/// A completion of a QP (`ud` for a datagram one) as the verbs layer numbers it, the CQ it
/// goes to and whether it is solicited; `network_v4` tells a datagram's network type.
fn completion(
    c: &Completion,
    qp: &QpHandle,
    ud: bool,
    network_v4: Option<bool>,
) -> (Queue, WcFields, bool) {
    use crate::glue::bindings as b;
    let opcode = match c.opcode {
        WcOpcode::Send => b::ib_wc_opcode_IB_WC_SEND,
        WcOpcode::RdmaWrite => b::ib_wc_opcode_IB_WC_RDMA_WRITE,
        WcOpcode::RdmaRead => b::ib_wc_opcode_IB_WC_RDMA_READ,
        WcOpcode::CompSwap => b::ib_wc_opcode_IB_WC_COMP_SWAP,
        WcOpcode::FetchAdd => b::ib_wc_opcode_IB_WC_FETCH_ADD,
        WcOpcode::AtomicWrite => b::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
        WcOpcode::BindMw => b::ib_wc_opcode_IB_WC_BIND_MW,
        WcOpcode::LocalInvalidate => b::ib_wc_opcode_IB_WC_LOCAL_INV,
        WcOpcode::FastRegister => b::ib_wc_opcode_IB_WC_REG_MR,
        WcOpcode::Recv => b::ib_wc_opcode_IB_WC_RECV,
        WcOpcode::RecvRdmaWithImm => b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
    };
    let recv = c.queue == WorkQueue::Recv;
    let wc = WcFields {
        wr_id: c.wr_id,
        status: c.status as u32,
        opcode,
        byte_len: c.byte_len,
        imm_data: c.imm_data,
        invalidated_rkey: c.invalidated_rkey,
        qp_num: qp.qpn(),
        src_qp: c.src_qp,
        // On RoCE a UD receive always has the GRH area (IBA 11.4.1.2).
        grh: recv && ud,
        network_v4: if recv { network_v4 } else { None },
    };
    let queue = if recv { Queue::Recv } else { Queue::Send };
    (queue, wc, c.solicited)
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

/// Sends the `len`-byte packet at the start of `tx` along `av`, out of the netdev of its
/// port; traffic to this device's own address takes the loopback path (which hands over
/// `tx` itself and leaves `spare`, or a buffer of the device's pool, in its place; the
/// packet joins `handover`, which may hand over what it held to make room, adding kicks to
/// `kicks`), everything else the netdev's IP stack, by the route `routes` keeps, in `batch`.
fn send(
    dev: &DeviceShared,
    av: &AddressVector,
    qpn: u32,
    (tx, len): (&mut KVec<u8>, usize),
    (handover, spare): (&mut Handover, &mut SpareBuffer),
    (kicks, routes, batch): (&mut Kicks, &mut RouteCache, &mut TxBatch),
) {
    let path = net::TxPath {
        src: IpAddr::from_octets(av.sgid),
        dst: IpAddr::from_octets(av.dgid),
        src_port: udp_source_port(qpn, av),
        tclass: av.traffic_class,
        hop_limit: av.hop_limit,
    };
    // Modify QP and Create AH checked the port against the device's.
    let Some(port) = dev.ports.get(u32::from(av.port)) else {
        dev.counters.tx_no_path.inc();
        return;
    };
    let result = if av.sgid == av.dgid {
        let pool = (&dev.buffers, spare);
        net::loopback_in_place(&port.netdev, &path, tx, len, pool, handover, kicks)
    } else {
        net::transmit(&port.netdev, &path, &tx[..len], routes, batch)
    };
    match result {
        Ok(()) => {
            let traffic = &port.traffic;
            traffic.sent_pkts.inc();
            traffic.sent_octets.add(len as u64);
            if path.dst.is_multicast() {
                traffic.mcast_sent_pkts.inc();
            }
        }
        Err(_) => dev.counters.tx_errors.inc(),
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
