// SPDX-License-Identifier: GPL-2.0

//! Hostile input: arbitrary byte strings and mutated packets of every
//! opcode, fed to the parser and to RC, UC, UD and XRC initiator and
//! target QPs in every state they can receive in. A packet the parser takes must be handled by an IBA rule
//! (a response, a completion, an async event, a memory, state or PSN
//! change) or counted as a drop; one that it refuses is counted by the glue
//! (`rcvd_malformed`). After the hostile phase a live pair still completes
//! legitimate traffic with verified data, or a QP is in ERR with the IBA
//! status. Every failure names its seed and iteration; rerun with
//! `RRXE_SIM_SEED=<seed>`, and run longer with `RRXE_FUZZ_ITERS=<n>`.

#![cfg(test)]

use super::super::aeth::Syndrome;
use super::super::headers::{
    AtomicAckEth, AtomicEth, Bth, Deth, ExtHeader, Feth, Ieth, ImmDt, Rdeth, Reth, Xrceth,
};
use super::super::opcode::{self, codes, OpcodeInfo, Operation, Position, Transport};
use super::super::packet::{self, ExtHeaders, Packet};
use super::super::psn::{Msn, Psn};
use super::super::qp::completion::{AsyncEvent, WcStatus};
use super::super::qp::wqe::{SendFlags, SendOpcode, UdDest};
use super::super::qp::TransportEvent;
use super::tests::{check, consuming, drain_tx, inject, post_ops, random_ops, request_with, Op};
use super::*;
use std::format;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::string::String;

/// Iterations per test: `RRXE_FUZZ_ITERS` if set, else `default`.
fn iters(default: u64) -> u64 {
    std::env::var("RRXE_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// Runs `f` for iterations `0..n`, turning a panic into a failure that
/// names the seed and the iteration.
fn each_iteration(test: &str, seed: u64, n: u64, mut f: impl FnMut(u64) -> Result<(), String>) {
    for i in 0..n {
        match catch_unwind(AssertUnwindSafe(|| f(i))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!(
                "{test}: seed {seed:#x} iteration {i}: {e}\n  reproduce: RRXE_SIM_SEED={seed:#x} cargo test {test}"
            ),
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| String::from(*s))
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                panic!(
                    "{test}: seed {seed:#x} iteration {i}: panicked: {msg}\n  reproduce: RRXE_SIM_SEED={seed:#x} cargo test {test}"
                )
            }
        }
    }
}

/// What the fuzzer knows of the QP it attacks, to aim near its PSNs,
/// regions and Q_Key.
#[derive(Clone, Copy, Debug)]
struct Aim {
    qpn: u32,
    /// ePSN (requests are aimed at it).
    epsn: u32,
    /// Next PSN the requester sends (responses are aimed just behind it).
    sq_psn: u32,
    mtu: usize,
}

const RKEY: u32 = 7;
/// XRC SRQs of an attacked XRC target, numbered from 0 and in its XRC
/// domain (0); the next SRQN is an SRQ of another domain.
const HOSTILE_SRQS: usize = 3;
const REGION_VA: u64 = 0x1000;
const REGION_LEN: usize = 4096;

impl Aim {
    fn of(node: &Node) -> Self {
        let q = node.qp.query();
        Self {
            qpn: node.qp.context().qpn,
            epsn: q.rq_psn.unwrap_or(0),
            sq_psn: q.sq_psn.unwrap_or(0),
            mtu: node.qp.context().path_mtu.bytes(),
        }
    }
}

fn pick<T: Copy>(rng: &mut XorShift, from: &[T]) -> T {
    from[rng.below(from.len() as u64) as usize]
}

/// A PSN near where `aim` expects one, or far in the past or future.
fn psn_for(rng: &mut XorShift, aim: &Aim, response: bool) -> Psn {
    let base = if response { aim.sq_psn } else { aim.epsn };
    let base = Psn::new(base);
    match rng.below(8) {
        0..=2 => base,
        3 => base.wrapping_add(rng.below(4) as u32 + 1),
        4 => base.wrapping_sub(rng.below(8) as u32 + 1),
        // Far in the past and in the future: the edges of the window.
        5 => base.wrapping_sub((1 << 23) - rng.below(4) as u32),
        6 => base.wrapping_add((1 << 23) - rng.below(4) as u32),
        _ => Psn::new(rng.next_u64() as u32),
    }
}

fn va_for(rng: &mut XorShift) -> u64 {
    match rng.below(6) {
        0 | 1 => REGION_VA + 8 * rng.below(REGION_LEN as u64 / 8),
        // Misaligned, for atomics.
        2 => REGION_VA + 1 + rng.below(7),
        3 => REGION_VA + REGION_LEN as u64 - rng.below(16),
        4 => u64::MAX - rng.below(16),
        _ => rng.next_u64(),
    }
}

/// Mostly the region's R_Key, sometimes any.
fn rkey_for(rng: &mut XorShift) -> u32 {
    if rng.chance(0.8) {
        RKEY
    } else {
        rng.next_u64() as u32
    }
}

fn len_for(rng: &mut XorShift, aim: &Aim) -> u32 {
    match rng.below(7) {
        0 => 0,
        1 => rng.below(aim.mtu as u64 + 1) as u32,
        2 => rng.below(REGION_LEN as u64 + 1) as u32,
        // Beyond the region.
        3 => REGION_LEN as u32 + 1 + rng.below(64) as u32,
        4 => 8,
        5 => pick(rng, &[0x8000_0000, u32::MAX, 0x7FFF_FFFF]),
        _ => rng.next_u64() as u32,
    }
}

