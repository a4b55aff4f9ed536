// SPDX-License-Identifier: GPL-2.0

//! Received packets waiting for their QP's task: queued in its backlog, or handed to the
//! run a loopback hand-over claimed for them (its inbox).

use crate::glue::net::RxPacket;
use crate::transport::ring::Ring;
use kernel::prelude::*;

/// Received packets a QP holds before its task takes them: the queue grows by chunks of
/// `RX_CHUNK` up to `RX_CHUNKS` of them (less one, see [`Backlog::push`]); beyond that, or
/// when no memory is left in softirq, packets are dropped and counted, as a congested link
/// would drop them. The wire delivers a whole message's packets back to back (a 1 MiB UC
/// message at MTU 1024 is 1024 packets), faster than the task runs under load, and UC and UD
/// have no retry to recover a drop, so the queue must hold a burst of that size.
const RX_CHUNK: usize = 32;
const RX_CHUNKS: usize = 256;
const RX_SLOTS: usize = RX_CHUNK * RX_CHUNKS;

/// Packets waiting for the task, in arrival order: a ring of `RX_SLOTS` positions whose
/// chunks are allocated as packets arrive and freed once the task has taken them all.
pub(crate) struct Backlog {
    /// `RX_CHUNKS` slots; empty once the QP is destroyed (see [`Backlog::close`]).
    chunks: KVec<Option<KVec<Option<RxPacket>>>>,
    /// A chunk kept from the last one freed, so a steady stream does not allocate.
    spare: Option<KVec<Option<RxPacket>>>,
    head: usize,
    len: usize,
}

impl Backlog {
    /// An empty backlog, with room for its chunk table and one chunk.
    pub(crate) fn new() -> Result<Self> {
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

    /// The number of packets waiting.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Queues a packet (softirq); gives it back if the backlog is full or closed. At most
    /// `RX_SLOTS - RX_CHUNK` packets wait, so the chunk `pop` leaves behind never holds a
    /// waiting packet and can be freed.
    pub(crate) fn push(&mut self, pkt: RxPacket) -> core::result::Result<(), RxPacket> {
        if self.len >= RX_SLOTS - RX_CHUNK {
            return Err(pkt);
        }
        let at = (self.head + self.len) % RX_SLOTS;
        let Some(slot) = self.chunks.get_mut(at / RX_CHUNK) else {
            return Err(pkt);
        };
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

    /// Takes the oldest packet.
    pub(crate) fn pop(&mut self) -> Option<RxPacket> {
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

    /// Empties the backlog for good (the QP is destroyed): every later push fails. Returns
    /// what it held, for the caller to drop outside its lock.
    pub(crate) fn close(&mut self) -> Self {
        core::mem::replace(
            self,
            Self {
                chunks: KVec::new(),
                spare: None,
                head: 0,
                len: 0,
            },
        )
    }
}

/// Packets an inbox holds; more go to the backlog, after them.
const INBOX_SLOTS: usize = 8;

/// Packets a loopback hand-over gave a QP's run directly, having claimed it
/// (`Task::claim`): the run takes them before its backlog, with no lock, since only the
/// holder of the run (the claim's, then the run itself) reaches them. A hand-over claims
/// the run only when the backlog is empty, so the sender's earlier packets have all been
/// taken in, and its later ones join the inbox or, once the claim is handed on, the
/// backlog behind it: each sender's packets are taken in in the order it sent them (an RC
/// responder treats a packet out of order as a lost one, and UC and UD lose the message),
/// while packets of different senders had no order to keep.
pub(crate) type Inbox = Ring<RxPacket, INBOX_SLOTS>;
