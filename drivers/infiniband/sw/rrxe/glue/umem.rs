// SPDX-License-Identifier: GPL-2.0

//! The memory behind MRs: pinned user memory (`struct ib_umem` and an array of its pages) and
//! kernel memory (DMA MRs), with the copies and atomics the data path makes on them.
//!
//! Every access here is bounds-checked against the memory itself, whatever the caller
//! checked before; nothing sleeps, so the data path may call these from softirq or a work
//! item alike. Only creating and releasing a [`Umem`] sleep (process context).

use super::bindings;
use core::ffi::c_void;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::alloc::KVVec;
use kernel::error::from_err_ptr;
use kernel::prelude::*;

const PAGE_SIZE: usize = bindings::RRXE_PAGE_SIZE;
const PAGE_SHIFT: u32 = bindings::RRXE_PAGE_SHIFT;

/// Why an access to MR memory was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemError {
    /// The range is not inside the memory (or wraps around the address space).
    Bounds,
    /// An atomic's target is not 8-byte aligned in memory.
    Misaligned,
    /// A write to user memory pinned read-only (it may be a shared page, e.g. the zero
    /// page, which must never be written).
    ReadOnly,
}

/// A pinned page of a [`Umem`].
#[derive(Clone, Copy)]
struct PagePtr(NonNull<bindings::page>);

/// Where `len` bytes at byte `offset` of a buffer that starts `first` bytes into its first
/// page lie: `(page index, offset in that page, bytes in that page)` for each page touched,
/// in order. The caller has checked that `first + offset + len` does not overflow.
fn page_chunks(
    first: usize,
    offset: usize,
    len: usize,
) -> impl Iterator<Item = (usize, usize, usize)> {
    let mut pos = first + offset;
    let mut left = len;
    core::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let in_page = pos & (PAGE_SIZE - 1);
        let n = left.min(PAGE_SIZE - in_page);
        let chunk = (pos >> PAGE_SHIFT, in_page, n);
        pos += n;
        left -= n;
        Some(chunk)
    })
}

/// User pages pinned for an MR, and a table of them for the data path; dropping it unpins
/// them (which may sleep: drop it in process context only).
pub(crate) struct Umem {
    raw: NonNull<bindings::ib_umem>,
    /// The pinned pages, in address order: page `i` holds bytes
    /// `i * PAGE_SIZE - first .. (i + 1) * PAGE_SIZE - first` of the memory.
    pages: KVVec<PagePtr>,
    /// Offset of the first byte in the first page.
    first: usize,
    /// Length in bytes.
    len: usize,
    /// Whether the pages were pinned for writing (`FOLL_WRITE`, so they are the process's
    /// own, not shared copy-on-write pages).
    writable: bool,
}

