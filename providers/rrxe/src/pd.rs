// SPDX-License-Identifier: GPL-2.0

//! Protection domains and what lives in them: memory regions and windows.
//! None of them carries driver data; the kernel does the work.

use crate::abi::{self, ibv_mr, ibv_mw, ibv_pd, verbs_mr};
use crate::sys;
use core::ffi::{c_int, c_void};
use core::ptr;

pub(crate) unsafe extern "C" fn alloc_pd(context: *mut abi::ibv_context) -> *mut ibv_pd {
    let pd = Box::into_raw(Box::<ibv_pd>::default());
    let mut cmd = abi::ibv_alloc_pd::default();
    let mut resp = abi::ib_uverbs_alloc_pd_resp::default();
    // SAFETY: pd is a fresh allocation the call fills in; cmd and resp are
    // valid for their sizes.
    let ret = unsafe {
        abi::ibv_cmd_alloc_pd(
            context,
            pd,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: pd came from Box::into_raw above and was not handed out.
        drop(unsafe { Box::from_raw(pd) });
        sys::set_errno(ret);
        return ptr::null_mut();
    }
    pd
}

pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: pd is one alloc_pd returned.
    let ret = unsafe { abi::ibv_cmd_dealloc_pd(pd) };
    if ret == 0 {
        // SAFETY: the kernel object is gone; the application may not use pd.
        drop(unsafe { Box::from_raw(pd) });
    }
    ret
}

pub(crate) unsafe extern "C" fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut ibv_mr {
    let vmr = Box::into_raw(Box::<verbs_mr>::default());
    let mut cmd = abi::ibv_reg_mr::default();
    let mut resp = abi::ib_uverbs_reg_mr_resp::default();
    // SAFETY: vmr is a fresh allocation the call fills in; the range is the
    // application's, checked and pinned by the kernel.
    let ret = unsafe {
        abi::ibv_cmd_reg_mr(
            pd,
            addr,
            length,
            hca_va,
            access,
            vmr,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: vmr came from Box::into_raw above and was not handed out.
        drop(unsafe { Box::from_raw(vmr) });
        sys::set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: vmr is valid; ibv_mr is its first member.
    unsafe { ptr::addr_of_mut!((*vmr).ibv_mr) }
}

pub(crate) unsafe extern "C" fn dereg_mr(vmr: *mut verbs_mr) -> c_int {
    // SAFETY: vmr is one reg_mr made.
    let ret = unsafe { abi::ibv_cmd_dereg_mr(vmr) };
    if ret == 0 {
        // SAFETY: deregistered; the application may not use it any more.
        drop(unsafe { Box::from_raw(vmr) });
    }
    ret
}

pub(crate) unsafe extern "C" fn alloc_mw(
    pd: *mut ibv_pd,
    type_: abi::ibv_mw_type::Type,
) -> *mut ibv_mw {
    let mw = Box::into_raw(Box::<ibv_mw>::default());
    let mut cmd = abi::ibv_alloc_mw::default();
    let mut resp = abi::ib_uverbs_alloc_mw_resp::default();
    // SAFETY: as in alloc_pd.
    let ret = unsafe {
        abi::ibv_cmd_alloc_mw(
            pd,
            type_,
            mw,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: mw came from Box::into_raw above and was not handed out.
        drop(unsafe { Box::from_raw(mw) });
        sys::set_errno(ret);
        return ptr::null_mut();
    }
    mw
}

pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: mw is one alloc_mw made.
    let ret = unsafe { abi::ibv_cmd_dealloc_mw(mw) };
    if ret == 0 {
        // SAFETY: the window is gone; the application may not use mw.
        drop(unsafe { Box::from_raw(mw) });
    }
    ret
}
