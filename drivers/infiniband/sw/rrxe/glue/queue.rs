// SPDX-License-Identifier: GPL-2.0

//! Queues in rdma_rxe's shared-ring format (`struct rxe_queue_buf` in
//! include/uapi/rdma/rdma_user_rxe.h), the ABI rdma-core's rxe provider maps.
//!
//! A queue is one vmalloc'ed buffer: a header with the element size, the index mask and the
//! producer and consumer indices each on its own cache line, then a power-of-two number of
//! power-of-two-sized slots, one always left empty to tell full from empty. A user queue is
//! exported through an mmap entry of its user context; the entry owns the buffer from then
//! on and frees it when the queue removes it. A mapping that outlives the queue (a process
//! that has not unmapped yet, or one whose context the core cut off) still points at valid
//! pages: `remap_vmalloc_range` took a page reference of the mapping's own for each page it
//! mapped, which only the unmap drops.

use super::bindings;
use super::rdma::udata::UData;
use core::ffi::c_void;
use core::mem::size_of;
use core::ptr::{self, addr_of_mut, NonNull};
use core::sync::atomic::{fence, AtomicU32, Ordering};
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::types::Opaque;
use kernel::uaccess::UserSlice;

/// Offsets in `struct rxe_queue_buf`.
const LOG2_ELEM_SIZE: usize = 0;
const INDEX_MASK: usize = 4;
/// rrxe's own word in `pad_1`, on a cache line apart from the fields above: while it is
/// non-zero, the kernel asks the producer of a receive queue for a doorbell after its next
/// post (Documentation/rrxe/uverbs-abi.rst). rdma-core's rxe provider never reads it.
const DOORBELL_WANTED: usize = 64;
/// rrxe's second word there: while it is non-zero, a run of the QP's task is going that
/// will read a send queue's producer index once more before it ends, so the producer's
/// posts need no doorbell. rdma-core's rxe provider never reads it and rings for every post.
const RUN_PENDING: usize = 68;
const PRODUCER_INDEX: usize = 128;
const CONSUMER_INDEX: usize = 256;
const DATA: usize = 384;

/// Most slots a queue may have: an SRQ of rdma_rxe's largest size, 2^20 WRs (callers bound
/// their own queues below this).
const MAX_SLOTS: u32 = 1 << 21;

/// Where a user mapping of a queue comes from: `mminfo` in rdma_rxe's create responses.
pub(crate) type MmapInfo = bindings::mminfo;

/// `struct mminfo` as userspace reads it.
pub(crate) fn mmap_info_bytes(mi: &MmapInfo) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&mi.offset.to_ne_bytes());
    bytes[8..12].copy_from_slice(&mi.size.to_ne_bytes());
    bytes[12..].copy_from_slice(&mi.pad.to_ne_bytes());
    bytes
}

/// Where rdma_rxe's modify_srq answers a resize: a `struct mminfo` in the caller's memory,
/// named by `rxe_modify_srq_cmd.mmap_info_addr` (Documentation/rrxe/uverbs-abi.rst, 6).
pub(crate) struct UserMmapInfo(pub(crate) u64);

impl UserMmapInfo {
    /// Writes `mi` to the caller's `mminfo`; `EFAULT` if the address is not writable.
    pub(crate) fn write(&self, mi: &MmapInfo) -> Result {
        let bytes = mmap_info_bytes(mi);
        let addr = usize::try_from(self.0).map_err(|_| EFAULT)?;
        UserSlice::new(addr, bytes.len())
            .writer()
            .write_slice(&bytes)
    }
}

/// The mmap entry of an exported queue; it owns the buffer.
#[repr(C)]
struct Mapping {
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    buf: NonNull<u8>,
}

/// A ring in rdma_rxe's shared format.
pub(crate) struct SharedQueue {
    buf: NonNull<u8>,
    len: usize,
    log2_elem_size: u32,
    index_mask: u32,
    mapping: Option<NonNull<Mapping>>,
}

// SAFETY: the buffer is plain memory; the indices are accessed atomically.
unsafe impl Send for SharedQueue {}
// SAFETY: as above.
unsafe impl Sync for SharedQueue {}

