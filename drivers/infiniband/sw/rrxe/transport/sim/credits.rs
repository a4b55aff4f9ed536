// SPDX-License-Identifier: GPL-2.0

//! End-to-end credits (IBA 9.7.7.2) proven on the simulated wire: the MSN
//! and the SSN/LSN arithmetic, credit-limited messages, unsolicited ACKs,
//! QPs on an SRQ, peers that report no credits, and a slow receiver.
//!
//! Node A is the requester, B the responder. [`Setup::rc`] runs at a
//! 256-byte MTU, a Local ACK Timeout of about 1 ms and an RNR timer of
//! 10 us, on a link with 2 us one-way latency.

#![cfg(test)]

use super::super::aeth::{CreditCode, Syndrome, CREDIT_WATCH_FIRST_NS};
use super::super::headers::Aeth;
use super::super::opcode::codes;
use super::super::packet::ExtHeaders;
use super::super::psn::{Msn, Psn};
use super::super::qp::completion::WcStatus;
use super::super::qp::wqe::{RemoteAddr, SendFlags, SendOpcode};
use super::super::qp::TransportEvent;
use super::tests::{inject, request_with};
use super::*;

const RKEY: u32 = 0x77;
const VA: u64 = 0x10_0000;

fn wqe(wr_id: u64, opcode: SendOpcode, length: u32) -> SendWqe {
    SendWqe {
        wr_id,
        opcode,
        flags: SendFlags::SIGNALED,
        length,
        remote: RemoteAddr { va: VA, rkey: RKEY },
        ..SendWqe::default()
    }
}

/// Posts a Send of `len` bytes whose every byte is `wr_id`.
fn post_send(node: &mut Node, wr_id: u64, len: u32) {
    node.post_send(
        wqe(wr_id, SendOpcode::Send, len),
        vec![wr_id as u8; len as usize],
    );
}

fn stat(p: &Pair, node: usize, e: TransportEvent) -> u32 {
    p.nodes[node].stats.get(e)
}

/// The request packets node `from` sent.
fn requests(p: &Pair, from: usize) -> Vec<Wire> {
    p.wire
        .iter()
        .filter(|w| w.from == from && w.request)
        .copied()
        .collect()
}

/// The response packets node `from` sent.
fn responses(p: &Pair, from: usize) -> Vec<Wire> {
    p.wire
        .iter()
        .filter(|w| w.from == from && !w.request)
        .copied()
        .collect()
}

/// Runs until A holds a message back for want of credits, and not past
/// the end of the hold: a step that sends nothing moves the clock to the
/// next deadline, so an alarm just after now stops it first.
fn until_held(p: &mut Pair) {
    p.alarms = vec![p.now + 1];
    assert!(p.run_until(10_000, |p| stat(p, A, TransportEvent::CreditHeld) > 0));
    p.alarms.clear();
}

fn credit_of(w: &Wire) -> Option<CreditCode> {
    match w.aeth {
        Some((Syndrome::Ack(code), _)) => Some(code),
        _ => None,
    }
}

/// Every AETH B sent reports the receive WQEs it had posted at that moment
/// (rounded down to table 17-8) — plus the one a Send in progress took, in
/// an ACK sent in the middle of that Send — or "no credit information" when
/// `shared`.
fn assert_credits_track_the_queue(p: &Pair, shared: bool) {
    let mut n = 0;
    for w in responses(p, B) {
        if let Some(code) = credit_of(&w) {
            if shared {
                assert_eq!(code, CreditCode::NO_CREDIT_INFO, "{w:?}");
            } else {
                let posted = CreditCode::from_posted_wqes(w.rq_posted);
                let with_send = CreditCode::from_posted_wqes(w.rq_posted + 1);
                assert!(code == posted || code == with_send, "{w:?}");
            }
            n += 1;
        }
    }
    assert!(n > 0, "B sent no AETH at all");
}

fn data_ok(node: &Node) {
    for c in node.recv_completions() {
        assert_eq!(c.status, WcStatus::Success);
    }
    for (i, c) in node.recv_completions().iter().enumerate() {
        let buf = &node.mem.recv_bufs[&(i as u32)];
        assert!(
            buf[..c.byte_len as usize]
                .iter()
                .all(|&b| b == c.wr_id as u8),
            "receive {i} holds another message's bytes"
        );
    }
}

#[test]
fn initial_unsolicited_ack_reports_posted_receives_at_epsn_minus_one() {
    // IBA 9.7.7.2.4: at INIT to RTR the responder sends an ACK with PSN
    // ePSN - 1 and MSN 0 carrying its initial credits.
    let setup = Setup::rc();
    let mut p = Pair::unconnected(setup, 1, Link::PERFECT);
    for i in 0..2 {
        let [init, rtr, rts] = connect_steps(setup, i);
        p.nodes[i].modify(p.now, init);
        if i == B {
            // Six: a value of table 17-8 (five would be reported as four).
            for r in 0..6 {
                p.nodes[B].post_recv(r, 1024);
            }
        }
        p.nodes[i].modify(p.now, rtr);
        p.nodes[i].modify(p.now, rts);
    }
    p.run_until(1000, |_| false);
    let b = responses(&p, B);
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(b[0].opcode, codes::RC_ACKNOWLEDGE);
    assert_eq!(b[0].psn, setup.sq_psn[A].wrapping_sub(1));
    assert_eq!(
        b[0].aeth,
        Some((Syndrome::Ack(CreditCode::from_posted_wqes(6)), Msn::ZERO))
    );
    assert_eq!(stat(&p, B, TransportEvent::UnsolicitedAck), 1);
    // A's first Sends need no probe: the six credits cover them.
    for i in 0..6 {
        post_send(&mut p.nodes[A], i, 100);
    }
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 6);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 0);
    assert_eq!(stat(&p, A, TransportEvent::CreditHeld), 0);
    data_ok(&p.nodes[B]);
}

