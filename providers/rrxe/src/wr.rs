// SPDX-License-Identifier: GPL-2.0

//! The extended send API (`ibv_wr_start`, `ibv_wr_send`, `ibv_wr_set_sge`, …,
//! `ibv_wr_complete`): a batch of requests built one call at a time and
//! posted together.
//!
//! Each builder starts a request from the QP's current `wr_id` and
//! `wr_flags`; setters complete the last one. The batch keeps its own copies
//! of scatter lists and inline data (the application may reuse them as soon
//! as a setter returns) and `wr_complete` posts it through the same checks
//! and WQE writer as `ibv_post_send`, all or nothing: a request refused
//! anywhere in the batch (a bad setter, no room in the ring) posts none.
//! The batch's requests and their buffers are kept from one batch to the
//! next, so a QP in steady use posts without allocating.

use crate::abi::{self, ibv_qp_ex, ibv_send_wr, ibv_sge};
use crate::qp::{self, Qp};
use crate::sys;
use core::ffi::c_int;
use core::ptr;

/// One request being built.
struct Pending {
    wr: ibv_send_wr,
    sges: Vec<ibv_sge>,
    /// Inline data, copied when set; posted as one SGE over this buffer.
    inline: Vec<u8>,
    is_inline: bool,
}

/// The requests between `wr_start` and `wr_complete` (the first `n` of
/// `wrs`; those after them are kept for their buffers), and the first error
/// a builder or setter met (reported by `wr_complete`).
#[derive(Default)]
pub(crate) struct Batch {
    wrs: Vec<Pending>,
    n: usize,
    err: c_int,
}

impl Batch {
    fn reset(&mut self) {
        self.n = 0;
        self.err = 0;
    }

    /// Starts the next request, reusing a kept one's buffers.
    fn push(&mut self, wr: ibv_send_wr) {
        if let Some(p) = self.wrs.get_mut(self.n) {
            p.wr = wr;
            p.sges.clear();
            p.inline.clear();
            p.is_inline = false;
        } else {
            self.wrs.push(Pending {
                wr,
                sges: Vec::new(),
                inline: Vec::new(),
                is_inline: false,
            });
        }
        self.n += 1;
    }

    fn last(&mut self) -> Option<&mut Pending> {
        self.wrs[..self.n].last_mut()
    }
}

impl Pending {
    /// Makes `bufs`, copied, the request's inline data.
    fn set_inline(&mut self, bufs: &[(*const u8, usize)]) {
        self.sges.clear();
        self.inline.clear();
        self.is_inline = true;
        for &(addr, len) in bufs {
            if len > 0 {
                // SAFETY: the application's buffer of len bytes, valid for
                // the call (the setters check for NULL).
                self.inline
                    .extend_from_slice(unsafe { core::slice::from_raw_parts(addr, len) });
            }
        }
    }
}

/// Which `IBV_QP_EX_WITH_*` operations each QP type accepts: those its
/// transport defines (IBA Table 38 for RC, UC and UD; A14.3 for XRC, which
/// has RC's operations but no memory window binds).
pub(crate) fn supported(qp_type: abi::ibv_qp_type::Type, ops: u64) -> bool {
    use abi::ibv_qp_create_send_ops_flags::*;
    use abi::ibv_qp_type::*;
    let rc = IBV_QP_EX_WITH_RDMA_WRITE
        | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
        | IBV_QP_EX_WITH_SEND
        | IBV_QP_EX_WITH_SEND_WITH_IMM
        | IBV_QP_EX_WITH_RDMA_READ
        | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
        | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
        | IBV_QP_EX_WITH_LOCAL_INV
        | IBV_QP_EX_WITH_BIND_MW
        | IBV_QP_EX_WITH_SEND_WITH_INV;
    let allowed = match qp_type {
        IBV_QPT_RC => rc | IBV_QP_EX_WITH_ATOMIC_WRITE,
        IBV_QPT_XRC_SEND => rc & !(IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV),
        IBV_QPT_UC => {
            IBV_QP_EX_WITH_RDMA_WRITE
                | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
                | IBV_QP_EX_WITH_SEND
                | IBV_QP_EX_WITH_SEND_WITH_IMM
                | IBV_QP_EX_WITH_BIND_MW
                | IBV_QP_EX_WITH_SEND_WITH_INV
        }
        IBV_QPT_UD => IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
        _ => 0,
    };
    ops & !u64::from(allowed) == 0
}

