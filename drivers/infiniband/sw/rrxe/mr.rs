// SPDX-License-Identifier: GPL-2.0

//! Memory regions: keys, and the pinned user memory behind them.

use crate::device::RrxeDevice;
use crate::glue::umem::Umem;
use crate::params;
use core::sync::atomic::Ordering;
use kernel::prelude::*;

/// State of one rrxe MR.
pub(crate) struct RrxeMr {
    /// Index of the key in the device's MR table.
    index: u32,
    /// Pinned for as long as the MR exists; the data path reads it.
    _umem: Option<Umem>,
}

/// An L_Key/R_Key: the table index in the upper 24 bits and a variant in the low 8 bits
/// (the "key" portion IBA 10.6.3.5 leaves to the CA), so that a key of a freed MR does not
/// match a later MR that reuses the index.
fn key(index: u32, variant: u32) -> u32 {
    index << 8 | (variant & 0xff)
}

fn register(dev: &RrxeDevice, umem: Option<Umem>) -> Result<(RrxeMr, u32)> {
    let index = dev.mr_keys().reserve(1, params::MAX_MR)?;
    let variant = dev.key_variant.fetch_add(1, Ordering::Relaxed);
    Ok((RrxeMr { index, _umem: umem }, key(index, variant)))
}

/// Registers pinned user memory.
pub(crate) fn reg_user(dev: &RrxeDevice, umem: Umem) -> Result<(RrxeMr, u32)> {
    register(dev, Some(umem))
}

/// Creates the all-memory MR of a kernel PD.
pub(crate) fn dma(dev: &RrxeDevice) -> Result<(RrxeMr, u32)> {
    register(dev, None)
}

/// Destroys an MR: its key becomes invalid.
pub(crate) fn dereg(dev: &RrxeDevice, mr: RrxeMr) {
    dev.mr_keys().release(mr.index);
}