#[test]
fn unsolicited_ack_when_receives_follow_zero_credits() {
    let mut p = settled(Setup::rc(), 2);
    // B advertised zero; A holds its Send back rather than probe an empty
    // receive queue (B's initial ACK showed B announces credits).
    post_send(&mut p.nodes[A], 7, 600);
    until_held(&mut p);
    assert!(requests(&p, A).is_empty());
    assert_eq!(stat(&p, A, TransportEvent::CreditHeld), 1);
    // B posts a receive: one unsolicited ACK (PSN ePSN - 1, MSN 0, one
    // credit), and the Send goes unlimited, with no RNR NAK.
    let posted_at = p.now;
    p.nodes[B].post_recv(7, 1024);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 1);
    let update = responses(&p, B)[1];
    assert_eq!(update.opcode, codes::RC_ACKNOWLEDGE);
    assert_eq!(update.at, posted_at);
    assert_eq!(update.psn, Setup::rc().sq_psn[A].wrapping_sub(1));
    assert_eq!(
        update.aeth,
        Some((Syndrome::Ack(CreditCode::from_posted_wqes(1)), Msn::ZERO))
    );
    assert_eq!(stat(&p, B, TransportEvent::UnsolicitedAck), 2);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 0);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    assert!(requests(&p, A)[0].at > posted_at);
    data_ok(&p.nodes[B]);
    // Later posts are announced while A knows of at most half of what is
    // posted (B's last ACK, for the Send, reported none left): 1 of 1, 2 of
    // 2, not 3 (A knows of 2), 4 of 4. Otherwise the next message's ACK
    // would carry the count.
    for (wr_id, acks) in [(8, 3), (9, 4), (10, 4), (11, 5)] {
        p.nodes[B].post_recv(wr_id, 1024);
        p.run_until(10_000, |_| false);
        assert_eq!(
            stat(&p, B, TransportEvent::UnsolicitedAck),
            acks,
            "post {wr_id}"
        );
    }
    let last = *responses(&p, B).last().unwrap();
    assert_eq!(credit_of(&last), Some(CreditCode::from_posted_wqes(4)));
    assert_credits_track_the_queue(&p, false);
}

/// A connected pair whose initial ACKs have arrived: A knows B's credits
/// (none yet) and that B reports them.
fn settled(setup: Setup, seed: u64) -> Pair {
    let mut p = Pair::connect(setup, seed, Link::PERFECT);
    p.run_until(1000, |_| false);
    p
}

/// Runs until B has sent one more packet, and loses it.
fn lose_next_from_b(p: &mut Pair) {
    let before = p.wire.len();
    p.links[B].loss = 1.0;
    p.alarms = vec![p.now + 1];
    assert!(p.run_until(10, |p| p.wire[before..].iter().any(|w| w.from == B)));
    p.alarms.clear();
    p.links[B].loss = 0.0;
}

/// A pair whose B has `posted` receives but whose initial ACK was lost: A
/// knows no credits and does not know that B announces them, so a limited
/// message probes at once.
fn pair_without_initial_ack(setup: Setup, posted: u64) -> Pair {
    let mut p = Pair::connect(setup, 3, Link::PERFECT);
    for i in 0..posted {
        p.nodes[B].post_recv(i + 1, 4096);
    }
    p.links[B].loss = 1.0;
    p.run_until(1000, |_| false);
    p.links[B].loss = 0.0;
    p.wire.clear();
    p
}

#[test]
fn limited_send_probes_alone_and_its_ack_releases_the_rest() {
    let mut p = pair_without_initial_ack(Setup::rc(), 1);
    // 600 bytes at MTU 256: three packets.
    post_send(&mut p.nodes[A], 1, 600);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 1);
    let w = &p.wire;
    assert_eq!(
        (w[0].from, w[0].opcode, w[0].ack_req),
        (A, codes::RC_SEND_FIRST, true),
        "{w:#?}"
    );
    // Nothing more from A until B's ACK of the probe: MSN 0 (the message is
    // not complete) and one credit, the WQE the probe took and nothing more
    // posted, so the LSN (1) is the probe's own SSN.
    assert_eq!(
        (w[1].from, w[1].opcode, w[1].psn),
        (B, codes::RC_ACKNOWLEDGE, w[0].psn)
    );
    assert_eq!(w[1].rq_posted, 0);
    assert_eq!(
        w[1].aeth,
        Some((Syndrome::Ack(CreditCode::from_posted_wqes(1)), Msn::ZERO))
    );
    assert_eq!(w[2].opcode, codes::RC_SEND_MIDDLE);
    assert!(w[2].at >= w[1].at + Link::PERFECT.latency);
    assert_eq!(w[3].opcode, codes::RC_SEND_LAST);
    assert_eq!(p.nodes[A].send_completions()[0].status, WcStatus::Success);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 1);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    data_ok(&p.nodes[B]);
}

#[test]
fn limited_write_with_immediate_goes_whole_and_asks_on_its_last_packet() {
    let mut p = pair_without_initial_ack(Setup::rc(), 1);
    p.nodes[B].add_region(RKEY, VA, vec![0; 4096]);
    p.nodes[A].post_send(
        wqe(1, SendOpcode::RdmaWriteWithImm(0xABCD), 600),
        vec![0x5A; 600],
    );
    // A plain Write behind it needs no credit, but must wait: a limited
    // message stops transmission until its ACK (IBA 9.7.7.2.4).
    p.nodes[A].post_send(wqe(2, SendOpcode::RdmaWrite, 8), vec![0xEE; 8]);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 2);
    let w = &p.wire;
    let ops: Vec<(usize, u8, bool)> = w.iter().map(|w| (w.from, w.opcode, w.ack_req)).collect();
    assert_eq!(
        ops[..5],
        [
            (A, codes::RC_RDMA_WRITE_FIRST, false),
            (A, codes::RC_RDMA_WRITE_MIDDLE, false),
            (A, codes::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, true),
            (B, codes::RC_ACKNOWLEDGE, false),
            (A, codes::RC_RDMA_WRITE_ONLY, true),
        ],
        "{w:#?}"
    );
    assert!(w[4].at >= w[3].at + Link::PERFECT.latency);
    let c = p.nodes[B].recv_completions();
    assert_eq!(
        (c[0].status, c[0].imm_data),
        (WcStatus::Success, Some(0xABCD))
    );
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 1);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
}

