// SPDX-License-Identifier: GPL-2.0

//! Automatic path migration (IBA 17.2.8) on two simulated wires per
//! direction: path [`PATH`] is the first wire, [`ALT_PATH`] the second.
//!
//! Node A is the requester, B the responder. Both load the second wire as
//! their alternate path and re-arm (RTS to RTS); each becomes ARMED on the
//! first packet it receives from the other with MigReq = 0. A wire fails
//! by dropping every packet put on it from some point on.

#![cfg(test)]

use super::super::aeth::{NakCode, Syndrome};
use super::super::headers::{Aeth, Bth};
use super::super::opcode::codes;
use super::super::packet::ExtHeaders;
use super::super::psn::{Msn, Psn};
use super::super::qp::completion::{AsyncEvent, WcStatus};
use super::super::qp::wqe::{RemoteAddr, SendFlags, SendOpcode};
use super::super::qp::{AltPath, MigState, Transmit, TransportEvent};
use super::tests::{check, finish_ops, post_ops, random_ops, Op};
use super::*;
use core::cell::Cell;
use std::boxed::Box;
use std::rc::Rc;

/// The alternate path of both nodes: the second wire, Local ACK Timeout
/// `timeout`.
fn alt_path(timeout: u8) -> AltPath {
    AltPath {
        av: ALT_PATH,
        port: 1,
        pkey: PKey::DEFAULT,
        timeout,
    }
}

/// Loads `alt` as node `i`'s alternate path and re-arms it (RTS to RTS).
fn rearm(p: &mut Pair, i: usize, alt: AltPath) {
    let now = p.now;
    p.nodes[i].modify(
        now,
        ModifyQp {
            state: Some(QpState::Rts),
            alt_path: Some(alt),
            path_mig_state: Some(MigState::Rearm.to_ib()),
            ..ModifyQp::default()
        },
    );
}

/// Both nodes re-armed onto the second wire.
fn rearm_both(p: &mut Pair, timeout: u8) {
    for i in 0..2 {
        rearm(p, i, alt_path(timeout));
    }
}

/// Migrates node `i` by command (RTS to RTS, ARMED to MIGRATED).
fn command_migration(p: &mut Pair, i: usize) {
    let now = p.now;
    p.nodes[i].modify(
        now,
        ModifyQp {
            state: Some(QpState::Rts),
            path_mig_state: Some(MigState::Migrated.to_ib()),
            ..ModifyQp::default()
        },
    );
}

/// A signaled RDMA Write of `len` bytes to B's region 7.
fn write(p: &mut Pair, wr_id: u64, len: u32) {
    p.nodes[A].post_send(
        SendWqe {
            wr_id,
            opcode: SendOpcode::RdmaWrite,
            flags: SendFlags::SIGNALED,
            length: len,
            remote: RemoteAddr {
                va: 0x1000,
                rkey: 7,
            },
            ..SendWqe::default()
        },
        vec![wr_id as u8; len as usize],
    );
}

/// One Write A to B and its ACK: both nodes see a packet of the other
/// with MigReq = 0 and arm.
fn arm_by_traffic(p: &mut Pair) {
    p.nodes[B].add_region(7, 0x1000, vec![0; 4096]);
    write(p, 1000, 16);
    let done = p.run_until(100_000, |p| !p.nodes[A].send_completions().is_empty());
    assert!(done);
    for n in &p.nodes {
        assert_eq!(n.qp.context().mig_state, MigState::Armed);
    }
}

fn stat(p: &Pair, node: usize, e: TransportEvent) -> u32 {
    p.nodes[node].stats.get(e)
}

fn migrations(p: &Pair, node: usize) -> usize {
    p.nodes[node]
        .events
        .iter()
        .filter(|e| **e == AsyncEvent::PathMigrated)
        .count()
}

