// SPDX-License-Identifier: GPL-2.0

//! RDMA objects as the driver sees them: a device or object of the core (`struct ib_*`)
//! with the driver's state behind it, the identities objects are checked against, and
//! handles through which the driver reaches an object's consumer (its event and completion
//! handlers).

use super::super::bindings;
use core::fmt;
use core::ptr::{self, addr_of_mut, NonNull};
use kernel::error::to_result;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::types::Opaque;

/// Message levels for [`Device::print`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Level {
    /// `KERN_INFO`.
    Info,
}

impl Level {
    fn prefix(self) -> &'static [u8] {
        match self {
            Level::Info => b"\x016\0",
        }
    }
}

/// Prints a message prefixed with the RDMA device (and its parent) name, as the core's own
/// `ibdev_*` messages are.
macro_rules! ibdev_print {
    ($dev:expr, $level:ident, $($arg:tt)*) => {
        $dev.print($crate::glue::rdma::object::Level::$level, format_args!($($arg)*))
    };
}
pub(crate) use ibdev_print;

/// A port event delivered to the device's consumers (`ib_dispatch_event`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortEvent {
    /// The port became active (`IB_EVENT_PORT_ACTIVE`).
    Active,
    /// The port left the active state (`IB_EVENT_PORT_ERR`).
    Error,
}

/// A registered RDMA device: the core's `struct ib_device` and the driver's data `D`.
///
/// The core allocates it (`_ib_alloc_device` with our size) with the `ib_device` first,
/// which `#[repr(C)]` and the field order guarantee. The registry that created it keeps a
/// pointer to itself here for `dealloc_driver`, which has nothing else to find it by.
#[repr(C)]
pub(crate) struct Device<D> {
    ibdev: Opaque<bindings::ib_device>,
    pub(super) registry: *const c_void,
    pub(super) data: D,
}

// SAFETY: the C parts are protected by the RDMA core's own locking; `D` is shared with the
// core's threads only through `&D`.
unsafe impl<D: Sync> Sync for Device<D> {}

impl<D> Device<D> {
    /// # Safety
    ///
    /// `ptr` must be an `ib_device` allocated by the device registry for data of type `D`
    /// whose `dealloc_driver` has not run, and must stay so for `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: the ib_device is the first field of the `#[repr(C)]` `Device<D>`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The core's device, for the glue layer.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ibdev.get()
    }

    /// The driver's data.
    pub(crate) fn data(&self) -> &D {
        &self.data
    }

    /// Prints `args` at `level`, prefixed like the RDMA core's own `ibdev_*` messages.
    pub(crate) fn print(&self, level: Level, args: fmt::Arguments<'_>) {
        // SAFETY: `%pA` formats a `core::fmt::Arguments` (lib/vsprintf.c, CONFIG_RUST); the
        // level string is NUL-terminated; the device is live.
        unsafe {
            bindings::ibdev_printk(
                level.prefix().as_ptr(),
                self.as_raw(),
                kernel::c_str!("%pA\n").as_char_ptr(),
                ptr::from_ref(&args).cast::<c_void>(),
            )
        };
    }

    /// Tells the device's consumers (ULPs, uverbs async event files) about a port event.
    pub(crate) fn dispatch_port_event(&self, port: u32, event: PortEvent) {
        let mut ev = bindings::ib_event {
            device: self.as_raw(),
            event: match event {
                PortEvent::Active => bindings::ib_event_type_IB_EVENT_PORT_ACTIVE,
                PortEvent::Error => bindings::ib_event_type_IB_EVENT_PORT_ERR,
            },
            ..Default::default()
        };
        ev.element.port_num = port;
        // SAFETY: `ev` names this live device; dispatch may be called from any context.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }

    /// Fills `speed` and `width` from the netdev's ethtool link speed.
    pub(crate) fn eth_speed(&self, port: u32, speed: &mut u16, width: &mut u8) -> Result {
        // SAFETY: the device is live and the out-pointers are valid.
        to_result(unsafe { bindings::ib_get_eth_speed(self.as_raw(), port, speed, width) })
    }

    /// Starts asynchronous unregistration, if the device is registered.
    pub(super) fn unregister_queued(&self) {
        // SAFETY: the device is live. The registration reference taken by try_get is what
        // ib_unregister_device_queued requires; its work item holds its own device reference.
        unsafe {
            if bindings::rrxe_ib_device_try_get(self.as_raw()) {
                bindings::ib_unregister_device_queued(self.as_raw());
                bindings::ib_device_put(self.as_raw());
            }
        }
    }
}