/// An AETH syndrome: mostly ACKs and NAKs, sometimes any valid encoding.
fn syndrome_for(rng: &mut XorShift) -> Syndrome {
    loop {
        let byte = match rng.below(4) {
            0 => rng.below(32) as u8,
            1 => 0x20 | rng.below(32) as u8,
            2 => 0x60 | rng.below(5) as u8,
            _ => rng.next_u64() as u8,
        };
        if let Ok(s) = Syndrome::from_byte(byte) {
            return s;
        }
    }
}

/// A well-formed packet of `info` aimed at `aim`, with field values that
/// probe the edges (PSNs, lengths, addresses, keys).
fn synthesize(rng: &mut XorShift, info: &OpcodeInfo, aim: &Aim) -> Vec<u8> {
    let response = info.is_response();
    let mut ext = ExtHeaders::default();
    for &kind in info.headers {
        match kind {
            ExtHeader::Rdeth => {
                ext.rdeth = Some(Rdeth {
                    ee_context: rng.below(1 << 24) as u32,
                })
            }
            ExtHeader::Deth => {
                ext.deth = Some(Deth {
                    qkey: if rng.chance(0.8) {
                        QKEY
                    } else {
                        rng.next_u64() as u32
                    },
                    src_qp: QPN[A],
                })
            }
            ExtHeader::Xrceth => {
                // Mostly an SRQ of an attacked XRC target, or its foreign
                // one.
                let xrc_srq = if rng.chance(0.7) {
                    rng.below(HOSTILE_SRQS as u64 + 1) as u32
                } else {
                    rng.below(1 << 24) as u32
                };
                ext.xrceth = Some(Xrceth { xrc_srq })
            }
            ExtHeader::Reth => {
                ext.reth = Some(Reth {
                    va: va_for(rng),
                    rkey: rkey_for(rng),
                    dma_len: len_for(rng, aim),
                })
            }
            ExtHeader::Feth => {
                ext.feth = Some(Feth {
                    selectivity_level: rng.below(4) as u8,
                    placement_type: rng.below(8) as u8,
                })
            }
            ExtHeader::AtomicEth => {
                ext.atomic_eth = Some(AtomicEth {
                    va: va_for(rng),
                    rkey: rkey_for(rng),
                    swap_add: rng.next_u64(),
                    compare: rng.next_u64(),
                })
            }
            ExtHeader::Aeth => {
                ext.aeth = Some(super::super::headers::Aeth {
                    syndrome: syndrome_for(rng),
                    msn: Msn::new(rng.below(1 << 24) as u32),
                })
            }
            ExtHeader::AtomicAckEth => {
                ext.atomic_ack_eth = Some(AtomicAckEth {
                    orig_remote_data: rng.next_u64(),
                })
            }
            ExtHeader::ImmDt => {
                ext.imm_dt = Some(ImmDt {
                    imm_data: rng.next_u64() as u32,
                })
            }
            ExtHeader::Ieth => {
                ext.ieth = Some(Ieth {
                    rkey: rkey_for(rng),
                })
            }
            ExtHeader::CnpReserved => {}
        }
    }
    let plen = if !info.has_payload {
        0
    } else if info.operation == Operation::AtomicWrite && rng.chance(0.7) {
        8
    } else {
        match (info.position, rng.below(5)) {
            (_, 0) => rng.below(4097) as usize,
            (Position::First | Position::Middle, _) => aim.mtu,
            (Position::Last, _) => 1 + rng.below(aim.mtu as u64) as usize,
            (Position::Only, _) => rng.below(aim.mtu as u64 + 1) as usize,
        }
    };
    let bth = Bth {
        opcode: info.opcode,
        solicited_event: rng.chance(0.2),
        mig_req: rng.chance(0.1),
        pad_count: packet::pad_count(plen),
        pkey: if rng.chance(0.95) {
            0xFFFF
        } else {
            rng.next_u64() as u16
        },
        dest_qp: aim.qpn,
        ack_req: rng.chance(0.7),
        psn: psn_for(rng, aim, response),
        ..Bth::default()
    };
    let mut buf = vec![0; packet::packet_len(info, plen)];
    let payload = rng.bytes(plen);
    match packet::write_packet(&mut buf, &bth, &ext, &payload) {
        Ok(len) => buf.truncate(len),
        // A field the generator made too wide: send the headers raw.
        Err(_) => buf = rng.bytes(buf.len()),
    }
    buf
}

/// Offset of the BTH's PadCnt/TVer byte and of its PSN.
const BTH_FLAGS: usize = 1;
const BTH_PSN: usize = 9;

