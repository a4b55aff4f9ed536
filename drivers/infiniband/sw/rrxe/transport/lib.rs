// SPDX-License-Identifier: GPL-2.0

//! Host build of the rrxe sans-IO RoCEv2 transport core, so that `cargo test`
//! can exercise exactly the sources the kernel module compiles.
#![no_std]

#[cfg(test)]
extern crate std;

#[path = "mod.rs"]
mod transport;

pub use transport::*;
