// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a receive ring several QPs take WQEs from.

use crate::abi::{self, ibv_recv_wr, ibv_srq, verbs_srq};
use crate::object::{self, Creating};
use crate::qp::RecvQueue;
use crate::ring::Ring;
use crate::sys;
use core::ffi::c_int;
use core::ptr;
use std::sync::Mutex;

/// An SRQ; `verbs_srq` first, as libibverbs hands back `&vsrq.srq`.
#[repr(C)]
pub(crate) struct Srq {
    vsrq: verbs_srq,
    /// Posting and resizing serialise here; None only if a resize could not
    /// map the new ring.
    rq: Mutex<Option<RecvQueue>>,
}

#[repr(C)]
#[derive(Default)]
struct CreateSrqResp {
    ibv_resp: abi::ib_uverbs_create_srq_resp,
    drv: abi::rxe_create_srq_resp,
}

fn srq_of<'a>(ibsrq: *mut ibv_srq) -> &'a Srq {
    // SAFETY: every SRQ libibverbs hands us was made here, with ibv_srq at
    // offset 0 of its Srq, which lives until destroy_srq.
    unsafe { &*ibsrq.cast::<Srq>() }
}

fn new_srq() -> Creating<Srq> {
    Creating::new(Srq {
        vsrq: verbs_srq::default(),
        rq: Mutex::new(None),
    })
}

