// SPDX-License-Identifier: GPL-2.0

//! Registration with libibverbs, which devices are ours, device contexts
//! and the table of verbs.
//!
//! rrxe reports the same driver id as rdma_rxe (`RDMA_DRIVER_RXE`, so that
//! the stock `rxe` provider binds it too), so the driver id alone cannot
//! tell the two apart. libibverbs calls `match_device` after its table
//! match; it accepts a device whose node description is rrxe's. That
//! attribute is fixed at device registration: rrxe implements no
//! `modify_device`, so the core refuses writes to it.

use crate::abi::{self, verbs_context, verbs_context_ops, verbs_device, verbs_device_ops};
use crate::abi::{verbs_match_ent, verbs_sysfs_dev};
use crate::{ah, cq, pd, qp, srq, sys, xrcd};
use core::ffi::{c_char, c_int, c_void, CStr};
use core::mem::size_of;
use core::ptr;

/// rrxe's node description, `/sys/class/infiniband/<dev>/node_desc`
/// (drivers/infiniband/sw/rrxe/params.rs).
const RRXE_NODE_DESC: &str = "rrxe";

/// rdma_rxe's uverbs ABI version, which rrxe reports.
const RXE_UVERBS_ABI_VERSION: u32 = 2;

struct Sync<T>(T);
// SAFETY: the wrapped tables are immutable after construction; their
// pointers refer to other statics and to functions.
unsafe impl<T> core::marker::Sync for Sync<T> {}

static MATCH_TABLE: Sync<[verbs_match_ent; 2]> = Sync([
    verbs_match_ent {
        driver_data: ptr::null_mut(),
        u: abi::verbs_match_ent__bindgen_ty_1 {
            driver_id: abi::rdma_driver_id::RDMA_DRIVER_RXE as u64,
        },
        vendor: 0,
        device: 0,
        kind: abi::verbs_match_kind::VERBS_MATCH_DRIVER_ID as u8,
    },
    // SAFETY: all-zero is the table's sentinel.
    unsafe { core::mem::zeroed() },
]);

static DEVICE_OPS: Sync<verbs_device_ops> = Sync(verbs_device_ops {
    name: c"rrxe".as_ptr(),
    match_min_abi_version: RXE_UVERBS_ABI_VERSION,
    match_max_abi_version: RXE_UVERBS_ABI_VERSION,
    match_table: MATCH_TABLE.0.as_ptr(),
    static_providers: ptr::null_mut(),
    match_device: Some(match_device),
    alloc_context: Some(alloc_context),
    import_context: None,
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
});

static CONTEXT_OPS: Sync<verbs_context_ops> = Sync(verbs_context_ops {
    alloc_mw: Some(pd::alloc_mw),
    alloc_pd: Some(pd::alloc_pd),
    attach_mcast: Some(abi::ibv_cmd_attach_mcast),
    bind_mw: Some(qp::bind_mw),
    close_xrcd: Some(xrcd::close_xrcd),
    create_ah: Some(ah::create_ah),
    create_cq: Some(cq::create_cq),
    create_cq_ex: Some(cq::create_cq_ex),
    create_qp: Some(qp::create_qp),
    create_qp_ex: Some(qp::create_qp_ex),
    create_srq: Some(srq::create_srq),
    create_srq_ex: Some(srq::create_srq_ex),
    dealloc_mw: Some(pd::dealloc_mw),
    dealloc_pd: Some(pd::dealloc_pd),
    dereg_mr: Some(pd::dereg_mr),
    destroy_ah: Some(ah::destroy_ah),
    destroy_cq: Some(cq::destroy_cq),
    destroy_qp: Some(qp::destroy_qp),
    destroy_srq: Some(srq::destroy_srq),
    detach_mcast: Some(abi::ibv_cmd_detach_mcast),
    free_context: Some(free_context),
    get_srq_num: Some(srq::get_srq_num),
    modify_qp: Some(qp::modify_qp),
    modify_srq: Some(srq::modify_srq),
    open_qp: Some(qp::open_qp),
    open_xrcd: Some(xrcd::open_xrcd),
    poll_cq: Some(cq::poll_cq),
    post_recv: Some(qp::post_recv),
    post_send: Some(qp::post_send),
    post_srq_recv: Some(srq::post_srq_recv),
    query_device_ex: Some(query_device_ex),
    query_port: Some(query_port),
    query_qp: Some(qp::query_qp),
    query_srq: Some(srq::query_srq),
    reg_mr: Some(pd::reg_mr),
    req_notify_cq: Some(abi::ibv_cmd_req_notify_cq),
    resize_cq: Some(cq::resize_cq),
    // SAFETY: every other op is an Option or a raw pointer, for which zero is
    // "not supplied"; libibverbs then installs its EOPNOTSUPP fallback.
    ..unsafe { core::mem::zeroed() }
});

/// Registers the provider when libibverbs loads the library (the ELF
/// constructor does what rdma-core's `PROVIDER_DRIVER` does).
extern "C" fn register() {
    // SAFETY: DEVICE_OPS is a static, valid for the life of the library,
    // which libibverbs never unloads.
    unsafe { abi::verbs_register_driver_34(&DEVICE_OPS.0) };
}

#[used]
#[link_section = ".init_array"]
static REGISTER: extern "C" fn() = register;

/// The device as libibverbs knows it. `verbs_device` must come first: the
/// library hands back `&vdev.device`.
#[repr(C)]
struct Device {
    vdev: verbs_device,
}

/// A device context. The `verbs_context` comes first, so that libibverbs'
/// allocation (`_verbs_init_and_alloc_context` with offset 0) is ours too.
#[repr(C)]
pub(crate) struct Context {
    vctx: verbs_context,
}

