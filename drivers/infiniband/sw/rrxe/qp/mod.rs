// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the verbs object around the transport engine (`object`), the task that runs
//! the engine (`task`), the packets waiting for it (`backlog`: queued, or handed to a run
//! claimed for them) and what it owes the QP's consumers once it has let go of the QP
//! (`outbox`), and the receive side of an XRC target (`xrc`).

pub(crate) mod backlog;
pub(crate) mod object;
pub(crate) mod outbox;
pub(crate) mod task;
pub(crate) mod xrc;