impl SharedQueue {
    /// A queue holding at least `entries` elements of `elem_size` bytes.
    pub(crate) fn new(entries: u32, elem_size: usize) -> Result<Self> {
        let slots = entries
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .filter(|&s| s <= MAX_SLOTS)
            .ok_or(EINVAL)?;
        let elem = elem_size.checked_next_power_of_two().ok_or(EINVAL)?;
        let page = bindings::RRXE_PAGE_SIZE;
        let len = (DATA + slots as usize * elem + page - 1) & !(page - 1);
        // SAFETY: vmalloc_user returns zeroed, page-aligned memory that may be mapped to
        // userspace, or null.
        let raw = unsafe { bindings::rrxe_vmalloc_user(len as _) };
        let buf = NonNull::new(raw.cast::<u8>()).ok_or(ENOMEM)?;
        let queue = Self {
            buf,
            len,
            log2_elem_size: elem.trailing_zeros(),
            index_mask: slots - 1,
            mapping: None,
        };
        // SAFETY: the header lies inside the fresh buffer; no one else sees it yet.
        unsafe {
            buf.as_ptr()
                .add(LOG2_ELEM_SIZE)
                .cast::<u32>()
                .write(queue.log2_elem_size);
            buf.as_ptr()
                .add(INDEX_MASK)
                .cast::<u32>()
                .write(queue.index_mask);
        }
        Ok(queue)
    }

    /// How many elements the queue holds (one slot stays empty).
    pub(crate) fn capacity(&self) -> u32 {
        self.index_mask
    }

    /// Makes the queue mappable by the user context of the verb `udata` belongs to; returns
    /// what userspace passes to mmap.
    pub(crate) fn export(&mut self, udata: &UData) -> Result<MmapInfo> {
        let uctx = udata.ucontext();
        if self.mapping.is_some() {
            return Err(EINVAL);
        }
        let mapping = KBox::new(
            Mapping {
                entry: Opaque::new(bindings::rdma_user_mmap_entry::default()),
                buf: self.buf,
            },
            GFP_KERNEL,
        )?;
        let mapping = NonNull::new(KBox::into_raw(mapping)).ok_or(ENOMEM)?;
        // SAFETY: `uctx` is live for the verb; the entry is zeroed and lives in a stable
        // allocation; on success the
        // context's xarray references it until `rdma_user_mmap_entry_remove`, after which
        // `mmap_free` frees it (mapped pages keep their own references).
        let err = unsafe {
            bindings::rdma_user_mmap_entry_insert(
                uctx,
                Opaque::raw_get(addr_of_mut!((*mapping.as_ptr()).entry)),
                self.len,
            )
        };
        if let Err(e) = to_result(err) {
            // SAFETY: not inserted, so we still own the allocation.
            drop(unsafe { KBox::from_raw(mapping.as_ptr()) });
            return Err(e);
        }
        self.mapping = Some(mapping);
        // SAFETY: the entry was just initialised by the insert.
        let pgoff = unsafe { (*(*mapping.as_ptr()).entry.get()).start_pgoff };
        Ok(MmapInfo {
            offset: (pgoff as u64) << bindings::RRXE_PAGE_SHIFT,
            size: self.len as u32,
            pad: 0,
        })
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: the header is inside the buffer, 4-byte aligned, and only ever accessed
        // atomically (by us and by the provider's C11 atomics).
        unsafe { AtomicU32::from_ptr(self.buf.as_ptr().add(offset).cast::<u32>()) }
    }

    /// The producer index. Userspace may have written anything into a queue it produces,
    /// so the value is masked into range.
    pub(crate) fn producer(&self) -> u32 {
        self.index(PRODUCER_INDEX).load(Ordering::Acquire) & self.index_mask
    }

    /// Asks the producer for a doorbell once the queue holds `after` elements (posted, not
    /// yet consumed), or, with 0, stops asking. Returns the producer index if this raised
    /// the request: a post published before the request was visible saw no request and rang
    /// nothing, so the caller looks for one itself. The producer publishes its index, then
    /// reads the word (each side a store, a full fence, then a load), so at least one side
    /// sees the other's store. The producer takes a request by clearing the word, so a burst
    /// of posts rings once; whatever it writes there costs at most a needless run.
    pub(crate) fn want_doorbell(&self, after: u32) -> Option<u32> {
        let word = self.index(DOORBELL_WANTED);
        let old = word.load(Ordering::Relaxed);
        if old == after {
            return None;
        }
        word.store(after, Ordering::Relaxed);
        // A new size for a request already up needs no second look.
        if after == 0 || old != 0 {
            return None;
        }
        fence(Ordering::SeqCst);
        Some(self.producer())
    }

    /// Tells the producer that the consumer will read the producer index again before it
    /// stops (`true`: the producer may leave out its doorbells), or that it will not.
    pub(crate) fn set_run_pending(&self, pending: bool) {
        self.index(RUN_PENDING)
            .store(u32::from(pending), Ordering::Relaxed);
    }

    /// Clears the word [`Self::set_run_pending`] sets and returns the producer index read
    /// after a full fence. The producer publishes its index, then reads the word (a store,
    /// a full fence, a load, as here), so a post either saw the word set and is counted in
    /// the index returned, or saw it clear and rings.
    pub(crate) fn end_run_pending(&self) -> u32 {
        self.set_run_pending(false);
        fence(Ordering::SeqCst);
        self.producer()
    }