/// Fails wire `path` after it has carried `after` packets (both
/// directions): every later packet on it is lost. Returns the time of the
/// first packet lost.
fn fail_wire_after(p: &mut Pair, path: PathHandle, after: u32) -> Rc<Cell<Option<u64>>> {
    let carried = Cell::new(0u32);
    let failed_at = Rc::new(Cell::new(None));
    let seen = Rc::clone(&failed_at);
    p.wire_fault = Some(Box::new(move |w: &Wire| {
        if w.path != path {
            return false;
        }
        carried.set(carried.get() + 1);
        let lost = carried.get() > after;
        if lost && seen.get().is_none() {
            seen.set(Some(w.at));
        }
        lost
    }));
    failed_at
}

/// What both nodes sent over `path`, in order.
fn over(p: &Pair, path: PathHandle) -> Vec<Wire> {
    p.wire.iter().filter(|w| w.path == path).copied().collect()
}

/// Checks the wire after one migration onto the second wire: before it,
/// MigReq = 0 on the first wire (both armed); on the second wire every
/// packet carries MigReq = 1, the first of them a request from A.
fn check_wire_after_migration(p: &Pair) {
    let second = over(p, ALT_PATH);
    assert!(!second.is_empty(), "nothing went over the second wire");
    assert!(second[0].from == A && second[0].request);
    assert!(
        second.iter().all(|w| w.mig_req),
        "MigReq = 0 on the new path"
    );
    let armed_traffic = over(p, PATH);
    assert!(armed_traffic.iter().all(|w| !w.mig_req));
}

/// Mixed random traffic (Sends, Writes, Reads, atomics) on an armed pair;
/// the first wire fails mid-transfer. A's retries run out, it migrates and
/// retries over the second wire with MigReq = 1; B migrates on the first
/// such packet. Every WR completes once, successfully, with exact data.
#[test]
fn failing_primary_wire_mid_transfer_migrates_both_sides() {
    for seed in [seed_or(0xA9_0001), 0xA9_0002, 0xA9_0003] {
        let mut setup = Setup::rc();
        setup.retry_cnt = 3;
        let mut pair = Pair::connect(setup, seed, Link::PERFECT);
        // The ops' first packets arm the pair.
        rearm_both(&mut pair, setup.timeout);
        let failed_at = fail_wire_after(&mut pair, PATH, 40);
        let mut rng = XorShift::new(seed);
        let ops = random_ops(&mut rng, 30);
        let o = finish_ops(post_ops(pair, seed, ops, true));
        check(&o, false).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
        let p = &o.pair;
        assert!(
            failed_at.get().is_some(),
            "seed {seed:#x}: the wire never failed"
        );
        for n in [A, B] {
            let ctx = p.nodes[n].qp.context();
            assert_eq!(ctx.mig_state, MigState::Migrated);
            assert_eq!(ctx.primary.av, Some(ALT_PATH));
            assert_eq!(migrations(p, n), 1, "seed {seed:#x}: node {n}");
        }
        assert_eq!(stat(p, A, TransportEvent::MigratedOnRetryExhaustion), 1);
        assert_eq!(stat(p, B, TransportEvent::MigratedOnPeerRequest), 1);
        // Exhaustion by timeouts: the first attempt and three retries.
        assert_eq!(
            stat(p, A, TransportEvent::AckTimeout),
            u32::from(setup.retry_cnt) + 1
        );
        assert_eq!(stat(p, A, TransportEvent::RetryExceeded), 0);
        check_wire_after_migration(p);
    }
}

/// RNR NAKs do not migrate (IBA 17.2.8 names transport retries only): a
/// responder without receives exhausts the RNR retry count and the QP
/// fails as without an alternate path.
#[test]
fn rnr_retry_exhaustion_does_not_migrate() {
    let mut setup = Setup::rc();
    setup.rnr_retry = 2;
    let mut p = Pair::connect(setup, 3, Link::PERFECT);
    rearm_both(&mut p, setup.timeout);
    arm_by_traffic(&mut p);
    p.nodes[A].post_send(
        SendWqe {
            wr_id: 1,
            opcode: SendOpcode::Send,
            flags: SendFlags::SIGNALED,
            length: 8,
            ..SendWqe::default()
        },
        vec![1; 8],
    );
    p.run_until(1_000_000, |p| p.nodes[A].send_completions().len() == 2);
    assert_eq!(
        p.nodes[A].send_completions()[1].status,
        WcStatus::RnrRetryExcErr
    );
    assert_eq!(migrations(&p, A), 0);
    assert_eq!(p.nodes[A].qp.context().mig_state, MigState::Armed);
    assert_eq!(p.nodes[A].qp.state(), QpState::Err);
    assert!(over(&p, ALT_PATH).is_empty());
}

