// SPDX-License-Identifier: GPL-2.0

//! XRC (IBA Annex A14) end to end: an XRC initiator (A) sends to an XRC
//! target (B) whose XRC domain holds several XRC SRQs, in two protection
//! domains, next to an SRQ of another XRC domain. Random Sends, Writes,
//! Reads and atomics, each naming a random SRQ of the domain, cross a lossy,
//! duplicating and reordering channel: every WR is executed exactly once,
//! lands in the SRQ it named and moves the right bytes. A WR naming the
//! foreign SRQ or no SRQ at all, or an R_Key outside its SRQ's PD, is
//! refused with NAK Remote Access Error. Rerun a failing seed with
//! `RRXE_SIM_SEED=<seed> cargo test xrc`.

#![cfg(test)]

use super::super::aeth::{CreditCode, Syndrome};
use super::super::opcode::codes;
use super::super::qp::completion::{WcOpcode, WcStatus};
use super::super::qp::wqe::RemoteAddr;
use super::super::qp::TransportEvent;
use super::tests::{build_wr, random_op, rkey_of, Op};
use super::*;
use std::format;
use std::string::String;

/// The target's XRC domain, and another one.
const XRCD: u32 = 7;
const OTHER_XRCD: u32 = 8;
/// The XRC SRQs of the target's domain and their PDs: two share PD 1.
const SRQS: [(u32, u32); 3] = [(0x100, 1), (0x101, 1), (0x102, 2)];
/// An SRQ of the other XRC domain (in PD 1, so only the domain differs).
const FOREIGN_SRQ: u32 = 0x200;
/// An SRQN no SRQ has.
const MISSING_SRQ: u32 = 0x300;
/// One Fetch & Add / Compare & Swap target per PD, by R_Key.
const COUNTERS: [(u32, u32); 2] = [(0xC1, 1), (0xC2, 2)];
const COUNTER_VA: u64 = 0x8000_0000;
const RECV_LEN: u32 = 16 * 1024;

/// Whether `op` takes a receive WQE of the SRQ it names.
const fn consumes_recv(op: Op) -> bool {
    matches!(op, Op::Send(_) | Op::SendImm(_) | Op::WriteImm(_))
}

/// Where a WR goes, and what it expects there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// SRQ `SRQS[i]`.
    Srq(usize),
    /// SRQ `SRQS[i]`, with an R_Key of the other PD.
    WrongPd(usize),
    Foreign,
    Missing,
}

/// A WR and the SRQ it names.
#[derive(Clone, Copy, Debug)]
struct XrcOp {
    op: Op,
    target: Target,
}

fn srqn_of(t: Target) -> u32 {
    match t {
        Target::Srq(s) | Target::WrongPd(s) => SRQS[s].0,
        Target::Foreign => FOREIGN_SRQ,
        Target::Missing => MISSING_SRQ,
    }
}

/// A random WR of at most `RECV_LEN` bytes; an Atomic Write, which has no
/// XRC opcode, becomes a Fetch & Add.
fn random_xrc_op(rng: &mut XorShift) -> Op {
    let len = |rng: &mut XorShift| match rng.below(4) {
        0..=1 => rng.below(300) as u32,
        _ => rng.below(u64::from(RECV_LEN) + 1) as u32,
    };
    match random_op(rng, len) {
        Op::AtomicWrite(v) => Op::FetchAdd(v >> 24),
        op => op,
    }
}

/// Send PSNs of A and B: A's requests cross the 24-bit wrap.
const PSNS: [u32; 2] = [0x00FF_FFC0, 77];

