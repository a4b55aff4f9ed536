// SPDX-License-Identifier: GPL-2.0

//! Completion queues: the kernel produces `struct ib_uverbs_wc` entries into
//! a mapped ring (byte for byte `struct ibv_wc`), the provider consumes them
//! without a system call. Arming is the core's `REQ_NOTIFY_CQ` command.
//!
//! A CQ is polled with `ibv_poll_cq` (copies of whole entries) or, when
//! created with `ibv_create_cq_ex`, with the extended API, which reads the
//! fields of the current entry in place between `start_poll` and `end_poll`.

use crate::abi::{self, ib_uverbs_wc, ibv_cq, ibv_cq_ex, ibv_wc, verbs_cq};
use crate::lock::SpinLock;
use crate::object::{self, Creating};
use crate::ring::Ring;
use crate::sys;
use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

/// What the lock protects: the ring (replaced on resize) and, during an
/// extended poll, the entry being read.
struct Polling {
    ring: Option<Ring>,
    current: *const ib_uverbs_wc,
}

/// A CQ; `verbs_cq` first, as libibverbs hands back `&vcq.cq`.
#[repr(C)]
pub(crate) struct Cq {
    vcq: verbs_cq,
    /// Consumers serialise here; the kernel is the only producer.
    poll: SpinLock<Polling>,
}

#[repr(C)]
#[derive(Default)]
struct CreateCqResp {
    ibv_resp: abi::ib_uverbs_create_cq_resp,
    mi: abi::mminfo,
}

#[repr(C)]
#[derive(Default)]
struct CreateCqExResp {
    ibv_resp: abi::ib_uverbs_ex_create_cq_resp,
    mi: abi::mminfo,
}

#[repr(C)]
#[derive(Default)]
struct ResizeCqResp {
    ibv_resp: abi::ib_uverbs_resize_cq_resp,
    mi: abi::mminfo,
}

const _: () = assert!(size_of::<ibv_wc>() == size_of::<ib_uverbs_wc>());

/// The work-completion fields the extended API can read on rrxe: everything
/// `struct ib_uverbs_wc` carries (no timestamps, VLAN or flow tag).
const SUPPORTED_WC_FLAGS: u64 = {
    use abi::ibv_create_cq_wc_flags::*;
    (IBV_WC_EX_WITH_BYTE_LEN
        | IBV_WC_EX_WITH_IMM
        | IBV_WC_EX_WITH_QP_NUM
        | IBV_WC_EX_WITH_SRC_QP
        | IBV_WC_EX_WITH_SLID
        | IBV_WC_EX_WITH_SL
        | IBV_WC_EX_WITH_DLID_PATH_BITS) as u64
};

fn new_cq() -> Creating<Cq> {
    Creating::new(Cq {
        vcq: verbs_cq::default(),
        poll: SpinLock::new(Polling {
            ring: None,
            current: ptr::null(),
        }),
    })
}

fn map_cq_ring(fd: c_int, mi: &abi::mminfo) -> Result<Ring, c_int> {
    let ring = Ring::map(fd, mi)?;
    if ring.slot_len() >= size_of::<ib_uverbs_wc>() {
        Ok(ring)
    } else {
        Err(sys::EPROTO)
    }
}

/// Maps a created CQ's ring, or destroys the kernel CQ again.
///
/// # Safety
///
/// The kernel CQ of `cq` must just have been created, with `mi` describing
/// its ring.
unsafe fn finish_create(cq: &Creating<Cq>, fd: c_int, mi: &abi::mminfo) -> Result<(), c_int> {
    let r = map_cq_ring(fd, mi).inspect_err(|_| {
        // SAFETY: the kernel CQ exists and nothing else refers to it.
        unsafe {
            abi::ibv_cmd_destroy_cq(ptr::addr_of_mut!((*cq.as_ptr()).vcq.__bindgen_anon_1.cq))
        };
    })?;
    // SAFETY: the CQ is ours until handed out.
    unsafe { (*cq.as_ptr()).poll.get_mut().ring = Some(r) };
    Ok(())
}