/// A limited Send into an empty receive queue: RNR NAK, then the receive
/// is posted (its unsolicited ACK lost), and after the RNR timer the probe
/// is retransmitted. It must ask for its ACK again, or B takes it silently
/// and the rest of the message waits for the Local ACK Timeout, or, with
/// the timeout infinite, forever.
fn retransmitted_probe(timeout: u8) -> u64 {
    let mut setup = Setup::rc();
    setup.timeout = timeout;
    let mut p = pair_without_initial_ack(setup, 0);
    let start = p.now;
    post_send(&mut p.nodes[A], 1, 600);
    p.run_until(10_000, |p| {
        p.wire
            .iter()
            .any(|w| matches!(w.aeth, Some((Syndrome::RnrNak(_), _))))
    });
    p.nodes[B].post_recv(1, 1024);
    lose_next_from_b(&mut p);
    assert!(p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 1));
    let probes: Vec<&Wire> = p
        .wire
        .iter()
        .filter(|w| w.opcode == codes::RC_SEND_FIRST)
        .collect();
    assert_eq!(probes.len(), 2, "{:#?}", p.wire);
    assert!(probes.iter().all(|w| w.ack_req));
    assert_eq!(p.nodes[A].send_completions()[0].status, WcStatus::Success);
    assert_eq!(stat(&p, A, TransportEvent::AckTimeout), 0);
    assert_eq!(stat(&p, A, TransportEvent::RnrNakRcvd), 1);
    data_ok(&p.nodes[B]);
    p.now - start
}

/// An RNR NAK carries the MSN but no credit count, so the LSN stays where
/// the last ACK put it (IBA 9.7.7.2.4). B announces two receives at MSN 0
/// (LSN 2) and never reposts until told: of four three-packet Sends, A sends
/// two within the LSN and probes with the third, which B refuses with an
/// RNR NAK at MSN 2, its ACKs of the first two lost. Reading that MSN with
/// the old count (as the first run on a loaded host did) would put the LSN
/// at 4, release the probe's hold and send the fourth Send unannounced into
/// an empty receive queue; it must wait until B posts receives.
#[test]
fn rnr_nak_moves_the_msn_but_not_the_lsn() {
    let mut p = Pair::connect(Setup::rc(), 5, Link::PERFECT);
    p.nodes[B].post_recv(1, 1024);
    p.nodes[B].post_recv(2, 1024);
    p.run_until(1000, |_| false);
    p.wire.clear();
    // B's ACKs of the first two Sends are lost (or, as on a loaded host,
    // late): its RNR NAK is the first AETH that says MSN 2.
    p.wire_fault = Some(std::boxed::Box::new(|w: &Wire| {
        w.from == B && matches!(w.aeth, Some((Syndrome::Ack(_), _)))
    }));
    // 600 bytes at MTU 256: three packets each.
    for i in 1..=4 {
        post_send(&mut p.nodes[A], i, 600);
    }
    let rnr_naks = |p: &Pair| {
        p.wire
            .iter()
            .filter(|w| matches!(w.aeth, Some((Syndrome::RnrNak(_), _))))
            .count()
    };
    // Three refusals of the probe: two retransmissions after the RNR timer.
    assert!(p.run_until(10_000, |p| rnr_naks(p) == 3), "{:#?}", p.wire);
    let probe = p
        .wire
        .iter()
        .find(|w| matches!(w.aeth, Some((Syndrome::RnrNak(_), _))))
        .map(|w| w.psn)
        .unwrap_or_default();
    let posted_at = p.now;
    p.wire_fault = None;
    p.nodes[B].post_recv(3, 1024);
    p.nodes[B].post_recv(4, 1024);
    assert!(p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 4));
    let fourth = (probe + 3) & 0xFF_FFFF;
    let early: Vec<&Wire> = p
        .wire
        .iter()
        .filter(|w| w.from == A && w.request && w.psn == fourth && w.at < posted_at)
        .collect();
    assert!(
        early.is_empty(),
        "Send 4 left before B had a receive for it: {early:#?}"
    );
    for w in p.wire.iter().filter(|w| w.from == B) {
        if let Some((Syndrome::RnrNak(_), _)) = w.aeth {
            assert_eq!(w.psn, probe, "only the probe is refused: {w:?}");
        }
    }
    assert!(p.nodes[A]
        .send_completions()
        .iter()
        .all(|c| c.status == WcStatus::Success));
    assert_eq!(p.nodes[B].recv_completions().len(), 4);
    data_ok(&p.nodes[B]);
}

#[test]
fn retransmitted_probe_asks_for_its_ack() {
    // RNR timer (10 us) and a few round trips, nowhere near the 1 ms
    // Local ACK Timeout.
    let took = retransmitted_probe(Setup::rc().timeout);
    assert!(took < 100_000, "took {took} ns");
}

#[test]
fn retransmitted_probe_completes_with_infinite_timeout() {
    retransmitted_probe(0);
}

#[test]
fn held_message_probes_when_no_credit_update_comes() {
    // B's update after zero credits is lost: A's hold ends after a Local ACK
    // Timeout and the Send probes; B has the receive, so no RNR NAK.
    let mut p = settled(Setup::rc(), 4);
    let held_at = p.now;
    post_send(&mut p.nodes[A], 1, 600);
    until_held(&mut p);
    p.nodes[B].post_recv(1, 1024);
    lose_next_from_b(&mut p);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 1);
    let probe = requests(&p, A)[0];
    assert_eq!((probe.opcode, probe.ack_req), (codes::RC_SEND_FIRST, true));
    // Timeout 8: 4.096 us * 2^8.
    assert!(
        probe.at >= held_at + 4096 * 256,
        "probe at {}",
        probe.at - held_at
    );
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 1);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    data_ok(&p.nodes[B]);
}

#[test]
fn requester_stops_holding_after_holds_in_a_row_run_out() {
    // B's credit updates never arrive (each one is lost): the first holds
    // end by timeout and probe, and after HOLDS_BEFORE_PROBING of them in a
    // row A stops waiting for updates and probes at once.
    let mut p = settled(Setup::rc(), 11);
    for i in 0..4 {
        post_send(&mut p.nodes[A], i, 600);
    }
    for done in 1..=4 {
        if done <= 3 {
            until_held(&mut p);
        }
        p.nodes[B].post_recv(done as u64 - 1, 1024);
        lose_next_from_b(&mut p);
        p.run_until(10_000, |p| p.nodes[A].send_completions().len() == done);
    }
    assert_eq!(stat(&p, A, TransportEvent::CreditHeld), 3);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 4);
    // The first three probed after their hold, when B had the receive; the
    // fourth probed at once into the empty queue.
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 1);
    data_ok(&p.nodes[B]);
}