/// An XRC initiator (A) at RTS and target (B) at RTS, or with `tgt_rtr`
/// at RTR (a receive-only target needs no more: it answers from RTR), path
/// MTU `mtu` (as `enum ib_mtu`), the target's SRQs and regions in place.
fn xrc_pair(seed: u64, link: Link, mtu: u8, tgt_rtr: bool) -> Pair {
    let mut pair = Pair::unconnected(Setup::rc(), seed, link);
    pair.nodes = [
        Node::new(QpType::XrcIni, QPN[A]),
        Node::new(QpType::XrcTgt, QPN[B]),
    ];
    pair.nodes[B].qp.set_xrcd(XRCD);
    let srqs = &mut pair.nodes[B].xrc.0;
    for (srqn, pd) in SRQS {
        srqs.insert(
            srqn,
            FakeXrcSrq {
                xrcd: XRCD,
                pd,
                ..FakeXrcSrq::default()
            },
        );
    }
    srqs.insert(
        FOREIGN_SRQ,
        FakeXrcSrq {
            xrcd: OTHER_XRCD,
            pd: 1,
            ..FakeXrcSrq::default()
        },
    );
    for (rkey, pd) in COUNTERS {
        let initial = 1000u64.to_le_bytes().to_vec();
        pair.nodes[B].add_region_in(rkey, COUNTER_VA, pd, initial);
    }
    for (i, t) in [(A, QpType::XrcIni), (B, QpType::XrcTgt)] {
        let setup = Setup {
            qp_type: t,
            mtu,
            sq_psn: PSNS,
            ..Setup::rc()
        };
        let upto = if i == B && tgt_rtr { 2 } else { 3 };
        for m in connect_steps(setup, i).into_iter().take(upto) {
            pair.nodes[i].modify(pair.now, m);
        }
    }
    pair
}

/// What a run is checked against.
struct Expect {
    ops: Vec<XrcOp>,
    /// Per WR: the bytes sent, or the bytes a Read must bring back.
    data: Vec<Vec<u8>>,
    /// Per atomic WR: the original value it must return.
    orig: BTreeMap<usize, u64>,
    /// Final value of each PD's counter.
    counters: [u64; 2],
}

/// Posts `ops` on A, their receive WQEs on the SRQs they name on B
/// (receive WQE id and wr_id are the WR's index, so a completion tells
/// which SRQ it came from), and the regions they access; WRs from `hold`
/// on are returned instead of posted.
fn post(
    pair: &mut Pair,
    seed: u64,
    ops: Vec<XrcOp>,
    hold: usize,
) -> (Expect, Vec<(SendWqe, Vec<u8>)>) {
    let mut held = Vec::new();
    let mut rng = XorShift::new(seed.rotate_left(23));
    let mut data = Vec::new();
    let mut orig = BTreeMap::new();
    let mut counters = [1000u64; 2];
    for (i, op) in ops.iter().enumerate() {
        let srqn = srqn_of(op.target);
        let pd = match op.target {
            Target::Srq(s) => SRQS[s].1,
            // The other PD of the domain's SRQs.
            Target::WrongPd(s) => 3 - SRQS[s].1,
            Target::Foreign | Target::Missing => 1,
        };
        let b = &mut pair.nodes[B];
        if consumes_recv(op.op) {
            if let Some(srq) = b.xrc.0.get_mut(&srqn) {
                b.mem.recv_bufs.insert(i as u32, vec![0; RECV_LEN as usize]);
                srq.rq.queue.push_back(RecvWqe {
                    wr_id: i as u64,
                    length: RECV_LEN,
                    id: i as u32,
                });
            }
        }
        let k = (pd - 1) as usize;
        let counter_at = RemoteAddr {
            va: COUNTER_VA,
            rkey: COUNTERS[k].0,
        };
        let wr = build_wr(op.op, i, &mut rng, &mut counters[k], counter_at);
        let wqe = SendWqe {
            xrc_srqn: srqn,
            ..wr.wqe
        };
        if let Some((va, region)) = wr.region {
            b.add_region_in(wqe.remote.rkey, va, pd, region);
        }
        if let Some(value) = wr.orig {
            orig.insert(i, value);
        }
        data.push(wr.source);
        let local = wr.local;
        if i < hold {
            pair.nodes[A].post_send(wqe, local);
        } else {
            held.push((wqe, local));
        }
    }
    let e = Expect {
        ops,
        data,
        orig,
        counters,
    };
    (e, held)
}