// SAFETY: a umem is a plain description of pinned pages, usable from any thread; the page
// pointers stay valid (pinned) until it is dropped.
unsafe impl Send for Umem {}
// SAFETY: as above; it is never mutated after creation (accesses to the memory itself go
// through the methods below).
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of the calling process's memory at `addr` for `access`
    /// (`IB_ACCESS_*`) on the device `pin` names, and lists its pages.
    fn get(pin: &UmemPinner, addr: u64, len: u64, access: i32) -> Result<Self> {
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let first = addr & (PAGE_SIZE - 1);
        let npages = first.checked_add(len).ok_or(EINVAL)?.div_ceil(PAGE_SIZE);
        // Allocated before pinning, so that nothing but the walk can fail afterwards.
        let mut pages = KVVec::with_capacity(npages, GFP_KERNEL)?;
        // SAFETY: called in the context of the process whose memory is pinned (a uverbs
        // call); the device is live. Returns an ERR_PTR on failure.
        let raw =
            from_err_ptr(unsafe { bindings::ib_umem_get(pin.0.as_ptr(), addr, len, access) })?;
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // More pages than the range spans would not be the umem we expect.
        let mut extra = false;
        // SAFETY: ib_umem_get succeeded: `raw` is a valid umem whose sg table lists the
        // pinned pages from the one holding `addr` on (`for_each_sgtable_page`, over the CPU
        // entries).
        unsafe {
            let sgt = ptr::addr_of_mut!((*raw.as_ptr()).sgt_append.sgt);
            let mut iter = bindings::sg_page_iter::default();
            bindings::__sg_page_iter_start(&mut iter, (*sgt).sgl, (*sgt).orig_nents, 0);
            while bindings::__sg_page_iter_next(&mut iter) {
                let page = bindings::rrxe_sg_page_iter_page(&mut iter);
                let Some(page) = NonNull::new(page) else {
                    break;
                };
                // Within the capacity reserved above, so `push` does not allocate.
                if pages.len() == npages || pages.push(PagePtr(page), GFP_KERNEL).is_err() {
                    extra = true;
                    break;
                }
            }
        }
        // SAFETY: `raw` is a valid umem, not written by anyone after ib_umem_get.
        let writable = unsafe { (*raw.as_ptr()).writable() } != 0;
        let umem = Self {
            raw,
            pages,
            first,
            len,
            writable,
        };
        // Dropping `umem` unpins.
        if extra || umem.pages.len() != npages {
            return Err(EINVAL);
        }
        Ok(umem)
    }

    /// The user address of its first byte, as pinned.
    pub(crate) fn address(&self) -> u64 {
        // SAFETY: `raw` is a valid umem until `self` is dropped; ib_umem_get set `address`
        // and nothing writes it afterwards.
        unsafe { (*self.raw.as_ptr()).address as u64 }
    }

    /// The in-bounds page chunks of `len` bytes at `offset`.
    fn chunks(
        &self,
        offset: usize,
        len: usize,
    ) -> Result<impl Iterator<Item = (usize, usize, usize)>, MemError> {
        let end = offset.checked_add(len).ok_or(MemError::Bounds)?;
        if end > self.len {
            return Err(MemError::Bounds);
        }
        // `first + len` did not overflow in `get`, so `first + offset + len` does not.
        Ok(page_chunks(self.first, offset, len))
    }

    /// Runs `f` on the kernel mapping of the pinned page `index`.
    fn with_page<R>(&self, index: usize, f: impl FnOnce(*mut u8) -> R) -> R {
        let page = self.pages[index].0;
        // SAFETY: the page is pinned for as long as `self` lives; kmap_local_page does not
        // sleep and the mapping is released below, in the same context.
        let va = unsafe { bindings::rrxe_kmap_local_page(page.as_ptr()) };
        let ret = f(va.cast());
        // Without high memory every page has its kernel address, which `kmap_local_page()`
        // returns, and `kunmap_local()` does nothing (include/linux/highmem-internal.h): the
        // call is left out (two a Read).
        #[cfg(CONFIG_HIGHMEM)]
        // SAFETY: mapped above, and mappings are released in reverse order (there is one).
        unsafe {
            bindings::rrxe_kunmap_local(va)
        };
        ret
    }

    /// Copies `dst.len()` bytes at byte `offset` of the memory into `dst`.
    pub(crate) fn copy_out(&self, offset: usize, dst: &mut [u8]) -> Result<(), MemError> {
        let mut done = 0;
        for (page, in_page, n) in self.chunks(offset, dst.len())? {
            self.with_page(page, |va| {
                // SAFETY: `va + in_page .. + n` lies in the mapped page (`page_chunks`), and
                // `dst[done..done + n]` in `dst`. The application (or a peer's RDMA) may
                // write the page concurrently, as with any RDMA buffer: the C memcpy makes no
                // assumption about that, and the bytes copied are then simply unspecified.
                unsafe {
                    bindings::memcpy(
                        dst.as_mut_ptr().add(done).cast::<c_void>(),
                        va.add(in_page).cast::<c_void>(),
                        n,
                    )
                };
            });
            done += n;
        }
        Ok(())
    }

    /// Copies `src` into the memory at byte `offset`.
    pub(crate) fn copy_in(&self, offset: usize, src: &[u8]) -> Result<(), MemError> {
        if !self.writable {
            return Err(MemError::ReadOnly);
        }
        let mut done = 0;
        for (page, in_page, n) in self.chunks(offset, src.len())? {
            self.with_page(page, |va| {
                // SAFETY: as in `copy_out`, with the roles swapped; the pages were pinned
                // for writing (checked above).
                unsafe {
                    bindings::memcpy(
                        va.add(in_page).cast::<c_void>(),
                        src.as_ptr().add(done).cast::<c_void>(),
                        n,
                    )
                };
            });
            done += n;
        }
        Ok(())
    }

    /// Replaces the 8 bytes at byte `offset` with `f(old)` atomically (against every other
    /// rrxe atomic and against the CPU's atomics) and returns `old`.
    pub(crate) fn atomic(&self, offset: usize, f: impl FnMut(u64) -> u64) -> Result<u64, MemError> {
        if !self.writable {
            return Err(MemError::ReadOnly);
        }
        let mut chunks = self.chunks(offset, 8)?;
        let Some((page, in_page, 8)) = chunks.next() else {
            // Straddles a page boundary, so it is not aligned.
            return Err(MemError::Misaligned);
        };
        if in_page % 8 != 0 {
            return Err(MemError::Misaligned);
        }
        Ok(self.with_page(page, |va| {
            // SAFETY: `va + in_page` is 8-byte aligned and 8 bytes of it lie in the mapped
            // page, pinned for writing; concurrent accesses from rrxe go through `atomic_rmw` too.
            unsafe { atomic_rmw(va.add(in_page), f) }
        }))
    }
}