#[test]
fn receives_posted_without_a_doorbell_are_noticed() {
    // A user QP posts receives through its ring, no system call: B's engine
    // learns of them only when it runs. Having handed out its last credit,
    // it rechecks its receive queue CREDIT_WATCH_FIRST_NS later, then after
    // twice that, four times, ... (16 ms at most). A holds its Send for up to
    // its Local ACK Timeout, 67 ms.
    let mut setup = Setup::rc();
    setup.timeout = 14;
    let mut p = Pair::connect(setup, 12, Link::PERFECT);
    p.nodes[B].post_recv(1, 1024);
    p.run_until(1000, |_| false);
    post_send(&mut p.nodes[A], 1, 100);
    post_send(&mut p.nodes[A], 2, 100);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 1);
    until_held(&mut p);
    let taken_at = responses(&p, B).last().unwrap().at;
    // Posted 5.5 first intervals after the last credit went: found by the
    // check at 1 + 2 + 4 = 7.
    let first = CREDIT_WATCH_FIRST_NS;
    let posted_at = taken_at + first * 11 / 2;
    p.alarms = vec![posted_at];
    p.run_until(10_000, |p| p.now >= posted_at);
    p.nodes[B].post_recv_quietly(2, 1024);
    p.alarms.clear();
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 2);
    let update = responses(&p, B)
        .into_iter()
        .find(|w| w.at > posted_at)
        .unwrap();
    assert_eq!(update.at, taken_at + 7 * first, "{update:?}");
    assert_eq!(credit_of(&update), Some(CreditCode::from_posted_wqes(1)));
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 0);
    data_ok(&p.nodes[B]);
}

#[test]
fn receives_posted_without_a_doorbell_after_zero_initial_credits_are_noticed() {
    // A consumer that brings its QP to RTR before posting its receives
    // (perftest's server, through rdma-core's provider, which posts through
    // the ring): B's initial ACK reports no credits, so A holds its first
    // Send. No receive took a credit, yet B must recheck as if one had:
    // without the watch A's Send waited out its hold (64 ms) and probed, a
    // 4 KiB `ib_send_bw` round at a third of its rate.
    let mut setup = Setup::rc();
    setup.timeout = 14;
    let mut p = Pair::connect(setup, 18, Link::PERFECT);
    p.run_until(1000, |p| !responses(p, B).is_empty());
    let initial = responses(&p, B)[0];
    assert_eq!(credit_of(&initial), Some(CreditCode::from_posted_wqes(0)));
    // Until A has the initial ACK, not until idle: B's rechecks go on for
    // a second.
    let arrived = initial.at + 10_000;
    p.alarms = vec![arrived];
    p.run_until(1000, |p| p.now >= arrived);
    p.alarms.clear();
    post_send(&mut p.nodes[A], 1, 100);
    until_held(&mut p);
    // Posted 1.5 first intervals after the initial ACK: found by the check
    // at 1 + 2 = 3.
    let first = CREDIT_WATCH_FIRST_NS;
    let posted_at = initial.at + first * 3 / 2;
    p.alarms = vec![posted_at];
    p.run_until(10_000, |p| p.now >= posted_at);
    p.alarms.clear();
    assert!(requests(&p, A).is_empty());
    p.nodes[B].post_recv_quietly(1, 1024);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 1);
    let update = responses(&p, B)
        .into_iter()
        .find(|w| w.at > posted_at)
        .unwrap();
    assert_eq!(update.at, initial.at + 3 * first, "{update:?}");
    assert_eq!(credit_of(&update), Some(CreditCode::from_posted_wqes(1)));
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 0);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    data_ok(&p.nodes[B]);
}

#[test]
fn a_receive_doorbell_is_wanted_only_while_the_requester_waits_for_one() {
    // The engine asks for a doorbell on posts exactly while it watches its
    // receive queue: from the message that took A's last credit until an
    // update announced new ones. A doorbell then sends the update at once
    // rather than at the next recheck (CREDIT_WATCH_FIRST_NS after the credit
    // went).
    let mut p = Pair::connect(Setup::rc(), 14, Link::PERFECT);
    p.nodes[B].post_recv(1, 1024);
    p.run_until(1000, |_| false);
    assert!(!p.nodes[B].qp.wants_recv_doorbell(), "A has a credit");
    post_send(&mut p.nodes[A], 1, 100);
    post_send(&mut p.nodes[A], 2, 100);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 1);
    until_held(&mut p);
    assert!(p.nodes[B].qp.wants_recv_doorbell(), "A holds its Send");
    // Posted through the ring: nothing tells the engine yet.
    p.nodes[B].post_recv_quietly(2, 1024);
    assert!(p.nodes[B].qp.wants_recv_doorbell());
    let rung_at = p.now;
    p.nodes[B].with(|qp, io| qp.post_recv(io));
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 2);
    let update = responses(&p, B)
        .into_iter()
        .find(|w| w.at >= rung_at)
        .unwrap();
    assert_eq!(update.at, rung_at, "{update:?}");
    assert_eq!(credit_of(&update), Some(CreditCode::from_posted_wqes(1)));
    // B's ACK of the second Send reported no receive left: the watch, and
    // the wish for a doorbell, start again.
    assert!(p.nodes[B].qp.wants_recv_doorbell());
    p.nodes[B].post_recv(3, 1024);
    p.run_until(10_000, |_| false);
    assert!(!p.nodes[B].qp.wants_recv_doorbell(), "the update went out");
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    data_ok(&p.nodes[B]);

    // Two Sends take both receives posted: a responder that reports credits
    // now watches; one that reports none (on an SRQ, or with credit
    // reporting off) never asks for a doorbell.
    for (srq, reporting) in [(false, true), (true, false), (false, false)] {
        let setup = Setup::rc();
        let mut p = Pair::unconnected(setup, 15, Link::PERFECT);
        p.nodes[B].rq.shared = srq;
        p.nodes[B].qp.set_credit_reporting(reporting || srq);
        p.bring_up(setup);
        p.nodes[B].post_recv(1, 1024);
        p.nodes[B].post_recv(2, 1024);
        post_send(&mut p.nodes[A], 1, 100);
        post_send(&mut p.nodes[A], 2, 100);
        p.run_until(100_000, |p| p.nodes[A].send_completions().len() == 2);
        assert_eq!(p.nodes[A].send_completions().len(), 2);
        assert_eq!(
            p.nodes[B].qp.wants_recv_doorbell(),
            reporting,
            "srq {srq}, reporting {reporting}"
        );
    }
}

