// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the send and receive rings, posting to them, and the
//! doorbells. Receives need no system call (the kernel looks at the receive
//! ring when a request needs a receive WQE) but while the peer waits for
//! credits: then the kernel asks for a receive doorbell, so that the peer
//! hears of the receive at once. Sends ring, but not while a run of the
//! kernel's task is going that will look at the send ring again before it
//! ends (a connected QP's; the word in the ring's header says so).

use crate::abi::{self, ibv_qp, ibv_recv_wr, ibv_send_wr, verbs_qp};
use crate::object::{self, Creating};
use crate::ring::Ring;
use crate::sys;
use crate::wqe::{self, SendLimits};
use crate::wr;
use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;
use std::sync::Mutex;

/// A send queue: its ring and the provider's send sequence number.
struct SendQueue {
    ring: Ring,
    lim: SendLimits,
    /// Send sequence number of the next WQE, carried in it for the kernel's
    /// bookkeeping.
    ssn: u32,
}

/// A receive queue, of a QP or of an SRQ.
pub(crate) struct RecvQueue {
    pub(crate) ring: Ring,
    pub(crate) max_sge: u32,
}

impl RecvQueue {
    /// Posts a chain of receive requests; on failure `bad_wr` names the first
    /// one not posted, and those before it are posted.
    pub(crate) fn post(&self, mut wr: *mut ibv_recv_wr, bad_wr: &mut *mut ibv_recv_wr) -> c_int {
        while !wr.is_null() {
            // SAFETY: the application's chain; each element is valid during
            // the post call.
            let w = unsafe { &*wr };
            let Some(slot) = self.ring.next_free() else {
                *bad_wr = wr;
                return sys::ENOMEM;
            };
            // SAFETY: slot is the free producer slot of this receive ring.
            if let Err(e) = unsafe { wqe::write_recv(slot, w, self.max_sge, self.ring.slot_len()) }
            {
                *bad_wr = wr;
                return e;
            }
            self.ring.publish();
            wr = w.next;
        }
        0
    }
}

/// A QP; `verbs_qp` first, as libibverbs hands back `&vqp.qp`.
#[repr(C)]
pub(crate) struct Qp {
    vqp: verbs_qp,
    /// None on an XRC target, which sends only responses, from the kernel.
    sq: Mutex<Option<SendQueue>>,
    /// None when the QP receives through an SRQ, or receives nothing (an
    /// XRC initiator or target).
    rq: Mutex<Option<RecvQueue>>,
    /// Requests built with the extended send API, posted by `wr_complete`.
    pub(crate) batch: Mutex<wr::Batch>,
}