pub(crate) unsafe extern "C" fn create_srq(
    pd: *mut abi::ibv_pd,
    attr: *mut abi::ibv_srq_init_attr,
) -> *mut ibv_srq {
    let srq = new_srq();
    let mut cmd = abi::ibv_create_srq::default();
    let mut resp = CreateSrqResp::default();
    // SAFETY: the SRQ is fresh; the call fills in its ibv_srq and writes the
    // granted sizes back into attr; cmd and resp are valid.
    let ret = unsafe {
        abi::ibv_cmd_create_srq(
            pd,
            ptr::addr_of_mut!((*srq.as_ptr()).vsrq.srq),
            attr,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return object::fail(ret);
    }
    // SAFETY: pd and attr are valid; the SRQ was created with resp.
    unsafe { finish_create(srq, (*(*pd).context).cmd_fd, (*attr).attr.max_sge, &resp) }
}

/// An SRQ with the extended attributes: a basic one, or an XRC SRQ
/// (A14.4.4) with its domain and completion queue, which XRC targets of the
/// domain take receive WQEs from by number.
pub(crate) unsafe extern "C" fn create_srq_ex(
    context: *mut abi::ibv_context,
    attr: *mut abi::ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    use abi::ibv_srq_init_attr_mask::*;
    use abi::ibv_srq_type::*;
    // SAFETY: libibverbs passes the application's valid attributes.
    let a = unsafe { &*attr };
    let known = IBV_SRQ_INIT_ATTR_TYPE
        | IBV_SRQ_INIT_ATTR_PD
        | IBV_SRQ_INIT_ATTR_XRCD
        | IBV_SRQ_INIT_ATTR_CQ;
    let srq_type = if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE != 0 {
        a.srq_type
    } else {
        IBV_SRQT_BASIC
    };
    if a.comp_mask & !known != 0 || !matches!(srq_type, IBV_SRQT_BASIC | IBV_SRQT_XRC) {
        // Tag matching SRQs do not exist on rrxe.
        return object::fail(sys::EOPNOTSUPP);
    }
    let srq = new_srq();
    let mut cmd = abi::ibv_create_xsrq::default();
    let mut resp = CreateSrqResp::default();
    // SAFETY: the SRQ is fresh; libibverbs fills in the verbs_srq (type,
    // domain, CQ and, for XRC, the SRQ number) and the granted sizes.
    let ret = unsafe {
        abi::ibv_cmd_create_srq_ex(
            context,
            ptr::addr_of_mut!((*srq.as_ptr()).vsrq),
            attr,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return object::fail(ret);
    }
    // SAFETY: context is valid; the SRQ was created with resp.
    unsafe { finish_create(srq, (*context).cmd_fd, a.attr.max_sge, &resp) }
}

/// Maps a created SRQ's ring and hands the SRQ out, or destroys it again.
///
/// # Safety
///
/// A successful create command with `resp` as its response must have filled
/// in the verbs_srq of `srq`.
unsafe fn finish_create(
    srq: Creating<Srq>,
    fd: c_int,
    max_sge: u32,
    resp: &CreateSrqResp,
) -> *mut ibv_srq {
    match Ring::map(fd, &resp.drv.mi) {
        Ok(ring) => {
            // SAFETY: the SRQ is ours until handed out. The core's number
            // (libibverbs stores it for XRC SRQs) and the driver's are the
            // same; the driver's is there for basic SRQs too.
            unsafe {
                (*srq.as_ptr()).vsrq.srq_num = resp.drv.srq_num;
                *(*srq.as_ptr())
                    .rq
                    .get_mut()
                    .unwrap_or_else(|e| e.into_inner()) = Some(RecvQueue { ring, max_sge });
            }
            // ibv_srq is at offset 0 (verbs_srq's, the Srq's first field).
            srq.hand_out().cast::<ibv_srq>()
        }
        Err(e) => {
            // SAFETY: the kernel SRQ exists and nothing else refers to it.
            unsafe { abi::ibv_cmd_destroy_srq(ptr::addr_of_mut!((*srq.as_ptr()).vsrq.srq)) };
            object::fail(e)
        }
    }
}

pub(crate) unsafe extern "C" fn destroy_srq(ibsrq: *mut ibv_srq) -> c_int {
    // SAFETY: ibsrq is one this provider handed out, at offset 0 of its Srq.
    // Freeing the Srq unmaps the ring.
    unsafe { object::free_if_destroyed(ibsrq.cast::<Srq>(), abi::ibv_cmd_destroy_srq(ibsrq)) }
}

/// Changes the limit or the size. A new size gets a new ring from the
/// kernel, holding the WQEs not yet consumed; the kernel reports where it is
/// through a `struct mminfo` whose address the command carries.
pub(crate) unsafe extern "C" fn modify_srq(
    ibsrq: *mut ibv_srq,
    attr: *mut abi::ibv_srq_attr,
    mask: c_int,
) -> c_int {
    let srq = srq_of(ibsrq);
    let mut guard = srq.rq.lock().unwrap_or_else(|e| e.into_inner());
    let mut mi = abi::mminfo::default();
    let mut cmd = abi::rrxe_modify_srq::default();
    cmd.drv_payload.mmap_info_addr = ptr::addr_of_mut!(mi) as u64;
    // SAFETY: arguments as libibverbs passed them; cmd is the core command
    // followed by rxe's, and mi outlives the call that writes it.
    let ret = unsafe {
        abi::ibv_cmd_modify_srq(
            ibsrq,
            attr,
            mask,
            ptr::addr_of_mut!(cmd.ibv_cmd),
            size_of_val(&cmd),
        )
    };
    if ret != 0 || mask & abi::ibv_srq_attr_mask::IBV_SRQ_MAX_WR as c_int == 0 {
        return ret;
    }
    // SAFETY: the SRQ's context outlives it.
    let fd = unsafe { (*srq.vsrq.srq.context).cmd_fd };
    let max_sge = guard.as_ref().map_or(0, |rq| rq.max_sge);
    // The old ring is dead: the kernel moved its WQEs to the new one.
    *guard = None;
    match Ring::map(fd, &mi) {
        Ok(ring) => {
            *guard = Some(RecvQueue { ring, max_sge });
            0
        }
        Err(e) => e,
    }
}

pub(crate) unsafe extern "C" fn query_srq(
    ibsrq: *mut ibv_srq,
    attr: *mut abi::ibv_srq_attr,
) -> c_int {
    let mut cmd = abi::ibv_query_srq::default();
    // SAFETY: arguments as libibverbs passed them; cmd valid for its size.
    unsafe { abi::ibv_cmd_query_srq(ibsrq, attr, &mut cmd, size_of_val(&cmd)) }
}

pub(crate) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    if bad_wr.is_null() {
        return sys::EINVAL;
    }
    // SAFETY: bad_wr is the caller's out pointer.
    let bad = unsafe { &mut *bad_wr };
    *bad = ptr::null_mut();
    let guard = srq_of(ibsrq).rq.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(rq) => rq.post(wr, bad),
        None => {
            *bad = wr;
            sys::EINVAL
        }
    }
}

pub(crate) unsafe extern "C" fn get_srq_num(ibsrq: *mut ibv_srq, srq_num: *mut u32) -> c_int {
    if srq_num.is_null() {
        return sys::EINVAL;
    }
    // SAFETY: srq_num is the caller's out pointer.
    unsafe { *srq_num = srq_of(ibsrq).vsrq.srq_num };
    0
}
