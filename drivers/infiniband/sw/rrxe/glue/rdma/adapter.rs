// SPDX-License-Identifier: GPL-2.0

//! The `struct ib_device_ops` of a [`Driver`], and every `extern "C"` function in it.
//!
//! The table is a constant built once per driver from the `#[vtable]` trait: an op the
//! driver does not implement (`HAS_*` false) is left NULL, so the core reports it as not
//! supported and uverbs does not offer its commands. Each trampoline states the core's
//! contract it relies on and turns the raw pointers it gets into the safe views of
//! `object.rs`, `attr.rs`, `wr.rs` and `udata.rs` before calling the driver.

use super::super::bindings;
use super::super::error::eopnotsupp;
use super::super::queue;
use super::super::umem::{KernelMemory, UmemPinner};
use super::attr::{
    qp_type_from_raw, AddressVector, CqInit, LinkLayer, MrRereg, QpCaps, QpInit, QpModify, SrqAttr,
    SrqModify, XrcSrqInit,
};
use super::driver::{Ah, Cq, DeviceOf, Driver, Mr, Mw, Pd, Qp, Srq, UContext, Xrcd};
use super::object::{CqHandle, Device, Object, PdId, QpHandle, SrqHandle, XrcdId};
use super::registry::DeviceRegistry;
use super::udata::UData;
use super::wr::{RecvWr, RegWr, SendWr, UdTarget};
use crate::transport::pma::{MadAnswer, MAD_SIZE};
use crate::transport::qp::state::QpType;
use core::ffi::c_int;
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use core::ptr::{self, addr_of_mut, NonNull};
use kernel::error::from_result;
use kernel::ffi::c_uint;
use kernel::prelude::*;
use kernel::types::{ARef, Opaque};

/// The trampolines of driver `T`.
pub(crate) struct Adapter<T>(PhantomData<T>);

// `process_mad` reads and writes whole `struct ib_mad`s as byte arrays.
const _: () = assert!(size_of::<bindings::ib_mad>() == MAD_SIZE);

impl<T: Driver> Adapter<T> {
    /// The ops table of `T`'s devices. `owner` is the module's, set at registration.
    pub(crate) const OPS: bindings::ib_device_ops = bindings::ib_device_ops {
        driver_id: T::DRIVER_ID,
        uverbs_abi_ver: T::UVERBS_ABI_VERSION,
        query_device: Some(Self::query_device),
        query_port: Some(Self::query_port),
        query_pkey: Some(Self::query_pkey),
        get_port_immutable: Some(Self::get_port_immutable),
        get_link_layer: Some(Self::get_link_layer),
        get_netdev: Some(Self::get_netdev),
        process_mad: if T::HAS_ANSWER_MAD {
            Some(Self::process_mad)
        } else {
            None
        },
        alloc_ucontext: Some(Self::alloc_ucontext),
        dealloc_ucontext: Some(Self::dealloc_ucontext),
        disassociate_ucontext: Some(Self::disassociate_ucontext),
        mmap: Some(Self::mmap),
        mmap_free: Some(Self::mmap_free),
        alloc_pd: Some(Self::alloc_pd),
        dealloc_pd: Some(Self::dealloc_pd),
        alloc_xrcd: if T::HAS_ALLOC_XRCD {
            Some(Self::alloc_xrcd)
        } else {
            None
        },
        dealloc_xrcd: if T::HAS_ALLOC_XRCD {
            Some(Self::dealloc_xrcd)
        } else {
            None
        },
        create_cq: Some(Self::create_cq),
        destroy_cq: Some(Self::destroy_cq),
        poll_cq: Some(Self::poll_cq),
        resize_cq: if T::HAS_RESIZE_CQ {
            Some(Self::resize_cq)
        } else {
            None
        },
        req_notify_cq: Some(Self::req_notify_cq),
        reg_user_mr: Some(Self::reg_user_mr),
        get_dma_mr: Some(Self::get_dma_mr),
        rereg_user_mr: if T::HAS_REREG_USER_MR {
            Some(Self::rereg_user_mr)
        } else {
            None
        },
        dereg_mr: Some(Self::dereg_mr),
        alloc_mr: if T::HAS_ALLOC_MR {
            Some(Self::alloc_mr)
        } else {
            None
        },
        map_mr_sg: if T::HAS_ALLOC_MR {
            Some(Self::map_mr_sg)
        } else {
            None
        },
        alloc_mw: if T::HAS_ALLOC_MW {
            Some(Self::alloc_mw)
        } else {
            None
        },
        dealloc_mw: if T::HAS_ALLOC_MW {
            Some(Self::dealloc_mw)
        } else {
            None
        },
        create_qp: Some(Self::create_qp),
        modify_qp: Some(Self::modify_qp),
        query_qp: Some(Self::query_qp),
        destroy_qp: Some(Self::destroy_qp),
        post_send: Some(Self::post_send),
        post_recv: Some(Self::post_recv),
        attach_mcast: if T::HAS_ATTACH_MCAST {
            Some(Self::attach_mcast)
        } else {
            None
        },
        detach_mcast: if T::HAS_ATTACH_MCAST {
            Some(Self::detach_mcast)
        } else {
            None
        },
        create_ah: Some(Self::create_ah),
        create_user_ah: Some(Self::create_ah),
        destroy_ah: Some(Self::destroy_ah),
        create_srq: if T::HAS_CREATE_SRQ {
            Some(Self::create_srq)
        } else {
            None
        },
        modify_srq: if T::HAS_CREATE_SRQ {
            Some(Self::modify_srq)
        } else {
            None
        },
        query_srq: if T::HAS_CREATE_SRQ {
            Some(Self::query_srq)
        } else {
            None
        },
        destroy_srq: if T::HAS_CREATE_SRQ {
            Some(Self::destroy_srq)
        } else {
            None
        },
        // post_srq_recv stays unset: user SRQs are posted to in their shared ring without
        // a system call, and kernel SRQs are refused by the driver.
        alloc_hw_port_stats: Some(Self::alloc_hw_port_stats),
        get_hw_stats: Some(Self::get_hw_stats),
        dealloc_driver: Some(Self::dealloc_driver),
        size_ib_ah: size_of::<Ah<T>>(),
        size_ib_cq: size_of::<Cq<T>>(),
        size_ib_mw: size_of::<Mw<T>>(),
        size_ib_pd: size_of::<Pd<T>>(),
        size_ib_qp: size_of::<Qp<T>>(),
        size_ib_srq: size_of::<Srq<T>>(),
        size_ib_ucontext: size_of::<UContext<T>>(),
        size_ib_xrcd: size_of::<Xrcd>(),
        // SAFETY: `struct ib_device_ops` is plain data: pointers and sizes, for which zero
        // (NULL, no op) is a valid value.
        ..unsafe { MaybeUninit::zeroed().assume_init() }
    };

