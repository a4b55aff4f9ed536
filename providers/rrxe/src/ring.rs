// SPDX-License-Identifier: GPL-2.0

//! A queue shared with the kernel: `struct rxe_queue_buf` mapped from the
//! uverbs file (Documentation/rrxe/uverbs-abi.rst, sections 2 and 3).
//!
//! Each side owns one index and only reads the other's. Indices are slot
//! numbers already masked; one slot always stays empty, so
//! `producer == consumer` means empty and `producer + 1 == consumer` full.
//! Whoever publishes an index does so with a release store after writing or
//! reading the slots it covers, and the other side loads it with acquire
//! before touching those slots.

use crate::abi::{self, mminfo, rxe_queue_buf};
use crate::sys;
use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use core::ptr::{self, NonNull};
use core::sync::atomic::{fence, AtomicU32, Ordering};

/// rrxe's word in the header's padding (`pad_1`, on a cache line of its own):
/// non-zero while the kernel asks the producer of a QP's receive queue for a
/// doorbell, once the queue holds that many WQEs
/// (Documentation/rrxe/uverbs-abi.rst).
const DOORBELL_WANTED: usize = 64;
/// rrxe's second word there: non-zero while a run of a connected QP's task is
/// going that will read the send queue's producer index again before it ends,
/// so that a post needs no doorbell (Documentation/rrxe/uverbs-abi.rst).
const RUN_PENDING: usize = 68;
const _: () = assert!(
    DOORBELL_WANTED >= offset_of!(rxe_queue_buf, pad_1)
        && RUN_PENDING + 4 <= offset_of!(rxe_queue_buf, producer_index)
);

/// Slot sizes the kernel can choose: 64 bytes (a cache line) up to a WQE of
/// 32 SGEs or 512 bytes inline, rounded to a power of two.
const MAX_LOG2_SLOT: u32 = 16;

/// One mapped queue. Dropping it unmaps it.
pub(crate) struct Ring {
    buf: NonNull<rxe_queue_buf>,
    map_len: usize,
    mask: u32,
    log2_slot: u32,
}

impl Ring {
    /// Maps the queue the kernel described in `mi` and checks that its header
    /// describes slots inside the mapping, so no index can reach past it.
    pub(crate) fn map(cmd_fd: c_int, mi: &mminfo) -> Result<Ring, c_int> {
        let len = mi.size as usize;
        let data_off = size_of::<rxe_queue_buf>();
        if len <= data_off {
            return Err(abi::EINVAL as c_int);
        }
        // SAFETY: a fresh shared mapping of the uverbs file at the offset the
        // kernel handed out for this queue; nothing else refers to it yet.
        let addr = unsafe {
            abi::mmap(
                ptr::null_mut(),
                len,
                (abi::PROT_READ | abi::PROT_WRITE) as c_int,
                abi::MAP_SHARED as c_int,
                cmd_fd,
                mi.offset as _,
            )
        };
        if addr as isize == -1 {
            return Err(sys::last_error());
        }
        let buf = NonNull::new(addr.cast::<rxe_queue_buf>()).ok_or(abi::EINVAL as c_int)?;
        // SAFETY: the mapping is at least the header long (checked above);
        // the kernel wrote these two fields before handing out the offset and
        // never changes them.
        let (log2_slot, mask) =
            unsafe { ((*buf.as_ptr()).log2_elem_size, (*buf.as_ptr()).index_mask) };
        let ring = Ring {
            buf,
            map_len: len,
            mask,
            log2_slot,
        };
        let slots = u64::from(mask) + 1;
        let fits = log2_slot <= MAX_LOG2_SLOT
            && slots.is_power_of_two()
            && (data_off as u64).saturating_add(slots << log2_slot) <= len as u64;
        if fits {
            Ok(ring)
        } else {
            Err(abi::EINVAL as c_int)
        }
    }

    /// Bytes per slot.
    pub(crate) fn slot_len(&self) -> usize {
        1usize << self.log2_slot
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: offset is that of a u32 index in the mapped header, which
        // lives as long as self; AtomicU32 has u32's layout, and the kernel
        // accesses the same word atomically.
        unsafe {
            &*self
                .buf
                .as_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<AtomicU32>()
        }
    }

    fn producer(&self) -> &AtomicU32 {
        self.index(offset_of!(rxe_queue_buf, producer_index))
    }

