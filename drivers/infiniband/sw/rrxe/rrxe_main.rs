// SPDX-License-Identifier: GPL-2.0

//! rrxe: a soft-RoCE (RoCEv2) RDMA provider.
//!
//! `rdma link add NAME type rrxe netdev NETDEV` creates an RDMA device over an Ethernet
//! netdev; stock rdma-core binds it through the rdma_rxe uverbs ABI.
//!
//! Layers, calls going one way: `transport` (the IBA transport as a sans-IO state machine),
//! `glue` (safe wrappers over the kernel's C APIs, the only `unsafe`), and the driver on
//! top of both, a one-way chain from its leaves (`params`, `counters`, `incarnation`,
//! `abi`) through the object tables (`ah`, `mr`, `mw`, `srq`, `cq`), what QPs share
//! (`shared`), work queues (`wq`), memory (`memory`), QPs (`qp`), multicast groups (`mcast`) and the device (`device`)
//! to `verbs`, which implements the driver contract.

mod abi;
mod ah;
mod counters;
mod cq;
mod device;
mod glue;
mod incarnation;
#[cfg(rrxe_layout_pad)]
mod layout_pad;
mod mcast;
mod memory;
mod mr;
mod mw;
mod params;
mod port;
mod qp;
mod quota;
mod shared;
mod srq;
/// The IBA transport as a sans-IO state machine; also built and tested on the host.
pub mod transport;
mod verbs;
mod wq;

use kernel::prelude::*;

module! {
    type: RrxeModule,
    name: "rrxe",
    author: "The rrxe developers",
    description: "Soft-RoCE (RoCEv2) RDMA provider in Rust",
    license: "GPL",
    alias: ["rdma-link-rrxe"],
}

/// The module: the workqueue QP tasks run on, and the driver's registration. Fields drop
/// in order: every device is gone before the workqueue, which then drains what still runs.
// Fields drop in declaration order: the devices go before the namespace watch that closes
// sockets they might have left.
struct RrxeModule {
    _registration: glue::rdma::link::Registration<verbs::Rrxe>,
    _tasks: glue::task::TaskQueue,
    _netns: glue::net::NetnsWatch,
    /// Last: the QPs the registration's teardown destroyed leave their tables after a
    /// grace period, in RCU callbacks that run this module's code.
    _rcu: glue::rcu::RcuBarrier,
}

impl kernel::Module for RrxeModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        glue::net::check_crc32()?;
        let netns = glue::net::NetnsWatch::register()?;
        let tasks = glue::task::TaskQueue::new()?;
        let registration = glue::rdma::link::Registration::new(module)?;
        pr_info!("loaded\n");
        Ok(Self {
            _registration: registration,
            _tasks: tasks,
            _netns: netns,
            _rcu: glue::rcu::RcuBarrier::new(),
        })
    }
}