/// After a migration the second failure has nowhere to go: the QP fails
/// with RETRY_EXC_ERR, as without an alternate path.
#[test]
fn a_second_failure_after_migrating_exhausts_retries() {
    let mut setup = Setup::rc();
    setup.retry_cnt = 2;
    let mut p = Pair::connect(setup, 4, Link::PERFECT);
    rearm_both(&mut p, setup.timeout);
    arm_by_traffic(&mut p);
    // Both wires die: the first at once, the second after the two
    // requests sent on it after migrating and the first ACK.
    let carried = Cell::new(0u32);
    p.wire_fault = Some(Box::new(move |w: &Wire| {
        if w.path == PATH {
            return true;
        }
        carried.set(carried.get() + 1);
        carried.get() > 3
    }));
    write(&mut p, 1, 16);
    write(&mut p, 2, 16);
    p.run_until(1_000_000, |p| p.nodes[A].send_completions().len() == 3);
    let c = p.nodes[A].send_completions();
    assert_eq!(c[1].status, WcStatus::Success);
    assert_eq!(c[2].status, WcStatus::RetryExcErr);
    assert_eq!(migrations(&p, A), 1);
    assert_eq!(stat(&p, A, TransportEvent::RetryExceeded), 1);
    assert!(p.nodes[A]
        .events
        .contains(&AsyncEvent::RetryExhausted { rnr: false }));
}

/// A Transmit and its bytes.
fn drain(node: &mut Node, now: u64) -> Vec<(Transmit, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = vec![0; MAX_PACKET_LEN];
    while let Some(t) = node.with(|qp, io| qp.poll_transmit(now, &mut buf, io)) {
        out.push((t, buf[..t.len].to_vec()));
    }
    out
}

/// A NAK from B to A.
fn nak(psn: u32, code: NakCode, msn: u32) -> Vec<u8> {
    let bth = Bth {
        opcode: codes::RC_ACKNOWLEDGE,
        pkey: 0xFFFF,
        dest_qp: QPN[A],
        psn: Psn::new(psn),
        ..Bth::default()
    };
    let ext = ExtHeaders {
        aeth: Some(Aeth {
            syndrome: Syndrome::Nak(code),
            msn: Msn::new(msn),
        }),
        ..ExtHeaders::default()
    };
    let mut buf = vec![0; MAX_PACKET_LEN];
    let len = packet::write_packet(&mut buf, &bth, &ext, &[]).unwrap();
    buf.truncate(len);
    buf
}

fn deliver(node: &mut Node, now: u64, bytes: &[u8], path: PathHandle) {
    let pkt = packet::parse(bytes, None).unwrap();
    node.with(|qp, io| qp.handle_packet(now, &pkt, Arrival::NONE.with(path), io));
}