/// One to three damages to a packet.
fn mutate(rng: &mut XorShift, bytes: &mut Vec<u8>) {
    for _ in 0..=rng.below(3) {
        match rng.below(9) {
            0 => {
                let keep = rng.below(bytes.len() as u64 + 1) as usize;
                bytes.truncate(keep);
            }
            1 => {
                let more = rng.below(9) as usize;
                bytes.extend(rng.bytes(more));
            }
            // PadCnt.
            2 if bytes.len() > BTH_FLAGS => {
                bytes[BTH_FLAGS] = bytes[BTH_FLAGS] & !0x30 | (rng.below(4) as u8) << 4;
            }
            // TVer.
            3 if bytes.len() > BTH_FLAGS => {
                bytes[BTH_FLAGS] = bytes[BTH_FLAGS] & !0x0F | rng.below(16) as u8;
            }
            // Another opcode: any, an XRC one, or a reserved one.
            4 if !bytes.is_empty() => {
                bytes[0] = match rng.below(3) {
                    0 => rng.next_u64() as u8,
                    1 => codes::XRC_BASE + rng.below(0x18) as u8,
                    _ => 0xC0 | rng.below(0x40) as u8,
                };
            }
            // PSN far from where it was.
            5 if bytes.len() >= BTH_PSN + 3 => {
                let psn = rng.next_u64().to_be_bytes();
                bytes[BTH_PSN..BTH_PSN + 3].copy_from_slice(&psn[..3]);
            }
            _ if !bytes.is_empty() => {
                for _ in 0..=rng.below(4) {
                    let i = rng.below(bytes.len() as u64) as usize;
                    bytes[i] ^= 1 << rng.below(8);
                }
            }
            _ => {}
        }
    }
}

/// A test's seed (`RRXE_SIM_SEED`, else `default`), its generator and
/// every opcode the parser knows.
fn fuzzer(default: u64) -> (u64, XorShift, Vec<&'static OpcodeInfo>) {
    let seed = seed_or(default);
    (seed, XorShift::new(seed), known_opcodes())
}

/// Every opcode the parser knows.
fn known_opcodes() -> Vec<&'static OpcodeInfo> {
    (0..=u8::MAX).filter_map(opcode::lookup).collect()
}

/// A hostile packet for `aim` at a QP of `transport`: random bytes, or a
/// packet of any known opcode (mostly the QP's own transport), mutated half
/// the time.
fn hostile(
    rng: &mut XorShift,
    opcodes: &[&'static OpcodeInfo],
    transport: Transport,
    aim: &Aim,
) -> Vec<u8> {
    if rng.chance(0.1) {
        let n = rng.below(80) as usize;
        return rng.bytes(n);
    }
    let own: Vec<_> = opcodes
        .iter()
        .filter(|i| i.transport == transport)
        .copied()
        .collect();
    let info = if rng.chance(0.75) {
        pick(rng, &own)
    } else {
        pick(rng, opcodes)
    };
    let mut bytes = synthesize(rng, info, aim);
    if rng.chance(0.5) {
        mutate(rng, &mut bytes);
    }
    bytes
}

/// Everything a packet can visibly do to a node.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    sent: u64,
    completions: usize,
    events: usize,
    counted: u64,
    state: QpState,
    sq_psn: Option<u32>,
    rq_psn: Option<u32>,
    timeout: Option<u64>,
    sq_consumer: u32,
    rq_posted: usize,
    mem_writes: u64,
}

fn seen(pair: &Pair, i: usize) -> Seen {
    let n = &pair.nodes[i];
    let q = n.qp.query();
    Seen {
        sent: pair.sent[i],
        completions: n.completions.len(),
        events: n.events.len(),
        counted: TransportEvent::ALL
            .iter()
            .map(|&e| u64::from(n.stats.get(e)))
            .sum(),
        state: n.qp.state(),
        sq_psn: q.sq_psn,
        rq_psn: q.rq_psn,
        timeout: n.qp.poll_timeout(),
        sq_consumer: n.sq.consumer,
        rq_posted: n.rq.queue.len(),
        mem_writes: n.mem.writes,
    }
}

/// Whether dropping `pkt` without a trace is what IBA asks: a positive ACK
/// behind the requester's next PSN, or before RTS, acknowledges nothing new
/// (a duplicate, or an unsolicited ACK repeating the last PSN, IBA
/// 9.7.5.1.2 and 9.7.7.2.4) and its credits may be no news either.
fn iba_silent(pkt: &Packet<'_>, before: &Seen) -> bool {
    let positive_ack = pkt.info.operation == Operation::Acknowledge
        && matches!(pkt.ext.aeth.map(|a| a.syndrome), Some(Syndrome::Ack(_)));
    // Half the PSN space away, the requester's oldest unacknowledged PSN
    // (which it judges by) and its next PSN disagree about what is behind.
    let behind_next = before.sq_psn.is_some_and(|next| {
        let next = Psn::new(next);
        pkt.bth.psn.is_before(next) || next.distance_to(pkt.bth.psn) > (1 << 23) - (1 << 16)
    });
    positive_ack
        && match before.state {
            QpState::Rtr => true,
            QpState::Rts | QpState::Sqd => behind_next,
            _ => false,
        }
}

/// Parser verdicts and engine verdicts of a run.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    malformed: u64,
    handled: u64,
    counted: u64,
    silent: u64,
}

