// SPDX-License-Identifier: GPL-2.0

//! The driver-specific input and output of a uverbs call (`struct ib_udata`).

use super::super::bindings;
use core::mem::size_of;
use core::ptr::{self, NonNull};
use kernel::error::to_result;
use kernel::ffi::c_void;
use kernel::prelude::*;
use kernel::uaccess::UserSlice;

/// The driver-specific input and output of a uverbs call in progress.
pub(crate) struct UData {
    raw: NonNull<bindings::ib_udata>,
}

impl UData {
    /// Wraps the driver udata of a uverbs call in progress; `None` for kernel callers.
    ///
    /// # Safety
    ///
    /// A non-null `raw` must stay valid while the returned value is used.
    pub(super) unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Option<Self> {
        NonNull::new(raw).map(|raw| Self { raw })
    }

    /// Bytes of driver-specific output userspace has room for.
    pub(crate) fn out_len(&self) -> usize {
        // SAFETY: the udata is valid for the call.
        unsafe { self.raw.as_ref().outlen }
    }

    /// Copies `resp` to userspace; fails with `EINVAL` if it has no room for all of it.
    pub(crate) fn respond<R: Copy>(&mut self, resp: &R) -> Result {
        if self.out_len() < size_of::<R>() {
            return Err(EINVAL);
        }
        // SAFETY: the udata is valid for the call; `resp` is `size_of::<R>()` readable bytes.
        to_result(unsafe {
            bindings::rrxe_copy_to_udata(
                self.raw.as_ptr(),
                ptr::from_ref(resp).cast::<c_void>(),
                size_of::<R>(),
            )
        })
    }

    /// Bytes of driver-specific input userspace passed.
    pub(crate) fn in_len(&self) -> usize {
        // SAFETY: the udata is valid for the call.
        unsafe { self.raw.as_ref().inlen }
    }

    /// Copies the first `buf.len()` bytes of the driver-specific input.
    pub(crate) fn read_in(&self, buf: &mut [u8]) -> Result {
        if self.in_len() < buf.len() {
            return Err(EINVAL);
        }
        // SAFETY: the udata is valid for the call.
        let inbuf = unsafe { self.raw.as_ref().inbuf };
        // `inbuf` is a user address, for write() and ioctl() calls alike; the copy checks it.
        UserSlice::new(inbuf as usize, buf.len())
            .reader()
            .read_slice(buf)
    }

    /// Copies `bytes` to userspace at byte `offset` of the driver-specific output, leaving
    /// the bytes before it as they are; fails with `EINVAL` if the output is shorter than
    /// `total`.
    pub(crate) fn respond_bytes_at(&mut self, offset: usize, total: usize, bytes: &[u8]) -> Result {
        let end = offset.checked_add(bytes.len()).ok_or(EINVAL)?;
        if self.out_len() < total.max(end) {
            return Err(EINVAL);
        }
        // SAFETY: the udata is valid for the call.
        let outbuf = unsafe { self.raw.as_ref().outbuf };
        // `outbuf` is a user address; the copy checks it.
        UserSlice::new(outbuf as usize + offset, bytes.len())
            .writer()
            .write_slice(bytes)
    }

    /// The user context of the call.
    pub(crate) fn ucontext(&self) -> *mut bindings::ib_ucontext {
        // SAFETY: the udata belongs to a uverbs call, whose bundle names its context.
        unsafe { bindings::rrxe_udata_to_ucontext(self.raw.as_ptr()) }
    }
}