#[test]
fn a_receive_doorbell_waits_for_the_depth_the_consumer_keeps() {
    // B keeps eight receives posted, and A's eight Sends take them all: an
    // update per repost would grant one credit at a time and pace A at one
    // message a round trip, so the doorbell is asked for once all eight are
    // back; fewer are left to the rechecks.
    let mut p = Pair::connect(Setup::rc(), 17, Link::PERFECT);
    for i in 0..8 {
        p.nodes[B].post_recv(i, 1024);
    }
    p.run_until(1000, |_| false);
    assert_eq!(p.nodes[B].qp.recv_doorbell_after(), None, "A has credits");
    for i in 0..9 {
        post_send(&mut p.nodes[A], i, 100);
    }
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 8);
    until_held(&mut p);
    assert_eq!(p.nodes[B].qp.recv_doorbell_after(), Some(8));
    // The consumer reposts eight, and rings: one update grants all eight.
    for i in 8..16 {
        p.nodes[B].post_recv_quietly(i, 1024);
    }
    let rung_at = p.now;
    p.nodes[B].with(|qp, io| qp.post_recv(io));
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 9);
    let update = responses(&p, B)
        .into_iter()
        .find(|w| w.at >= rung_at)
        .unwrap();
    assert_eq!(update.at, rung_at, "{update:?}");
    assert_eq!(credit_of(&update), Some(CreditCode::from_posted_wqes(8)));
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    data_ok(&p.nodes[B]);
}

#[test]
fn an_ack_owed_to_a_request_does_not_end_the_credit_watch() {
    // A driver's run takes the packets that arrived, then fires its expired
    // timer, then sends. A run that waited for the CPU can find the last
    // packet of a Send (owed an ACK, which reports no credits left) and the
    // receive queue's recheck due together: the watch must go on, or a
    // receive posted through the ring afterwards reaches the requester only
    // when its hold runs out (64 ms) and it probes.
    let mut setup = Setup::rc();
    setup.timeout = 14;
    let mut p = Pair::connect(setup, 16, Link::PERFECT);
    p.nodes[B].post_recv(1, 1024);
    p.run_until(1000, |_| false);
    post_send(&mut p.nodes[A], 1, 1000);
    post_send(&mut p.nodes[A], 2, 100);
    // Stops right after B took the Send's last packet: its ACK is not sent.
    p.run_until(10_000, |p| p.nodes[B].recv_completions().len() == 1);
    let recheck = p.nodes[B].qp.poll_timeout().unwrap();
    p.now = p.now.max(recheck);
    let late = p.now;
    p.nodes[B].with(|qp, io| qp.handle_timeout(late, io));
    assert!(p.nodes[B].qp.wants_recv_doorbell(), "the watch goes on");
    // The run sends the ACK it owes (no credits), then B's user reposts.
    let acks = responses(&p, B).len();
    p.run_until(10, |p| responses(p, B).len() > acks);
    assert_eq!(p.now, late);
    p.nodes[B].post_recv_quietly(2, 1024);
    p.run_until(100_000, |p| p.nodes[A].send_completions().len() == 2);
    let update = responses(&p, B)
        .into_iter()
        .find(|w| w.at > late && credit_of(w) == Some(CreditCode::from_posted_wqes(1)))
        .unwrap();
    // The next recheck, two first intervals later, found the receive.
    assert_eq!(update.at, late + 2 * CREDIT_WATCH_FIRST_NS, "{update:?}");
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 0);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    data_ok(&p.nodes[B]);
}

#[test]
fn credit_watch_ends() {
    // Nothing is posted: the rechecks stop after CREDIT_WATCH_SPAN_NS, and
    // B has no deadline left.
    let mut p = Pair::connect(Setup::rc(), 13, Link::PERFECT);
    p.nodes[B].post_recv(1, 1024);
    p.run_until(1000, |_| false);
    post_send(&mut p.nodes[A], 1, 100);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 1);
    let start = p.now;
    p.run_until(100_000, |_| false);
    assert_eq!(p.nodes[B].qp.poll_timeout(), None);
    assert!(
        p.now - start <= 1_000_000_000 + 16_000_000,
        "{}",
        p.now - start
    );
}

#[test]
fn reads_writes_and_atomics_need_no_credit_but_keep_their_order() {
    // IBA 9.7.7.2.4: only Sends and RDMA Writes with Immediate consume
    // credits, and the requester may not pass a held WQE with later ones.
    let mut p = Pair::connect(Setup::rc(), 5, Link::PERFECT);
    p.nodes[B].add_region(RKEY, VA, vec![0; 4096]);
    p.run_until(1000, |_| false);
    p.nodes[A].post_send(wqe(1, SendOpcode::RdmaWrite, 300), vec![1; 300]);
    p.nodes[A].post_send(wqe(2, SendOpcode::RdmaRead, 300), vec![0; 300]);
    p.nodes[A].post_send(wqe(3, SendOpcode::AtomicFetchAdd { add: 5 }, 8), vec![0; 8]);
    post_send(&mut p.nodes[A], 4, 100);
    p.nodes[A].post_send(wqe(5, SendOpcode::RdmaWrite, 8), vec![5; 8]);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 3);
    until_held(&mut p);
    let done: Vec<u64> = p.nodes[A]
        .send_completions()
        .iter()
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(done, [1, 2, 3]);
    assert_eq!(stat(&p, A, TransportEvent::CreditHeld), 1);
    p.nodes[B].post_recv(4, 1024);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 5);
    let done: Vec<u64> = p.nodes[A]
        .send_completions()
        .iter()
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(done, [1, 2, 3, 4, 5]);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 0);
}