/// Repeated PSN sequence error NAKs for the same request, each answering a
/// retransmission, run the retry count out: the armed QP migrates and
/// sends the request again over the alternate path with MigReq = 1. No
/// timer expires on the way.
#[test]
fn repeated_sequence_naks_migrate() {
    let mut setup = Setup::rc();
    setup.retry_cnt = 2;
    let mut p = Pair::connect(setup, 5, Link::PERFECT);
    rearm_both(&mut p, setup.timeout);
    arm_by_traffic(&mut p);
    write(&mut p, 1, 16);
    let now = p.now;
    let first = drain(&mut p.nodes[A], now);
    assert_eq!(first.len(), 1);
    let psn = packet::parse(&first[0].1, None).unwrap().bth.psn.get();
    // The arming Write was message 1.
    let msn = 1;
    for attempt in 0..=setup.retry_cnt {
        deliver(
            &mut p.nodes[A],
            now,
            &nak(psn, NakCode::PsnSequenceError, msn),
            PATH,
        );
        let again = drain(&mut p.nodes[A], now);
        assert_eq!(again.len(), 1, "attempt {attempt}");
        let (t, bytes) = &again[0];
        let pkt = packet::parse(bytes, None).unwrap();
        assert_eq!(pkt.bth.psn.get(), psn);
        let last = attempt == setup.retry_cnt;
        assert_eq!(t.dest, Dest::Path(if last { ALT_PATH } else { PATH }));
        assert_eq!(pkt.bth.mig_req, last, "attempt {attempt}");
    }
    p.nodes[A].drain();
    assert_eq!(stat(&p, A, TransportEvent::SeqNakRcvd), 3);
    assert_eq!(stat(&p, A, TransportEvent::MigratedOnRetryExhaustion), 1);
    assert_eq!(stat(&p, A, TransportEvent::AckTimeout), 0);
    assert_eq!(migrations(&p, A), 1);
    // The retransmission drained above was lost; the timer sends it again,
    // over the new path, and B follows the migration.
    p.run_until(1_000_000, |p| p.nodes[A].send_completions().len() == 2);
    assert_eq!(p.nodes[A].send_completions()[1].status, WcStatus::Success);
    assert_eq!(p.nodes[B].qp.context().primary.av, Some(ALT_PATH));
    assert_eq!(migrations(&p, B), 1);
}

/// A Read response lost on the first wire: the response to the next Read
/// implies the loss (an implied NAK, IBA 9.7.6.1.4), which with a retry
/// count of 0 exhausts it: the QP migrates without waiting for a timeout,
/// and both Reads return their data.
#[test]
fn implied_nak_migrates() {
    let mut setup = Setup::rc();
    setup.retry_cnt = 0;
    let mut p = Pair::connect(setup, 6, Link::PERFECT);
    rearm_both(&mut p, setup.timeout);
    arm_by_traffic(&mut p);
    let remote: Vec<u8> = (0..64u8).collect();
    p.nodes[B].add_region(9, 0x9000, remote.clone());
    let psn = p.nodes[A].qp.query().sq_psn.unwrap();
    p.wire_fault = Some(Box::new(move |w: &Wire| {
        w.from == B && w.path == PATH && w.psn == psn
    }));
    for (wr_id, off) in [(1u64, 0u64), (2, 32)] {
        p.nodes[A].post_send(
            SendWqe {
                wr_id,
                opcode: SendOpcode::RdmaRead,
                flags: SendFlags::SIGNALED,
                length: 32,
                remote: RemoteAddr {
                    va: 0x9000 + off,
                    rkey: 9,
                },
                ..SendWqe::default()
            },
            vec![0; 32],
        );
    }
    p.run_until(1_000_000, |p| p.nodes[A].send_completions().len() == 3);
    assert!(p.nodes[A]
        .send_completions()
        .iter()
        .all(|c| c.status == WcStatus::Success));
    assert_eq!(p.nodes[A].mem.send_bufs[&1], remote[..32]);
    assert_eq!(p.nodes[A].mem.send_bufs[&2], remote[32..]);
    assert_eq!(stat(&p, A, TransportEvent::ImpliedNak), 1);
    assert_eq!(stat(&p, A, TransportEvent::AckTimeout), 0);
    assert_eq!(stat(&p, A, TransportEvent::MigratedOnRetryExhaustion), 1);
    assert_eq!(migrations(&p, B), 1);
    check_wire_after_migration(&p);
}

