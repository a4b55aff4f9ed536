// SPDX-License-Identifier: GPL-2.0

//! Protection domains and what lives in them: memory regions and windows.
//! None of them carries driver data; the kernel does the work.

use crate::abi::{self, ibv_mr, ibv_mw, ibv_pd, verbs_mr};
use crate::object::{self, Creating};
use core::ffi::{c_int, c_void};

pub(crate) unsafe extern "C" fn alloc_pd(context: *mut abi::ibv_context) -> *mut ibv_pd {
    let pd = Creating::new(ibv_pd::default());
    let mut cmd = abi::ibv_alloc_pd::default();
    let mut resp = abi::ib_uverbs_alloc_pd_resp::default();
    // SAFETY: the PD is fresh and the call fills it in; cmd and resp are
    // valid for their sizes.
    let ret = unsafe {
        abi::ibv_cmd_alloc_pd(
            context,
            pd.as_ptr(),
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return object::fail(ret);
    }
    pd.hand_out()
}

pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: pd is one alloc_pd handed out.
    unsafe { object::free_if_destroyed(pd, abi::ibv_cmd_dealloc_pd(pd)) }
}

pub(crate) unsafe extern "C" fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut ibv_mr {
    let vmr = Creating::new(verbs_mr::default());
    let mut cmd = abi::ibv_reg_mr::default();
    let mut resp = abi::ib_uverbs_reg_mr_resp::default();
    // SAFETY: the MR is fresh and the call fills it in; the range is the
    // application's, checked and pinned by the kernel.
    let ret = unsafe {
        abi::ibv_cmd_reg_mr(
            pd,
            addr,
            length,
            hca_va,
            access,
            vmr.as_ptr(),
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return object::fail(ret);
    }
    // ibv_mr is the first member: libibverbs hands back the verbs_mr.
    vmr.hand_out().cast::<ibv_mr>()
}

pub(crate) unsafe extern "C" fn dereg_mr(vmr: *mut verbs_mr) -> c_int {
    // SAFETY: vmr is one reg_mr handed out.
    unsafe { object::free_if_destroyed(vmr, abi::ibv_cmd_dereg_mr(vmr)) }
}

pub(crate) unsafe extern "C" fn alloc_mw(
    pd: *mut ibv_pd,
    type_: abi::ibv_mw_type::Type,
) -> *mut ibv_mw {
    let mw = Creating::new(ibv_mw::default());
    let mut cmd = abi::ibv_alloc_mw::default();
    let mut resp = abi::ib_uverbs_alloc_mw_resp::default();
    // SAFETY: as in alloc_pd.
    let ret = unsafe {
        abi::ibv_cmd_alloc_mw(
            pd,
            type_,
            mw.as_ptr(),
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return object::fail(ret);
    }
    mw.hand_out()
}

pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: mw is one alloc_mw handed out.
    unsafe { object::free_if_destroyed(mw, abi::ibv_cmd_dealloc_mw(mw)) }
}