/// A message that takes no receive WQE (an RDMA Read, Write or atomic) raises the MSN and
/// with it the LSN, but posts nothing: its own response or ACK carries the count. The
/// task's look at the receive queue after taking the message in (at every run, before it
/// sends) must not find news in that LSN and add an unsolicited ACK to each message:
/// `ib_read_lat`, with no receives posted, drew three packets a Read.
#[test]
fn messages_taking_no_receive_draw_no_unsolicited_ack() {
    let mut p = Pair::connect(Setup::rc(), 6, Link::PERFECT);
    p.nodes[B].add_region(RKEY, VA, vec![0; 4096]);
    p.run_until(1000, |_| false);
    let initial = stat(&p, B, TransportEvent::UnsolicitedAck);
    let sent = p.sent[B];
    for i in 0..4 {
        p.nodes[A].post_send(wqe(2 * i, SendOpcode::RdmaRead, 8), vec![0; 8]);
        p.nodes[A].post_send(wqe(2 * i + 1, SendOpcode::RdmaWrite, 8), vec![1; 8]);
        p.run_until(10_000, |p| {
            p.nodes[A].send_completions().len() == 2 * i as usize + 2
        });
    }
    assert_eq!(stat(&p, B, TransportEvent::UnsolicitedAck), initial);
    // A response a Read, and at most an ACK a Write.
    assert!(p.sent[B] - sent <= 8, "{:#?}", &p.wire);
    // A receive posted now is news: A knows of none.
    p.nodes[B].post_recv(9, 1024);
    p.run_until(1000, |_| false);
    assert_eq!(stat(&p, B, TransportEvent::UnsolicitedAck), initial + 1);
}

#[test]
fn lsn_counts_only_credit_consuming_messages_across_the_msn_wrap() {
    // Two credits; Sends, Reads and Writes mixed, SSNs crossing 2^24: the
    // Read and the Writes add one to the LSN each (IBA 9.7.7.2.4), so the
    // first two Sends, the Read and the Writes go, and the third Send waits.
    let mut p = Pair::connect(Setup::rc(), 6, Link::PERFECT);
    let start = Msn::new(0xFF_FFFE);
    for n in &mut p.nodes {
        n.qp.start_messages_at(start);
    }
    p.nodes[B].add_region(RKEY, VA, vec![0; 4096]);
    p.nodes[B].post_recv(1, 1024);
    p.nodes[B].post_recv(3, 1024);
    p.run_until(1000, |_| false);
    post_send(&mut p.nodes[A], 1, 100);
    p.nodes[A].post_send(wqe(2, SendOpcode::RdmaRead, 100), vec![0; 100]);
    post_send(&mut p.nodes[A], 3, 100);
    p.nodes[A].post_send(wqe(4, SendOpcode::RdmaWrite, 100), vec![4; 100]);
    post_send(&mut p.nodes[A], 5, 100);
    p.nodes[A].post_send(wqe(6, SendOpcode::RdmaWrite, 100), vec![6; 100]);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 4);
    until_held(&mut p);
    let done: Vec<u64> = p.nodes[A]
        .send_completions()
        .iter()
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(done, [1, 2, 3, 4]);
    // B's last ACK: four messages past the start, no credits left.
    let last = *responses(&p, B).last().unwrap();
    assert_eq!(
        last.aeth,
        Some((
            Syndrome::Ack(CreditCode::from_posted_wqes(0)),
            start.wrapping_add(4)
        ))
    );
    let acked = responses(&p, B).len();
    p.nodes[B].post_recv(5, 1024);
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 6);
    // The credit update repeats the PSN of B's latest ACK (IBA 9.7.7.2.4:
    // a duplicate to the requester) with the new count.
    let r = responses(&p, B);
    assert_eq!(r[acked].opcode, codes::RC_ACKNOWLEDGE);
    assert_eq!(r[acked].psn, r[acked - 1].psn);
    assert_eq!(
        r[acked].aeth,
        Some((
            Syndrome::Ack(CreditCode::from_posted_wqes(1)),
            start.wrapping_add(4)
        ))
    );
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 0);
    let last = *responses(&p, B).last().unwrap();
    assert_eq!(last.aeth.unwrap().1, Msn::new(4));
    data_ok(&p.nodes[B]);
}

/// The message of each PSN A's requests used, for `ops` started at
/// `psn`: (first PSN, PSNs used).
fn message_psns(psn: u32, ops: &[(SendOpcode, u32)], mtu: u32) -> Vec<(Psn, u32)> {
    let mut psn = Psn::new(psn);
    ops.iter()
        .map(|&(op, len)| {
            let n = match op {
                SendOpcode::AtomicFetchAdd { .. } | SendOpcode::AtomicCmpSwap { .. } => 1,
                _ => len.div_ceil(mtu).max(1),
            };
            let first = psn;
            psn = psn.wrapping_add(n);
            (first, n)
        })
        .collect()
}

#[test]
fn msn_of_every_ack_counts_completed_messages_through_the_wrap() {
    // IBA 9.7.7.2: the MSN an ACK carries is the number of messages the
    // responder has completed (mod 2^24). Checked against an independent
    // count: the messages whose last PSN the ACK's PSN covers.
    let setup = Setup::rc();
    let mut p = Pair::connect(setup, 7, Link::PERFECT);
    let start = Msn::new(0xFF_FFF0);
    for n in &mut p.nodes {
        n.qp.start_messages_at(start);
    }
    p.nodes[B].add_region(RKEY, VA, vec![0; 8192]);
    let mut rng = XorShift::new(7);
    let mut ops = Vec::new();
    for i in 0..40u64 {
        let len = 1 + rng.below(700) as u32;
        let op = match rng.below(5) {
            0 => SendOpcode::Send,
            1 => SendOpcode::RdmaWriteWithImm(i as u32),
            2 => SendOpcode::RdmaWrite,
            3 => SendOpcode::RdmaRead,
            _ => SendOpcode::AtomicFetchAdd { add: 1 },
        };
        let len = if matches!(op, SendOpcode::AtomicFetchAdd { .. }) {
            8
        } else {
            len
        };
        ops.push((op, len));
        if op.consumes_recv_wqe() {
            p.nodes[B].post_recv(i, 1024);
        }
        p.nodes[A].post_send(wqe(i, op, len), vec![i as u8; len as usize]);
    }
    p.run_until(100_000, |p| {
        p.nodes[A].send_completions().len() == ops.len()
    });
    assert!(p.nodes[A]
        .send_completions()
        .iter()
        .all(|c| c.status == WcStatus::Success));
    let msgs = message_psns(setup.sq_psn[A], &ops, 256);
    let base = Psn::new(setup.sq_psn[A]);
    let mut acks = 0;
    let mut prev = start;
    for w in responses(&p, B) {
        let Some((Syndrome::Ack(_), msn)) = w.aeth else {
            continue;
        };
        assert!(!msn.is_before(prev), "MSN went back: {w:?}");
        prev = msn;
        if w.opcode != codes::RC_ACKNOWLEDGE {
            continue;
        }
        let covered = base.prev().distance_to(Psn::new(w.psn));
        let complete = msgs
            .iter()
            .filter(|(first, n)| base.distance_to(first.wrapping_add(n - 1)) < covered)
            .count() as u32;
        assert_eq!(msn, start.wrapping_add(complete), "{w:?}");
        acks += 1;
    }
    assert!(acks > 10);
    assert_eq!(prev, start.wrapping_add(ops.len() as u32));
    assert!(prev.get() < start.get(), "the MSN did not wrap");
    assert_credits_track_the_queue(&p, false);
}

