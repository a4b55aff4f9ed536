// SPDX-License-Identifier: GPL-2.0

//! Kernel glue: safe wrappers over the C APIs rrxe calls.
//!
//! This is the only layer with `unsafe`. Every wrapper states the C contract it relies on in
//! a `// SAFETY:` comment; the driver above it is ordinary safe Rust.

pub(crate) mod bindings;
pub(crate) mod error;
pub(crate) mod global;
pub(crate) mod module_param;
pub(crate) mod net;
pub(crate) mod netdev;
pub(crate) mod percpu;
pub(crate) mod queue;
pub(crate) mod rcu;
pub(crate) mod rdma;
pub(crate) mod stats;
pub(crate) mod sync;
pub(crate) mod table;
pub(crate) mod task;
pub(crate) mod umem;