#[repr(C)]
#[derive(Default)]
struct CreateQpResp {
    ibv_resp: abi::ib_uverbs_create_qp_resp,
    drv: abi::rxe_create_qp_resp,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The QP types a process creates rings for: XRC_RECV (an XRC target) is
/// the kernel's alone, with neither ring (Documentation/rrxe/xrc.rst).
fn creatable(qp_type: abi::ibv_qp_type::Type) -> bool {
    use abi::ibv_qp_type::*;
    matches!(
        qp_type,
        IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD | IBV_QPT_XRC_SEND | IBV_QPT_XRC_RECV
    )
}

fn new_qp() -> Creating<Qp> {
    Creating::new(Qp {
        vqp: verbs_qp::default(),
        sq: Mutex::new(None),
        rq: Mutex::new(None),
        batch: Mutex::new(wr::Batch::default()),
    })
}

/// Completes a QP the kernel created: maps its rings and hands it out, or
/// destroys it again if they cannot be mapped.
///
/// # Safety
///
/// The ibv_qp of `qp` must have been filled in by a successful create
/// command whose rxe response is `drv`, with the granted capabilities in
/// `caps`.
unsafe fn finish_create(
    qp: Creating<Qp>,
    fd: c_int,
    srq: bool,
    caps: &abi::ibv_qp_cap,
    drv: &abi::rxe_create_qp_resp,
) -> *mut ibv_qp {
    // SAFETY: the QP is ours until handed out; the create command filled in
    // its ibv_qp.
    let ibqp = unsafe { ptr::addr_of_mut!((*qp.as_ptr()).vqp.__bindgen_anon_1.qp) };
    // SAFETY: as above.
    let qp_type = unsafe { (*ibqp).qp_type };
    match map_rings(fd, qp_type, srq, caps, drv) {
        Ok((sq, rq)) => {
            // SAFETY: the QP is ours until handed out.
            unsafe {
                *(*qp.as_ptr())
                    .sq
                    .get_mut()
                    .unwrap_or_else(|e| e.into_inner()) = sq;
                *(*qp.as_ptr())
                    .rq
                    .get_mut()
                    .unwrap_or_else(|e| e.into_inner()) = rq;
            }
            qp.hand_out().cast::<ibv_qp>()
        }
        Err(e) => {
            // SAFETY: the kernel QP exists and nothing else refers to it.
            unsafe { abi::ibv_cmd_destroy_qp(ibqp) };
            object::fail(e)
        }
    }
}

pub(crate) unsafe extern "C" fn create_qp(
    pd: *mut abi::ibv_pd,
    attr: *mut abi::ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: libibverbs passes the application's valid attributes.
    let a = unsafe { &mut *attr };
    if !creatable(a.qp_type) || a.qp_type == abi::ibv_qp_type::IBV_QPT_XRC_RECV {
        // An XRC target needs a domain, which only ibv_create_qp_ex names.
        return object::fail(sys::EOPNOTSUPP);
    }
    let qp = new_qp();
    let mut cmd = abi::ibv_create_qp::default();
    let mut resp = CreateQpResp::default();
    // SAFETY: the QP is fresh; the call fills it in and writes the granted
    // capabilities back into attr->cap; cmd and resp are valid.
    let ret = unsafe {
        abi::ibv_cmd_create_qp(
            pd,
            ptr::addr_of_mut!((*qp.as_ptr()).vqp.__bindgen_anon_1.qp),
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
    // SAFETY: pd is valid; its context is the device context. The QP was
    // created with resp as its response.
    unsafe {
        finish_create(
            qp,
            (*(*pd).context).cmd_fd,
            !a.srq.is_null(),
            &a.cap,
            &resp.drv,
        )
    }
}

#[repr(C)]
#[derive(Default)]
struct CreateQpExResp {
    ibv_resp: abi::ib_uverbs_ex_create_qp_resp,
    drv: abi::rxe_create_qp_resp,
}

pub(crate) unsafe extern "C" fn create_qp_ex(
    context: *mut abi::ibv_context,
    attr: *mut abi::ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    use abi::ibv_qp_init_attr_mask::*;
    // SAFETY: libibverbs passes the application's valid attributes.
    let a = unsafe { &mut *attr };
    let known = IBV_QP_INIT_ATTR_PD
        | IBV_QP_INIT_ATTR_XRCD
        | IBV_QP_INIT_ATTR_CREATE_FLAGS
        | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    let flags = if a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 {
        a.create_flags
    } else {
        0
    };
    let ops = if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        Some(a.send_ops_flags)
    } else {
        None
    };
    // rrxe has no QP creation flags (scatter-FCS, CVLAN stripping and the
    // like are Ethernet-NIC features) and no TSO, RSS or WQ indirection.
    if a.comp_mask & !known != 0
        || flags != 0
        || !creatable(a.qp_type)
        || ops.is_some_and(|o| !wr::supported(a.qp_type, o))
    {
        return object::fail(sys::EOPNOTSUPP);
    }
    let qp = new_qp();
    let mut cmd = abi::ibv_create_qp_ex::default();
    let mut resp = CreateQpExResp::default();
    // SAFETY: as in create_qp; libibverbs takes the PD or the XRC domain from
    // attr, fills in the verbs_qp and writes the granted capabilities back.
    let ret = unsafe {
        abi::ibv_cmd_create_qp_ex2(
            context,
            ptr::addr_of_mut!((*qp.as_ptr()).vqp),
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
    if ops.is_some() {
        // SAFETY: the QP is ours until handed out; the ibv_qp_ex shares the
        // QP's first bytes (verbs_qp's union).
        unsafe {
            (*qp.as_ptr()).vqp.comp_mask |= abi::verbs_qp_mask::VERBS_QP_EX;
            wr::install(&mut (*qp.as_ptr()).vqp.__bindgen_anon_1.qp_ex);
        }
    }
    // SAFETY: context is valid; the QP was created with resp as its response.
    unsafe { finish_create(qp, (*context).cmd_fd, !a.srq.is_null(), &a.cap, &resp.drv) }
}

/// Opens an XRC target QP another process created in a shared domain
/// (IBA A14.4.3): a second handle on the kernel's QP, with no rings.
pub(crate) unsafe extern "C" fn open_qp(
    context: *mut abi::ibv_context,
    attr: *mut abi::ibv_qp_open_attr,
) -> *mut ibv_qp {
    let qp = new_qp();
    let mut cmd = abi::ibv_open_qp::default();
    let mut resp = abi::ib_uverbs_create_qp_resp::default();
    // SAFETY: the QP is fresh and libibverbs fills it in; attr is the
    // application's; cmd and resp are valid.
    let ret = unsafe {
        abi::ibv_cmd_open_qp(
            context,
            ptr::addr_of_mut!((*qp.as_ptr()).vqp),
            size_of::<verbs_qp>() as c_int,
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
    // ibv_qp is at offset 0 (verbs_qp's union, the Qp's first field).
    qp.hand_out().cast::<ibv_qp>()
}

type Rings = (Option<SendQueue>, Option<RecvQueue>);

fn map_rings(
    fd: c_int,
    qp_type: abi::ibv_qp_type::Type,
    srq: bool,
    caps: &abi::ibv_qp_cap,
    drv: &abi::rxe_create_qp_resp,
) -> Result<Rings, c_int> {
    use abi::ibv_qp_type::*;
    if qp_type == IBV_QPT_XRC_RECV {
        return Ok((None, None));
    }
    let ring = Ring::map(fd, &drv.sq_mi)?;
    let lim = SendLimits {
        max_sge: caps.max_send_sge,
        max_inline: caps.max_inline_data,
        slot_len: ring.slot_len(),
        qp_type,
    };
    let sq = SendQueue { ring, lim, ssn: 0 };
    // An XRC initiator has no receive queue (A14.4.2), nor has a QP on an SRQ.
    let rq = if !srq && qp_type != IBV_QPT_XRC_SEND {
        Some(RecvQueue {
            ring: Ring::map(fd, &drv.rq_mi)?,
            max_sge: caps.max_recv_sge,
        })
    } else {
        None
    };
    Ok((Some(sq), rq))
}

pub(crate) unsafe extern "C" fn destroy_qp(ibqp: *mut ibv_qp) -> c_int {
    // SAFETY: ibqp is one this provider handed out, at offset 0 of its Qp.
    // Freeing the Qp unmaps the rings.
    unsafe { object::free_if_destroyed(ibqp.cast::<Qp>(), abi::ibv_cmd_destroy_qp(ibqp)) }
}

pub(crate) unsafe extern "C" fn modify_qp(
    ibqp: *mut ibv_qp,
    attr: *mut abi::ibv_qp_attr,
    mask: c_int,
) -> c_int {
    let mut cmd = abi::ibv_modify_qp::default();
    // SAFETY: arguments as libibverbs passed them; cmd valid for its size.
    unsafe { abi::ibv_cmd_modify_qp(ibqp, attr, mask, &mut cmd, size_of_val(&cmd)) }
}

pub(crate) unsafe extern "C" fn query_qp(
    ibqp: *mut ibv_qp,
    attr: *mut abi::ibv_qp_attr,
    mask: c_int,
    init_attr: *mut abi::ibv_qp_init_attr,
) -> c_int {
    let mut cmd = abi::ibv_query_qp::default();
    // SAFETY: arguments as libibverbs passed them; cmd valid for its size.
    unsafe { abi::ibv_cmd_query_qp(ibqp, attr, mask, init_attr, &mut cmd, size_of_val(&cmd)) }
}

/// Tells the kernel the send ring has new WQEs: a `POST_SEND` command that
/// carries none (`wr_count` 0), as rdma_rxe's ABI defines.
fn ring_doorbell(ibqp: &ibv_qp) -> Result<(), c_int> {
    let mut cmd = abi::ibv_post_send::default();
    let mut resp = abi::ib_uverbs_post_send_resp::default();
    cmd.hdr.command = abi::ib_uverbs_write_cmds::IB_USER_VERBS_CMD_POST_SEND;
    cmd.hdr.in_words = (size_of::<abi::ibv_post_send>() / 4) as u16;
    cmd.hdr.out_words = (size_of::<abi::ib_uverbs_post_send_resp>() / 4) as u16;
    cmd.core_payload.response = ptr::addr_of_mut!(resp) as u64;
    cmd.core_payload.qp_handle = ibqp.handle;
    cmd.core_payload.wqe_size = size_of::<ibv_send_wr>() as u32;
    write_command(ibqp, &cmd)
}

/// Tells the kernel the receive ring has a WQE it asked to hear of: a
/// `POST_RECV` command that carries none, rrxe's receive doorbell.
fn ring_recv_doorbell(ibqp: &ibv_qp) -> Result<(), c_int> {
    let mut cmd = abi::ibv_post_recv::default();
    let mut resp = abi::ib_uverbs_post_recv_resp::default();
    cmd.hdr.command = abi::ib_uverbs_write_cmds::IB_USER_VERBS_CMD_POST_RECV;
    cmd.hdr.in_words = (size_of::<abi::ibv_post_recv>() / 4) as u16;
    cmd.hdr.out_words = (size_of::<abi::ib_uverbs_post_recv_resp>() / 4) as u16;
    cmd.core_payload.response = ptr::addr_of_mut!(resp) as u64;
    cmd.core_payload.qp_handle = ibqp.handle;
    cmd.core_payload.wqe_size = size_of::<abi::ib_uverbs_recv_wr>() as u32;
    write_command(ibqp, &cmd)
}

/// Writes a uverbs write() command (`ibv_post_send`, `ibv_post_recv`: header
/// and payload, all whole words, no padding) to the QP's context.
fn write_command<C>(ibqp: &ibv_qp, cmd: &C) -> Result<(), c_int> {
    // SAFETY: viewing the command, a plain C struct, as its bytes.
    let bytes =
        unsafe { core::slice::from_raw_parts(ptr::from_ref(cmd).cast::<u8>(), size_of::<C>()) };
    // SAFETY: the context outlives its QPs.
    let fd = unsafe { (*ibqp.context).cmd_fd };
    sys::write_all(fd, bytes)
}

/// Posts a chain of send requests. With `all_or_nothing` (the extended
/// API's `ibv_wr_complete`) either every request is posted or none is; else
/// (`ibv_post_send`) those before a refused request are posted. On failure
/// returns the error and the first request not posted.
pub(crate) fn post_chain(
    qp: &Qp,
    head: *mut ibv_send_wr,
    all_or_nothing: bool,
) -> Result<(), (c_int, *mut ibv_send_wr)> {
    use abi::ibv_qp_state::*;
    // SAFETY: reading the QP state libibverbs caches on every modify.
    let state = unsafe { qp.vqp.__bindgen_anon_1.qp.state };
    if matches!(state, IBV_QPS_RESET | IBV_QPS_INIT | IBV_QPS_RTR) {
        // IBA 10.8.2 / C10-29: work requests may be posted to a send queue
        // only from RTS on (SQD, SQE and Error flush them).
        return Err((sys::EINVAL, head));
    }
    let mut wr = head;
    let mut k = 0u32;
    let mut err = 0;
    let ring = {
        let mut guard = lock(&qp.sq);
        let Some(sq) = guard.as_mut() else {
            return Err((sys::EINVAL, head));
        };
        // The kernel frees a WQE's slot as the WQE completes: an empty ring
        // had nothing outstanding.
        let idle = sq.ring.is_empty();
        while !wr.is_null() {
            // SAFETY: the chain is the caller's (the application's, or the
            // batch's), valid during the call.
            let w = unsafe { &*wr };
            let Some(slot) = sq.ring.free_slot_at(if all_or_nothing { k } else { 0 }) else {
                err = sys::ENOMEM;
                break;
            };
            // SAFETY: slot is a free producer slot of this send ring.
            if let Err(e) = unsafe { wqe::write_send(slot, w, &sq.lim, sq.ssn.wrapping_add(k)) } {
                err = e;
                break;
            }
            if !all_or_nothing {
                sq.ring.publish();
            }
            k += 1;
            wr = w.next;
        }
        let posted = if all_or_nothing {
            if err == 0 {
                sq.ring.publish_n(k);
                k
            } else {
                0
            }
        } else {
            k
        };
        sq.ssn = sq.ssn.wrapping_add(posted);
        // A post a run of the kernel's task will find needs no doorbell, but
        // for one to a queue with nothing outstanding: likely what its poster
        // waits on next (a ping-pong's answer). Its doorbell, a system call on
        // the poster's CPU, queues the run there at once, where the run's last
        // look must wake that CPU from another: 2-byte Write latency 19.9 ->
        // 16.5 us (Documentation/rrxe/benchmarks.rst). A stream's posts find
        // WQEs outstanding and ring no more than before.
        posted > 0 && (idle || !sq.ring.run_pending())
    };
    if all_or_nothing && err != 0 {
        wr = head;
    }
    if ring {
        // SAFETY: reading the QP's handle and context.
        if let Err(e) = ring_doorbell(unsafe { &qp.vqp.__bindgen_anon_1.qp }) {
            if err == 0 {
                return Err((e, ptr::null_mut()));
            }
        }
    }
    if err != 0 {
        Err((err, wr))
    } else {
        Ok(())
    }
}

pub(crate) unsafe extern "C" fn post_send(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    if bad_wr.is_null() {
        return sys::EINVAL;
    }
    // SAFETY: ibqp is one create_qp made; bad_wr is the caller's out pointer.
    let (qp, bad) = unsafe { (&*ibqp.cast::<Qp>(), &mut *bad_wr) };
    *bad = ptr::null_mut();
    match post_chain(qp, wr, false) {
        Ok(()) => 0,
        Err((e, at)) => {
            *bad = at;
            e
        }
    }
}

pub(crate) unsafe extern "C" fn post_recv(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    if bad_wr.is_null() {
        return sys::EINVAL;
    }
    // SAFETY: ibqp is one create_qp made; bad_wr is the caller's out pointer.
    let (qp, bad) = unsafe { (&*ibqp.cast::<Qp>(), &mut *bad_wr) };
    *bad = ptr::null_mut();
    // SAFETY: reading the cached QP state.
    if unsafe { qp.vqp.__bindgen_anon_1.qp.state } == abi::ibv_qp_state::IBV_QPS_RESET {
        // IBA C10-97.2.1: no receives may be posted in Reset.
        *bad = wr;
        return sys::EINVAL;
    }
    let guard = lock(&qp.rq);
    let Some(rq) = guard.as_ref() else {
        *bad = wr;
        return sys::EINVAL;
    };
    let rc = rq.post(wr, bad);
    if rq.ring.take_doorbell_request() {
        // The WQEs are posted whatever becomes of the doorbell: if it fails (a
        // device gone), the kernel's own recheck of the ring still finds them.
        // SAFETY: reading the QP's handle and context.
        let _ = ring_recv_doorbell(unsafe { &qp.vqp.__bindgen_anon_1.qp });
    }
    rc
}

pub(crate) unsafe extern "C" fn bind_mw(
    ibqp: *mut ibv_qp,
    mw: *mut abi::ibv_mw,
    bind: *mut abi::ibv_mw_bind,
) -> c_int {
    use abi::*;
    if mw.is_null() || bind.is_null() {
        return sys::EINVAL;
    }
    // SAFETY: the application's window and bind description.
    let (m, b) = unsafe { (&mut *mw, &*bind) };
    // Type 2 windows are bound with a posted IBV_WR_BIND_MW; ibv_bind_mw is
    // for type 1 (IBA 10.6.7.2.1). Zero-based type 1 windows do not exist.
    if m.type_ != ibv_mw_type::IBV_MW_TYPE_1
        || b.bind_info.mr.is_null()
        || b.bind_info.mw_access_flags & ibv_access_flags::IBV_ACCESS_ZERO_BASED != 0
    {
        return sys::EINVAL;
    }
    let rkey = wqe::next_rkey(m.rkey);
    let mut wr = ibv_send_wr {
        wr_id: b.wr_id,
        opcode: ibv_wr_opcode::IBV_WR_BIND_MW,
        send_flags: b.send_flags,
        ..Default::default()
    };
    wr.__bindgen_anon_2.bind_mw = ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
        mw,
        rkey,
        bind_info: b.bind_info,
    };
    let mut bad = ptr::null_mut();
    // SAFETY: wr is a valid one-element chain; bad is a valid out pointer.
    let ret = unsafe { post_send(ibqp, &mut wr, &mut bad) };
    if ret == 0 {
        // The verbs give the window its new key when the bind is posted.
        m.rkey = rkey;
    }
    ret
}
