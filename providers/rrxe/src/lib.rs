// SPDX-License-Identifier: GPL-2.0

//! librrxe: the libibverbs provider of rrxe devices.
//!
//! rrxe speaks rdma_rxe's user-verbs ABI (Documentation/rrxe/uverbs-abi.rst),
//! so rdma-core's stock `rxe` provider drives it. This provider drives the
//! same rings and commands for rrxe devices only, and is where rrxe's
//! extensions to that ABI reach applications.
//!
//! Layers, calls going down:
//! - `device`: registration with libibverbs, device matching, contexts and
//!   the table of verbs;
//! - `pd`, `cq`, `qp`, `srq`, `ah`, `xrcd`: one object each, the verbs on it;
//! - `wr`: the extended send API's batches; `wqe`: building work-queue
//!   elements from work requests;
//! - `object`, `ring`, `lock`, `sys`, `abi`: object lifetimes, the mapped rings,
//!   the spin lock of the extended APIs, system calls and the generated
//!   C declarations. `unsafe` lives at the C boundary (entry points taking
//!   libibverbs' pointers, the rings, system calls), each block with its
//!   `SAFETY` argument.

mod abi;
mod ah;
mod cq;
mod device;
mod lock;
mod object;
mod pd;
mod qp;
mod ring;
mod srq;
mod sys;
mod wqe;
mod wr;
mod xrcd;
