// SPDX-License-Identifier: GPL-2.0

//! The RDMA core, by concern: the driver's contract (`driver`), the ops table and its
//! trampolines (`adapter`), device registration (`registry`), objects and the handles that
//! reach their consumers (`object`), attribute views (`attr`), work requests (`wr`), uverbs
//! udata (`udata`) and the rdma link type (`link`).

pub(crate) mod adapter;
pub(crate) mod attr;
pub(crate) mod driver;
pub(crate) mod link;
pub(crate) mod object;
pub(crate) mod registry;
pub(crate) mod udata;
pub(crate) mod wr;