pub(crate) unsafe extern "C" fn create_cq(
    context: *mut abi::ibv_context,
    cqe: c_int,
    channel: *mut abi::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let cq = new_cq();
    let mut resp = CreateCqResp::default();
    // SAFETY: the CQ is fresh and the call fills in its ibv_cq; with no
    // command buffer libibverbs builds the request itself; resp is the core
    // response followed by rxe's.
    let ret = unsafe {
        abi::ibv_cmd_create_cq(
            context,
            cqe,
            channel,
            comp_vector,
            ptr::addr_of_mut!((*cq.as_ptr()).vcq.__bindgen_anon_1.cq),
            ptr::null_mut(),
            0,
            &mut resp.ibv_resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return object::fail(ret);
    }
    // SAFETY: context is valid; the CQ was created with resp.
    if let Err(e) = unsafe { finish_create(&cq, (*context).cmd_fd, &resp.mi) } {
        return object::fail(e);
    }
    // ibv_cq is at offset 0 (verbs_cq's union, the Cq's first field).
    cq.hand_out().cast::<ibv_cq>()
}

pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut abi::ibv_context,
    attr: *mut abi::ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    // SAFETY: libibverbs passes the application's valid attributes.
    let a = unsafe { &*attr };
    if a.wc_flags & !SUPPORTED_WC_FLAGS != 0 {
        return object::fail(sys::EOPNOTSUPP);
    }
    let cq = new_cq();
    let mut resp = CreateCqExResp::default();
    // SAFETY: as in create_cq; libibverbs checks comp_mask and flags.
    let ret = unsafe {
        abi::ibv_cmd_create_cq_ex(
            context,
            attr,
            ptr::addr_of_mut!((*cq.as_ptr()).vcq),
            ptr::null_mut(),
            0,
            &mut resp.ibv_resp,
            size_of_val(&resp),
            0,
        )
    };
    if ret != 0 {
        return object::fail(ret);
    }
    // SAFETY: context is valid; the CQ was created with resp.
    if let Err(e) = unsafe { finish_create(&cq, (*context).cmd_fd, &resp.mi) } {
        return object::fail(e);
    }
    let cq = cq.hand_out();
    // SAFETY: the CQ is valid, and the application gets it only on return.
    let ex = unsafe { &mut (*cq).vcq.__bindgen_anon_1.cq_ex };
    ex.start_poll = Some(start_poll);
    ex.next_poll = Some(next_poll);
    ex.end_poll = Some(end_poll);
    ex.read_opcode = Some(read_opcode);
    ex.read_vendor_err = Some(read_vendor_err);
    ex.read_wc_flags = Some(read_wc_flags);
    use abi::ibv_create_cq_wc_flags::*;
    let want = |f: u32| a.wc_flags & u64::from(f) != 0;
    if want(IBV_WC_EX_WITH_BYTE_LEN) {
        ex.read_byte_len = Some(read_byte_len);
    }
    if want(IBV_WC_EX_WITH_IMM) {
        ex.read_imm_data = Some(read_imm_data);
    }
    if want(IBV_WC_EX_WITH_QP_NUM) {
        ex.read_qp_num = Some(read_qp_num);
    }
    if want(IBV_WC_EX_WITH_SRC_QP) {
        ex.read_src_qp = Some(read_src_qp);
    }
    if want(IBV_WC_EX_WITH_SLID) {
        ex.read_slid = Some(read_slid);
    }
    if want(IBV_WC_EX_WITH_SL) {
        ex.read_sl = Some(read_sl);
    }
    if want(IBV_WC_EX_WITH_DLID_PATH_BITS) {
        ex.read_dlid_path_bits = Some(read_dlid_path_bits);
    }
    ex
}

pub(crate) unsafe extern "C" fn destroy_cq(ibcq: *mut ibv_cq) -> c_int {
    // SAFETY: ibcq is one create_cq handed out, at offset 0 of its Cq.
    // Freeing the Cq unmaps the ring.
    unsafe { object::free_if_destroyed(ibcq.cast::<Cq>(), abi::ibv_cmd_destroy_cq(ibcq)) }
}

fn cq_of<'a>(ibcq: *mut ibv_cq) -> &'a Cq {
    // SAFETY: every CQ libibverbs hands us was made here (ibv_cq and
    // ibv_cq_ex at offset 0 of a leaked Box<Cq>) and lives until destroy_cq.
    unsafe { &*ibcq.cast::<Cq>() }
}