    fn consumer(&self) -> &AtomicU32 {
        self.index(offset_of!(rxe_queue_buf, consumer_index))
    }

    fn slot(&self, index: u32) -> *mut u8 {
        let off = size_of::<rxe_queue_buf>() + (((index & self.mask) as usize) << self.log2_slot);
        // SAFETY: map() checked that every masked slot lies in the mapping.
        unsafe { self.buf.as_ptr().cast::<u8>().add(off) }
    }

    /// Producer side: the slot `k` places after the producer, if the ring has
    /// room for `k + 1` more elements. Slots are the producer's until
    /// published.
    pub(crate) fn free_slot_at(&self, k: u32) -> Option<*mut u8> {
        let prod = self.producer().load(Ordering::Relaxed) & self.mask;
        let cons = self.consumer().load(Ordering::Acquire) & self.mask;
        let used = prod.wrapping_sub(cons) & self.mask;
        if u64::from(used) + u64::from(k) + 1 > u64::from(self.mask) {
            None
        } else {
            Some(self.slot(prod.wrapping_add(k)))
        }
    }

    /// Producer side: the slot the next element goes to, or None if the ring
    /// is full.
    pub(crate) fn next_free(&self) -> Option<*mut u8> {
        self.free_slot_at(0)
    }

    /// Producer side: hands the next `n` slots to the kernel, in one release
    /// store after they were written.
    pub(crate) fn publish_n(&self, n: u32) {
        let prod = self.producer().load(Ordering::Relaxed);
        self.producer()
            .store(prod.wrapping_add(n) & self.mask, Ordering::Release);
    }

    /// Producer side: hands the slot `next_free` returned to the kernel.
    pub(crate) fn publish(&self) {
        self.publish_n(1);
    }

    /// Producer side, after publishing: whether the kernel asked for a
    /// doorbell and the ring now holds the WQEs it asked for (posted, not yet
    /// consumed), taking the request so that one post of a burst rings. The
    /// kernel raises it, then reads the producer index; this side published
    /// the index and reads the request, each with a full fence in between, so
    /// a post is either seen by the kernel or rings, or is found by the
    /// kernel's next recheck of the ring (fewer than asked for).
    pub(crate) fn take_doorbell_request(&self) -> bool {
        fence(Ordering::SeqCst);
        let word = self.index(DOORBELL_WANTED);
        let after = word.load(Ordering::Relaxed);
        if after == 0 {
            return false;
        }
        let prod = self.producer().load(Ordering::Relaxed) & self.mask;
        let cons = self.consumer().load(Ordering::Acquire) & self.mask;
        // A stale consumer index counts too many: a doorbell early, not lost.
        (prod.wrapping_sub(cons) & self.mask) >= after && word.swap(0, Ordering::Relaxed) != 0
    }

    /// Producer side, after publishing: whether a run of the kernel's task will
    /// read the producer index again, so that the post needs no doorbell. The
    /// kernel clears the word, then reads the producer index; this side
    /// published the index and reads the word, each with a full fence in
    /// between, so a post either is seen by that read or rings. A kernel
    /// without the word leaves it zero: every post rings.
    pub(crate) fn run_pending(&self) -> bool {
        fence(Ordering::SeqCst);
        self.index(RUN_PENDING).load(Ordering::Relaxed) != 0
    }

    /// Producer side: whether the consumer has freed every element published.
    pub(crate) fn is_empty(&self) -> bool {
        let prod = self.producer().load(Ordering::Relaxed) & self.mask;
        let cons = self.consumer().load(Ordering::Acquire) & self.mask;
        prod == cons
    }

    /// Consumer side: the oldest element the kernel produced, if any.
    pub(crate) fn next_full(&self) -> Option<*const u8> {
        let cons = self.consumer().load(Ordering::Relaxed) & self.mask;
        let prod = self.producer().load(Ordering::Acquire) & self.mask;
        if cons == prod {
            None
        } else {
            Some(self.slot(cons).cast_const())
        }
    }

    /// Consumer side: gives the slot `next_full` returned back to the kernel.
    pub(crate) fn consume(&self) {
        let cons = self.consumer().load(Ordering::Relaxed);
        self.consumer()
            .store((cons + 1) & self.mask, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by map() with this length and is not
        // referenced once the ring is gone. munmap of a valid mapping fails
        // only on bad arguments.
        unsafe { abi::munmap(self.buf.as_ptr().cast::<c_void>(), self.map_len) };
    }
}