    /// The consumer index, masked into range.
    pub(crate) fn consumer(&self) -> u32 {
        self.index(CONSUMER_INDEX).load(Ordering::Acquire) & self.index_mask
    }

    /// Publishes a new consumer index after the consumed slot has been read.
    pub(crate) fn set_consumer(&self, index: u32) {
        self.index(CONSUMER_INDEX)
            .store(index & self.index_mask, Ordering::Release);
    }

    /// How many elements the queue holds, by both indices in its header: a guess, for the
    /// consumer's index there is the process's to overwrite too.
    pub(crate) fn len_by_header(&self) -> u32 {
        self.count_from(self.consumer())
    }

    /// How many elements are between consumer index `consumer`, which the kernel keeps
    /// privately, and the producer index userspace published.
    pub(crate) fn count_from(&self, consumer: u32) -> u32 {
        self.producer().wrapping_sub(consumer) & self.index_mask
    }

    /// Moves `count` elements of `old` from index `start` on to the start of this empty
    /// queue and sets its indices (consumer 0, producer `count`); `old` is left as it was.
    /// Both queues must have the same element size and this one room for all the
    /// elements. The caller names the range from the indices it keeps itself: the shared
    /// header's copy of its own index may have been overwritten by userspace.
    pub(crate) fn take_entries_from_range(
        &mut self,
        old: &SharedQueue,
        start: u32,
        count: u32,
    ) -> Result {
        if count > self.capacity() || old.log2_elem_size != self.log2_elem_size {
            return Err(EINVAL);
        }
        let elem = 1usize << self.log2_elem_size;
        let mut index = start & old.index_mask;
        for slot in 0..count as usize {
            // SAFETY: both slots lie inside their buffers (indices masked, `slot` below this
            // queue's capacity); the buffers are distinct allocations. Volatile reads: the
            // old ring may be mapped by userspace.
            unsafe {
                let src = old
                    .buf
                    .as_ptr()
                    .add(DATA + ((index as usize) << self.log2_elem_size));
                let dst = self.buf.as_ptr().add(DATA + (slot << self.log2_elem_size));
                copy_volatile(src, dst, elem, Shared::Source);
            }
            index = old.next(index);
        }
        self.index(CONSUMER_INDEX).store(0, Ordering::Release);
        self.index(PRODUCER_INDEX).store(count, Ordering::Release);
        Ok(())
    }

    /// Publishes a new producer index after the produced slot has been written.
    pub(crate) fn set_producer(&self, index: u32) {
        self.index(PRODUCER_INDEX)
            .store(index & self.index_mask, Ordering::Release);
    }

    /// Size of a slot in bytes.
    pub(crate) fn slot_size(&self) -> usize {
        1 << self.log2_elem_size
    }

    fn slot(&self, index: u32) -> *mut u8 {
        // SAFETY: the masked index names a slot inside the buffer.
        unsafe {
            self.buf
                .as_ptr()
                .add(DATA + (((index & self.index_mask) as usize) << self.log2_elem_size))
        }
    }

    /// Writes `value` into slot `index` (of a queue this side produces).
    pub(crate) fn write_slot<E: Copy>(&self, index: u32, value: &E) {
        let len = size_of::<E>().min(self.slot_size());
        let src = ptr::from_ref(value).cast::<u8>();
        // SAFETY: `dst` is a slot of at least `len` bytes (above), 8-byte aligned; `src` is
        // `len` readable bytes of kernel memory, another allocation.
        unsafe { copy_volatile(src, self.slot(index), len, Shared::Destination) };
    }

    /// Writes `src` (at most a slot) into slot `index` (of a queue this side produces).
    pub(crate) fn write_slot_bytes(&self, index: u32, src: &[u8]) {
        let len = src.len().min(self.slot_size());
        // SAFETY: the slot has at least `len` bytes, 8-byte aligned; `src` has them too, in
        // another allocation.
        unsafe { copy_volatile(src.as_ptr(), self.slot(index), len, Shared::Destination) };
    }

    /// Copies the first `dst.len()` bytes (at most a slot) of slot `index` into `dst`, once:
    /// userspace may be writing the slot concurrently, so callers decode only the copy.
    pub(crate) fn read_slot_bytes(&self, index: u32, dst: &mut [u8]) {
        let len = dst.len().min(self.slot_size());
        // SAFETY: the slot has at least `len` bytes, 8-byte aligned; `dst` has room for them,
        // in another allocation.
        unsafe { copy_volatile(self.slot(index), dst.as_mut_ptr(), len, Shared::Source) };
    }

    /// The index after `index`.
    pub(crate) fn next(&self, index: u32) -> u32 {
        index.wrapping_add(1) & self.index_mask
    }