/// Runs until every WR has completed at A.
fn run(pair: &mut Pair, n: usize) {
    let settled = pair.run_until(20_000_000, |p| p.nodes[A].send_completions().len() == n);
    assert!(settled, "simulation stalled at t={} ns", pair.now);
}

/// Checks a finished run: WRs up to the first refused one (whose status is
/// `refused`) complete successfully and exactly once in the SRQ they named,
/// the rest are flushed.
fn check(pair: &Pair, e: &Expect, refused: Option<(usize, WcStatus)>) -> Result<(), String> {
    let (a, b) = (&pair.nodes[A], &pair.nodes[B]);
    let sends = a.send_completions();
    let ok = refused.map_or(e.ops.len(), |(i, _)| i);
    for (i, c) in sends.iter().enumerate() {
        let want = match refused {
            Some((r, status)) if i == r => status,
            Some((r, _)) if i > r => WcStatus::WrFlushErr,
            _ => WcStatus::Success,
        };
        if c.wr_id != i as u64 || c.status != want {
            return Err(format!("WR {i} ({:?}): {c:?}, expected {want:?}", e.ops[i]));
        }
    }
    let recvs = b.recv_completions();
    let consuming: Vec<usize> = (0..ok).filter(|&i| consumes_recv(e.ops[i].op)).collect();
    let got: Vec<u64> = recvs.iter().map(|c| c.wr_id).collect();
    let want: Vec<u64> = consuming.iter().map(|&i| i as u64).collect();
    if got != want {
        return Err(format!("receive completions {got:?}, expected {want:?}"));
    }
    for (c, &i) in recvs.iter().zip(&consuming) {
        let (opcode, n, imm) = match e.ops[i].op {
            Op::Send(n) => (WcOpcode::Recv, n, None),
            Op::SendImm(n) => (WcOpcode::Recv, n, Some(i as u32)),
            Op::WriteImm(n) => (WcOpcode::RecvRdmaWithImm, n, Some(!(i as u32))),
            _ => unreachable!(),
        };
        if c.status != WcStatus::Success
            || c.xrc_srqn != Some(srqn_of(e.ops[i].target))
            || c.opcode != opcode
            || c.byte_len != n
            || c.imm_data != imm
        {
            return Err(format!("receive of WR {i}: {c:?}"));
        }
        if opcode == WcOpcode::Recv && b.mem.recv_bufs[&(i as u32)][..n as usize] != e.data[i][..] {
            return Err(format!("Send WR {i}: payload differs"));
        }
    }
    let mut atomics = 0;
    for (i, op) in e.ops.iter().enumerate().take(ok) {
        let local = &a.mem.send_bufs[&(i as u32)];
        match op.op {
            // An Atomic Write has no XRC opcode: none is generated.
            Op::Write(_) | Op::WriteImm(_) | Op::AtomicWrite(_) => {
                if b.mem.regions[&rkey_of(i)].data != e.data[i] {
                    return Err(format!("Write WR {i}: target differs"));
                }
            }
            Op::Read(_) => {
                if *local != e.data[i] {
                    return Err(format!("Read WR {i}: local buffer differs"));
                }
            }
            Op::FetchAdd(_) | Op::CmpSwap { .. } => {
                atomics += 1;
                let got = u64::from_ne_bytes(local[..8].try_into().unwrap());
                if got != e.orig[&i] {
                    return Err(format!("atomic WR {i}: {got}, expected {}", e.orig[&i]));
                }
            }
            Op::Send(_) | Op::SendImm(_) => {}
        }
    }
    if refused.is_none() {
        for (k, (rkey, _)) in COUNTERS.iter().enumerate() {
            let v = u64::from_le_bytes(b.mem.regions[rkey].data[..8].try_into().unwrap());
            if v != e.counters[k] {
                return Err(format!(
                    "counter {rkey:#x}: {v}, expected {}",
                    e.counters[k]
                ));
            }
        }
        // Exactly once: duplicates are answered from responder resources.
        if b.mem.atomic_calls != atomics {
            return Err(format!(
                "{} atomic executions for {atomics}",
                b.mem.atomic_calls
            ));
        }
    }
    check_wire(pair)
}

