// SPDX-License-Identifier: GPL-2.0

//! Address handles (IBA 10.2.2): the destination of UD sends. rdma_rxe's ABI names an AH
//! in a UD send WQE by a number the kernel hands out (`ah_num`); rrxe resolves every send's
//! number in the device's table and never uses an address vector from the WQE itself.

use crate::glue::bindings as b;
use crate::glue::rdma::attr::AddressVector;
use crate::glue::rdma::object::PdId;
use crate::glue::rdma::udata::UData;
use crate::glue::table::IndexTable;
use crate::params;
use crate::quota::Charge;
use kernel::prelude::*;
use kernel::sync::Arc;

/// What an AH number stands for.
pub(crate) struct AhState {
    av: AddressVector,
    /// The AH's protection domain: a UD QP may only use AHs of its own PD (IBA 10.2.3).
    pd: PdId,
}

/// A device's address handles, by number.
#[pin_data]
pub(crate) struct AhTable {
    #[pin]
    ahs: IndexTable<AhState>,
}

/// State of one rrxe AH.
pub(crate) struct RrxeAh {
    num: u32,
    /// The AH's place in the device's count.
    _charge: Charge,
}

impl RrxeAh {
    /// The AH's number.
    pub(crate) fn num(&self) -> u32 {
        self.num
    }
}

impl AhTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            ahs <- IndexTable::new(),
        })
    }

    /// Creates an AH; user AHs learn their number from the response.
    pub(crate) fn create(
        &self,
        charge: Charge,
        pd: PdId,
        av: &AddressVector,
        sleepable: bool,
        udata: Option<&mut UData>,
    ) -> Result<RrxeAh> {
        if !av.roce_v2 {
            return Err(EINVAL);
        }
        // Number 0 means "address vector in the WQE" to the provider; rrxe never hands it
        // out. Kernel consumers (the CM) create AHs under spinlocks, saying so by not passing
        // RDMA_CREATE_AH_SLEEPABLE.
        let state = AhState { av: *av, pd };
        let num = if sleepable {
            self.ahs
                .insert(1, params::MAX_AH, Arc::new(state, GFP_KERNEL)?)?
        } else {
            self.ahs
                .insert_atomic(1, params::MAX_AH, Arc::new(state, GFP_ATOMIC)?)?
        };
        if let Some(udata) = udata {
            // Older providers pass no response buffer and put the address in each WQE, which
            // rrxe does not accept: a UD send then fails instead of trusting userspace.
            if udata.out_len() >= core::mem::size_of::<b::rxe_create_ah_resp>() {
                if let Err(e) = udata.respond(&b::rxe_create_ah_resp {
                    ah_num: num,
                    reserved: 0,
                }) {
                    let _ = self.ahs.remove(num);
                    return Err(e);
                }
            }
        }
        Ok(RrxeAh {
            num,
            _charge: charge,
        })
    }

    /// Destroys an AH: its number stops resolving.
    pub(crate) fn destroy(&self, ah: &RrxeAh) {
        let _ = self.ahs.remove(ah.num);
    }

    /// The address of AH `num`, if it exists in PD `pd`.
    pub(crate) fn lookup(&self, pd: PdId, num: u32) -> Option<AddressVector> {
        let state = self.ahs.get(num)?;
        (state.pd == pd).then_some(state.av)
    }
}
