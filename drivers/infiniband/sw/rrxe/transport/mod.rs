// SPDX-License-Identifier: GPL-2.0

//! Sans-IO RoCEv2 transport core.
//!
//! Pure functions and plain data describing the InfiniBand transport layer
//! (IBA Volume 1, chapter 9) as carried over UDP by RoCEv2 (IBA Annex A17).
//! Nothing here touches sockets, memory regions, timers or locks: callers
//! feed bytes and state in and get decisions and bytes out. The same sources
//! are built into the kernel module and, through `lib.rs`, on the host for
//! `cargo test`, which is why sibling modules are only ever named through
//! `super::` and why neither `std` nor `alloc` is used outside tests.
//!
//! One module is not about the wire: [`wait_gauge`] weighs the host's scheduling (whether
//! spinning for a QP's run costs less than waking a worker), plain arithmetic on samples
//! the driver takes, here so that `cargo test` checks it too.

pub mod aeth;
pub mod headers;
pub mod icrc;
pub mod opcode;
pub mod packet;
pub mod pma;
pub mod psn;
pub mod qp;
pub mod region;
pub mod ring;
#[cfg(test)]
mod sim;
pub mod timer;
pub mod wait_gauge;