/// An RDMA object: the core's `struct ib_*` first (`#[repr(C)]`), then the driver's state.
///
/// The core allocates PDs, CQs, QPs, SRQs, AHs, MWs and user contexts zeroed, `size_ib_*`
/// bytes (the adapter reports `size_of` this type), and hands them to the create op; the
/// adapter allocates MRs itself. The state is written when the create op succeeds and
/// dropped by the matching destroy op.
#[repr(C)]
pub(crate) struct Object<I, D> {
    pub(super) ib: Opaque<I>,
    pub(super) data: core::mem::MaybeUninit<D>,
}

impl<I, D> Object<I, D> {
    /// Stores the driver's state of a freshly created object.
    ///
    /// # Safety
    ///
    /// `ib` must be the core part of an `Object<I, D>` whose state is not initialised.
    pub(super) unsafe fn init(ib: *mut I, data: D) {
        // SAFETY: per the caller, `ib` starts an `Object<I, D>` valid for writes.
        unsafe { addr_of_mut!((*ib.cast::<Self>()).data).write(core::mem::MaybeUninit::new(data)) };
    }

    /// Drops the driver's state when the core destroys the object.
    ///
    /// # Safety
    ///
    /// The state must have been stored by [`Object::init`] and not dropped yet; nothing
    /// uses it afterwards.
    pub(super) unsafe fn drop_data(ib: *mut I) {
        // SAFETY: per the caller.
        unsafe { (*addr_of_mut!((*ib.cast::<Self>()).data)).assume_init_drop() };
    }

    /// Borrows a live object.
    ///
    /// # Safety
    ///
    /// `ib` must be the core part of an `Object<I, D>` whose state is initialised and stays
    /// so for `'a`.
    pub(super) unsafe fn from_raw<'a>(ib: *mut I) -> &'a Self {
        // SAFETY: per the caller.
        unsafe { &*ib.cast::<Self>() }
    }

    /// The driver's state.
    pub(crate) fn data(&self) -> &D {
        // SAFETY: references to an `Object` are only made by `from_raw`, whose caller
        // guarantees the state is initialised.
        unsafe { self.data.assume_init_ref() }
    }
}

/// The identity of a protection domain, which MRs, QPs and the like are checked against
/// (the address of its `struct ib_pd`, unique while the PD exists; objects of a PD keep it
/// alive, since the core refuses to deallocate a PD still in use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PdId(usize);

impl PdId {
    /// No PD: what an object without one (an XRC target QP) is checked as, which no key
    /// matches (no `struct ib_pd` is at address 0).
    pub(crate) const NONE: Self = Self(0);

    pub(super) fn from_raw(ibpd: *mut bindings::ib_pd) -> Self {
        Self(ibpd as usize)
    }
}

/// The identity of an XRC domain (IBA 11.2.10.1), which XRC SRQs and XRC target QPs belong
/// to: a number the driver gives it at allocation, which the transport engine compares
/// between an SRQ and a target QP. It is stored right behind the core's `struct ib_xrcd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct XrcdId(pub(crate) u32);

/// Asynchronous QP events (IBA 11.6.3), as `enum ib_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpEvent {
    /// Communication established.
    CommEstablished,
    /// Send queue drained.
    SqDrained,
    /// Local work queue catastrophic error.
    Fatal,
    /// Invalid request local work queue error.
    RequestError,
    /// Local access violation work queue error.
    AccessError,
    /// A QP on an SRQ in the error state will take no more WQEs from it (IBA 10.3.1).
    LastWqeReached,
    /// The QP migrated to its alternate path (IBA 17.2.8).
    PathMigrated,
    /// A migration request did not match the QP's alternate path (IBA 17.2.8).
    PathMigrationFailed,
}

/// A queue pair's consumer side, as the driver reaches it: its number and its event
/// handler; never the driver's state.
///
/// It is valid from the QP's creation until its destroy op returns. The driver may keep it
/// longer, but must not use it after the destroy op has returned: every use must be ordered
/// before the destroy op (the QP's task, which makes every use, is shut down or told so by
/// destroy before destroy returns).
#[derive(Clone, Copy)]
pub(crate) struct QpHandle(NonNull<bindings::ib_qp>);

