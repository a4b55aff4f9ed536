// SPDX-License-Identifier: GPL-2.0

//! Address handles. rrxe keeps every UD address in the kernel and returns
//! its number (`ah_num`), which each UD send WQE names; it never needs the
//! legacy address vector copied into the WQE.

use crate::abi::{self, ibv_ah, ibv_ah_attr, ibv_pd};
use crate::object::{self, Creating};
use crate::sys;
use core::ffi::c_int;
use core::ptr;

/// An address handle; `ibv_ah` first, as libibverbs hands it back.
#[repr(C)]
pub(crate) struct Ah {
    ah: ibv_ah,
    /// The kernel's number for this address (`rxe_create_ah_resp.ah_num`).
    pub(crate) ah_num: u32,
}

#[repr(C)]
#[derive(Default)]
struct CreateAhResp {
    ibv_resp: abi::ib_uverbs_create_ah_resp,
    drv: abi::rxe_create_ah_resp,
}

pub(crate) unsafe extern "C" fn create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    let ah = Creating::new(Ah {
        ah: ibv_ah::default(),
        ah_num: 0,
    });
    // SAFETY: the AH is ours until handed out.
    let ibah = unsafe { ptr::addr_of_mut!((*ah.as_ptr()).ah) };
    let mut resp = CreateAhResp::default();
    // SAFETY: ibah is fresh and the call fills it in; resp is the core
    // response followed by rxe's, valid for its size.
    let ret =
        unsafe { abi::ibv_cmd_create_ah(pd, ibah, attr, &mut resp.ibv_resp, size_of_val(&resp)) };
    if ret != 0 {
        return object::fail(ret);
    }
    if resp.drv.ah_num == 0 {
        // Only a kernel that predates ah_num answers 0, and rrxe is not one.
        // SAFETY: the handle was created above and is not handed out.
        unsafe { abi::ibv_cmd_destroy_ah(ibah) };
        return object::fail(sys::EPROTO);
    }
    // SAFETY: the AH is ours until handed out.
    unsafe { (*ah.as_ptr()).ah_num = resp.drv.ah_num };
    ah.hand_out().cast::<ibv_ah>()
}

pub(crate) unsafe extern "C" fn destroy_ah(ah: *mut ibv_ah) -> c_int {
    // SAFETY: ah is one create_ah handed out, the first member of its Ah.
    unsafe { object::free_if_destroyed(ah.cast::<Ah>(), abi::ibv_cmd_destroy_ah(ah)) }
}
