// SPDX-License-Identifier: GPL-2.0

//! Streams of RDMA Writes in perftest's two shapes, run to completion and
//! checked: 64-byte messages (its message-rate figure) and 64 KiB ones at
//! path MTU 1024 (its bandwidth figure); and 2-byte RDMA Reads one at a
//! time, as in its Read latency figure. They are also what
//! `make profile-engine` runs under callgrind with more messages
//! (`RRXE_COST_MESSAGES`) to count the engine's instructions per message
//! and per packet on the host, where the count does not depend on a
//! guest's scheduling.

#![cfg(test)]

use super::super::qp::completion::WcStatus;
use super::super::qp::wqe::{RemoteAddr, SendFlags, SendOpcode};
use super::*;

const RKEY: u32 = 0x99;
const VA: u64 = 0x40_0000;
/// Send queue depth kept posted, as `ib_write_bw -t 128`.
const DEPTH: usize = 128;

/// The messages a shape runs: `RRXE_COST_MESSAGES` (the profile's count),
/// or `default` (the test's).
fn messages_or(default: usize) -> usize {
    std::env::var("RRXE_COST_MESSAGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Counts only what the kernel's task runs: no extra poll after each drain
/// (`Node::check_has_completions`; every other scenario makes it).
fn uncheck(pair: &mut Pair) {
    for node in &mut pair.nodes {
        node.check_has_completions = false;
    }
}

/// Posts `default` messages of `len` bytes (or `RRXE_COST_MESSAGES`),
/// keeping [`DEPTH`] posted, and checks each completes in order and the
/// last one's bytes land.
fn stream_of_writes(len: u32, mtu: u8, default: usize) {
    let messages = messages_or(default);
    let setup = Setup { mtu, ..Setup::rc() };
    let mut pair = Pair::connect(setup, seed_or(11), Link::PERFECT);
    uncheck(&mut pair);
    pair.nodes[B].add_region(RKEY, VA, vec![0; len as usize]);
    let mut posted = 0;
    let mut completed = 0;
    let mut last = Vec::new();
    while completed < messages {
        while posted < messages && posted - completed < DEPTH {
            // Each message overwrites the same bytes with its own number,
            // so the region ends holding the last one.
            last = vec![posted as u8; len as usize];
            let wqe = SendWqe {
                wr_id: posted as u64,
                opcode: SendOpcode::RdmaWrite,
                flags: SendFlags::SIGNALED,
                length: len,
                remote: RemoteAddr { va: VA, rkey: RKEY },
                ..SendWqe::default()
            };
            pair.nodes[A].post_send(wqe, last.clone());
            posted += 1;
        }
        assert!(
            pair.run_until(10_000_000, |p| !p.nodes[A].completions.is_empty()),
            "the stream stalled after {completed} messages"
        );
        // Completions are counted and dropped, so that a long stream
        // profiles the engine rather than a growing vector.
        for c in pair.nodes[A].completions.drain(..) {
            assert_eq!((c.status, c.wr_id), (WcStatus::Success, completed as u64));
            completed += 1;
        }
    }
    assert_eq!(pair.nodes[B].mem.regions[&RKEY].data, last);
    assert_eq!(pair.retransmitted, [0, 0]);
}

#[test]
fn a_stream_of_small_writes_lands_in_order() {
    stream_of_writes(64, 1, 1_000);
}

#[test]
fn a_stream_of_64k_writes_lands_in_order() {
    // Path MTU 1024 (code 3): 64 packets a message.
    stream_of_writes(64 * 1024, 3, 20);
}

/// perftest's `ib_read_lat -s 2` shape: one 2-byte RDMA Read at a time,
/// each run to its completion (the request, the response, the completion)
/// before the next is posted; `default` Reads or `RRXE_COST_MESSAGES`.
fn ping_pong_of_reads(default: usize) {
    let reads = messages_or(default);
    let mut pair = Pair::connect(Setup::rc(), seed_or(12), Link::PERFECT);
    uncheck(&mut pair);
    for i in 0..reads {
        // The responder's bytes change every time, so a Read that returned
        // an earlier one's would show.
        let bytes = (i as u16).to_be_bytes().to_vec();
        pair.nodes[B].add_region(RKEY, VA, bytes.clone());
        let wqe = SendWqe {
            wr_id: i as u64,
            opcode: SendOpcode::RdmaRead,
            flags: SendFlags::SIGNALED,
            length: 2,
            remote: RemoteAddr { va: VA, rkey: RKEY },
            ..SendWqe::default()
        };
        let index = pair.nodes[A].post_send(wqe, vec![0; 2]);
        assert!(
            pair.run_until(10_000, |p| !p.nodes[A].completions.is_empty()),
            "Read {i} did not complete"
        );
        let c = pair.nodes[A].completions.remove(0);
        assert_eq!((c.status, c.wr_id), (WcStatus::Success, i as u64));
        assert!(pair.nodes[A].completions.is_empty());
        assert_eq!(pair.nodes[A].mem.send_bufs.remove(&index), Some(bytes));
    }
    assert_eq!(pair.retransmitted, [0, 0]);
}

#[test]
fn a_ping_pong_of_small_reads_returns_each_ones_bytes() {
    ping_pong_of_reads(1_000);
}