// SAFETY: a QP is shared with the RDMA core, which calls into it from any thread.
unsafe impl Send for QpHandle {}
// SAFETY: as above.
unsafe impl Sync for QpHandle {}

impl QpHandle {
    pub(super) fn from_raw(qp: NonNull<bindings::ib_qp>) -> Self {
        Self(qp)
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_qp {
        self.0.as_ptr()
    }

    /// The QP number (set once the create op has returned).
    pub(crate) fn qpn(&self) -> u32 {
        // SAFETY: a live QP (type invariant); the core sets `qp_num` from the create op's
        // answer before the QP is used.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// Delivers an asynchronous event to the QP's consumer. Must not be called with a lock
    /// held that the consumer's handler may need: it may modify or destroy the QP.
    pub(crate) fn dispatch_event(&self, event: QpEvent) {
        let kind = match event {
            QpEvent::CommEstablished => bindings::ib_event_type_IB_EVENT_COMM_EST,
            QpEvent::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::RequestError => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            QpEvent::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            QpEvent::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            QpEvent::PathMigrated => bindings::ib_event_type_IB_EVENT_PATH_MIG,
            QpEvent::PathMigrationFailed => bindings::ib_event_type_IB_EVENT_PATH_MIG_ERR,
        };
        let qp = self.as_raw();
        // SAFETY: a live QP (type invariant); its device is fixed at creation.
        let device = unsafe { (*qp).device };
        let mut ev = bindings::ib_event {
            device,
            event: kind,
            ..Default::default()
        };
        ev.element.qp = qp;
        // SAFETY: a live QP; the core installs `event_handler` at creation (it forwards to
        // the consumer's handler, to every handle of a shared QP, or to uverbs' event file).
        unsafe {
            if let Some(handler) = (*qp).event_handler {
                handler(&mut ev, (*qp).qp_context);
            }
        }
    }
}

/// A completion queue's consumer side: its completion and event handlers.
///
/// It is valid from the CQ's creation until its destroy op returns; the core keeps a CQ
/// alive while QPs use it (`usecnt`), and the driver must not use the handle afterwards.
#[derive(Clone, Copy)]
pub(crate) struct CqHandle(NonNull<bindings::ib_cq>);

// SAFETY: a CQ is shared with the RDMA core, which calls into it from any thread.
unsafe impl Send for CqHandle {}
// SAFETY: as above.
unsafe impl Sync for CqHandle {}

impl CqHandle {
    pub(super) fn from_raw(cq: NonNull<bindings::ib_cq>) -> Self {
        Self(cq)
    }

    /// Signals the CQ's completion event (IBA 11.4.2.2) to its consumer. Must not be called
    /// with a QP's or the CQ's lock held.
    pub(crate) fn completion_event(&self) {
        let cq = self.0.as_ptr();
        // SAFETY: a live CQ; the core sets `comp_handler` at creation (uverbs' completion
        // channel or the kernel consumer's handler).
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }

    /// Reports a CQ overrun (IBA 11.6.3.2, CQ error) to the CQ's consumer.
    pub(crate) fn error_event(&self) {
        let cq = self.0.as_ptr();
        // SAFETY: a live CQ of one of our devices.
        let device = unsafe { (*cq).device };
        let mut ev = bindings::ib_event {
            device,
            event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
            ..Default::default()
        };
        ev.element.cq = cq;
        // SAFETY: a live CQ; the core sets `event_handler` at creation.
        unsafe {
            if let Some(handler) = (*cq).event_handler {
                handler(&mut ev, (*cq).cq_context);
            }
        }
    }
}

/// Asynchronous SRQ events (IBA 11.6.3), as `enum ib_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrqEvent {
    /// Fewer WQEs than the armed limit remain.
    LimitReached,
}

/// A shared receive queue's consumer side: its event handler.
///
/// It is valid from the SRQ's creation until its destroy op returns. The core refuses to
/// destroy an SRQ QPs are attached to (`usecnt`) and drops a QP's count only after the
/// QP's destroy op returned, so a QP may use it until then.
#[derive(Clone, Copy)]
pub(crate) struct SrqHandle(NonNull<bindings::ib_srq>);

// SAFETY: an SRQ is shared with the RDMA core, which calls into it from any thread.
unsafe impl Send for SrqHandle {}
// SAFETY: as above.
unsafe impl Sync for SrqHandle {}

impl SrqHandle {
    pub(super) fn from_raw(srq: NonNull<bindings::ib_srq>) -> Self {
        Self(srq)
    }