#[test]
fn read_responses_and_atomic_acks_carry_credits_too() {
    // B's last credit-carrying packet is a Read response reporting zero: a
    // receive posted after it must still earn an unsolicited ACK.
    let mut p = pair_without_initial_ack(Setup::rc(), 1);
    p.nodes[B].add_region(RKEY, VA, vec![0; 4096]);
    // The lost initial ACK promised one credit; A's Send takes it, but asks
    // no ACK of its own (a multi-packet Send acknowledged by what follows).
    let send_only = request_with(
        codes::RC_SEND_ONLY,
        100,
        false,
        ExtHeaders::default(),
        &[9; 50],
    );
    inject(&mut p.nodes[B], p.now, &send_only);
    let read = request_with(
        codes::RC_RDMA_READ_REQUEST,
        101,
        true,
        ExtHeaders {
            reth: Some(super::super::headers::Reth {
                va: VA,
                rkey: RKEY,
                dma_len: 8,
            }),
            ..ExtHeaders::default()
        },
        &[],
    );
    inject(&mut p.nodes[B], p.now, &read);
    let out = super::tests::drain_tx(&mut p.nodes[B], p.now);
    assert_eq!(out.len(), 1, "the Read response acknowledges the Send");
    assert_eq!(out[0].0, codes::RC_RDMA_READ_RESPONSE_ONLY);
    assert_eq!(
        out[0].2,
        Some(Syndrome::Ack(CreditCode::from_posted_wqes(0)))
    );
    p.nodes[B].post_recv(2, 1024);
    let out = super::tests::drain_tx(&mut p.nodes[B], p.now);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, codes::RC_ACKNOWLEDGE);
    assert_eq!(
        out[0].2,
        Some(Syndrome::Ack(CreditCode::from_posted_wqes(1)))
    );
    // The initial ACK (lost) and this one.
    let s = p.nodes[B].qp.take_stats();
    p.nodes[B].stats.add(&s);
    assert_eq!(stat(&p, B, TransportEvent::UnsolicitedAck), 2);
}

#[test]
fn qp_on_an_srq_reports_no_credits_and_sends_no_unsolicited_ack() {
    let setup = Setup::rc();
    let mut p = Pair::unconnected(setup, 8, Link::PERFECT);
    p.nodes[B].rq.shared = true;
    p.bring_up(setup);
    for i in 0..20 {
        p.nodes[B].post_recv(i, 1024);
    }
    p.run_until(1000, |_| false);
    assert!(responses(&p, B).is_empty(), "{:?}", p.wire);
    for i in 0..20 {
        post_send(&mut p.nodes[A], i, 300);
    }
    p.run_until(100_000, |p| p.nodes[A].send_completions().len() == 20);
    assert_eq!(stat(&p, B, TransportEvent::UnsolicitedAck), 0);
    assert_credits_track_the_queue(&p, true);
    // A knew nothing at first: its first Send probed, and the "no credit
    // information" in its ACK made A unlimited.
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 1);
    assert_eq!(stat(&p, A, TransportEvent::CreditHeld), 0);
    data_ok(&p.nodes[B]);
}

/// Ghost ACKs at a requester that has one credit (IBA 9.7.7.2.4): for a
/// PSN never sent, from half the PSN space away and from just past the last
/// PSN acknowledged, each claiming an MSN far ahead and 64 free receives.
/// Taken, one would let A send into B's empty queue and silence B's real
/// counts, whose MSNs are behind it.
#[test]
fn ghost_acks_do_not_move_the_credits() {
    let mut p = settled(Setup::rc(), 4);
    p.nodes[B].post_recv(1, 1024);
    p.run_until(1000, |_| false);
    let una = Setup::rc().sq_psn[A];
    let ghost = |psn: u32| {
        let aeth = Aeth {
            syndrome: Syndrome::Ack(CreditCode::from_posted_wqes(64)),
            msn: Msn::new(0x10_0000),
        };
        let ext = ExtHeaders {
            aeth: Some(aeth),
            ..ExtHeaders::default()
        };
        request_with(codes::RC_ACKNOWLEDGE, psn, false, ext, &[])
    };
    let ignored = stat(&p, A, TransportEvent::IgnoredResponse);
    for psn in [
        una.wrapping_add(5),
        una.wrapping_add(0x80_0000),
        una.wrapping_sub(0x40_0000),
    ] {
        inject(&mut p.nodes[A], p.now, &ghost(psn));
        p.nodes[A].drain();
    }
    assert_eq!(stat(&p, A, TransportEvent::IgnoredResponse), ignored + 3);
    // Three Sends against B's one receive: the first goes, the second waits.
    for i in 1..=3 {
        post_send(&mut p.nodes[A], i, 100);
    }
    p.alarms = vec![p.now + 1];
    p.run_until(10_000, |p| {
        stat(p, A, TransportEvent::CreditHeld) > 0 || stat(p, B, TransportEvent::RnrNakSent) > 0
    });
    p.alarms.clear();
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    assert_eq!(stat(&p, A, TransportEvent::CreditHeld), 1);
    assert_eq!(requests(&p, A).len(), 1, "{:#?}", p.wire);
    // B's real counts, MSN 1 and on, still release the rest.
    for i in 2..=3 {
        p.nodes[B].post_recv(i, 1024);
    }
    p.run_until(10_000, |p| p.nodes[A].send_completions().len() == 3);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 0);
    data_ok(&p.nodes[B]);
}

