// SPDX-License-Identifier: GPL-2.0

//! XRC domains (IBA Annex A14.2.1): the scope in which XRC target QPs and
//! XRC SRQs find each other. Opening one on a file shares it with every
//! process that opens the same file; the kernel keeps that table.

use crate::abi::{self, ibv_xrcd, verbs_xrcd};
use crate::sys;
use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

pub(crate) unsafe extern "C" fn open_xrcd(
    context: *mut abi::ibv_context,
    attr: *mut abi::ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    let xrcd = Box::into_raw(Box::<verbs_xrcd>::default());
    let mut cmd = abi::ibv_open_xrcd::default();
    let mut resp = abi::ib_uverbs_open_xrcd_resp::default();
    // SAFETY: xrcd is a fresh allocation the call fills in (handle and
    // context); attr is the application's; cmd and resp are valid.
    let ret = unsafe {
        abi::ibv_cmd_open_xrcd(
            context,
            xrcd,
            size_of::<verbs_xrcd>() as c_int,
            attr,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: xrcd came from Box::into_raw above and was not handed out.
        drop(unsafe { Box::from_raw(xrcd) });
        sys::set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: xrcd is valid; its ibv_xrcd is the first member.
    unsafe { ptr::addr_of_mut!((*xrcd).xrcd) }
}

pub(crate) unsafe extern "C" fn close_xrcd(ibxrcd: *mut ibv_xrcd) -> c_int {
    let xrcd = ibxrcd.cast::<verbs_xrcd>();
    // SAFETY: ibxrcd is one open_xrcd made, the first member of a verbs_xrcd.
    let ret = unsafe { abi::ibv_cmd_close_xrcd(xrcd) };
    if ret == 0 {
        // SAFETY: this process's handle is closed; the application may not
        // use it any more.
        drop(unsafe { Box::from_raw(xrcd) });
    }
    ret
}
