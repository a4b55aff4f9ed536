// SPDX-License-Identifier: GPL-2.0

//! The module's parameters (`/sys/module/rrxe/parameters/`). The 6.12 `module!` macro
//! declares none, so the C shim does and the glue reads them.

use super::bindings;

/// `credits`: whether QPs created from now on report end-to-end credits (IBA 9.7.7.2).
/// Off, they answer like rdma_rxe: "no credit information" and no unsolicited ACKs.
pub(crate) fn credits() -> bool {
    // SAFETY: reads a module-lifetime bool (with READ_ONCE); callable in any context.
    unsafe { bindings::rrxe_param_credits() }
}

/// `run_times`: whether QP task runs time themselves and their parts (the `qp_*_ns`
/// counters), at the cost of clock readings the transport does not need.
pub(crate) fn run_times() -> bool {
    // SAFETY: a module-lifetime bool, which sysfs writes whole; read once (as READ_ONCE
    // would), in any context. Read in place rather than through a call: every task run
    // asks.
    unsafe { core::ptr::addr_of!(bindings::rrxe_run_times).read_volatile() }
}

/// `answer_waits`: when an answer's doorbell and its QP's run spin for each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AnswerWaits {
    /// Never: each leaves the work to a worker, as before the waits existed.
    Never,
    /// Always, whatever the spins cost.
    Always,
    /// While the device's spins cost less than its worker wake-ups (the default).
    Measured,
}

/// `answer_waits` (0, 1, or anything else for the default, 2).
pub(crate) fn answer_waits() -> AnswerWaits {
    // SAFETY: a module-lifetime int, which sysfs writes whole; read once (as READ_ONCE
    // would), in any context.
    match unsafe { core::ptr::addr_of!(bindings::rrxe_answer_waits).read_volatile() } {
        0 => AnswerWaits::Never,
        1 => AnswerWaits::Always,
        _ => AnswerWaits::Measured,
    }
}

/// An object kind whose count per device a module parameter bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    /// `max_pd`.
    Pd,
    /// `max_cq`.
    Cq,
    /// `max_qp`.
    Qp,
    /// `max_srq`.
    Srq,
    /// `max_mr`.
    Mr,
    /// `max_mw`.
    Mw,
    /// `max_ah`.
    Ah,
}

impl Limit {
    /// Every kind, in the order of [`Limit::index`].
    pub(crate) const ALL: [Limit; 7] = [
        Limit::Pd,
        Limit::Cq,
        Limit::Qp,
        Limit::Srq,
        Limit::Mr,
        Limit::Mw,
        Limit::Ah,
    ];

    /// A dense index, for per-kind arrays.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// The parameter's default, which is also the most a device can hold of the kind.
    pub(crate) const fn capacity(self) -> u32 {
        match self {
            Limit::Pd => bindings::RRXE_MAX_PD,
            Limit::Cq => bindings::RRXE_MAX_CQ,
            Limit::Qp => bindings::RRXE_MAX_QP,
            Limit::Srq => bindings::RRXE_MAX_SRQ,
            Limit::Mr => bindings::RRXE_MAX_MR,
            Limit::Mw => bindings::RRXE_MAX_MW,
            Limit::Ah => bindings::RRXE_MAX_AH,
        }
    }

    /// The parameter's value now, at most [`Limit::capacity`].
    pub(crate) fn get(self) -> u32 {
        let which = match self {
            Limit::Pd => bindings::rrxe_limit_RRXE_LIMIT_PD,
            Limit::Cq => bindings::rrxe_limit_RRXE_LIMIT_CQ,
            Limit::Qp => bindings::rrxe_limit_RRXE_LIMIT_QP,
            Limit::Srq => bindings::rrxe_limit_RRXE_LIMIT_SRQ,
            Limit::Mr => bindings::rrxe_limit_RRXE_LIMIT_MR,
            Limit::Mw => bindings::rrxe_limit_RRXE_LIMIT_MW,
            Limit::Ah => bindings::rrxe_limit_RRXE_LIMIT_AH,
        };
        // SAFETY: reads a module-lifetime uint (with READ_ONCE); callable in any context.
        let value = unsafe { bindings::rrxe_param_limit(which) };
        value.min(self.capacity())
    }
}
