// SPDX-License-Identifier: GPL-2.0

//! Error codes the kernel crate of 6.12 does not name.

use super::bindings;
use kernel::prelude::*;

/// `EOPNOTSUPP`: the operation is valid but not offered.
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-bindings::RRXE_EOPNOTSUPP)
}
