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