/// Fills in the extended QP's builders.
pub(crate) fn install(ex: &mut ibv_qp_ex) {
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_send = Some(wr_send);
    ex.wr_send_imm = Some(wr_send_imm);
    ex.wr_send_inv = Some(wr_send_inv);
    ex.wr_rdma_write = Some(wr_rdma_write);
    ex.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    ex.wr_rdma_read = Some(wr_rdma_read);
    ex.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    ex.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    ex.wr_bind_mw = Some(wr_bind_mw);
    ex.wr_local_inv = Some(wr_local_inv);
    ex.wr_send_tso = Some(wr_send_tso);
    ex.wr_atomic_write = Some(wr_atomic_write);
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
    ex.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
}

fn qp_of<'a>(ex: *mut ibv_qp_ex) -> &'a Qp {
    // SAFETY: the builders are installed only on QPs of this provider, whose
    // ibv_qp_ex is at offset 0 of a leaked Box<Qp>, alive while the
    // application uses it.
    unsafe { &*ex.cast::<Qp>() }
}

/// Starts a request with `opcode` from the QP's wr_id and wr_flags, and lets
/// `f` fill in its operation fields.
fn begin(ex: *mut ibv_qp_ex, opcode: abi::ibv_wr_opcode::Type, f: impl FnOnce(&mut ibv_send_wr)) {
    // SAFETY: ex is valid (qp_of); the application set these two fields.
    let (wr_id, flags) = unsafe { ((*ex).wr_id, (*ex).wr_flags) };
    let mut wr = ibv_send_wr {
        wr_id,
        opcode,
        send_flags: flags,
        ..Default::default()
    };
    f(&mut wr);
    qp::lock(&qp_of(ex).batch).push(wr);
}

/// Applies a setter to the last request; without one the batch fails.
fn last(ex: *mut ibv_qp_ex, f: impl FnOnce(&mut Pending)) {
    let mut b = qp::lock(&qp_of(ex).batch);
    match b.last() {
        Some(p) => f(p),
        None => {
            if b.err == 0 {
                b.err = sys::EINVAL;
            }
        }
    }
}

fn fail(ex: *mut ibv_qp_ex, err: c_int) {
    let mut b = qp::lock(&qp_of(ex).batch);
    if b.err == 0 {
        b.err = err;
    }
}

unsafe extern "C" fn wr_start(ex: *mut ibv_qp_ex) {
    qp::lock(&qp_of(ex).batch).reset();
}

unsafe extern "C" fn wr_abort(ex: *mut ibv_qp_ex) {
    qp::lock(&qp_of(ex).batch).reset();
}

unsafe extern "C" fn wr_complete(ex: *mut ibv_qp_ex) -> c_int {
    let qp = qp_of(ex);
    // Held while posting (then the send queue's lock is taken: always in
    // that order), so the batch's buffers stay put.
    let mut b = qp::lock(&qp.batch);
    let (n, err) = (b.n, b.err);
    b.reset();
    if err != 0 || n == 0 {
        return err;
    }
    let wrs = &mut b.wrs[..n];
    // Point each request at its own scatter list or inline copy, then chain
    // them.
    for p in wrs.iter_mut() {
        if p.is_inline {
            p.sges.clear();
            p.sges.push(ibv_sge {
                addr: p.inline.as_ptr() as u64,
                length: p.inline.len() as u32,
                lkey: 0,
            });
            p.wr.send_flags |= abi::ibv_send_flags::IBV_SEND_INLINE;
        }
        p.wr.num_sge = p.sges.len() as c_int;
        p.wr.sg_list = if p.sges.is_empty() {
            ptr::null_mut()
        } else {
            p.sges.as_mut_ptr()
        };
        p.wr.next = ptr::null_mut();
    }
    let base = wrs.as_mut_ptr();
    for i in 1..n {
        // SAFETY: i - 1 and i are within the batch, which nothing else
        // touches while its lock is held.
        unsafe { (*base.add(i - 1)).wr.next = ptr::addr_of_mut!((*base.add(i)).wr) };
    }
    // SAFETY: base points at the batch's first request (n > 0).
    let head = unsafe { ptr::addr_of_mut!((*base).wr) };
    match qp::post_chain(qp, head, true) {
        Ok(()) => 0,
        Err((e, _)) => e,
    }
}

