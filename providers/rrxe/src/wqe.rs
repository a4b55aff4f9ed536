// SPDX-License-Identifier: GPL-2.0

//! Work-queue elements: a work request checked and written into a ring
//! slot in the layout rrxe reads (`struct rxe_send_wqe`, `struct
//! rxe_recv_wqe`; Documentation/rrxe/uverbs-abi.rst, section 5).
//!
//! Everything is checked before the slot is touched, so a refused request
//! leaves the ring as it was. The kernel checks again what it relies on;
//! these checks exist to fail at post time with `bad_wr` pointing at the
//! culprit, as the verbs require (IBA 11.4.1.1, C11-4: an invalid request is
//! an immediate error), rather than with an error completion later.

use crate::abi::{self, ibv_recv_wr, ibv_send_wr, ibv_sge, rxe_recv_wqe};
use crate::ah::Ah;
use crate::sys;
use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

/// What a send queue accepts, from the capabilities the kernel granted.
pub(crate) struct SendLimits {
    pub(crate) max_sge: u32,
    pub(crate) max_inline: u32,
    pub(crate) slot_len: usize,
    pub(crate) qp_type: abi::ibv_qp_type::Type,
}

fn sges(list: *const ibv_sge, num: c_int, max: u32) -> Result<&'static [ibv_sge], c_int> {
    let n = u32::try_from(num).map_err(|_| sys::EINVAL)?;
    if n > max {
        return Err(sys::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(sys::EINVAL);
    }
    // SAFETY: the verbs contract: sg_list points at num_sge entries that stay
    // valid for the duration of the post call; the slice does not outlive it
    // (callers use it before returning).
    Ok(unsafe { core::slice::from_raw_parts(list, n as usize) })
}

fn total_length(sges: &[ibv_sge]) -> Result<u32, c_int> {
    // A message is at most 2^31 bytes (IBA 9.4, and ibv_sge.length is u32):
    // a sum that overflows u32 is no message at all.
    sges.iter()
        .try_fold(0u32, |acc, s| acc.checked_add(s.length).ok_or(sys::EINVAL))
}

