// SPDX-License-Identifier: GPL-2.0

//! QP incarnations: an identity of one QP for its whole life.

use core::sync::atomic::{AtomicU64, Ordering};

/// Identifies one QP for its whole life, unlike its number, which a later QP may reuse
/// once it is destroyed: a type 2 memory window remembers the QP it was bound through
/// (IBA 10.6.7.2.2), and no successor holding the same number may use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpIncarnation(u64);

impl QpIncarnation {
    /// An incarnation no QP has.
    pub(crate) const NONE: Self = Self(0);

    /// A new incarnation, never handed out before.
    pub(crate) fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // 64 bits: creating a QP per nanosecond would take centuries to wrap.
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}