/// Every packet is an XRC one, and the target's AETHs carry no credit
/// information (it has no receive queue of its own), never in an
/// unsolicited ACK.
fn check_wire(pair: &Pair) -> Result<(), String> {
    let mut requests_seen = false;
    for w in &pair.wire {
        if w.opcode < codes::XRC_BASE {
            return Err(format!("non-XRC opcode {:#x} on the wire", w.opcode));
        }
        if w.from == A {
            requests_seen = true;
            continue;
        }
        if !requests_seen {
            return Err("the target sent before any request".into());
        }
        match w.aeth {
            Some((Syndrome::Ack(code), _)) if code != CreditCode::NO_CREDIT_INFO => {
                return Err(format!("the target advertised credits {code:?}"));
            }
            _ => {}
        }
    }
    Ok(())
}

fn lossy(rng: &mut XorShift) -> Link {
    Link {
        loss: [0.0, 0.03, 0.08][rng.below(3) as usize],
        dup: [0.0, 0.05][rng.below(2) as usize],
        reorder: [0.0, 0.05, 0.1][rng.below(3) as usize],
        latency: 1_000 + rng.below(10_000),
        gap: [0, 500][rng.below(2) as usize],
    }
}

/// Random WRs to the domain's SRQs, all delivered.
fn traffic(seed: u64) -> Result<(), String> {
    let mut rng = XorShift::new(seed);
    let link = lossy(&mut rng);
    let n = 20 + rng.below(30) as usize;
    let ops: Vec<XrcOp> = (0..n)
        .map(|_| XrcOp {
            op: random_xrc_op(&mut rng),
            target: Target::Srq(rng.below(SRQS.len() as u64) as usize),
        })
        .collect();
    let mtu = [1, 3, 5][rng.below(3) as usize];
    let tgt_rtr = rng.chance(0.5);
    let mut pair = xrc_pair(seed, link, mtu, tgt_rtr);
    let (e, _) = post(&mut pair, seed, ops, n);
    run(&mut pair, n);
    check(&pair, &e, None).map_err(|err| {
        format!("seed {seed:#x} (MTU {mtu}, target at RTR {tgt_rtr}, {link:?}): {err}")
    })?;
    let refused = pair.nodes[B].stats.get(TransportEvent::XrcSrqRefused);
    if refused != 0 {
        return Err(format!("seed {seed:#x}: {refused} refusals"));
    }
    Ok(())
}

#[test]
fn xrc_random_traffic_lands_in_the_named_srqs() {
    let base = seed_or(0x58_5243);
    for k in 0..6 {
        let seed = base.wrapping_add(k);
        if let Err(err) = traffic(seed) {
            panic!("{err}");
        }
    }
}

/// Valid WRs, then one refused for `bad`, then more that are flushed.
fn refusal(seed: u64, bad: Target, op: Op) -> Result<(), String> {
    let mut rng = XorShift::new(seed);
    let mut link = lossy(&mut rng);
    let before = 1 + rng.below(8) as usize;
    let mut ops: Vec<XrcOp> = (0..before)
        .map(|_| XrcOp {
            op: random_xrc_op(&mut rng),
            target: Target::Srq(rng.below(SRQS.len() as u64) as usize),
        })
        .collect();
    ops.push(XrcOp { op, target: bad });
    ops.extend((0..3).map(|_| XrcOp {
        op: random_xrc_op(&mut rng),
        target: Target::Srq(0),
    }));
    let n = ops.len();
    let mut pair = xrc_pair(seed, link, 1, false);
    // The NAK leaves the target once, from ERR (IBA 9.7.5.2.4): were it
    // lost, the initiator would rightly end in RetryExcErr instead.
    link.loss = 0.0;
    pair.links[B] = link;
    // The WRs before the refused one finish first: Read responses still
    // owed when the target enters ERR are never sent, and their Reads
    // would end in RetryExcErr.
    let (e, held) = post(&mut pair, seed, ops, before);
    run(&mut pair, before);
    for (wqe, local) in held {
        pair.nodes[A].post_send(wqe, local);
    }
    run(&mut pair, n);
    let ctx = format!("seed {seed:#x} {bad:?} {op:?}");
    check(&pair, &e, Some((before, WcStatus::RemAccessErr)))
        .map_err(|err| format!("{ctx}: {err}"))?;
    let refused = pair.nodes[B].stats.get(TransportEvent::XrcSrqRefused);
    let want_refused = matches!(bad, Target::Foreign | Target::Missing);
    if (refused > 0) != want_refused {
        return Err(format!("{ctx}: {refused} XRC SRQ refusals"));
    }
    if pair.nodes[B].qp.state() != QpState::Err {
        return Err(format!("{ctx}: the target is not in ERR"));
    }
    // The foreign SRQ kept every WQE posted to it.
    let posted = e
        .ops
        .iter()
        .filter(|op| op.target == Target::Foreign && consumes_recv(op.op))
        .count();
    if pair.nodes[B].xrc.0[&FOREIGN_SRQ].rq.queue.len() != posted {
        return Err(format!("{ctx}: the foreign SRQ was touched"));
    }
    Ok(())
}