unsafe extern "C" fn wr_send(ex: *mut ibv_qp_ex) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_SEND, |_| {});
}

unsafe extern "C" fn wr_send_imm(ex: *mut ibv_qp_ex, imm: abi::__be32) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_SEND_WITH_IMM, |wr| {
        wr.__bindgen_anon_1.imm_data = imm
    });
}

unsafe extern "C" fn wr_send_inv(ex: *mut ibv_qp_ex, rkey: u32) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_SEND_WITH_INV, |wr| {
        wr.__bindgen_anon_1.invalidate_rkey = rkey
    });
}

unsafe extern "C" fn wr_rdma_write(ex: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_RDMA_WRITE, |wr| {
        wr.wr.rdma = abi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: addr,
            rkey,
        };
    });
}

unsafe extern "C" fn wr_rdma_write_imm(ex: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: abi::__be32) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM, |wr| {
        wr.wr.rdma = abi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: addr,
            rkey,
        };
        wr.__bindgen_anon_1.imm_data = imm;
    });
}

unsafe extern "C" fn wr_rdma_read(ex: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_RDMA_READ, |wr| {
        wr.wr.rdma = abi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: addr,
            rkey,
        };
    });
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    ex: *mut ibv_qp_ex,
    rkey: u32,
    addr: u64,
    compare: u64,
    swap: u64,
) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP, |wr| {
        wr.wr.atomic = abi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: addr,
            compare_add: compare,
            swap,
            rkey,
        };
    });
}

unsafe extern "C" fn wr_atomic_fetch_add(ex: *mut ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD, |wr| {
        wr.wr.atomic = abi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: addr,
            compare_add: add,
            swap: 0,
            rkey,
        };
    });
}

unsafe extern "C" fn wr_bind_mw(
    ex: *mut ibv_qp_ex,
    mw: *mut abi::ibv_mw,
    rkey: u32,
    info: *const abi::ibv_mw_bind_info,
) {
    if info.is_null() {
        fail(ex, sys::EINVAL);
        return;
    }
    // SAFETY: the application's bind description, valid for the call; it is
    // copied.
    let bind_info = unsafe { *info };
    begin(ex, abi::ibv_wr_opcode::IBV_WR_BIND_MW, |wr| {
        wr.__bindgen_anon_2.bind_mw = abi::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
            mw,
            rkey,
            bind_info,
        };
    });
}

unsafe extern "C" fn wr_local_inv(ex: *mut ibv_qp_ex, rkey: u32) {
    begin(ex, abi::ibv_wr_opcode::IBV_WR_LOCAL_INV, |wr| {
        wr.__bindgen_anon_1.invalidate_rkey = rkey
    });
}

/// TSO sends are for raw Ethernet QPs, which rrxe does not have.
unsafe extern "C" fn wr_send_tso(
    ex: *mut ibv_qp_ex,
    _hdr: *mut core::ffi::c_void,
    _hdr_sz: u16,
    _mss: u16,
) {
    fail(ex, sys::EOPNOTSUPP);
}