/// Software migrates A mid-transfer on a healthy pair: nothing is lost,
/// B follows on A's first MigReq packet, the two then re-arm onto the
/// first wire and fail back to it when the second one fails.
#[test]
fn commanded_migration_rearm_and_fail_back() {
    let seed = seed_or(0xA9_0010);
    let mut setup = Setup::rc();
    setup.retry_cnt = 3;
    let mut pair = Pair::connect(setup, seed, Link::PERFECT);
    rearm_both(&mut pair, setup.timeout);
    let mut rng = XorShift::new(seed);
    let ops: Vec<Op> = random_ops(&mut rng, 24);
    let mut o = post_ops(pair, seed, ops, true);
    let p = &mut o.pair;
    p.run_until(1_000_000, |p| p.sent[A] > 30);
    assert_eq!(p.nodes[A].qp.context().mig_state, MigState::Armed);
    command_migration(p, A);
    assert_eq!(p.nodes[A].qp.context().primary.av, Some(ALT_PATH));
    let o = finish_ops(o);
    check(&o, false).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
    let mut p = o.pair;
    assert_eq!(stat(&p, A, TransportEvent::MigratedOnCommand), 1);
    assert_eq!(stat(&p, B, TransportEvent::MigratedOnPeerRequest), 1);
    assert_eq!(
        stat(&p, A, TransportEvent::AckTimeout),
        0,
        "no loss, no timeout"
    );
    check_wire_after_migration(&p);

    // Re-arm onto the first wire: both load it as the alternate path.
    let back = AltPath {
        av: PATH,
        ..alt_path(setup.timeout)
    };
    rearm(&mut p, A, back);
    rearm(&mut p, B, back);
    p.nodes[B].add_region(7, 0x1000, vec![0; 4096]);
    write(&mut p, 2000, 16);
    let n = p.nodes[A].send_completions().len();
    p.run_until(1_000_000, |p| p.nodes[A].send_completions().len() == n + 1);
    for i in [A, B] {
        assert_eq!(p.nodes[i].qp.context().mig_state, MigState::Armed);
    }
    // The second wire fails: back to the first.
    p.wire_fault = Some(Box::new(|w: &Wire| w.path == ALT_PATH));
    for k in 0..4 {
        write(&mut p, 3000 + k, 512);
    }
    p.run_until(5_000_000, |p| p.nodes[A].send_completions().len() == n + 5);
    let c = p.nodes[A].send_completions();
    assert!(c[n..].iter().all(|c| c.status == WcStatus::Success));
    for i in [A, B] {
        assert_eq!(p.nodes[i].qp.context().primary.av, Some(PATH));
        assert_eq!(migrations(&p, i), 2);
    }
    assert_eq!(stat(&p, A, TransportEvent::MigratedOnRetryExhaustion), 1);
}

/// A migration request that does not come over B's alternate path is
/// dropped: B keeps its path and state, counts it and raises Path
/// Migration Request Failed once.
#[test]
fn mismatched_migration_request_is_refused() {
    let mut setup = Setup::rc();
    setup.retry_cnt = 1;
    let mut p = Pair::connect(setup, 7, Link::PERFECT);
    rearm(&mut p, A, alt_path(setup.timeout));
    // B's alternate path is a third path no wire joins.
    rearm(
        &mut p,
        B,
        AltPath {
            av: PathHandle(2),
            ..alt_path(setup.timeout)
        },
    );
    arm_by_traffic(&mut p);
    command_migration(&mut p, A);
    for k in 1..=3 {
        write(&mut p, k, 16);
    }
    p.run_until(1_000_000, |p| p.nodes[A].send_completions().len() == 4);
    assert_eq!(
        p.nodes[A].send_completions()[1].status,
        WcStatus::RetryExcErr
    );
    let b = &p.nodes[B];
    assert_eq!(b.qp.context().mig_state, MigState::Armed);
    assert_eq!(b.qp.context().primary.av, Some(PATH));
    assert!(b.stats.get(TransportEvent::MigrationRefused) >= 2);
    let failed = b
        .events
        .iter()
        .filter(|e| **e == AsyncEvent::PathMigrationFailed)
        .count();
    assert_eq!(failed, 1);
    assert_eq!(migrations(&p, B), 0);
    assert!(b.recv_completions().is_empty());
    // The arming Write's bytes, untouched.
    assert_eq!(
        b.mem.regions[&7].data[..16],
        [1000u64 as u8; 16],
        "nothing executed"
    );
}