/// The MW key a bind installs: same index, next consumer key (the low 8
/// bits, IBA 10.6.7.2.2 and 9.4.1.1.2 "the Consumer Key").
pub(crate) fn next_rkey(rkey: u32) -> u32 {
    (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
}

/// Checks `wr` and writes it into `slot`, the free slot at the producer.
///
/// # Safety
///
/// `slot` must be the producer's free slot of a send ring whose slots are
/// `lim.slot_len` bytes, and `wr` a work request as the verbs define it
/// (its pointers valid for this call).
pub(crate) unsafe fn write_send(
    slot: *mut u8,
    wr: &ibv_send_wr,
    lim: &SendLimits,
    ssn: u32,
) -> Result<(), c_int> {
    use abi::*;
    let sg = sges(wr.sg_list, wr.num_sge, lim.max_sge)?;
    let length = total_length(sg)?;
    let inline = wr.send_flags & ibv_send_flags::IBV_SEND_INLINE != 0;
    let op = wr.opcode;
    let is_atomic = op == ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP
        || op == ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD;
    // SAFETY: reading the union member the opcode selects (all are plain
    // data; a member that does not apply is never used).
    let (rdma, atomic, ud, bind) = unsafe {
        (
            wr.wr.rdma,
            wr.wr.atomic,
            wr.wr.ud,
            wr.__bindgen_anon_2.bind_mw,
        )
    };
    // SAFETY: as above; imm_data and invalidate_rkey share their 32 bits.
    let ex = unsafe { wr.__bindgen_anon_1.invalidate_rkey };

    if is_atomic && (length < 8 || atomic.remote_addr & 7 != 0) {
        // IBA 9.4.5: an atomic operates on an aligned 64-bit word.
        return Err(sys::EINVAL);
    }
    if inline && length > lim.max_inline {
        return Err(sys::EINVAL);
    }
    // Atomic Write (IBA 1.5, 9.4.7): eight bytes, given inline, to an aligned
    // address; the value goes where inline data would (uverbs-abi.rst 5).
    let atomic_write = op == ibv_wr_opcode::IBV_WR_ATOMIC_WRITE;
    if atomic_write && (!inline || length != 8 || rdma.remote_addr & 7 != 0) {
        return Err(sys::EINVAL);
    }
    let ud_send = lim.qp_type == ibv_qp_type::IBV_QPT_UD
        && (op == ibv_wr_opcode::IBV_WR_SEND || op == ibv_wr_opcode::IBV_WR_SEND_WITH_IMM);
    if ud_send && ud.ah.is_null() {
        return Err(sys::EINVAL);
    }
    if op == ibv_wr_opcode::IBV_WR_BIND_MW {
        let rc_uc =
            lim.qp_type == ibv_qp_type::IBV_QPT_RC || lim.qp_type == ibv_qp_type::IBV_QPT_UC;
        if length != 0 || !sg.is_empty() || ex != 0 || !rc_uc || bind.mw.is_null() {
            return Err(sys::EINVAL);
        }
    }
    let tail = if inline {
        length as usize
    } else {
        size_of_val(sg)
    };
    if size_of::<rxe_send_wqe>() + tail > lim.slot_len {
        return Err(sys::EINVAL);
    }

    // SAFETY: the caller guarantees slot is a free slot of slot_len bytes,
    // which holds the fixed part (checked just above with the tail).
    unsafe { ptr::write_bytes(slot, 0, size_of::<rxe_send_wqe>()) };
    // SAFETY: as above; slots are 64-byte aligned and nothing else refers to
    // a free slot.
    let wqe = unsafe { &mut *slot.cast::<rxe_send_wqe>() };
    wqe.wr.wr_id = wr.wr_id;
    wqe.wr.opcode = op;
    // The value of an Atomic Write is inline data only as far as this
    // provider is concerned; the WQE carries it in its own place.
    wqe.wr.send_flags = if atomic_write {
        wr.send_flags & !ibv_send_flags::IBV_SEND_INLINE
    } else {
        wr.send_flags
    };
    wqe.wr.ex.invalidate_rkey = ex;
    wqe.iova = if is_atomic {
        atomic.remote_addr
    } else {
        rdma.remote_addr
    };
    match op {
        ibv_wr_opcode::IBV_WR_RDMA_WRITE
        | ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM
        | ibv_wr_opcode::IBV_WR_RDMA_READ
        | ibv_wr_opcode::IBV_WR_ATOMIC_WRITE => {
            wqe.wr.wr.rdma = rxe_send_wr__bindgen_ty_2__bindgen_ty_1 {
                remote_addr: rdma.remote_addr,
                rkey: rdma.rkey,
                reserved: 0,
            };
        }
        ibv_wr_opcode::IBV_WR_SEND | ibv_wr_opcode::IBV_WR_SEND_WITH_IMM if ud_send => {
            // SAFETY: ud.ah is non-NULL (checked) and every AH of this
            // provider is an Ah, whose ibv_ah comes first.
            let ah_num = unsafe { (*ud.ah.cast::<Ah>()).ah_num };
            wqe.wr.wr.ud.remote_qpn = ud.remote_qpn;
            wqe.wr.wr.ud.remote_qkey = ud.remote_qkey;
            wqe.wr.wr.ud.ah_num = ah_num;
        }
        ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP | ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD => {
            wqe.wr.wr.atomic = rxe_send_wr__bindgen_ty_2__bindgen_ty_2 {
                remote_addr: atomic.remote_addr,
                compare_add: atomic.compare_add,
                swap: atomic.swap,
                rkey: atomic.rkey,
                reserved: 0,
            };
        }
        ibv_wr_opcode::IBV_WR_BIND_MW => {
            let info = bind.bind_info;
            let mr_lkey = if info.mr.is_null() {
                0
            } else {
                // SAFETY: a non-NULL MR of the bind names a registered MR.
                unsafe { (*info.mr).lkey }
            };
            // SAFETY: bind.mw is non-NULL (checked) and names a window.
            let mw_rkey = unsafe { (*bind.mw).rkey };
            wqe.wr.wr.mw = rxe_send_wr__bindgen_ty_2__bindgen_ty_4 {
                addr: info.addr,
                length: info.length,
                mr_lkey,
                mw_rkey,
                rkey: bind.rkey,
                access: info.mw_access_flags,
            };
        }
        _ => {}
    }
    if lim.qp_type == ibv_qp_type::IBV_QPT_XRC_SEND {
        // rrxe's one extension of rdma_rxe's WQE: the remote XRC SRQ number,
        // which every request's XRCETH carries (A14.4.1), in the word rdma_rxe
        // leaves reserved (uverbs-abi.rst, section 5).
        // SAFETY: reading the xrc member of the per-transport union.
        wqe.wr.reserved = unsafe { wr.qp_type.xrc.remote_srqn };
    }
    wqe.dma.length = length;
    wqe.dma.resid = length;
    wqe.dma.num_sge = if atomic_write { 0 } else { sg.len() as u32 };
    wqe.ssn = ssn;

    // SAFETY: the tail fits the slot (checked); the sources are the caller's
    // SGE array and, for inline data, the buffers it names, valid for this
    // call by the verbs contract.
    unsafe {
        let mut dst = slot.add(size_of::<rxe_send_wqe>());
        if inline {
            for s in sg {
                ptr::copy_nonoverlapping(s.addr as usize as *const u8, dst, s.length as usize);
                dst = dst.add(s.length as usize);
            }
        } else {
            ptr::copy_nonoverlapping(sg.as_ptr().cast::<u8>(), dst, tail);
        }
    }
    Ok(())
}

/// Checks `wr` and writes it into `slot`, the free slot at the producer of
/// a receive ring (an RQ or an SRQ).
///
/// # Safety
///
/// `slot` must be the producer's free slot of a receive ring whose slots are
/// `slot_len` bytes, and `wr` a receive request as the verbs define it.
pub(crate) unsafe fn write_recv(
    slot: *mut u8,
    wr: &ibv_recv_wr,
    max_sge: u32,
    slot_len: usize,
) -> Result<(), c_int> {
    let sg = sges(wr.sg_list, wr.num_sge, max_sge)?;
    let length = total_length(sg)?;
    let tail = size_of_val(sg);
    if size_of::<rxe_recv_wqe>() + tail > slot_len {
        return Err(sys::EINVAL);
    }
    // SAFETY: the slot is free and holds header and SGEs (checked above).
    unsafe {
        ptr::write_bytes(slot, 0, size_of::<rxe_recv_wqe>());
        let wqe = &mut *slot.cast::<rxe_recv_wqe>();
        wqe.wr_id = wr.wr_id;
        wqe.dma.length = length;
        wqe.dma.resid = length;
        wqe.dma.num_sge = sg.len() as u32;
        ptr::copy_nonoverlapping(
            sg.as_ptr().cast::<u8>(),
            slot.add(size_of::<rxe_recv_wqe>()),
            tail,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::rxe_send_wqe;

    /// A ring slot: the kernel's are at least 64-byte aligned.
    #[repr(C, align(64))]
    struct Slot([u8; 256]);

    #[test]
    fn next_rkey_changes_only_the_consumer_key() {
        assert_eq!(next_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(next_rkey(0x1234_5601), 0x1234_5602);
    }

    #[test]
    fn wqe_layouts_are_rxe_abi() {
        assert_eq!(size_of::<rxe_send_wqe>(), 208);
        assert_eq!(size_of::<rxe_recv_wqe>(), 40);
        assert_eq!(size_of::<ibv_sge>(), size_of::<abi::rxe_sge>());
    }

    #[test]
    fn refused_requests_leave_the_slot_alone() {
        let lim = SendLimits {
            max_sge: 1,
            max_inline: 16,
            slot_len: 256,
            qp_type: abi::ibv_qp_type::IBV_QPT_RC,
        };
        let mut slot = Slot([0xa5u8; 256]);
        let sge = [ibv_sge {
            addr: 0,
            length: 4,
            lkey: 1,
        }; 2];
        let mut wr = ibv_send_wr {
            sg_list: sge.as_ptr().cast_mut(),
            num_sge: 2,
            ..Default::default()
        };
        // SAFETY: slot is a 256-byte buffer; wr's SGE array outlives the call.
        assert_eq!(
            unsafe { write_send(slot.0.as_mut_ptr(), &wr, &lim, 0) },
            Err(sys::EINVAL)
        );
        wr.num_sge = 1;
        wr.opcode = abi::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD;
        // SAFETY: as above.
        assert_eq!(
            unsafe { write_send(slot.0.as_mut_ptr(), &wr, &lim, 0) },
            Err(sys::EINVAL)
        );
        assert!(slot.0.iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn send_wqe_carries_the_request() {
        let lim = SendLimits {
            max_sge: 2,
            max_inline: 32,
            slot_len: 256,
            qp_type: abi::ibv_qp_type::IBV_QPT_RC,
        };
        let mut slot = Slot([0xa5u8; 256]);
        let sge = [
            ibv_sge {
                addr: 0x1000,
                length: 100,
                lkey: 7,
            },
            ibv_sge {
                addr: 0x2000,
                length: 28,
                lkey: 8,
            },
        ];
        let mut wr = ibv_send_wr {
            wr_id: 42,
            sg_list: sge.as_ptr().cast_mut(),
            num_sge: 2,
            opcode: abi::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
            send_flags: abi::ibv_send_flags::IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr.rdma.remote_addr = 0xdead_0000;
        wr.wr.rdma.rkey = 0x55;
        let slot_ptr = slot.0.as_mut_ptr();
        // SAFETY: slot is an aligned 256-byte buffer; wr's SGEs outlive the call.
        assert_eq!(unsafe { write_send(slot_ptr, &wr, &lim, 9) }, Ok(()));
        // SAFETY: the slot now holds a WQE.
        let wqe = unsafe { ptr::read_unaligned(slot_ptr.cast::<rxe_send_wqe>()) };
        assert_eq!({ wqe.wr.wr_id }, 42);
        assert_eq!(wqe.dma.length, 128);
        assert_eq!(wqe.dma.num_sge, 2);
        assert_eq!(wqe.ssn, 9);
        assert_eq!({ wqe.iova }, 0xdead_0000);
        assert_eq!(&slot.0[208..216], &0x1000u64.to_ne_bytes());
        assert_eq!(&slot.0[216..220], &100u32.to_ne_bytes());
        assert_eq!(&slot.0[236..240], &8u32.to_ne_bytes());
        assert!(slot.0[240..].iter().all(|&b| b == 0xa5));
    }
}