/// Atomic Write (IBA 1.5): the eight bytes are copied now and travel as
/// inline data.
unsafe extern "C" fn wr_atomic_write(
    ex: *mut ibv_qp_ex,
    rkey: u32,
    addr: u64,
    value: *const core::ffi::c_void,
) {
    if value.is_null() {
        fail(ex, sys::EINVAL);
        return;
    }
    begin(ex, abi::ibv_wr_opcode::IBV_WR_ATOMIC_WRITE, |wr| {
        wr.wr.rdma = abi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: addr,
            rkey,
        };
    });
    last(ex, |p| p.set_inline(&[(value.cast::<u8>(), 8)]));
}

unsafe extern "C" fn wr_set_ud_addr(ex: *mut ibv_qp_ex, ah: *mut abi::ibv_ah, qpn: u32, qkey: u32) {
    last(ex, |p| {
        p.wr.wr.ud = abi::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
            ah,
            remote_qpn: qpn,
            remote_qkey: qkey,
        };
    });
}

unsafe extern "C" fn wr_set_xrc_srqn(ex: *mut ibv_qp_ex, srqn: u32) {
    last(ex, |p| p.wr.qp_type.xrc.remote_srqn = srqn);
}

unsafe extern "C" fn wr_set_sge(ex: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    last(ex, |p| {
        p.is_inline = false;
        p.sges.clear();
        p.sges.push(ibv_sge { addr, length, lkey });
    });
}

unsafe extern "C" fn wr_set_sge_list(ex: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    if n > 0 && list.is_null() {
        fail(ex, sys::EINVAL);
        return;
    }
    let sges: &[ibv_sge] = if n == 0 {
        &[]
    } else {
        // SAFETY: the application's array of n SGEs, valid for the call; it
        // is copied.
        unsafe { core::slice::from_raw_parts(list, n) }
    };
    last(ex, |p| {
        p.is_inline = false;
        p.sges.clear();
        p.sges.extend_from_slice(sges);
    });
}

unsafe extern "C" fn wr_set_inline_data(
    ex: *mut ibv_qp_ex,
    addr: *mut core::ffi::c_void,
    length: usize,
) {
    if length > 0 && addr.is_null() {
        fail(ex, sys::EINVAL);
        return;
    }
    last(ex, |p| {
        p.set_inline(&[(addr.cast::<u8>().cast_const(), length)])
    });
}

unsafe extern "C" fn wr_set_inline_data_list(
    ex: *mut ibv_qp_ex,
    n: usize,
    list: *const abi::ibv_data_buf,
) {
    if n > 0 && list.is_null() {
        fail(ex, sys::EINVAL);
        return;
    }
    let bufs: Vec<(*const u8, usize)> = if n == 0 {
        Vec::new()
    } else {
        // SAFETY: the application's array of n buffers, valid for the call.
        unsafe { core::slice::from_raw_parts(list, n) }
            .iter()
            .map(|b| (b.addr.cast::<u8>().cast_const(), b.length))
            .collect()
    };
    if bufs.iter().any(|b| b.1 > 0 && b.0.is_null()) {
        fail(ex, sys::EINVAL);
        return;
    }
    last(ex, |p| p.set_inline(&bufs));
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi::ibv_qp_create_send_ops_flags::*;
    use abi::ibv_qp_type::*;

    #[test]
    fn operations_follow_the_transport() {
        let send = u64::from(IBV_QP_EX_WITH_SEND);
        let read = u64::from(IBV_QP_EX_WITH_RDMA_READ);
        let bind = u64::from(IBV_QP_EX_WITH_BIND_MW);
        assert!(supported(IBV_QPT_RC, send | read | bind));
        assert!(supported(IBV_QPT_XRC_SEND, send | read));
        assert!(!supported(IBV_QPT_XRC_SEND, bind));
        assert!(!supported(IBV_QPT_UC, read));
        assert!(supported(IBV_QPT_UD, send));
        assert!(!supported(IBV_QPT_UD, u64::from(IBV_QP_EX_WITH_RDMA_WRITE)));
        assert!(!supported(IBV_QPT_XRC_RECV, send));
        assert!(!supported(IBV_QPT_RC, u64::from(IBV_QP_EX_WITH_TSO)));
    }
}
