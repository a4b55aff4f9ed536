// SPDX-License-Identifier: GPL-2.0

//! Raw C bindings, generated at build time by bindgen from `include/rrxe_bindings.h` with the
//! kernel's own C flags (see the Kbuild file). Only the glue layer uses them.

#![allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::as_underscore,
    dead_code,
    improper_ctypes,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    unknown_lints,
    unnecessary_transmutes
)]

// rust/bindgen_parameters blocklists these so they map to Rust's pointer-sized integers.
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

include!("../rrxe_bindings_generated.rs");