/// Feeds `bytes` to node `to` of `pair` as the glue does (parse against the
/// path MTU, then the engine), and checks that it left a trace. Returns
/// whether the packet was taken as the peer's own: it moved the ePSN,
/// retired or completed a WQE, or changed memory.
fn feed(
    pair: &mut Pair,
    to: usize,
    bytes: &[u8],
    arrival: Arrival,
    t: &mut Tally,
) -> Result<bool, String> {
    let pmtu = pair.nodes[to].qp.context().path_mtu.bytes();
    let Ok(pkt) = packet::parse(bytes, Some(pmtu)) else {
        t.malformed += 1;
        return Ok(false);
    };
    pair.now += 1;
    let now = pair.now;
    let before = seen(pair, to);
    pair.nodes[to].with(|qp, io| qp.handle_packet(now, &pkt, arrival, io));
    pair.transmit();
    pair.nodes[to].drain();
    let after = seen(pair, to);
    if after.counted != before.counted {
        t.counted += 1;
    } else if after != before {
        t.handled += 1;
    } else if iba_silent(&pkt, &before) {
        t.silent += 1;
    } else {
        return Err(format!(
            "a packet vanished without a trace: {} psn {:#x} aeth {:?} payload {} arrival {arrival:?} at {before:?}\n  bytes {:02x?}",
            pkt.info.name,
            pkt.bth.psn.get(),
            pkt.ext.aeth.map(|a| a.syndrome),
            pkt.payload.len(),
            &bytes[..bytes.len().min(96)],
        ));
    }
    Ok(after.rq_psn != before.rq_psn
        || after.sq_consumer != before.sq_consumer
        || after.completions != before.completions
        || after.mem_writes != before.mem_writes)
}

/// Where a QP under attack stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// In a state, idle; SQE (UC and UD) after a local error.
    In(QpState),
    /// RC: the requester has Reads, atomics and a multi-packet Send
    /// outstanding.
    RequesterBusy,
    /// RC, UC: the responder is inside a multi-packet Send.
    ResponderMidMessage,
}

const STAGES: [Stage; 9] = [
    Stage::In(QpState::Reset),
    Stage::In(QpState::Init),
    Stage::In(QpState::Rtr),
    Stage::In(QpState::Rts),
    Stage::In(QpState::Sqd),
    Stage::In(QpState::Sqe),
    Stage::In(QpState::Err),
    Stage::RequesterBusy,
    Stage::ResponderMidMessage,
];

fn applies(qp_type: QpType, stage: Stage) -> bool {
    match stage {
        // RC and XRC never enter SQE (IBA 10.3.1.6).
        Stage::In(QpState::Sqe) => !matches!(qp_type, QpType::Rc | QpType::XrcIni | QpType::XrcTgt),
        Stage::RequesterBusy => matches!(qp_type, QpType::Rc | QpType::XrcIni),
        Stage::ResponderMidMessage => qp_type.is_connected() && qp_type != QpType::XrcIni,
        _ => true,
    }
}

/// The BTH transport of a QP type's packets.
fn transport_of(qp_type: QpType) -> Transport {
    match qp_type {
        QpType::Rc => Transport::Rc,
        QpType::Uc => Transport::Uc,
        QpType::Ud | QpType::Gsi => Transport::Ud,
        QpType::XrcIni | QpType::XrcTgt => Transport::Xrc,
    }
}

fn setup_of(qp_type: QpType) -> Setup {
    Setup {
        qp_type,
        ..Setup::rc()
    }
}

/// A connection of `qp_type` with random MTU, PSNs (a wrap through zero
/// among them) and responder resources, none among them (IBA 11.2.4.2)
/// unless `stage` needs Reads and atomics to go out.
fn random_setup(rng: &mut XorShift, qp_type: QpType, stage: Stage) -> Setup {
    let busy = stage == Stage::RequesterBusy;
    Setup {
        mtu: 1 + rng.below(5) as u8,
        rd_atomic: u8::from(busy) + rng.below(9 - u64::from(busy)) as u8,
        sq_psn: [
            rng.below(1 << 24) as u32,
            (1 << 24) - 1 - rng.below(8) as u32,
        ],
        ..setup_of(qp_type)
    }
}