    /// Delivers an asynchronous event to the SRQ's consumer. Must not be called with a QP's
    /// lock held.
    pub(crate) fn dispatch_event(&self, event: SrqEvent) {
        let kind = match event {
            SrqEvent::LimitReached => bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
        };
        let srq = self.0.as_ptr();
        // SAFETY: a live SRQ of one of our devices.
        let device = unsafe { (*srq).device };
        let mut ev = bindings::ib_event {
            device,
            event: kind,
            ..Default::default()
        };
        ev.element.srq = srq;
        // SAFETY: a live SRQ; the core installs `event_handler` before create_srq.
        unsafe {
            if let Some(handler) = (*srq).event_handler {
                handler(&mut ev, (*srq).srq_context);
            }
        }
    }
}

/// A work completion to deliver (IBA 11.4.2.1), numbered as the verbs layer numbers it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WcFields {
    /// The WR id.
    pub(crate) wr_id: u64,
    /// `enum ib_wc_status`.
    pub(crate) status: u32,
    /// `enum ib_wc_opcode`.
    pub(crate) opcode: u32,
    /// Bytes transferred.
    pub(crate) byte_len: u32,
    /// Immediate data as it was on the wire (big-endian value).
    pub(crate) imm_data: Option<u32>,
    /// R_Key invalidated by a Send with Invalidate.
    pub(crate) invalidated_rkey: Option<u32>,
    /// The QP the completion belongs to.
    pub(crate) qp_num: u32,
    /// Source QP of a UD receive.
    pub(crate) src_qp: u32,
    /// Whether a GRH precedes a UD receive's data (always, on RoCE).
    pub(crate) grh: bool,
    /// For UD receives: whether the datagram came over IPv4 (else IPv6).
    pub(crate) network_v4: Option<bool>,
}

/// A completion as kernel consumers read it (`struct ib_wc`).
pub(crate) type WorkCompletion = bindings::ib_wc;

/// A completion as the rxe provider reads it from a user CQ (`struct ib_uverbs_wc`).
pub(crate) type UserWorkCompletion = bindings::ib_uverbs_wc;

impl WcFields {
    fn flags(&self) -> u32 {
        let mut flags = 0;
        if self.grh {
            flags |= bindings::ib_wc_flags_IB_WC_GRH;
        }
        if self.imm_data.is_some() {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
        }
        if self.invalidated_rkey.is_some() {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
        }
        flags
    }

    /// The completion as a user CQ holds it.
    pub(crate) fn to_user(self) -> UserWorkCompletion {
        let mut wc = bindings::ib_uverbs_wc {
            wr_id: self.wr_id,
            status: self.status,
            opcode: self.opcode,
            byte_len: self.byte_len,
            qp_num: self.qp_num,
            src_qp: self.src_qp,
            wc_flags: self.flags(),
            port_num: 1,
            ..Default::default()
        };
        if let Some(imm) = self.imm_data {
            wc.ex.imm_data = imm.to_be();
        } else if let Some(rkey) = self.invalidated_rkey {
            wc.ex.invalidate_rkey = rkey;
        }
        wc
    }

    /// The completion as a kernel CQ holds it, for QP `qp`.
    pub(crate) fn to_kernel(self, qp: &QpHandle) -> WorkCompletion {
        let mut wc = WorkCompletion {
            status: self.status,
            opcode: self.opcode,
            byte_len: self.byte_len,
            qp: qp.as_raw(),
            src_qp: self.src_qp,
            wc_flags: self.flags() as c_int,
            port_num: 1,
            ..Default::default()
        };
        wc.__bindgen_anon_1.wr_id = self.wr_id;
        if let Some(v4) = self.network_v4 {
            wc.network_hdr_type = if v4 {
                bindings::rdma_network_type_RDMA_NETWORK_IPV4
            } else {
                bindings::rdma_network_type_RDMA_NETWORK_IPV6
            } as u8;
            wc.wc_flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as c_int;
        }
        if let Some(imm) = self.imm_data {
            wc.ex.imm_data = imm.to_be();
        } else if let Some(rkey) = self.invalidated_rkey {
            wc.ex.invalidate_rkey = rkey;
        }
        wc
    }
}
