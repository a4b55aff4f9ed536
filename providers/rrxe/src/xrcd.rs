// SPDX-License-Identifier: GPL-2.0

//! XRC domains (IBA Annex A14.2.1): the scope in which XRC target QPs and
//! XRC SRQs find each other. Opening one on a file shares it with every
//! process that opens the same file; the kernel keeps that table.

use crate::abi::{self, ibv_xrcd, verbs_xrcd};
use crate::object::{self, Creating};
use core::ffi::c_int;
use core::mem::size_of;

pub(crate) unsafe extern "C" fn open_xrcd(
    context: *mut abi::ibv_context,
    attr: *mut abi::ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    let xrcd = Creating::new(verbs_xrcd::default());
    let mut cmd = abi::ibv_open_xrcd::default();
    let mut resp = abi::ib_uverbs_open_xrcd_resp::default();
    // SAFETY: the domain is fresh and the call fills it in (handle and
    // context); attr is the application's; cmd and resp are valid.
    let ret = unsafe {
        abi::ibv_cmd_open_xrcd(
            context,
            xrcd.as_ptr(),
            size_of::<verbs_xrcd>() as c_int,
            attr,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return object::fail(ret);
    }
    // ibv_xrcd is the first member: libibverbs hands back the verbs_xrcd.
    xrcd.hand_out().cast::<ibv_xrcd>()
}

pub(crate) unsafe extern "C" fn close_xrcd(ibxrcd: *mut ibv_xrcd) -> c_int {
    let xrcd = ibxrcd.cast::<verbs_xrcd>();
    // SAFETY: ibxrcd is one open_xrcd handed out, the first member of its
    // verbs_xrcd.
    unsafe { object::free_if_destroyed(xrcd, abi::ibv_cmd_close_xrcd(xrcd)) }
}
