// SPDX-License-Identifier: GPL-2.0

//! The lifetime every provider object shares. The provider allocates it, a
//! kernel command fills in its libibverbs part, and libibverbs holds it from
//! then on. It is freed when the command that destroys the kernel object
//! succeeds, or at once if the creation fails. A destroy that fails leaves
//! both the kernel object and the provider's in place, so the application
//! can retry it.

use crate::sys;
use core::ffi::c_int;
use core::ptr::{self, NonNull};

/// An object being created: freed when dropped, unless handed out.
pub(crate) struct Creating<T> {
    obj: NonNull<T>,
}

impl<T> Creating<T> {
    pub(crate) fn new(obj: T) -> Self {
        Creating {
            obj: NonNull::from(Box::leak(Box::new(obj))),
        }
    }

    /// The object, for the create command to fill in and the provider to
    /// finish; valid while `self` is.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.obj.as_ptr()
    }

    /// The object is libibverbs' from here on, until its destroy verb.
    pub(crate) fn hand_out(self) -> *mut T {
        let p = self.obj.as_ptr();
        core::mem::forget(self);
        p
    }
}

impl<T> Drop for Creating<T> {
    fn drop(&mut self) {
        // SAFETY: the object came from Box::leak in new() and was not handed
        // out, so nothing else refers to it.
        drop(unsafe { Box::from_raw(self.obj.as_ptr()) });
    }
}

/// Frees `obj` if `ret`, its destroy command's result, says the kernel object
/// is gone, and returns `ret`.
///
/// # Safety
///
/// `obj` must have been handed out by a `Creating<T>` and not freed since;
/// on success the application may not use it any more (the verbs' rule).
pub(crate) unsafe fn free_if_destroyed<T>(obj: *mut T, ret: c_int) -> c_int {
    if ret == 0 {
        // SAFETY: the caller's contract; this is its Box, given back once.
        drop(unsafe { Box::from_raw(obj) });
    }
    ret
}

/// A verb that returns an object failing: errno is `err`, the result NULL.
pub(crate) fn fail<U>(err: c_int) -> *mut U {
    sys::set_errno(err);
    ptr::null_mut()
}
