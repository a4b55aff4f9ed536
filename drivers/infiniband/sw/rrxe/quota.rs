// SPDX-License-Identifier: GPL-2.0

//! Object limits: a device holds at most the number of PDs, CQs, QPs, SRQs, MRs, MWs and AHs
//! it reports in Query HCA (IBA 11.2.1.2), counting kernel-owned objects (the GSI QP, the
//! MAD layer's PD and CQ, XRC target QPs) with the user's. The module parameters `max_pd`
//! ... `max_ah` lower the limits of the devices created after they are set.
//!
//! Every object holds a [`Charge`] from creation to destruction: the count goes down when
//! the core destroys the object, not when the last in-flight reference to it goes, so a
//! consumer that destroys one object may create another at once.

use crate::glue::module_param::Limit;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// The limits of one device and how much of each is in use.
pub(crate) struct Quotas {
    limits: [u32; Limit::ALL.len()],
    used: [AtomicU32; Limit::ALL.len()],
}

impl Quotas {
    /// The limits the module parameters set now.
    pub(crate) fn from_params() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                limits: Limit::ALL.map(Limit::get),
                used: [const { AtomicU32::new(0) }; Limit::ALL.len()],
            },
            GFP_KERNEL,
        )?)
    }

    /// The most objects of `kind` the device holds.
    pub(crate) fn limit(&self, kind: Limit) -> u32 {
        self.limits[kind.index()]
    }

    /// Counts a new object of `kind`, or fails with `ENOMEM` (IBA 11.2: "insufficient
    /// resources") when the device holds its limit. Any context.
    pub(crate) fn charge(self: &Arc<Self>, kind: Limit) -> Result<Charge> {
        let limit = self.limit(kind);
        self.used[kind.index()]
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .map_err(|_| ENOMEM)?;
        Ok(Charge {
            quotas: self.clone(),
            kind,
        })
    }
}

/// One object's place in its device's count, given back when dropped.
pub(crate) struct Charge {
    quotas: Arc<Quotas>,
    kind: Limit,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.quotas.used[self.kind.index()].fetch_sub(1, Ordering::AcqRel);
    }
}