/// A pair whose node B stands at `stage` with receives posted and a region
/// to write, read and update; nothing in flight.
fn attacked(setup: Setup, stage: Stage) -> Pair {
    let qp_type = setup.qp_type;
    let mut pair = Pair::unconnected(setup, 1, Link::PERFECT);
    // An XRC QP's peer is the other half of XRC.
    let peer = match qp_type {
        QpType::XrcIni => QpType::XrcTgt,
        QpType::XrcTgt => QpType::XrcIni,
        t => t,
    };
    pair.nodes[A] = Node::new(peer, QPN[A]);
    let peer_setup = Setup {
        qp_type: peer,
        ..setup
    };
    let steps = [connect_steps(peer_setup, A), connect_steps(setup, B)];
    if qp_type == QpType::XrcTgt {
        for srqn in 0..=HOSTILE_SRQS as u32 {
            let srq = FakeXrcSrq {
                xrcd: u32::from(srqn == HOSTILE_SRQS as u32),
                ..FakeXrcSrq::default()
            };
            pair.nodes[B].xrc.0.insert(srqn, srq);
        }
    }
    let upto = match stage {
        Stage::In(QpState::Reset) => 0,
        Stage::In(QpState::Init) => 1,
        Stage::In(QpState::Rtr) => 2,
        _ => 3,
    };
    for m in steps[A] {
        pair.nodes[A].modify(pair.now, m);
    }
    for m in steps[B].into_iter().take(upto) {
        pair.nodes[B].modify(pair.now, m);
    }
    if stage != Stage::In(QpState::Reset) {
        for r in 0..4 {
            pair.nodes[B].post_recv(r, 16 * 1024);
        }
        // An XRC target's receives are its SRQs' (ids past the QP's own).
        let b = &mut pair.nodes[B];
        for (srqn, srq) in &mut b.xrc.0 {
            for r in 0..4 {
                let id = 100 + srqn * 4 + r;
                b.mem.recv_bufs.insert(id, vec![0; 16 * 1024]);
                srq.rq.queue.push_back(RecvWqe {
                    wr_id: u64::from(id),
                    length: 16 * 1024,
                    id,
                });
            }
        }
    }
    pair.nodes[B].add_region(RKEY, REGION_VA, vec![0; REGION_LEN]);
    let mut wqe = SendWqe {
        flags: SendFlags::SIGNALED,
        ..SendWqe::default()
    };
    if qp_type == QpType::Ud {
        wqe.ud = UdDest {
            dest_qpn: QPN[A],
            qkey: QKEY,
            ah: 1,
        };
    }
    match stage {
        Stage::In(state @ (QpState::Sqd | QpState::Err)) => {
            pair.nodes[B].modify(pair.now, state_change(state));
        }
        Stage::In(QpState::Sqe) => {
            // A send whose buffer is gone: a local protection error.
            wqe.length = 16;
            let index = pair.nodes[B].post_send(wqe, vec![0; 16]);
            pair.nodes[B].mem.send_bufs.remove(&index);
            pair.transmit();
            pair.nodes[B].drain();
            assert_eq!(pair.nodes[B].qp.state(), QpState::Sqe);
        }
        Stage::RequesterBusy => {
            let mtu = pair.nodes[B].qp.context().path_mtu.bytes() as u32;
            let ops = [
                (SendOpcode::RdmaRead, 3 * mtu),
                (SendOpcode::AtomicFetchAdd { add: 1 }, 8),
                (SendOpcode::Send, 3 * mtu),
                (
                    SendOpcode::AtomicCmpSwap {
                        compare: 0,
                        swap: 1,
                    },
                    8,
                ),
                (SendOpcode::RdmaRead, 1),
            ];
            for (opcode, length) in ops {
                wqe.opcode = opcode;
                wqe.length = length;
                pair.nodes[B].post_send(wqe, vec![0; length as usize]);
            }
            pair.transmit();
        }
        Stage::ResponderMidMessage => {
            // The first packet of A's three-MTU Send, delivered.
            let mtu = pair.nodes[A].qp.context().path_mtu.bytes() as u32;
            wqe.opcode = SendOpcode::Send;
            wqe.length = 3 * mtu;
            pair.nodes[A].post_send(wqe, vec![0; wqe.length as usize]);
            let epsn = pair.nodes[B].qp.query().rq_psn;
            let started = pair.run_until(1_000, |p| p.nodes[B].qp.query().rq_psn != epsn);
            assert!(started, "the Send did not start");
        }
        _ => {}
    }
    pair.nodes[B].drain();
    pair.flights.clear();
    pair
}

fn state_change(state: QpState) -> ModifyQp {
    ModifyQp {
        state: Some(state),
        ..ModifyQp::default()
    }
}

/// The path a hostile packet claims to arrive over: mostly the QP's own.
fn arrival_for(rng: &mut XorShift) -> Arrival {
    match rng.below(20) {
        0 => Arrival::NONE,
        1 => Arrival::NONE.with(ALT_PATH),
        _ => Arrival::NONE.with(PATH),
    }
}

/// Attacks B of fresh pairs of `qp_type` at every stage that applies,
/// `per_stage` packets each, restarting the stage every few packets (a QP
/// that a packet moved to ERR is attacked in ERR until then).
fn attack_every_stage(test: &str, qp_type: QpType, default_seed: u64) {
    let (seed, mut rng, opcodes) = fuzzer(default_seed);
    let n = iters(5000);
    let transport = transport_of(qp_type);
    let mut tally = Tally::default();
    let stages: Vec<_> = STAGES
        .iter()
        .copied()
        .filter(|&s| applies(qp_type, s))
        .collect();
    let mut pair = attacked(setup_of(qp_type), stages[0]);
    let mut stage = stages[0];
    each_iteration(test, seed, n * stages.len() as u64, |i| {
        if i % 16 == 0 {
            stage = stages[(i / 16) as usize % stages.len()];
            pair = attacked(random_setup(&mut rng, qp_type, stage), stage);
        }
        let aim = Aim::of(&pair.nodes[B]);
        let bytes = hostile(&mut rng, &opcodes, transport, &aim);
        let arrival = arrival_for(&mut rng);
        pair.flights.clear();
        feed(&mut pair, B, &bytes, arrival, &mut tally)
            .map(|_| ())
            .map_err(|e| format!("{stage:?}: {e}"))
    });
    std::eprintln!("{test}: seed {seed:#x}: {tally:?}");
}

#[test]
fn rc_hostile_packets_are_handled_or_counted() {
    attack_every_stage(
        "rc_hostile_packets_are_handled_or_counted",
        QpType::Rc,
        0xF022_0001,
    );
}

#[test]
fn uc_hostile_packets_are_handled_or_counted() {
    attack_every_stage(
        "uc_hostile_packets_are_handled_or_counted",
        QpType::Uc,
        0xF022_0002,
    );
}

#[test]
fn xrc_ini_hostile_packets_are_handled_or_counted() {
    attack_every_stage(
        "xrc_ini_hostile_packets_are_handled_or_counted",
        QpType::XrcIni,
        0xF022_0004,
    );
}

#[test]
fn xrc_tgt_hostile_packets_are_handled_or_counted() {
    attack_every_stage(
        "xrc_tgt_hostile_packets_are_handled_or_counted",
        QpType::XrcTgt,
        0xF022_0005,
    );
}