pub(crate) unsafe extern "C" fn poll_cq(ibcq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> c_int {
    cq_of(ibcq).poll.with(|p| {
        let Some(ring) = p.ring.as_ref() else {
            return -sys::EINVAL;
        };
        let mut n = 0;
        while n < ne.max(0) {
            let Some(slot) = ring.next_full() else {
                break;
            };
            // SAFETY: the slot holds a completion the kernel published
            // (acquire in next_full) and is at least an ib_uverbs_wc long
            // (checked at creation); wc has room for ne entries.
            unsafe {
                ptr::copy_nonoverlapping(slot, wc.add(n as usize).cast::<u8>(), size_of::<ibv_wc>())
            };
            ring.consume();
            n += 1;
        }
        n
    })
}

/// Changes the number of entries: the kernel moves the pending completions
/// to a new ring; the provider maps it in place of the old one.
pub(crate) unsafe extern "C" fn resize_cq(ibcq: *mut ibv_cq, cqe: c_int) -> c_int {
    let cq = cq_of(ibcq);
    cq.poll.with(|p| {
        let mut cmd = abi::ibv_resize_cq::default();
        let mut resp = ResizeCqResp::default();
        // SAFETY: ibcq is valid; nothing polls while the lock is held, so the
        // old ring is unused until replaced.
        let ret = unsafe {
            abi::ibv_cmd_resize_cq(
                ibcq,
                cqe,
                &mut cmd,
                size_of_val(&cmd),
                &mut resp.ibv_resp,
                size_of_val(&resp),
            )
        };
        if ret != 0 {
            return ret;
        }
        p.ring = None;
        // SAFETY: the CQ's context outlives it.
        let fd = unsafe { (*(*ibcq).context).cmd_fd };
        match map_cq_ring(fd, &resp.mi) {
            Ok(r) => {
                p.ring = Some(r);
                0
            }
            Err(e) => e,
        }
    })
}

fn cq_ex_of<'a>(current: *mut ibv_cq_ex) -> &'a Cq {
    cq_of(current.cast::<ibv_cq>())
}

/// Publishes the current entry's status and wr_id in the ibv_cq_ex, where
/// the API reads them.
///
/// # Safety
///
/// `current` must be a CQ of this provider, and the caller must hold its
/// poll lock with `p.current` pointing at a published entry.
unsafe fn expose(current: *mut ibv_cq_ex, p: &Polling) {
    // SAFETY: the entry is published and stays until consumed (caller).
    let wc = unsafe { &*p.current };
    // SAFETY: current is valid; only the poller writes these fields.
    unsafe {
        (*current).status = wc.status;
        (*current).wr_id = wc.wr_id;
    }
}

unsafe extern "C" fn start_poll(
    current: *mut ibv_cq_ex,
    _attr: *mut abi::ibv_poll_cq_attr,
) -> c_int {
    let cq = cq_ex_of(current);
    // SAFETY: released below when the CQ is empty, else by end_poll, which
    // the API requires after a successful start_poll.
    let p = unsafe { cq.poll.acquire() };
    match p.ring.as_ref().and_then(Ring::next_full) {
        Some(slot) => {
            p.current = slot.cast::<ib_uverbs_wc>();
            // SAFETY: lock held, current published.
            unsafe { expose(current, p) };
            0
        }
        None => {
            // SAFETY: taken above; p is not used again.
            unsafe { cq.poll.release() };
            abi::ENOENT as c_int
        }
    }
}

unsafe extern "C" fn next_poll(current: *mut ibv_cq_ex) -> c_int {
    let cq = cq_ex_of(current);
    // SAFETY: the caller holds the poll lock since start_poll; this reuses
    // that hold without taking it again.
    let p = unsafe { &mut *cq.poll_data() };
    let Some(ring) = p.ring.as_ref() else {
        return abi::ENOENT as c_int;
    };
    ring.consume();
    match ring.next_full() {
        Some(slot) => {
            p.current = slot.cast::<ib_uverbs_wc>();
            // SAFETY: lock held, current published.
            unsafe { expose(current, p) };
            0
        }
        None => {
            p.current = ptr::null();
            abi::ENOENT as c_int
        }
    }
}

unsafe extern "C" fn end_poll(current: *mut ibv_cq_ex) {
    let cq = cq_ex_of(current);
    // SAFETY: the caller holds the poll lock since start_poll.
    let p = unsafe { &mut *cq.poll_data() };
    if !p.current.is_null() {
        if let Some(ring) = p.ring.as_ref() {
            ring.consume();
        }
        p.current = ptr::null();
    }
    // SAFETY: end_poll ends the hold start_poll began.
    unsafe { cq.poll.release() };
}

impl Cq {
    /// The polling state, for the extended API's calls made while the lock is
    /// held from `start_poll`.
    fn poll_data(&self) -> *mut Polling {
        self.poll.data_ptr()
    }
}

/// The entry an extended poll is on.
fn current_wc<'a>(current: *mut ibv_cq_ex) -> &'a ib_uverbs_wc {
    // SAFETY: the read_* callbacks are called between a successful
    // start_poll or next_poll and the next of next_poll/end_poll, with the
    // lock held and current pointing at a published entry.
    unsafe { &*(*cq_ex_of(current).poll_data()).current }
}

unsafe extern "C" fn read_opcode(current: *mut ibv_cq_ex) -> abi::ibv_wc_opcode::Type {
    current_wc(current).opcode
}
unsafe extern "C" fn read_vendor_err(current: *mut ibv_cq_ex) -> u32 {
    current_wc(current).vendor_err
}
unsafe extern "C" fn read_byte_len(current: *mut ibv_cq_ex) -> u32 {
    current_wc(current).byte_len
}
unsafe extern "C" fn read_imm_data(current: *mut ibv_cq_ex) -> abi::__be32 {
    // SAFETY: imm_data and invalidate_rkey share the word; both are u32.
    unsafe { current_wc(current).ex.imm_data }
}
unsafe extern "C" fn read_qp_num(current: *mut ibv_cq_ex) -> u32 {
    current_wc(current).qp_num
}
unsafe extern "C" fn read_src_qp(current: *mut ibv_cq_ex) -> u32 {
    current_wc(current).src_qp
}
unsafe extern "C" fn read_wc_flags(current: *mut ibv_cq_ex) -> core::ffi::c_uint {
    current_wc(current).wc_flags
}
unsafe extern "C" fn read_slid(current: *mut ibv_cq_ex) -> u32 {
    u32::from(current_wc(current).slid)
}
unsafe extern "C" fn read_sl(current: *mut ibv_cq_ex) -> u8 {
    current_wc(current).sl
}
unsafe extern "C" fn read_dlid_path_bits(current: *mut ibv_cq_ex) -> u8 {
    current_wc(current).dlid_path_bits
}