    /// The device of a core object.
    ///
    /// # Safety
    ///
    /// `ibdev` must be a live device of driver `T` for `'a`.
    unsafe fn dev<'a>(ibdev: *mut bindings::ib_device) -> &'a DeviceOf<T> {
        // SAFETY: per the caller.
        unsafe { Device::from_raw(ibdev) }
    }

    // ---- device and port --------------------------------------------------------------

    /// # Safety
    ///
    /// Called by the RDMA core on a live device of driver `T` (as every op below, on live
    /// objects of driver `T` with the arguments `struct ib_device_ops` documents).
    unsafe extern "C" fn query_device(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract; `attr` is valid for writes.
        let (dev, attr) = unsafe { (Self::dev(ibdev), &mut *attr) };
        // SAFETY: `udata` is null for in-kernel callers, else valid for the call.
        if let Some(udata) = unsafe { udata.as_ref() } {
            // The rxe uverbs ABI has no driver-specific query_device data.
            if udata.inlen != 0 || udata.outlen != 0 {
                return EINVAL.to_errno();
            }
        }
        from_result(|| T::query_device(dev, attr).map(|()| 0))
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn query_port(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        // SAFETY: see the function's contract; `attr` is valid for writes.
        let (dev, attr) = unsafe { (Self::dev(ibdev), &mut *attr) };
        from_result(|| T::query_port(dev, port, attr).map(|()| 0))
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn query_pkey(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        // SAFETY: see the function's contract; `pkey` is valid for writes.
        let (dev, pkey) = unsafe { (Self::dev(ibdev), &mut *pkey) };
        from_result(|| {
            *pkey = T::query_pkey(dev, port, index)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn get_port_immutable(
        ibdev: *mut bindings::ib_device,
        port: u32,
        immutable: *mut bindings::ib_port_immutable,
    ) -> c_int {
        // SAFETY: see the function's contract; `immutable` is valid for writes.
        let (dev, immutable) = unsafe { (Self::dev(ibdev), &mut *immutable) };
        from_result(|| T::port_immutable(dev, port, immutable).map(|()| 0))
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn get_link_layer(
        ibdev: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: see the function's contract.
        let dev = unsafe { Self::dev(ibdev) };
        match T::link_layer(dev, port) {
            LinkLayer::Ethernet => bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
        }
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn get_netdev(
        ibdev: *mut bindings::ib_device,
        port: u32,
    ) -> *mut bindings::net_device {
        // SAFETY: see the function's contract.
        let dev = unsafe { Self::dev(ibdev) };
        // The caller owns the reference we return (it calls dev_put).
        T::netdev(dev, port).map_or(ptr::null_mut(), |n| ARef::into_raw(n).as_ptr().cast())
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]; the MAD pointers are null or point at MADs of at least
    /// `*out_mad_size` bytes (output) and of the size the MAD layer receives (input).
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn process_mad(
        ibdev: *mut bindings::ib_device,
        _flags: c_int,
        port: u32,
        in_wc: *const bindings::ib_wc,
        _in_grh: *const bindings::ib_grh,
        in_mad: *const bindings::ib_mad,
        out_mad: *mut bindings::ib_mad,
        out_mad_size: *mut usize,
        _out_mad_pkey_index: *mut u16,
    ) -> c_int {
        const PASS: c_int = bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS as c_int;
        const REPLY: c_int = PASS | bindings::ib_mad_result_IB_MAD_RESULT_REPLY as c_int;
        // MADs that arrived on the GSI QP (with a work completion: CM, and anyone's
        // PerfMgmt queries) are the MAD layer's to dispatch; only the core's own queries
        // about the port are answered here.
        if !in_wc.is_null() || in_mad.is_null() || out_mad.is_null() || out_mad_size.is_null() {
            return PASS;
        }
        // SAFETY: per the function's contract, `out_mad_size` is valid.
        if unsafe { *out_mad_size } < MAD_SIZE {
            return PASS;
        }
        // SAFETY: see the function's contract; a local query's MAD is a `struct ib_mad`,
        // `MAD_SIZE` bytes, as is the output, which the core allocated apart.
        let (dev, request, response) = unsafe {
            (
                Self::dev(ibdev),
                &*in_mad.cast::<[u8; MAD_SIZE]>(),
                &mut *out_mad.cast::<[u8; MAD_SIZE]>(),
            )
        };
        match T::answer_mad(dev, port, request, response) {
            MadAnswer::NotMine => PASS,
            MadAnswer::Reply => {
                // SAFETY: checked non-null above.
                unsafe { *out_mad_size = MAD_SIZE };
                REPLY
            }
        }
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]; `stats` holds `num_counters` values allocated by
    /// `alloc_hw_port_stats`, under the core's stats lock.
    unsafe extern "C" fn get_hw_stats(
        ibdev: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, values) = unsafe {
            let n = usize::try_from((*stats).num_counters).unwrap_or(0);
            (Self::dev(ibdev), (*stats).value.as_mut_slice(n))
        };
        T::read_counters(dev, port, values);
        values.len() as c_int
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn alloc_hw_port_stats(
        _ibdev: *mut bindings::ib_device,
        port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        let descs = T::counters(port).0;
        // SAFETY: the descriptors are 'static; the core frees the structure.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                descs.as_ptr(),
                descs.len() as c_int,
                bindings::RRXE_RDMA_HW_STATS_DEFAULT_LIFESPAN as _,
            )
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core once, last, on a device of driver `T` allocated by its
    /// [`DeviceRegistry`].
    unsafe extern "C" fn dealloc_driver(ibdev: *mut bindings::ib_device) {
        let dev = ibdev.cast::<DeviceOf<T>>();
        // SAFETY: the registry set the pointer at allocation and outlives its devices (its
        // drop unregisters them all).
        let registry = unsafe { &*(*dev).registry.cast::<DeviceRegistry<T>>() };
        registry.mark_dead(ibdev);
        // SAFETY: dealloc_driver is the last op the core calls, once; the entry is dead, so
        // the registry no longer hands out references to the data.
        unsafe { ptr::drop_in_place(addr_of_mut!((*dev).data)) };
    }

    // ---- user contexts and mmap -------------------------------------------------------

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibuc` is a zeroed `UContext<T>` of one of our devices.
    unsafe extern "C" fn alloc_ucontext(
        ibuc: *mut bindings::ib_ucontext,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let dev = unsafe { Self::dev((*ibuc).device) };
        from_result(|| {
            let data = T::alloc_ucontext(dev)?;
            // SAFETY: a fresh context; dealloc_ucontext, which the core calls exactly when
            // alloc_ucontext succeeded, drops the state.
            unsafe { UContext::<T>::init(ibuc, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: alloc_ucontext succeeded on `ibuc`.
    unsafe extern "C" fn dealloc_ucontext(ibuc: *mut bindings::ib_ucontext) {
        // SAFETY: alloc_ucontext succeeded on this context and the core calls this once.
        unsafe { UContext::<T>::drop_data(ibuc) };
    }

    /// Cuts a user context off a device that goes away, or moves to another network
    /// namespace, while the process still holds it. Offering the op is what lets the core
    /// go on without waiting for the process: it destroys the context's objects at once
    /// (the process gets `IB_EVENT_DEVICE_FATAL` and `EIO` from every command after) and
    /// no longer holds the module for open contexts.
    ///
    /// Nothing here needs revoking. The process's only direct access is its mapped rings,
    /// whose pages outlive the queues the destruction frees (see `queue`'s module doc) and
    /// which the kernel stops reading when it destroys the objects. Its doorbells and every
    /// other call are uverbs commands, which the core now refuses.
    ///
    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn disassociate_ucontext(_ibuc: *mut bindings::ib_ucontext) {}

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn mmap(
        ibuc: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: called by the core's mmap path for this context.
        from_result(|| unsafe { queue::mmap(ibuc, vma) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
        // SAFETY: every entry of our contexts was inserted by a `SharedQueue`.
        unsafe { queue::mmap_free(entry) }
    }

    // ---- protection domains -----------------------------------------------------------

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibpd` is a zeroed `Pd<T>` of one of our devices.
    unsafe extern "C" fn alloc_pd(
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let dev = unsafe { Self::dev((*ibpd).device) };
        from_result(|| {
            let data = T::alloc_pd(dev)?;
            // SAFETY: a fresh PD; dealloc_pd drops the state.
            unsafe { Pd::<T>::init(ibpd, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: alloc_pd succeeded on `ibpd`.
    unsafe extern "C" fn dealloc_pd(
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: alloc_pd succeeded on this PD and the core deallocates it once.
        unsafe { Pd::<T>::drop_data(ibpd) };
        0
    }

    // ---- XRC domains -------------------------------------------------------------------

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibxrcd` is a zeroed `Xrcd` of one of our devices.
    unsafe extern "C" fn alloc_xrcd(
        ibxrcd: *mut bindings::ib_xrcd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let dev = unsafe { Self::dev((*ibxrcd).device) };
        from_result(|| {
            let id = T::alloc_xrcd(dev)?;
            // SAFETY: a fresh XRCD; dealloc_xrcd drops it.
            unsafe { Xrcd::init(ibxrcd, id) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: alloc_xrcd succeeded on `ibxrcd`, which no SRQ or QP
    /// uses any more (the core checks `usecnt` and the target QP table).
    unsafe extern "C" fn dealloc_xrcd(
        ibxrcd: *mut bindings::ib_xrcd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, id) = unsafe { (Self::dev((*ibxrcd).device), Self::xrcd_id(ibxrcd)) };
        T::dealloc_xrcd(dev, id);
        // SAFETY: alloc_xrcd succeeded on this XRCD and the core deallocates it once.
        unsafe { Xrcd::drop_data(ibxrcd) };
        0
    }

    /// The number of a live XRCD of ours.
    ///
    /// # Safety
    ///
    /// `ibxrcd` must be an XRCD alloc_xrcd succeeded on, not yet deallocated.
    unsafe fn xrcd_id(ibxrcd: *mut bindings::ib_xrcd) -> XrcdId {
        // SAFETY: per the caller.
        *unsafe { Xrcd::from_raw(ibxrcd) }.data()
    }

    // ---- completion queues ------------------------------------------------------------

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibcq` is a zeroed `Cq<T>` of one of our devices whose
    /// handlers are set; `attrs` is the uverbs bundle of a user call, null for kernel ones.
    unsafe extern "C" fn create_cq(
        ibcq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, attr, mut udata) = unsafe {
            (
                Self::dev((*ibcq).device),
                &*attr,
                UData::from_raw(bindings::rrxe_bundle_udata(attrs)),
            )
        };
        from_result(|| {
            // No CQ creation flags (timestamps, ...) are supported.
            if attr.flags != 0 {
                return Err(eopnotsupp());
            }
            // The completion vector needs no handling: uverbs bounds it by
            // num_comp_vectors, and completions are delivered from rrxe's own contexts.
            let init = CqInit { entries: attr.cqe };
            let handle = CqHandle::from_raw(NonNull::new(ibcq).ok_or(EINVAL)?);
            let (data, capacity) = T::create_cq(dev, handle, &init, udata.as_mut())?;
            // SAFETY: a fresh CQ; destroy_cq drops the state. `cqe` is what uverbs reports
            // back as the CQ's size.
            unsafe {
                Cq::<T>::init(ibcq, data);
                (*ibcq).cqe = capacity as c_int;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: create_cq succeeded on `ibcq`; no QP uses it any more.
    unsafe extern "C" fn destroy_cq(
        ibcq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: create_cq succeeded on this CQ and the core destroys it once.
        unsafe { Cq::<T>::drop_data(ibcq) };
        0
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn resize_cq(
        ibcq: *mut bindings::ib_cq,
        cqe: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract; `udata` belongs to the uverbs call (null for
        // kernel callers).
        let (cq, mut udata) = unsafe { (Cq::<T>::from_raw(ibcq), UData::from_raw(udata)) };
        from_result(|| {
            let entries = u32::try_from(cqe).map_err(|_| EINVAL)?;
            let capacity = T::resize_cq(cq.data(), entries, udata.as_mut())?;
            // SAFETY: uverbs reports `cqe` back as the CQ's size; the core serialises verbs on
            // one CQ object.
            unsafe { (*ibcq).cqe = capacity as c_int };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: `wc` has room for `num` completions.
    unsafe extern "C" fn poll_cq(
        ibcq: *mut bindings::ib_cq,
        num: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        let Ok(num) = usize::try_from(num) else {
            return EINVAL.to_errno();
        };
        if num == 0 {
            return 0;
        }
        // SAFETY: see the function's contract.
        let (cq, wc) = unsafe {
            (
                Cq::<T>::from_raw(ibcq),
                core::slice::from_raw_parts_mut(wc, num),
            )
        };
        from_result(|| T::poll_cq(cq.data(), wc).map(|n| n as c_int))
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn req_notify_cq(
        ibcq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let cq = unsafe { Cq::<T>::from_raw(ibcq) };
        let solicited_only = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
        let report = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
        c_int::from(T::req_notify_cq(cq.data(), solicited_only, report))
    }

    // ---- memory regions and windows ---------------------------------------------------

    /// Allocates an MR, fills it with what `create` returns, and hands it to the core.
    ///
    /// The allocation comes first, so that once the driver has created its state (and
    /// taken a key) nothing can fail before the core owns it.
    fn new_mr(
        iova: u64,
        length: u64,
        create: impl FnOnce() -> Result<(T::Mr, u32)>,
    ) -> Result<*mut bindings::ib_mr> {
        let mut mr = KBox::new(
            Mr::<T> {
                ib: Opaque::new(bindings::ib_mr::default()),
                data: MaybeUninit::uninit(),
            },
            GFP_KERNEL,
        )?;
        let (data, key) = create()?;
        mr.data.write(data);
        // SAFETY: we own the MR exclusively until it is handed to the core below.
        unsafe {
            let ibmr = mr.ib.get();
            (*ibmr).lkey = key;
            (*ibmr).rkey = key;
            (*ibmr).iova = iova;
            (*ibmr).length = length;
            (*ibmr).page_size = bindings::RRXE_PAGE_SIZE as u32;
        }
        // The ib_mr is the first field of the `#[repr(C)]` Mr; the core fills in device,
        // pd and type, and gives the pointer back to dereg_mr.
        Ok(KBox::into_raw(mr).cast())
    }

    /// The driver's state of an MR that came from [`Self::new_mr`].
    ///
    /// # Safety
    ///
    /// `ibmr` must come from [`Self::new_mr`] and not be deregistered for `'a`.
    unsafe fn mr_data<'a>(ibmr: *mut bindings::ib_mr) -> &'a T::Mr {
        // SAFETY: per the caller, a `KBox<Mr<T>>` whose data `new_mr` initialised.
        let mr: &'a Mr<T> = unsafe { Object::from_raw(ibmr) };
        mr.data()
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibpd` is a live PD of one of our devices, in a uverbs
    /// call of the process that owns the memory.
    unsafe extern "C" fn reg_user_mr(
        ibpd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // SAFETY: see the function's contract.
        let (dev, ibdev) = unsafe { (Self::dev((*ibpd).device), (*ibpd).device) };
        let pd = PdId::from_raw(ibpd);
        Self::new_mr(iova, length, || {
            // SAFETY: the device is live and the pinner lives only for this call.
            let pin = unsafe { UmemPinner::new(NonNull::new(ibdev).ok_or(EINVAL)?) };
            let umem = pin.pin(start, length, access)?;
            T::reg_user_mr(dev, pd, umem, iova, length, access)
        })
        .unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: uverbs holds the MR's uobject for writing (no dereg or
    /// other rereg runs) and passes a live PD of the same device (the MR's own without
    /// IB_MR_REREG_PD).
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn rereg_user_mr(
        ibmr: *mut bindings::ib_mr,
        flags: c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // SAFETY: see the function's contract; the MR came from `new_mr`, which set its
        // iova and length.
        let (data, dev, ibdev, old_iova, old_length) = unsafe {
            (
                Self::mr_data(ibmr),
                Self::dev((*ibmr).device),
                (*ibmr).device,
                (*ibmr).iova,
                (*ibmr).length,
            )
        };
        let flags = flags as u32;
        let trans = flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0;
        let req = MrRereg {
            pd: PdId::from_raw(ibpd),
            trans: trans.then_some((start, length, iova)),
            access: (flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0).then_some(access),
        };
        let (iova, length) = if trans {
            (iova, length)
        } else {
            (old_iova, old_length)
        };
        // A new MR: the core gives it the uobject and destroys the old one.
        Self::new_mr(iova, length, || {
            // SAFETY: the device is live and the pinner lives only for this call.
            let pin = unsafe { UmemPinner::new(NonNull::new(ibdev).ok_or(EINVAL)?) };
            T::rereg_user_mr(dev, data, &req, &pin)
        })
        .unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn get_dma_mr(
        ibpd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: see the function's contract.
        let dev = unsafe { Self::dev((*ibpd).device) };
        let pd = PdId::from_raw(ibpd);
        Self::new_mr(0, 0, || {
            // SAFETY: the memory of a DMA MR is named by the kernel consumers of `pd` (only
            // kernel PDs get one: uverbs has no command for it).
            let memory = unsafe { KernelMemory::new() };
            T::get_dma_mr(dev, pd, memory, access)
        })
        .unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn alloc_mr(
        ibpd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        // Only page-list registrations: SG_GAPS and integrity MRs are not offered (the
        // device does not advertise IBK_SG_GAPS_REG or integrity handover).
        if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return EINVAL.to_ptr();
        }
        // SAFETY: see the function's contract.
        let (dev, user) = unsafe { (Self::dev((*ibpd).device), !(*ibpd).uobject.is_null()) };
        // `ib_alloc_mr` is a kernel verb; the page addresses it maps are kernel addresses,
        // so a user PD must never own one.
        if user {
            return EINVAL.to_ptr();
        }
        let pd = PdId::from_raw(ibpd);
        Self::new_mr(0, 0, || {
            // SAFETY: the PD is a kernel PD (checked above): the pages of this MR come from
            // `map_mr_sg` by its kernel consumer, as kernel virtual addresses.
            let memory = unsafe { KernelMemory::new() };
            T::alloc_mr(dev, pd, memory, max_num_sg)
        })
        .unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// Called by the RDMA core (`ib_map_mr_sg`) on an MR of driver `T` from `alloc_mr`,
    /// with a DMA-mapped scatterlist of `sg_nents` entries.
    unsafe extern "C" fn map_mr_sg(
        ibmr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        // SAFETY: see the function's contract; the core set the page size before calling.
        let (data, page_size) = unsafe { (Self::mr_data(ibmr), (*ibmr).page_size) };
        if let Err(e) = T::map_mr_begin(data, page_size) {
            return e.to_errno();
        }
        // rrxe registers without a DMA device, so the core maps scatterlists with its
        // virtual DMA ops (`ib_uses_virt_dma`): each DMA address is the kernel virtual
        // address of the memory, which is what `set_page` stores. `ib_sg_to_pages` also
        // sets the MR's iova and length.
        //
        // SAFETY: per the function contract; `set_page` reaches the MR's data only.
        unsafe { bindings::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(Self::set_page)) }
    }

    /// # Safety
    ///
    /// Called by `ib_sg_to_pages` from `map_mr_sg`, on an MR of driver `T`.
    unsafe extern "C" fn set_page(ibmr: *mut bindings::ib_mr, addr: u64) -> c_int {
        // SAFETY: as in `map_mr_sg`.
        let data = unsafe { Self::mr_data(ibmr) };
        match T::map_mr_page(data, addr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: the MR came from `new_mr`; the core keeps it if this
    /// fails.
    unsafe extern "C" fn dereg_mr(
        ibmr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (data, dev) = unsafe { (Self::mr_data(ibmr), Self::dev((*ibmr).device)) };
        if let Err(e) = T::dereg_mr(dev, data) {
            return e.to_errno();
        }
        // SAFETY: as above; the core no longer uses the MR once this succeeds.
        let mut mr = unsafe { KBox::from_raw(ibmr.cast::<Mr<T>>()) };
        // SAFETY: initialised by `new_mr`, dropped only here.
        unsafe { mr.data.assume_init_drop() };
        0
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: the core allocated the MW zeroed (`size_ib_mw` bytes) and
    /// set its device, PD and type.
    unsafe extern "C" fn alloc_mw(
        ibmw: *mut bindings::ib_mw,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, pd, mw_type) = unsafe {
            (
                Self::dev((*ibmw).device),
                PdId::from_raw((*ibmw).pd),
                (*ibmw).type_,
            )
        };
        let type2 = match mw_type {
            bindings::ib_mw_type_IB_MW_TYPE_1 => false,
            bindings::ib_mw_type_IB_MW_TYPE_2 => true,
            _ => return EINVAL.to_errno(),
        };
        match T::alloc_mw(dev, pd, type2) {
            Ok((data, rkey)) => {
                // SAFETY: as above; the state is not initialised yet.
                unsafe {
                    (*ibmw).rkey = rkey;
                    Mw::<T>::init(ibmw, data);
                }
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: alloc_mw succeeded on `ibmw`.
    unsafe extern "C" fn dealloc_mw(ibmw: *mut bindings::ib_mw) -> c_int {
        // SAFETY: see the function's contract.
        let (mw, dev) = unsafe { (Mw::<T>::from_raw(ibmw), Self::dev((*ibmw).device)) };
        T::dealloc_mw(dev, mw.data());
        // SAFETY: nothing uses the state after this; the core frees the MW.
        unsafe { Mw::<T>::drop_data(ibmw) };
        0
    }

    // ---- queue pairs ------------------------------------------------------------------

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibqp` is a zeroed `Qp<T>` with device, pd, CQs and SRQ
    /// set; `udata` is present for user QPs.
    unsafe extern "C" fn create_qp(
        ibqp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, init, mut udata) = unsafe {
            (
                Self::dev((*ibqp).device),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            if init.create_flags != 0 || !init.rwq_ind_tbl.is_null() {
                return Err(eopnotsupp());
            }
            let qp_type = qp_type_from_raw(init.qp_type)?;
            // An XRC target QP (created by the core for uverbs, without udata) has an XRC
            // domain and neither PD, CQs nor SRQ; an XRC initiator a PD and a send CQ only;
            // every other QP a PD and both CQs.
            // SAFETY: the core set the QP's PD (null for a target QP) before calling.
            let ibpd = unsafe { (*ibqp).pd };
            let valid = match qp_type {
                QpType::XrcTgt => {
                    !init.xrcd.is_null() && init.send_cq.is_null() && init.recv_cq.is_null()
                }
                QpType::XrcIni => {
                    init.xrcd.is_null()
                        && !ibpd.is_null()
                        && !init.send_cq.is_null()
                        && init.srq.is_null()
                }
                _ => {
                    init.xrcd.is_null()
                        && !ibpd.is_null()
                        && !init.send_cq.is_null()
                        && !init.recv_cq.is_null()
                }
            };
            if !valid {
                return Err(EINVAL);
            }
            // SAFETY: the CQs, SRQ and XRCD are objects of this device (uverbs and
            // ib_create_qp look them up among the caller's objects), created by our ops and
            // referenced (`usecnt`) until this QP is destroyed; the PD likewise.
            let (send_cq, recv_cq, srq, xrcd) = unsafe {
                (
                    (!init.send_cq.is_null()).then(|| Cq::<T>::from_raw(init.send_cq).data()),
                    (!init.recv_cq.is_null()).then(|| Cq::<T>::from_raw(init.recv_cq).data()),
                    (!init.srq.is_null()).then(|| Srq::<T>::from_raw(init.srq).data()),
                    (!init.xrcd.is_null()).then(|| Self::xrcd_id(init.xrcd)),
                )
            };
            let mut qinit = QpInit {
                qp_type,
                pd: (!ibpd.is_null()).then(|| PdId::from_raw(ibpd)),
                xrcd,
                caps: QpCaps::from_raw(&init.cap),
                send_cq,
                recv_cq,
                srq,
                signal_all: init.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
                port: if qp_type == QpType::Gsi {
                    u8::try_from(init.port_num).map_err(|_| EINVAL)?
                } else {
                    0
                },
            };
            let handle = QpHandle::from_raw(NonNull::new(ibqp).ok_or(EINVAL)?);
            let (data, qpn) = T::create_qp(dev, handle, &mut qinit, udata.as_mut())?;
            qinit.caps.to_raw(&mut init.cap);
            // SAFETY: a fresh QP; destroy_qp drops the state.
            unsafe {
                (*ibqp).qp_num = qpn;
                Qp::<T>::init(ibqp, data);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn modify_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (qp, attr, dev) =
            unsafe { (Qp::<T>::from_raw(ibqp), &*attr, Self::dev((*ibqp).device)) };
        from_result(|| {
            let m = QpModify::from_raw(attr, mask as u32)?;
            T::modify_qp(dev, qp.data(), &m)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: the core passes zeroed output structures.
    unsafe extern "C" fn query_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (qp, attr, init) = unsafe { (Qp::<T>::from_raw(ibqp), &mut *attr, &mut *init) };
        from_result(|| {
            let q = T::query_qp(qp.data())?;
            q.to_raw(attr);
            q.caps.to_raw(&mut init.cap);
            // SAFETY: a live QP; these are fixed at creation.
            unsafe {
                init.qp_type = (*ibqp).qp_type;
                init.send_cq = (*ibqp).send_cq;
                init.recv_cq = (*ibqp).recv_cq;
                init.srq = (*ibqp).srq;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: destroyed once; possibly from within a handler the QP's
    /// own work called.
    unsafe extern "C" fn destroy_qp(
        ibqp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (qp, dev) = unsafe { (Qp::<T>::from_raw(ibqp), Self::dev((*ibqp).device)) };
        T::destroy_qp(dev, qp.data());
        // SAFETY: the driver has stopped all use of the QP's handle; its state goes.
        unsafe { Qp::<T>::drop_data(ibqp) };
        0
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibqp` is a live QP of `T` and `gid` a valid GID.
    unsafe extern "C" fn attach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        // SAFETY: see the function's contract; every bit pattern of the union is a GID.
        let (qp, dev, gid, ud) = unsafe {
            (
                Qp::<T>::from_raw(ibqp),
                Self::dev((*ibqp).device),
                (*gid).raw,
                (*ibqp).qp_type == bindings::ib_qp_type_IB_QPT_UD,
            )
        };
        // Only UD QPs join multicast groups (IBA; the core checks too, ULPs calling the op
        // through other paths get the same answer).
        if !ud {
            return EINVAL.to_errno();
        }
        from_result(|| {
            T::attach_mcast(dev, qp.data(), &gid)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::attach_mcast`].
    unsafe extern "C" fn detach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (qp, dev, gid) = unsafe {
            (
                Qp::<T>::from_raw(ibqp),
                Self::dev((*ibqp).device),
                (*gid).raw,
            )
        };
        from_result(|| {
            T::detach_mcast(dev, qp.data(), &gid)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: `wr` is a valid list of work requests (or null: a user
    /// QP's doorbell) and `bad_wr` valid for writes.
    unsafe extern "C" fn post_send(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (qp, dev) = unsafe { (Qp::<T>::from_raw(ibqp), Self::dev((*ibqp).device)) };
        // SAFETY: as above; fixed at creation.
        let ud = unsafe {
            matches!(
                (*ibqp).qp_type,
                bindings::ib_qp_type_IB_QPT_UD | bindings::ib_qp_type_IB_QPT_GSI
            )
        };
        let mut cur = wr;
        let mut posted = false;
        let mut result = Ok(());
        while !cur.is_null() {
            // SAFETY: the consumer passes a valid list of work requests, each embedded in
            // the structure its opcode (and, for sends, the QP type) implies.
            let view = unsafe { Self::send_wr_view(cur, ud) };
            if let Err(e) = T::post_send(qp.data(), &view) {
                // SAFETY: `bad_wr` is valid for writes.
                unsafe { *bad_wr = cur };
                result = Err(e);
                break;
            }
            posted = true;
            // SAFETY: as above.
            cur = unsafe { (*cur).next };
        }
        // A null list is a user QP's doorbell (rdma_rxe's ABI): the WQEs are in its ring.
        if wr.is_null() || posted {
            if let Err(e) = T::post_send_doorbell(dev, qp.data(), wr.is_null()) {
                if wr.is_null() {
                    return e.to_errno();
                }
            }
        }
        match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// `wr` must be a valid kernel send WR embedded in the structure its opcode implies
    /// (`ib_ud_wr` for sends on UD QPs when `ud`), live for the returned lifetime.
    unsafe fn send_wr_view<'a>(wr: *const bindings::ib_send_wr, ud: bool) -> SendWr<'a, T::Ah> {
        // SAFETY: per the function contract.
        let raw = unsafe { &*wr };
        let opcode = raw.opcode;
        let mut view = SendWr {
            raw,
            opcode,
            flags: raw.send_flags as u32,
            remote: (0, 0),
            atomic: (0, 0),
            ud: None,
            reg: None,
        };
        match opcode {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: RDMA WRs are `ib_rdma_wr`s.
                let r = unsafe { &*wr.cast::<bindings::ib_rdma_wr>() };
                view.remote = (r.remote_addr, r.rkey);
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: atomic WRs are `ib_atomic_wr`s.
                let a = unsafe { &*wr.cast::<bindings::ib_atomic_wr>() };
                view.remote = (a.remote_addr, a.rkey);
                view.atomic = (a.compare_add, a.swap);
            }
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                // SAFETY: Fast Register WRs are `ib_reg_wr`s.
                let r = unsafe { &*wr.cast::<bindings::ib_reg_wr>() };
                if !r.mr.is_null() {
                    // SAFETY: the consumer's MR, live for the post (it posts a WR naming it);
                    // its iova and length are plain fields `ib_map_mr_sg` set.
                    let (iova, length) = unsafe { ((*r.mr).iova, (*r.mr).length) };
                    view.reg = Some(RegWr {
                        key: r.key,
                        // Flags are a bit set; the sign bit is no access right.
                        access: r.access as u32,
                        iova,
                        length,
                    });
                }
            }
            bindings::ib_wr_opcode_IB_WR_SEND | bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM
                if ud =>
            {
                // SAFETY: sends on UD QPs are `ib_ud_wr`s, whose AH is live for the post.
                let u = unsafe { &*wr.cast::<bindings::ib_ud_wr>() };
                if !u.ah.is_null() {
                    view.ud = Some(UdTarget {
                        // SAFETY: an AH of this device (the core creates AHs per device).
                        ah: unsafe { Ah::<T>::from_raw(u.ah) }.data(),
                        remote_qpn: u.remote_qpn,
                        remote_qkey: u.remote_qkey,
                        pkey_index: u.pkey_index,
                    });
                }
            }
            _ => {}
        }
        view
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: `wr` is a valid list of receive WRs and `bad_wr` valid
    /// for writes.
    unsafe extern "C" fn post_recv(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (qp, dev) = unsafe { (Qp::<T>::from_raw(ibqp), Self::dev((*ibqp).device)) };
        if wr.is_null() {
            // uverbs' POST_RECV with no WRs: a user QP's doorbell, as its POST_SEND with
            // none is rdma_rxe's send doorbell.
            T::post_recv_doorbell(dev, qp.data(), true);
            return 0;
        }
        let mut cur = wr;
        let mut result = Ok(());
        let mut posted = false;
        while !cur.is_null() {
            // SAFETY: the consumer passes a valid list of receive WRs.
            let raw = unsafe { &*cur };
            let view = RecvWr { raw };
            if let Err(e) = T::post_recv(qp.data(), &view) {
                // SAFETY: `bad_wr` is valid for writes.
                unsafe { *bad_wr = cur };
                result = Err(e);
                break;
            }
            posted = true;
            // SAFETY: as above.
            cur = unsafe { (*cur).next };
        }
        if posted {
            T::post_recv_doorbell(dev, qp.data(), false);
        }
        match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    // ---- address handles --------------------------------------------------------------

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibah` is a zeroed `Ah<T>` with device and pd set;
    /// `udata` is present for user AHs.
    unsafe extern "C" fn create_ah(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, init, mut udata) =
            unsafe { (Self::dev((*ibah).device), &*init, UData::from_raw(udata)) };
        from_result(|| {
            // SAFETY: the attributes outlive the call.
            let attr = unsafe { init.ah_attr.as_ref() }.ok_or(EINVAL)?;
            let av = AddressVector::from_raw(attr)?;
            // SAFETY: the core set the AH's PD before the call.
            let pd = PdId::from_raw(unsafe { (*ibah).pd });
            // The CM creates AHs under spinlocks: only with this flag may the driver sleep.
            let sleepable =
                init.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
            let data = T::create_ah(dev, pd, &av, sleepable, udata.as_mut())?;
            // SAFETY: a fresh AH; destroy_ah drops the state.
            unsafe { Ah::<T>::init(ibah, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: destroyed once.
    unsafe extern "C" fn destroy_ah(ibah: *mut bindings::ib_ah, _flags: u32) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, ah) = unsafe { (Self::dev((*ibah).device), Ah::<T>::from_raw(ibah)) };
        T::destroy_ah(dev, ah.data());
        // SAFETY: the driver no longer uses the state.
        unsafe { Ah::<T>::drop_data(ibah) };
        0
    }

    // ---- shared receive queues --------------------------------------------------------

    /// # Safety
    ///
    /// See [`Self::query_device`]: `ibsrq` is a zeroed `Srq<T>` with device, pd and event
    /// handler set; `udata` is present for user SRQs.
    unsafe extern "C" fn create_srq(
        ibsrq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, init, mut udata) = unsafe {
            (
                Self::dev((*ibsrq).device),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            // SAFETY: the core set the SRQ's PD, CQ and XRCD (for an XRC SRQ) from `init`
            // before calling: objects of this device it holds use counts on until the SRQ
            // is destroyed.
            let (ibpd, xrc) = unsafe {
                let xrc = match init.srq_type {
                    bindings::ib_srq_type_IB_SRQT_BASIC => None,
                    bindings::ib_srq_type_IB_SRQT_XRC => {
                        let cq = init.ext.cq;
                        let xrcd = init.ext.__bindgen_anon_1.xrc.xrcd;
                        if cq.is_null() || xrcd.is_null() {
                            return Err(EINVAL);
                        }
                        Some(XrcSrqInit {
                            xrcd: Self::xrcd_id(xrcd),
                            cq: Cq::<T>::from_raw(cq).data(),
                        })
                    }
                    _ => return Err(eopnotsupp()),
                };
                ((*ibsrq).pd, xrc)
            };
            if ibpd.is_null() {
                return Err(EINVAL);
            }
            let is_xrc = xrc.is_some();
            let mut attr = SrqAttr {
                max_wr: init.attr.max_wr,
                max_sge: init.attr.max_sge,
                limit: init.attr.srq_limit,
            };
            let handle = SrqHandle::from_raw(NonNull::new(ibsrq).ok_or(EINVAL)?);
            let (data, srq_num) = T::create_srq(
                dev,
                handle,
                PdId::from_raw(ibpd),
                &mut attr,
                xrc,
                udata.as_mut(),
            )?;
            if is_xrc {
                // SAFETY: a fresh SRQ; uverbs reports `ext.xrc.srq_num` as its SRQN.
                unsafe { (*ibsrq).ext.__bindgen_anon_1.xrc.srq_num = srq_num };
            }
            init.attr.max_wr = attr.max_wr;
            init.attr.max_sge = attr.max_sge;
            // SAFETY: a fresh SRQ; destroy_srq drops the state.
            unsafe { Srq::<T>::init(ibsrq, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]; `udata` is present for user calls.
    unsafe extern "C" fn modify_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (srq, attr, mut udata) =
            unsafe { (Srq::<T>::from_raw(ibsrq), &*attr, UData::from_raw(udata)) };
        from_result(|| {
            let mmap_info_addr = match udata.as_ref() {
                Some(u) => {
                    // rdma_rxe's rxe_modify_srq_cmd: the provider always sends it.
                    let mut cmd = [0u8; 8];
                    if u.in_len() < cmd.len() {
                        return Err(EINVAL);
                    }
                    u.read_in(&mut cmd)?;
                    Some(u64::from_ne_bytes(cmd))
                }
                None => None,
            };
            let m = SrqModify {
                max_wr: (mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0)
                    .then_some(attr.max_wr),
                limit: (mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0)
                    .then_some(attr.srq_limit),
                mmap_info_addr,
            };
            T::modify_srq(srq.data(), &m, udata.as_mut())?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`].
    unsafe extern "C" fn query_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (srq, attr) = unsafe { (Srq::<T>::from_raw(ibsrq), &mut *attr) };
        from_result(|| {
            let a = T::query_srq(srq.data())?;
            attr.max_wr = a.max_wr;
            attr.max_sge = a.max_sge;
            attr.srq_limit = a.limit;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// See [`Self::query_device`]: no QP is attached (the core checks `usecnt`); destroyed
    /// once.
    unsafe extern "C" fn destroy_srq(
        ibsrq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: see the function's contract.
        let (dev, srq) = unsafe { (Self::dev((*ibsrq).device), Srq::<T>::from_raw(ibsrq)) };
        T::destroy_srq(dev, srq.data());
        // SAFETY: the driver has stopped all use of the SRQ's state.
        unsafe { Srq::<T>::drop_data(ibsrq) };
        0
    }
}