/// Runs `refusal` for each of `targets` with each of `ops`, seeds counted
/// up from `base`.
fn refusals(base: u64, targets: &[Target], ops: &[Op]) {
    let mut seed = base;
    for &bad in targets {
        for &op in ops {
            if let Err(err) = refusal(seed, bad, op) {
                panic!("{err}");
            }
            seed = seed.wrapping_add(1);
        }
    }
}

#[test]
fn xrc_foreign_or_missing_srq_is_refused_with_remote_access_error() {
    refusals(
        seed_or(0xF0E1),
        &[Target::Foreign, Target::Missing],
        &[
            Op::Send(100),
            Op::WriteImm(3000),
            Op::Write(10),
            Op::Read(2000),
            Op::FetchAdd(1),
        ],
    );
}

#[test]
fn xrc_rkeys_are_checked_in_the_srq_s_pd() {
    refusals(
        seed_or(0x9D),
        &[Target::WrongPd(0), Target::WrongPd(1), Target::WrongPd(2)],
        &[
            Op::Read(500),
            Op::Write(64),
            Op::FetchAdd(5),
            Op::CmpSwap { hit: true, swap: 9 },
        ],
    );
}

#[test]
fn xrc_target_sends_no_requests_of_its_own() {
    let mut pair = xrc_pair(seed_or(1), Link::PERFECT, 1, false);
    let wqe = SendWqe {
        length: 4,
        ..SendWqe::default()
    };
    pair.nodes[B].post_send(wqe, vec![0; 4]);
    pair.run_until(1_000, |_| false);
    assert!(pair.wire.is_empty(), "{:?}", pair.wire);
}

/// An XRC SRQ without receive WQEs draws RNR NAKs (IBA 9.7.5.2.8), as an
/// RC receive queue does, until its receives are posted; the WRs to the
/// other SRQs are not lost meanwhile.
#[test]
fn xrc_empty_srq_draws_rnr_naks_until_receives_come() {
    let seed = seed_or(0x0052_4E52);
    let mut rng = XorShift::new(seed);
    let ops: Vec<XrcOp> = (0..12)
        .map(|k| XrcOp {
            op: Op::Send(rng.below(3000) as u32),
            target: Target::Srq(if k == 0 { 1 } else { rng.below(3) as usize }),
        })
        .collect();
    let n = ops.len();
    let mut pair = xrc_pair(seed, Link::PERFECT, 3, true);
    let (e, _) = post(&mut pair, seed, ops, n);
    let late = core::mem::take(&mut pair.nodes[B].xrc.0.get_mut(&SRQS[1].0).unwrap().rq.queue);
    pair.run_until(5_000_000, |p| p.now > 3_000_000);
    assert!(pair.nodes[B].stats.get(TransportEvent::RnrNakSent) > 0);
    pair.nodes[B].xrc.0.get_mut(&SRQS[1].0).unwrap().rq.queue = late;
    run(&mut pair, n);
    if let Err(err) = check(&pair, &e, None) {
        panic!("seed {seed:#x}: {err}");
    }
}
