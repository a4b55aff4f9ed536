// SPDX-License-Identifier: GPL-2.0

//! Address handles. rrxe keeps every UD address in the kernel and returns
//! its number (`ah_num`), which each UD send WQE names; it never needs the
//! legacy address vector copied into the WQE.

use crate::abi::{self, ibv_ah, ibv_ah_attr, ibv_pd};
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
    let ah = Box::into_raw(Box::new(Ah {
        ah: ibv_ah::default(),
        ah_num: 0,
    }));
    let mut resp = CreateAhResp::default();
    // SAFETY: ah is a fresh allocation whose ibv_ah the call fills in; resp
    // is the core response followed by rxe's, valid for its size.
    let ret = unsafe {
        abi::ibv_cmd_create_ah(
            pd,
            ptr::addr_of_mut!((*ah).ah),
            attr,
            &mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: ah came from Box::into_raw above and was not handed out.
        drop(unsafe { Box::from_raw(ah) });
        sys::set_errno(ret);
        return ptr::null_mut();
    }
    if resp.drv.ah_num == 0 {
        // Only a kernel that predates ah_num answers 0, and rrxe is not one.
        // SAFETY: the handle was created above and is not handed out.
        unsafe {
            abi::ibv_cmd_destroy_ah(ptr::addr_of_mut!((*ah).ah));
            drop(Box::from_raw(ah));
        }
        sys::set_errno(sys::EPROTO);
        return ptr::null_mut();
    }
    // SAFETY: ah is valid and not yet shared.
    unsafe {
        (*ah).ah_num = resp.drv.ah_num;
        ptr::addr_of_mut!((*ah).ah)
    }
}

pub(crate) unsafe extern "C" fn destroy_ah(ah: *mut ibv_ah) -> c_int {
    // SAFETY: ah is one create_ah made.
    let ret = unsafe { abi::ibv_cmd_destroy_ah(ah) };
    if ret == 0 {
        // SAFETY: ibv_ah is the first member of the leaked Box<Ah>.
        drop(unsafe { Box::from_raw(ah.cast::<Ah>()) });
    }
    ret
}