/// Is this sysfs device an rrxe device? Reads its node description.
fn is_rrxe(ibdev_path: &CStr) -> bool {
    let Ok(path) = ibdev_path.to_str() else {
        return false;
    };
    std::fs::read_to_string(format!("{path}/node_desc"))
        .map(|d| d.trim_end_matches('\n') == RRXE_NODE_DESC)
        .unwrap_or(false)
}

unsafe extern "C" fn match_device(sysfs_dev: *mut verbs_sysfs_dev) -> bool {
    // SAFETY: libibverbs passes a valid sysfs device for this call.
    let dev = unsafe { &*sysfs_dev };
    if dev.match_.is_null() {
        return false;
    }
    // SAFETY: ibdev_path is a NUL-terminated string libibverbs filled in.
    let path = unsafe { CStr::from_ptr(dev.ibdev_path.as_ptr()) };
    is_rrxe(path)
}

unsafe extern "C" fn alloc_device(_sysfs_dev: *mut verbs_sysfs_dev) -> *mut verbs_device {
    let dev = Box::new(Device {
        vdev: verbs_device::default(),
    });
    // libibverbs fills in the rest and gives it back to uninit_device.
    ptr::addr_of_mut!(Box::leak(dev).vdev)
}

unsafe extern "C" fn uninit_device(vdev: *mut verbs_device) {
    // SAFETY: vdev came from alloc_device (it is the first field of a leaked
    // Box<Device>) and libibverbs calls this once, when the last reference
    // goes.
    drop(unsafe { Box::from_raw(vdev.cast::<Device>()) });
}

unsafe extern "C" fn alloc_context(
    device: *mut abi::ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut verbs_context {
    // SAFETY: libibverbs allocates and zeroes size_of::<Context>() bytes and
    // initialises the verbs_context at offset 0 (a NULL offset pointer), or
    // returns NULL with errno set.
    let ctx = unsafe {
        abi::_verbs_init_and_alloc_context(
            device,
            cmd_fd,
            size_of::<Context>(),
            ptr::null_mut(),
            abi::rdma_driver_id::RDMA_DRIVER_RXE,
        )
    }
    .cast::<Context>();
    if ctx.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: ctx is the context just allocated; nobody else has it yet.
    let vctx = unsafe { ptr::addr_of_mut!((*ctx).vctx) };
    let mut cmd = abi::ibv_get_context::default();
    let mut resp = abi::ib_uverbs_get_context_resp::default();
    // SAFETY: vctx is initialised; cmd and resp are valid for their sizes.
    let ret = unsafe {
        abi::ibv_cmd_get_context(
            vctx,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: undoes _verbs_init_and_alloc_context, whose memory came from
        // the C allocator.
        unsafe {
            abi::verbs_uninit_context(vctx);
            abi::free(ctx.cast::<c_void>());
        }
        sys::set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: CONTEXT_OPS is static; verbs_set_ops copies what it needs.
    unsafe { abi::verbs_set_ops(vctx, &CONTEXT_OPS.0) };
    vctx
}

unsafe extern "C" fn free_context(ibctx: *mut abi::ibv_context) {
    let vctx = verbs_context_of(ibctx);
    // SAFETY: ibctx is a context alloc_context made; libibverbs calls this
    // once, when the application closes it. The memory came from the C
    // allocator at the context's address (offset 0).
    unsafe {
        abi::verbs_uninit_context(vctx);
        abi::free(vctx.cast::<c_void>());
    }
}

/// The `verbs_context` around an `ibv_context`: the ibv_context is its last
/// member.
pub(crate) fn verbs_context_of(ibctx: *mut abi::ibv_context) -> *mut verbs_context {
    let off = core::mem::offset_of!(verbs_context, context);
    ibctx.cast::<u8>().wrapping_sub(off).cast::<verbs_context>()
}

unsafe extern "C" fn query_device_ex(
    context: *mut abi::ibv_context,
    input: *const abi::ibv_query_device_ex_input,
    attr: *mut abi::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    let mut resp = abi::ib_uverbs_ex_query_device_resp::default();
    let mut resp_size = size_of_val(&resp);
    // SAFETY: libibverbs passes a valid context and an attr of attr_size
    // bytes; resp is valid for resp_size.
    let ret = unsafe {
        abi::ibv_cmd_query_device_any(context, input, attr, attr_size, &mut resp, &mut resp_size)
    };
    if ret != 0 {
        return ret;
    }
    let raw = resp.base.fw_ver;
    let fw = format!(
        "{}.{}.{}",
        (raw >> 32) & 0xffff,
        (raw >> 16) & 0xffff,
        raw & 0xffff
    );
    // SAFETY: attr is valid (the call above filled it); fw_ver is a fixed
    // char array inside orig_attr, which every attr_size includes.
    let dst = unsafe { &mut (*attr).orig_attr.fw_ver };
    let n = fw.len().min(dst.len() - 1);
    for (d, s) in dst.iter_mut().zip(fw.as_bytes()[..n].iter()) {
        *d = *s as c_char;
    }
    dst[n] = 0;
    0
}

unsafe extern "C" fn query_port(
    context: *mut abi::ibv_context,
    port: u8,
    attr: *mut abi::ibv_port_attr,
) -> c_int {
    let mut cmd = abi::ibv_query_port::default();
    // SAFETY: arguments as libibverbs passed them; cmd is valid for its size.
    unsafe { abi::ibv_cmd_query_port(context, port, attr, &mut cmd, size_of_val(&cmd)) }
}