#[test]
fn ud_hostile_packets_are_handled_or_counted() {
    attack_every_stage(
        "ud_hostile_packets_are_handled_or_counted",
        QpType::Ud,
        0xF022_0003,
    );
}

/// The parser alone, on arbitrary bytes and on mutations of valid packets
/// of every opcode: it never panics, and what it accepts is consistent with
/// the buffer.
#[test]
fn parser_survives_arbitrary_and_mutated_bytes() {
    let test = "parser_survives_arbitrary_and_mutated_bytes";
    let (seed, mut rng, opcodes) = fuzzer(0xF022_0000);
    let mut accepted = 0u64;
    each_iteration(test, seed, iters(5000) * 20, |_| {
        let aim = Aim {
            qpn: QPN[B],
            epsn: rng.below(1 << 24) as u32,
            sq_psn: rng.below(1 << 24) as u32,
            mtu: 256 << rng.below(5),
        };
        let mut bytes = if rng.chance(0.3) {
            let n = rng.below(300) as usize;
            rng.bytes(n)
        } else {
            let info = pick(&mut rng, &opcodes);
            synthesize(&mut rng, info, &aim)
        };
        if rng.chance(0.8) {
            mutate(&mut rng, &mut bytes);
        }
        let pmtu = rng.chance(0.5).then_some(aim.mtu);
        let Ok(p) = packet::parse(&bytes, pmtu) else {
            return Ok(());
        };
        accepted += 1;
        let framed = p.info.header_len()
            + p.payload.len()
            + usize::from(p.bth.pad_count)
            + super::super::icrc::ICRC_LEN;
        if framed != bytes.len()
            || p.icrc_covered.len() + super::super::icrc::ICRC_LEN != bytes.len()
            || pmtu.is_some_and(|m| p.payload.len() > m)
            || opcode::lookup(p.bth.opcode) != Some(p.info)
        {
            return Err(format!("inconsistent parse of {bytes:02x?}: {p:?}"));
        }
        Ok(())
    });
    std::eprintln!("{test}: seed {seed:#x}: {accepted} accepted");
}

/// A live RC or UC pair mid-transfer takes hostile packets on both sides
/// between steps; then the traffic is run to its end, and every WR must
/// complete. RC: with verified data; or a QP is in ERR for an IBA reason
/// (a hostile request executed at the ePSN was invalid: QpRequestError or
/// QpAccessError and a NAK, whose status the requester's WR then takes; a
/// forged NAK at the requester's oldest PSN; the retry counter run out on
/// forged sequence NAKs or against a responder in ERR); or a forged packet
/// was taken in sequence, and the WRs completed in order (see
/// `forged_outcome`). UC: every send completed successfully (IBA 9.8.3).
#[test]
fn live_pair_survives_hostile_packets() {
    let test = "live_pair_survives_hostile_packets";
    let (seed, mut rng, opcodes) = fuzzer(0xF022_0004);
    let mut tally = Tally::default();
    let mut outcomes = BTreeMap::new();
    each_iteration(test, seed, iters(5000) / 20, |i| {
        let run = seed ^ i.wrapping_mul(0x9E37_79B9);
        let qp_type = if rng.chance(0.7) {
            QpType::Rc
        } else {
            QpType::Uc
        };
        let mut setup = setup_of(qp_type);
        setup.mtu = 1 + rng.below(5) as u8;
        setup.sq_psn = [rng.below(1 << 24) as u32, rng.below(1 << 24) as u32];
        let n_ops = 1 + rng.below(6) as usize;
        let mut ops = random_ops(&mut rng, n_ops);
        if qp_type == QpType::Uc {
            ops.retain(|op| {
                matches!(
                    op,
                    Op::Send(_) | Op::SendImm(_) | Op::Write(_) | Op::WriteImm(_)
                )
            });
        }
        // A forged Send may take the receive a real one needed: RNR NAKs
        // then end in RnrRetryExcErr rather than forever.
        setup.rnr_retry = 3;
        let receives = consuming(&ops);
        let pair = Pair::connect(setup, run, Link::PERFECT);
        let mut o = post_ops(pair, run, ops, true);
        let transport = transport_of(qp_type);
        let mut forged = false;
        for _ in 0..20 {
            for _ in 0..rng.below(6) {
                o.pair.step();
            }
            let to = rng.below(2) as usize;
            // Mostly packets that pass the path and partition checks.
            let aim = Aim::of(&o.pair.nodes[to]);
            let bytes = hostile(&mut rng, &opcodes, transport, &aim);
            forged |= feed(
                &mut o.pair,
                to,
                &bytes,
                Arrival::NONE.with(PATH),
                &mut tally,
            )?;
        }
        // As finish_ops, but a stall is a finding only if a WR never
        // completes: UC, and RC after a forged ACK, complete sends whose
        // receives the responder never saw.
        let mut o = o;
        let wrs = n_ops.min(o.pair.nodes[A].sq.wqes.len());
        o.pair.run_until(20_000_000, |p| {
            let sends = p.nodes[A].send_completions();
            sends.len() == wrs
                && (sends.iter().any(|c| c.status != WcStatus::Success)
                    || p.nodes[B].recv_completions().len() == receives)
        });
        let a = &o.pair.nodes[A];
        if a.send_completions().len() != wrs {
            return Err(format!(
                "stalled: {} of {wrs} WRs completed, A {:?} timeout {:?}, B {:?}, forged {forged}",
                a.send_completions().len(),
                a.qp.state(),
                a.qp.poll_timeout(),
                o.pair.nodes[B].qp.state()
            ));
        }
        let verdict = if qp_type == QpType::Uc {
            // UC loses what the hostile packets broke, silently by IBA 9.8.3:
            // only the requester's side is certain.
            uc_outcome(&o.pair)
        } else {
            match check(&o, false) {
                Ok(()) => Ok("verified"),
                Err(e) => rc_error_outcome(&o.pair)
                    .or_else(|why| forged_outcome(&o.pair, forged).ok_or(why))
                    .map_err(|why| format!("{e}; {why}")),
            }
        }?;
        *outcomes
            .entry((qp_type == QpType::Rc, verdict))
            .or_insert(0u32) += 1;
        Ok(())
    });
    std::eprintln!("{test}: seed {seed:#x}: {tally:?} {outcomes:?}");
}