#[test]
fn peer_without_credits_is_unlimited() {
    // B as rdma_rxe: AETHs always 11111b, no unsolicited ACK.
    let setup = Setup::rc();
    let mut p = Pair::unconnected(setup, 9, Link::PERFECT);
    p.nodes[B].qp.set_credit_reporting(false);
    p.bring_up(setup);
    for i in 0..20 {
        p.nodes[B].post_recv(i, 1024);
    }
    for i in 0..20 {
        post_send(&mut p.nodes[A], i, 300);
    }
    p.run_until(100_000, |p| p.nodes[A].send_completions().len() == 20);
    assert_eq!(stat(&p, B, TransportEvent::UnsolicitedAck), 0);
    assert_eq!(stat(&p, A, TransportEvent::LimitedProbe), 1);
    assert_eq!(stat(&p, B, TransportEvent::RnrNakSent), 0);
    assert_credits_track_the_queue(&p, true);
    data_ok(&p.nodes[B]);
}

/// Outcome of [`slow_receiver`].
#[derive(Debug)]
struct SlowRun {
    rnr_naks: u32,
    elapsed_ns: u64,
    packets_from_a: usize,
}

/// B keeps `depth` receives posted and reposts each one `delay_ns` after
/// its message arrived; A posts `n` 1000-byte Sends at once.
fn slow_receiver(credits: bool, depth: u64, delay_ns: u64, n: u64) -> SlowRun {
    slow_receiver_on(Link::PERFECT, credits, depth, delay_ns, n)
}

fn slow_receiver_on(link: Link, credits: bool, depth: u64, delay_ns: u64, n: u64) -> SlowRun {
    slow_receiver_with(link, credits, depth, delay_ns, n, Node::post_recv)
}

/// As [`slow_receiver_on`], B reposting with `repost`.
fn slow_receiver_with(
    link: Link,
    credits: bool,
    depth: u64,
    delay_ns: u64,
    n: u64,
    repost: fn(&mut Node, u64, u32) -> u32,
) -> SlowRun {
    let mut setup = Setup::rc();
    // Timeout 14 (67 ms) and RNR timer 12 (0.64 ms), perftest's values.
    setup.timeout = 14;
    setup.min_rnr_timer = 12;
    let mut p = Pair::unconnected(setup, 10, link);
    p.nodes[B].qp.set_credit_reporting(credits);
    p.bring_up(setup);
    for i in 0..depth {
        p.nodes[B].post_recv(i, 1024);
    }
    for i in 0..n {
        post_send(&mut p.nodes[A], i, 1000);
    }
    let start = p.now;
    let mut posted = depth;
    let mut seen = 0;
    let mut due: Vec<u64> = Vec::new();
    while p.nodes[A].send_completions().len() < n as usize {
        assert!(
            p.step(),
            "stalled at {} of {n}",
            p.nodes[A].send_completions().len()
        );
        let got = p.nodes[B].recv_completions().len();
        for _ in seen..got {
            due.push(p.now + delay_ns);
        }
        seen = got;
        let now = p.now;
        while posted < n && due.first().is_some_and(|&t| t <= now) {
            due.remove(0);
            repost(&mut p.nodes[B], posted, 1024);
            posted += 1;
        }
        p.alarms = due.clone();
        assert!(p.now - start < 60_000_000_000, "no progress");
    }
    let c = p.nodes[A].send_completions();
    assert!(c.iter().all(|c| c.status == WcStatus::Success));
    let order: Vec<u64> = p.nodes[B]
        .recv_completions()
        .iter()
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(order, (0..n).collect::<Vec<_>>());
    data_ok(&p.nodes[B]);
    assert_credits_track_the_queue(&p, !credits);
    SlowRun {
        rnr_naks: stat(&p, B, TransportEvent::RnrNakSent),
        elapsed_ns: p.now - start,
        packets_from_a: requests(&p, A).len(),
    }
}

#[test]
fn slow_receiver_with_and_without_credits() {
    for depth in [1, 2] {
        let on = slow_receiver(true, depth, 200_000, 200);
        let off = slow_receiver(false, depth, 200_000, 200);
        std::eprintln!("depth {depth}: credits on {on:?}, off {off:?}");
        // With credits A never sends into an empty receive queue.
        assert_eq!(on.rnr_naks, 0);
        assert!(off.rnr_naks > 50, "{off:?}");
        assert!(on.packets_from_a < off.packets_from_a);
        assert!(on.elapsed_ns <= off.elapsed_ns);
    }
}

#[test]
fn two_receives_keep_two_messages_in_flight() {
    // A far receiver (5 ms each way, 2 ms per packet on the link, so 8 ms
    // per 4-packet message) reposting each receive 3 ms after its message:
    // the repost lands while the next Send is arriving. The ACK it earns
    // counts the WQE that Send took (A counts the Send against the LSN until
    // it completes), so A starts the next one before the current one is
    // acknowledged: about 9.6 ms a message. Counting only the WQEs still
    // posted would hold A to one Send in flight, about 12 ms a message.
    let far = Link {
        latency: 5_000_000,
        gap: 2_000_000,
        ..Link::PERFECT
    };
    let run = slow_receiver_on(far, true, 2, 3_000_000, 60);
    assert_eq!(run.rnr_naks, 0);
    assert!(run.elapsed_ns < 60 * 11_000_000, "{run:?}");
}

#[test]
fn slow_receiver_posting_through_its_ring() {
    // The slow receiver again, posting as a user QP does (no doorbell): the
    // rechecks of the receive queue keep RNR NAKs away. (Each repost is seen
    // up to a recheck late, 250 us at first: on this 2 us link that is slower
    // than the off run's RNR retries; on a real wire an RNR NAK costs more.)
    let on = slow_receiver_with(
        Link::PERFECT,
        true,
        2,
        200_000,
        200,
        Node::post_recv_quietly,
    );
    let off = slow_receiver_with(
        Link::PERFECT,
        false,
        2,
        200_000,
        200,
        Node::post_recv_quietly,
    );
    assert_eq!(on.rnr_naks, 0, "{on:?}");
    assert!(off.rnr_naks > 50, "{off:?}");
    assert_eq!(on.packets_from_a, 800, "{on:?}");
    assert!(off.packets_from_a > 10 * on.packets_from_a, "{off:?}");
}