/// Pins user memory for a device, in a verb of the process that owns the memory: what
/// `reg_user_mr` and `rereg_user_mr` get to pin with.
pub(crate) struct UmemPinner(NonNull<bindings::ib_device>);

impl UmemPinner {
    /// A pinner for `ibdev`.
    ///
    /// # Safety
    ///
    /// `ibdev` must be a live device, and the pinner used only during the uverbs call
    /// (of the process whose memory is pinned) it is made for.
    pub(super) unsafe fn new(ibdev: NonNull<bindings::ib_device>) -> Self {
        Self(ibdev)
    }

    /// Pins `len` bytes of the calling process's memory at `addr` for `access`
    /// (`IB_ACCESS_*`), and lists its pages.
    pub(crate) fn pin(&self, addr: u64, len: u64, access: i32) -> Result<Umem> {
        Umem::get(self, addr, len, access)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the umem came from ib_umem_get and is released once; the page pointers
        // die with `self`.
        unsafe { bindings::ib_umem_release(self.raw.as_ptr()) };
    }
}

/// Applies `f` to the u64 at `p` atomically, under the lock that serialises all rrxe
/// atomics (IBA 10.7.2.4: atomicity among the CA's atomics), and returns the old value.
///
/// # Safety
///
/// `p` must be 8-byte aligned and valid for reads and writes of 8 bytes.
unsafe fn atomic_rmw(p: *mut u8, mut f: impl FnMut(u64) -> u64) -> u64 {
    // SAFETY: per the caller; other CPUs (the application, other rrxe atomics) only reach
    // these bytes with atomic or locked accesses or at their own risk, as with any RDMA
    // atomic target.
    let target = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) };
    // SAFETY: the lock is a static initialised spinlock; it is released below.
    let flags = unsafe { bindings::rrxe_atomic_lock_irqsave() };
    let old = target.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| Some(f(v)));
    // SAFETY: taken above with these flags.
    unsafe { bindings::rrxe_atomic_unlock_irqrestore(flags) };
    // The closure always returns `Some`, so `fetch_update` succeeds.
    old.unwrap_or_else(|v| v)
}

/// Kernel memory, as a DMA MR lets kernel consumers name it: on a software RDMA device
/// (`ib_uses_virt_dma()`) the "DMA addresses" in their SGEs are kernel virtual addresses.
///
/// Only the glue creates one, for an MR of `get_dma_mr`. As with a DMA MR on hardware, the
/// consumer is trusted: it names only memory it owns, and it hands out the R_Key (the PD's
/// `unsafe_global_rkey`) only to peers it trusts with all of its memory.
pub(crate) struct KernelMemory(());

impl KernelMemory {
    /// # Safety
    ///
    /// Only for the MR of a kernel PD's `get_dma_mr`: every address given to the methods
    /// then comes from a kernel consumer of that PD (or a peer it gave the R_Key to).
    pub(super) unsafe fn new() -> Self {
        Self(())
    }

    /// The pointer for `len` bytes at kernel address `addr`.
    fn range(addr: u64, len: usize) -> Result<*mut u8, MemError> {
        let start = usize::try_from(addr).map_err(|_| MemError::Bounds)?;
        start.checked_add(len).ok_or(MemError::Bounds)?;
        if start == 0 && len != 0 {
            return Err(MemError::Bounds);
        }
        Ok(start as *mut u8)
    }

    /// Copies `dst.len()` bytes at kernel address `addr` into `dst`.
    pub(crate) fn copy_out(&self, addr: u64, dst: &mut [u8]) -> Result<(), MemError> {
        let src = Self::range(addr, dst.len())?;
        // SAFETY: the consumer names memory it owns (see `KernelMemory::new`).
        unsafe { bindings::memcpy(dst.as_mut_ptr().cast(), src.cast::<c_void>(), dst.len()) };
        Ok(())
    }

    /// Copies `src` to kernel address `addr`.
    pub(crate) fn copy_in(&self, addr: u64, src: &[u8]) -> Result<(), MemError> {
        let dst = Self::range(addr, src.len())?;
        // SAFETY: the consumer names memory it owns (see `KernelMemory::new`).
        unsafe { bindings::memcpy(dst.cast::<c_void>(), src.as_ptr().cast(), src.len()) };
        Ok(())
    }

    /// Replaces the u64 at kernel address `addr` with `f(old)` atomically; returns `old`.
    pub(crate) fn atomic(&self, addr: u64, f: impl FnMut(u64) -> u64) -> Result<u64, MemError> {
        let p = Self::range(addr, 8)?;
        if addr % 8 != 0 {
            return Err(MemError::Misaligned);
        }
        // SAFETY: aligned; the consumer names memory it owns (see `KernelMemory::new`).
        Ok(unsafe { atomic_rmw(p, f) })
    }
}