/// UC after a hostile phase: every send WR completed successfully (the
/// requester of UC reports success once the message left, IBA 9.8.3), and
/// the responder is usable or in ERR for an IBA reason.
fn uc_outcome(pair: &Pair) -> Result<&'static str, String> {
    let a = &pair.nodes[A];
    if a.send_completions()
        .iter()
        .any(|c| c.status != WcStatus::Success)
    {
        return Err(format!("UC send completions {:?}", a.send_completions()));
    }
    Ok("sent")
}

/// An RC pair that took a hostile packet as its peer's own: one at the
/// ePSN that continues the message in progress, or a response at the
/// requester's oldest PSN. IBA authenticates a packet by no more than its
/// QPN, P_Key and PSN, so the data it carried is indistinguishable from the
/// peer's and may replace it; what remains certain is that every WR
/// completed, in order.
fn forged_outcome(pair: &Pair, forged: bool) -> Option<&'static str> {
    let sends = pair.nodes[A].send_completions();
    let in_order = sends.iter().enumerate().all(|(i, c)| c.wr_id == i as u64);
    // A failure is one of IBA's (a NAK's status, a local error from forged
    // response data, a retry counter run out against a responder out of
    // step), and flushes everything after it.
    let mut statuses = sends
        .iter()
        .map(|c| c.status)
        .skip_while(|s| *s == WcStatus::Success);
    let failure_ok = statuses.next().is_none_or(|s| {
        matches!(
            s,
            WcStatus::RemInvReqErr
                | WcStatus::RemAccessErr
                | WcStatus::RemOpErr
                | WcStatus::RemInvRdReqErr
                | WcStatus::RetryExcErr
                | WcStatus::RnrRetryExcErr
                | WcStatus::LocLenErr
                | WcStatus::LocProtErr
        )
    }) && statuses.all(|s| s == WcStatus::WrFlushErr);
    (forged && in_order && failure_ok).then_some("forged in sequence, WRs completed in order")
}

/// An RC pair whose traffic did not verify: which IBA error state it is in.
fn rc_error_outcome(pair: &Pair) -> Result<&'static str, String> {
    let [a, b] = &pair.nodes;
    let first_error = a
        .send_completions()
        .into_iter()
        .map(|c| c.status)
        .find(|s| *s != WcStatus::Success);
    let b_err = b.qp.state() == QpState::Err;
    let a_err = a.qp.state() == QpState::Err;
    let request_error = |n: &Node| {
        n.events
            .iter()
            .any(|e| matches!(e, AsyncEvent::QpRequestError | AsyncEvent::QpAccessError))
    };
    match first_error {
        // B executed a hostile request and NAKed it; A failed its own WR
        // only if the NAK hit A's oldest PSN, else by retries against a
        // responder in ERR.
        Some(WcStatus::RetryExcErr) if a_err && b_err => Ok("B in ERR, A retry exceeded"),
        // Forged sequence NAKs and out-of-place responses at A's oldest PSN
        // each cost a retry (IBA 9.7.5.2.1, 9.7.6.1.4) until none is left.
        Some(WcStatus::RetryExcErr)
            if a_err
                && a.stats.get(TransportEvent::SeqNakRcvd)
                    + a.stats.get(TransportEvent::ImpliedNak)
                    > 0 =>
        {
            Ok("A retry exceeded on forged NAKs")
        }
        Some(WcStatus::RemInvReqErr | WcStatus::RemAccessErr | WcStatus::RemOpErr)
            if a_err && (b_err || !request_error(b)) =>
        {
            Ok("A completed a WR with the NAK's status")
        }
        // A took a hostile response as its own: a WR completed with its
        // local status, or the QP failed without B's fault.
        Some(WcStatus::LocLenErr | WcStatus::LocProtErr | WcStatus::RemInvRdReqErr) if a_err => {
            Ok("A's local error")
        }
        // A hostile request to A, executed and NAKed: A is in ERR and
        // reports it; its own WRs flush.
        Some(WcStatus::WrFlushErr) if a_err && request_error(a) => Ok("A in ERR by a request"),
        None if b_err && request_error(b) => Ok("B in ERR by a request"),
        other => Err(format!(
            "no IBA error state: first error {other:?}, A {:?} events {:?}, B {:?} events {:?}",
            a.qp.state(),
            a.events,
            b.qp.state(),
            b.events
        )),
    }
}