    /// Copies slot `index` into `out`, one 8-byte word at a time: userspace may be writing
    /// the slot concurrently, so it is read once, into kernel memory, before any use.
    pub(crate) fn read_slot<E: Copy + Default>(&self, index: u32) -> E {
        let mut out = E::default();
        let len = size_of::<E>().min(1 << self.log2_elem_size);
        let src = self.slot(index);
        let dst = ptr::from_mut(&mut out).cast::<u8>();
        // SAFETY: the slot lies inside the buffer (the index is masked), 8-byte aligned; `out`
        // is a plain `Copy` value of at least `len` bytes and kernel memory.
        unsafe { copy_volatile(src, dst, len, Shared::Source) };
        out
    }
}

impl Drop for SharedQueue {
    fn drop(&mut self) {
        match self.mapping {
            // SAFETY: the entry was inserted by `export`; removing it drops the insert
            // reference, and `mmap_free` frees the buffer then; pages still mapped live on
            // through the mapping's own page references.
            Some(mapping) => unsafe {
                bindings::rdma_user_mmap_entry_remove(Opaque::raw_get(addr_of_mut!(
                    (*mapping.as_ptr()).entry
                )))
            },
            // SAFETY: the buffer came from vmalloc_user and was never exported.
            None => unsafe { bindings::vfree(self.buf.as_ptr().cast::<c_void>()) },
        }
    }
}

/// Which end of a copy is a queue's buffer, which userspace may map and write concurrently.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shared {
    /// The source: each byte is read once (volatile), into kernel memory.
    Source,
    /// The destination: each byte is written once (volatile).
    Destination,
}

/// Copies `len` bytes from `src` to `dst`, the `shared` end accessed volatile: eight bytes at
/// a time while it is 8-byte aligned (a slot is, if its size is a multiple of eight: the
/// buffer is page-aligned and the slots start at [`DATA`]), then the rest byte by byte.
/// Byte by byte throughout, a WQE's snapshot and a completion's write cost 0.6 us a 64-byte
/// message more under TCG (Documentation/rrxe/benchmarks.rst).
///
/// # Safety
///
/// `src` must be readable and `dst` writable for `len` bytes, in different allocations.
unsafe fn copy_volatile(src: *const u8, dst: *mut u8, len: usize, shared: Shared) {
    let aligned = match shared {
        Shared::Source => src.align_offset(8) == 0,
        Shared::Destination => dst.align_offset(8) == 0,
    };
    let words = if aligned { len / 8 } else { 0 };
    for w in 0..words {
        // SAFETY: per the function contract, word `w` lies in both ranges, and the shared
        // end is aligned.
        unsafe {
            let (from, to) = (src.add(w * 8).cast::<u64>(), dst.add(w * 8).cast::<u64>());
            match shared {
                Shared::Source => to.write_unaligned(from.read_volatile()),
                Shared::Destination => to.write_volatile(from.read_unaligned()),
            }
        }
    }
    for i in words * 8..len {
        // SAFETY: per the function contract.
        unsafe {
            match shared {
                Shared::Source => dst.add(i).write(src.add(i).read_volatile()),
                Shared::Destination => dst.add(i).write_volatile(src.add(i).read()),
            }
        }
    }
}

/// Maps the queue behind `vma`'s offset into `vma`.
///
/// # Safety
///
/// `uctx` and `vma` come from the RDMA core's mmap path for that context.
pub(crate) unsafe fn mmap(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> Result {
    // SAFETY: per the caller; the lookup takes a reference, checks the size and VM_SHARED.
    let entry = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return Err(EINVAL);
    }
    let mapping = entry.cast::<Mapping>();
    // SAFETY: every entry in our contexts is the first field of a `Mapping`, whose buffer
    // the entry reference keeps alive; the buffer is vmalloc_user memory of the entry's size.
    let err = unsafe {
        let err = bindings::remap_vmalloc_range(vma, (*mapping).buf.as_ptr().cast::<c_void>(), 0);
        bindings::rdma_user_mmap_entry_put(entry);
        err
    };
    to_result(err)
}

/// Frees an exported queue once its entry is removed and unmapped (`ops.mmap_free`).
///
/// # Safety
///
/// Called by the RDMA core, once, for an entry inserted by [`SharedQueue::export`].
pub(crate) unsafe fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: the entry is the first field of a `Mapping` allocated by `export`; the core
    // holds no reference any more.
    let mapping = unsafe { KBox::from_raw(entry.cast::<Mapping>()) };
    // SAFETY: the buffer came from vmalloc_user and nothing maps it any more.
    unsafe { bindings::vfree(mapping.buf.as_ptr().cast::<c_void>()) };
}
