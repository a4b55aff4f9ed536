// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (IBA 10.2.9, 11.2.3): the `ib_device_ops` entries that create,
//! modify, query and destroy them, and the SRQ's asynchronous event.

use super::bindings;
use super::queue::MmapInfo;
use super::rdma::{eopnotsupp, mmap_info_bytes, Device, DeviceRegistry, Driver, Object, UData};
use core::ffi::c_int;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::error::from_result;
use kernel::prelude::*;
use kernel::uaccess::UserSlice;

/// A shared receive queue (`struct ib_srq`) and the driver's state for it.
pub(crate) type Srq<T> = Object<bindings::ib_srq, <T as Driver>::Srq>;

/// Sizes and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SrqAttr {
    /// Receive WRs the SRQ holds.
    pub(crate) max_wr: u32,
    /// Scatter entries per receive WR.
    pub(crate) max_sge: u32,
    /// The armed limit; 0 when disarmed.
    pub(crate) limit: u32,
}

/// Where rdma_rxe's modify_srq answers a resize: a `struct mminfo` in the caller's memory,
/// named by `rxe_modify_srq_cmd.mmap_info_addr` (Documentation/rrxe/uverbs-abi.rst, 6).
pub(crate) struct UserMmapInfo(u64);

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

/// A Modify SRQ request (IBA 11.2.3.3), each attribute present only if its mask bit is set.
pub(crate) struct SrqModify {
    /// IB_SRQ_MAX_WR: resize to at least this many WRs.
    pub(crate) max_wr: Option<u32>,
    /// IB_SRQ_LIMIT: arm the limit event at this level (0 disarms).
    pub(crate) limit: Option<u32>,
    /// Where a user SRQ's new ring is announced after a resize.
    pub(crate) mmap_info: Option<UserMmapInfo>,
}

/// Asynchronous SRQ events (IBA 11.6.3), as `enum ib_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrqEvent {
    /// Fewer WQEs than the armed limit remain.
    LimitReached,
}

/// A handle on an SRQ for the QPs that take receive WQEs from it; it reaches the core's
/// half of the SRQ (its event handler), never the driver's state.
///
/// It is valid from the SRQ's creation until its destroy op returns. The driver keeps it
/// only in state that is gone by then: the SRQ's own state, and state of the QPs attached
/// to it, which the core destroys first (it refuses to destroy an SRQ whose `usecnt` is
/// not zero, and drops a QP's count only after the QP's destroy op returned).
pub(crate) struct SrqRef<T: Driver>(NonNull<bindings::ib_srq>, PhantomData<T>);

// SAFETY: an SRQ is shared with the RDMA core, which calls into it from any thread.
unsafe impl<T: Driver> Send for SrqRef<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Sync for SrqRef<T> {}

impl<T: Driver> SrqRef<T> {
    fn raw(&self) -> *mut bindings::ib_srq {
        self.0.as_ptr()
    }

    /// Delivers an asynchronous event to the SRQ's consumer (any context).
    pub(crate) fn dispatch_event(&self, event: SrqEvent) {
        let kind = match event {
            SrqEvent::LimitReached => bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
        };
        let srq = self.raw();
        // SAFETY: a live SRQ of one of our devices.
        let device = unsafe { (*srq).device };
        let mut ev = bindings::ib_event {
            device,
            event: kind,
            ..Default::default()
        };
        ev.element.srq = srq;
        // SAFETY: a live SRQ; the core installs `event_handler` before create_srq (the
        // consumer's handler, or uverbs' async event file, which takes only irq-safe locks).
        unsafe {
            if let Some(handler) = (*srq).event_handler {
                handler(&mut ev, (*srq).srq_context);
            }
        }
    }
}

impl<T: Driver> DeviceRegistry<T> {
    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    pub(super) unsafe extern "C" fn create_srq(
        ibsrq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core passes a zeroed `Srq<T>` with device, pd, event handler and
        // context set, the consumer's init attributes, and udata for user SRQs.
        let (dev, init, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*ibsrq).device),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            // XRC and tag-matching SRQs are not implemented (rdma_rxe: basic only).
            if init.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
                return Err(eopnotsupp());
            }
            let mut attr = SrqAttr {
                max_wr: init.attr.max_wr,
                max_sge: init.attr.max_sge,
                limit: init.attr.srq_limit,
            };
            // The SRQ being created; its core fields are set (see above).
            let handle = SrqRef(NonNull::new(ibsrq).ok_or(EINVAL)?, PhantomData);
            let data = T::create_srq(dev, handle, &mut attr, udata.as_mut())?;
            // uverbs reports these back as the granted sizes.
            init.attr.max_wr = attr.max_wr;
            init.attr.max_sge = attr.max_sge;
            // SAFETY: a fresh SRQ; destroy_srq drops the state.
            unsafe { Srq::<T>::init(ibsrq, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on an SRQ of driver `T`.
    pub(super) unsafe extern "C" fn modify_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: a live SRQ of ours; the core passes valid attributes, and udata for user
        // calls (null for kernel ones).
        let (srq, attr, mut udata) =
            unsafe { (Srq::<T>::from_raw(ibsrq), &*attr, UData::from_raw(udata)) };
        from_result(|| {
            let mmap_info = match udata.as_ref() {
                Some(u) => {
                    // rdma_rxe's rxe_modify_srq_cmd: the provider always sends it.
                    let mut cmd = [0u8; 8];
                    if u.in_len() < cmd.len() {
                        return Err(EINVAL);
                    }
                    u.read_in(&mut cmd)?;
                    Some(UserMmapInfo(u64::from_ne_bytes(cmd)))
                }
                None => None,
            };
            let m = SrqModify {
                max_wr: (mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0)
                    .then_some(attr.max_wr),
                limit: (mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0)
                    .then_some(attr.srq_limit),
                mmap_info,
            };
            T::modify_srq(srq, &m, udata.as_mut())?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on an SRQ of driver `T`.
    pub(super) unsafe extern "C" fn query_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        // SAFETY: a live SRQ of ours; the core passes a valid output structure.
        let (srq, attr) = unsafe { (Srq::<T>::from_raw(ibsrq), &mut *attr) };
        from_result(|| {
            let a = T::query_srq(srq)?;
            attr.max_wr = a.max_wr;
            attr.max_sge = a.max_sge;
            attr.srq_limit = a.limit;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on an SRQ of driver `T`.
    pub(super) unsafe extern "C" fn destroy_srq(
        ibsrq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: a live SRQ of ours with no QP attached (the core checks `usecnt`),
        // destroyed once, on a live device.
        let (dev, srq) = unsafe {
            (
                Device::<T>::from_raw((*ibsrq).device),
                Srq::<T>::from_raw(ibsrq),
            )
        };
        T::destroy_srq(dev, srq);
        // SAFETY: the driver has stopped all use of the SRQ's state.
        unsafe { Srq::<T>::drop_data(ibsrq) };
        0
    }
}