/// The drop paths the fuzzer found silent, each with the counter it now
/// moves.
#[test]
fn hostile_drops_are_counted_by_reason() {
    let mtu = 256;
    let count = |p: &mut Pair, bytes: &[u8], event: TransportEvent| {
        let before = p.nodes[B].stats.get(event);
        inject(&mut p.nodes[B], p.now, bytes);
        p.nodes[B].drain();
        assert_eq!(p.nodes[B].stats.get(event), before + 1, "{event:?}");
    };
    let aeth = |syndrome| ExtHeaders {
        aeth: Some(super::super::headers::Aeth {
            syndrome,
            msn: Msn::ZERO,
        }),
        ..ExtHeaders::default()
    };
    let none = ExtHeaders::default;
    // An XRC Send at an RC QP (IBA 9.6.1).
    let mut p = attacked(setup_of(QpType::Rc), Stage::In(QpState::Rts));
    let xrc = ExtHeaders {
        xrceth: Some(Xrceth { xrc_srq: 1 }),
        ..ExtHeaders::default()
    };
    let xrc_send = request_with(codes::XRC_BASE + 4, 100, true, xrc, b"xrc");
    count(&mut p, &xrc_send, TransportEvent::WrongTransport);
    // Requests in INIT and ERR, a datagram in RESET (IBA 10.3.1).
    let send = request_with(codes::RC_SEND_ONLY, 100, true, none(), b"hi");
    for stage in [Stage::In(QpState::Init), Stage::In(QpState::Err)] {
        let mut p = attacked(setup_of(QpType::Rc), stage);
        count(&mut p, &send, TransportEvent::NotReady);
    }
    let deth = |qkey| ExtHeaders {
        deth: Some(Deth {
            qkey,
            src_qp: QPN[A],
        }),
        ..ExtHeaders::default()
    };
    let datagram = request_with(codes::UD_SEND_ONLY, 0, false, deth(QKEY), b"dgram");
    let mut p = attacked(setup_of(QpType::Ud), Stage::In(QpState::Reset));
    count(&mut p, &datagram, TransportEvent::NotReady);
    // A Read response that does not fit the three-packet Read at una, and
    // a NAK for a PSN never sent (IBA 9.7.6.1.2).
    let una = Setup::rc().sq_psn[B];
    let mut p = attacked(setup_of(QpType::Rc), Stage::RequesterBusy);
    let ack = aeth(Syndrome::ACK_NO_CREDIT_INFO);
    let misfit = request_with(codes::RC_RDMA_READ_RESPONSE_ONLY, una, false, ack, &[1]);
    count(&mut p, &misfit, TransportEvent::IgnoredResponse);
    let nak = aeth(Syndrome::Nak(super::super::aeth::NakCode::PsnSequenceError));
    let unsent = request_with(
        codes::RC_ACKNOWLEDGE,
        una.wrapping_add(1000),
        false,
        nak,
        &[],
    );
    count(&mut p, &unsent, TransportEvent::IgnoredResponse);
    // UD: a foreign Q_Key (IBA 10.2.5), then no receive posted (9.8.2).
    let mut p = attacked(setup_of(QpType::Ud), Stage::In(QpState::Rts));
    let foreign = request_with(codes::UD_SEND_ONLY, 0, false, deth(!QKEY), b"dgram");
    count(&mut p, &foreign, TransportEvent::QkeyViolation);
    p.nodes[B].rq.queue.clear();
    count(&mut p, &datagram, TransportEvent::NoResources);
    // UC: a Middle packet after a PSN gap (IBA 9.8.3).
    let mut p = attacked(setup_of(QpType::Uc), Stage::In(QpState::Rts));
    let middle = request_with(codes::UC_BASE + 1, 105, false, none(), &[0; 256][..mtu]);
    count(&mut p, &middle, TransportEvent::UcDropped);
    // XRC (IBA Annex A14): a request at an initiator, a response or an RC
    // request at a target, and a request naming an SRQ of another XRC
    // domain or none at all, refused with NAK Remote Access Error.
    let xrc_to = |srqn| ExtHeaders {
        xrceth: Some(Xrceth { xrc_srq: srqn }),
        ..ExtHeaders::default()
    };
    let mut p = attacked(setup_of(QpType::XrcIni), Stage::In(QpState::Rts));
    count(&mut p, &xrc_send, TransportEvent::WrongTransport);
    let epsn = Setup::rc().sq_psn[A];
    for bytes in [
        request_with(
            codes::XRC_BASE + codes::RC_ACKNOWLEDGE,
            epsn,
            false,
            ack,
            &[],
        ),
        request_with(codes::RC_SEND_ONLY, epsn, true, none(), b"rc"),
    ] {
        let mut p = attacked(setup_of(QpType::XrcTgt), Stage::In(QpState::Rts));
        count(&mut p, &bytes, TransportEvent::WrongTransport);
    }
    for srqn in [HOSTILE_SRQS as u32, 0x00AB_CDEF] {
        let mut p = attacked(setup_of(QpType::XrcTgt), Stage::In(QpState::Rts));
        let send = request_with(codes::XRC_BASE + 4, epsn, true, xrc_to(srqn), b"x");
        count(&mut p, &send, TransportEvent::XrcSrqRefused);
        let sent = drain_tx(&mut p.nodes[B], p.now);
        let nak = Syndrome::Nak(super::super::aeth::NakCode::RemoteAccessError);
        assert!(
            sent.iter()
                .any(|s| s.0 == codes::XRC_BASE + codes::RC_ACKNOWLEDGE && s.2 == Some(nak)),
            "no NAK Remote Access Error: {sent:?}"
        );
        assert_eq!(p.nodes[B].qp.state(), QpState::Err);
    }
}
