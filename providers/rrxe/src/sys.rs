// SPDX-License-Identifier: GPL-2.0

//! errno and the system calls the provider makes itself.

use crate::abi;
use core::ffi::{c_int, c_void};

/// Sets the thread's `errno`: verbs that return a pointer report failure as
/// NULL with `errno` set.
pub(crate) fn set_errno(err: c_int) {
    // SAFETY: __errno_location() returns this thread's errno, valid for the
    // thread's life.
    unsafe { *abi::__errno_location() = err };
}

/// The thread's `errno`.
pub(crate) fn errno() -> c_int {
    // SAFETY: as in `set_errno`.
    unsafe { *abi::__errno_location() }
}

/// `errno` as the positive error code verbs return, never 0 after a failure
/// (a failed call that left errno clear still failed).
pub(crate) fn last_error() -> c_int {
    match errno() {
        0 => abi::EIO as c_int,
        e => e,
    }
}

/// write(2) of a whole command to the uverbs file; the kernel takes a write
/// command in one call or fails it.
pub(crate) fn write_all(fd: c_int, buf: &[u8]) -> Result<(), c_int> {
    // SAFETY: buf is a valid readable slice of buf.len() bytes.
    let n = unsafe { abi::write(fd, buf.as_ptr().cast::<c_void>(), buf.len()) };
    if n == buf.len() as isize {
        Ok(())
    } else if n < 0 {
        Err(last_error())
    } else {
        Err(abi::EIO as c_int)
    }
}

/// The error codes the provider returns itself, as verbs return them.
pub(crate) const EINVAL: c_int = abi::EINVAL as c_int;
pub(crate) const ENOMEM: c_int = abi::ENOMEM as c_int;
pub(crate) const EPROTO: c_int = abi::EPROTO as c_int;
pub(crate) const EOPNOTSUPP: c_int = abi::EOPNOTSUPP as c_int;
