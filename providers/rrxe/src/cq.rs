// SPDX-License-Identifier: GPL-2.0

//! Completion queues: the kernel produces `struct ib_uverbs_wc` entries into
//! a mapped ring (byte for byte `struct ibv_wc`), the provider consumes them
//! without a system call. Arming is the core's `REQ_NOTIFY_CQ` command.

use crate::abi::{self, ibv_cq, ibv_wc, verbs_cq};
use crate::ring::Ring;
use crate::sys;
use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;
use std::sync::Mutex;

/// A CQ; `verbs_cq` first, as libibverbs hands back `&vcq.cq`.
#[repr(C)]
pub(crate) struct Cq {
    vcq: verbs_cq,
    /// Consumers serialise on the ring; the kernel is the only producer.
    ring: Mutex<Option<Ring>>,
}

#[repr(C)]
#[derive(Default)]
struct CreateCqResp {
    ibv_resp: abi::ib_uverbs_create_cq_resp,
    mi: abi::mminfo,
}

const _: () = assert!(size_of::<ibv_wc>() == size_of::<abi::ib_uverbs_wc>());

pub(crate) unsafe extern "C" fn create_cq(
    context: *mut abi::ibv_context,
    cqe: c_int,
    channel: *mut abi::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let cq = Box::into_raw(Box::new(Cq {
        vcq: verbs_cq::default(),
        ring: Mutex::new(None),
    }));
    let mut resp = CreateCqResp::default();
    // SAFETY: cq is a fresh allocation whose ibv_cq the call fills in; with
    // no command buffer libibverbs builds the request itself; resp is the
    // core response followed by rxe's.
    let ret = unsafe {
        abi::ibv_cmd_create_cq(
            context,
            cqe,
            channel,
            comp_vector,
            ptr::addr_of_mut!((*cq).vcq.__bindgen_anon_1.cq),
            ptr::null_mut(),
            0,
            &mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: cq came from Box::into_raw above and was not handed out.
        drop(unsafe { Box::from_raw(cq) });
        sys::set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: context is valid for the call.
    let fd = unsafe { (*context).cmd_fd };
    let ring = Ring::map(fd, &resp.mi).and_then(|r| {
        if r.slot_len() >= size_of::<ibv_wc>() {
            Ok(r)
        } else {
            Err(sys::EPROTO)
        }
    });
    // SAFETY: cq is ours until returned.
    let ibcq = unsafe { ptr::addr_of_mut!((*cq).vcq.__bindgen_anon_1.cq) };
    match ring {
        Ok(r) => {
            // SAFETY: as above.
            unsafe { *(*cq).ring.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(r) };
            ibcq
        }
        Err(e) => {
            // SAFETY: the kernel CQ exists and nothing else refers to it.
            unsafe {
                abi::ibv_cmd_destroy_cq(ibcq);
                drop(Box::from_raw(cq));
            }
            sys::set_errno(e);
            ptr::null_mut()
        }
    }
}

pub(crate) unsafe extern "C" fn destroy_cq(ibcq: *mut ibv_cq) -> c_int {
    // SAFETY: ibcq is one create_cq made.
    let ret = unsafe { abi::ibv_cmd_destroy_cq(ibcq) };
    if ret == 0 {
        // SAFETY: ibv_cq is at offset 0 of the leaked Box<Cq>; the kernel CQ
        // is gone and the application may not use it. Dropping unmaps.
        drop(unsafe { Box::from_raw(ibcq.cast::<Cq>()) });
    }
    ret
}

pub(crate) unsafe extern "C" fn poll_cq(ibcq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: ibcq is one create_cq made and not destroyed while polled.
    let cq = unsafe { &*ibcq.cast::<Cq>() };
    let guard = cq.ring.lock().unwrap_or_else(|e| e.into_inner());
    let Some(ring) = guard.as_ref() else {
        return -(abi::EINVAL as c_int);
    };
    let mut n = 0;
    while n < ne.max(0) {
        let Some(slot) = ring.next_full() else {
            break;
        };
        // SAFETY: the slot holds a completion the kernel published (acquire
        // in next_full) and is at least an ibv_wc long (checked at
        // creation); wc has room for ne entries.
        unsafe {
            ptr::copy_nonoverlapping(slot, wc.add(n as usize).cast::<u8>(), size_of::<ibv_wc>())
        };
        ring.consume();
        n += 1;
    }
    n
}
