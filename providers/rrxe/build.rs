// SPDX-License-Identifier: GPL-2.0

//! Generates the Rust view of libibverbs' provider interface from
//! `abi/provider.h` and the installed rdma-core and kernel headers, and links
//! the library so that a provider ABI other than the one it was written for
//! fails the build (and, at run time, the load) instead of misbehaving.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=abi/provider.h");
    println!("cargo:rerun-if-changed=build.rs");

    let status = Command::new("bindgen")
        .arg("abi/provider.h")
        .arg("-o")
        .arg(out.join("abi.rs"))
        .args([
            "--with-derive-default",
            "--no-layout-tests",
            "--default-enum-style",
            "moduleconsts",
        ])
        .args([
            "--allowlist-function",
            "verbs_.*|_verbs_.*|ibv_cmd_.*|mmap|munmap|write|__errno_location|free",
        ])
        .args([
            "--allowlist-type",
            "verbs_.*|ibv_.*|ib_uverbs_.*|rxe_.*|mminfo|rrxe_.*|rdma_driver_id",
        ])
        .args([
            "--allowlist-var",
            "IBV_.*|IB_USER_VERBS_.*|RDMA_DRIVER_.*|RRXE_.*|PROT_.*|MAP_SHARED|E[A-Z]+|VERBS_.*",
        ])
        .args(["--", "-Wno-gnu-variable-sized-type-not-at-end"])
        .status()
        .expect("bindgen (bindgen-cli, installed by scripts/deps.sh) runs");
    assert!(status.success(), "bindgen failed on abi/provider.h");

    // libibverbs exports the provider interface under one symbol version per
    // private ABI; `verbs_register_driver_34` exists only in version 34.
    // `-z defs` makes the link fail if any symbol we use is missing from the
    // installed library, so a mismatch is a build error here and a dlopen()
    // error (the provider is not loaded) on a machine with another rdma-core.
    println!("cargo:rustc-link-lib=dylib=ibverbs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librrxe-rdmav34.so");
}
