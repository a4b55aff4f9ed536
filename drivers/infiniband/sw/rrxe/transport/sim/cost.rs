// SPDX-License-Identifier: GPL-2.0

//! A stream of small RDMA Writes, the shape of perftest's message-rate
//! figure, run to completion and checked. It is also what
//! `make profile-engine` runs under callgrind with many more messages
//! (`RRXE_COST_MESSAGES`) to count the engine's instructions per packet
//! on the host, where the count does not depend on a guest's scheduling.

#![cfg(test)]

use super::super::qp::completion::WcStatus;
use super::super::qp::wqe::{RemoteAddr, SendFlags, SendOpcode};
use super::*;

const RKEY: u32 = 0x99;
const VA: u64 = 0x40_0000;
/// Message size of perftest's rate figure.
const LEN: u32 = 64;
/// Send queue depth kept posted, as `ib_write_bw -t 128`.
const DEPTH: usize = 128;

#[test]
fn a_stream_of_small_writes_lands_in_order() {
    let messages: usize = std::env::var("RRXE_COST_MESSAGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    let mut pair = Pair::connect(Setup::rc(), seed_or(11), Link::PERFECT);
    pair.nodes[B].add_region(RKEY, VA, vec![0; LEN as usize]);
    let mut posted = 0;
    let mut completed = 0;
    let mut last = Vec::new();
    while completed < messages {
        while posted < messages && posted - completed < DEPTH {
            // Each message overwrites the same bytes with its own number,
            // so the region ends holding the last one.
            last = vec![posted as u8; LEN as usize];
            let wqe = SendWqe {
                wr_id: posted as u64,
                opcode: SendOpcode::RdmaWrite,
                flags: SendFlags::SIGNALED,
                length: LEN,
                remote: RemoteAddr { va: VA, rkey: RKEY },
                ..SendWqe::default()
            };
            pair.nodes[A].post_send(wqe, last.clone());
            posted += 1;
        }
        assert!(
            pair.run_until(1_000_000, |p| !p.nodes[A].completions.is_empty()),
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
