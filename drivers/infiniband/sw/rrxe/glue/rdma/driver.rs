// SPDX-License-Identifier: GPL-2.0

//! The driver's whole contract with the RDMA core: a `#[vtable]` trait whose methods are
//! the entries of `struct ib_device_ops`. An op the driver does not implement is absent from
//! the table the adapter builds (`HAS_*`), so the core treats it as unsupported; its
//! default here is never called.

use super::super::bindings;
use super::super::netdev::NetDevice;
use super::super::stats::CounterDescs;
use super::super::umem::{KernelMemory, Umem, UmemPinner};
use super::attr::{
    AddressVector, CqInit, DeviceAttr, LinkLayer, MrRereg, PortAttr, PortImmutable, QpAttributes,
    QpInit, QpModify, SrqAttr, SrqModify, XrcSrqInit,
};
use super::object::{CqHandle, Device, Object, PdId, QpHandle, SrqHandle, WorkCompletion, XrcdId};
use super::udata::UData;
use super::wr::{RecvWr, SendWr};
use crate::transport::pma::{MadAnswer, MAD_SIZE};
use kernel::error::VTABLE_DEFAULT_ERROR;
use kernel::prelude::*;
use kernel::types::ARef;

/// A protection domain (`struct ib_pd`) and the driver's state for it.
pub(crate) type Pd<T> = Object<bindings::ib_pd, <T as Driver>::Pd>;
/// A completion queue (`struct ib_cq`) and the driver's state for it.
pub(crate) type Cq<T> = Object<bindings::ib_cq, <T as Driver>::Cq>;
/// A queue pair (`struct ib_qp`) and the driver's state for it.
pub(crate) type Qp<T> = Object<bindings::ib_qp, <T as Driver>::Qp>;
/// An address handle (`struct ib_ah`) and the driver's state for it.
pub(crate) type Ah<T> = Object<bindings::ib_ah, <T as Driver>::Ah>;
/// A shared receive queue (`struct ib_srq`) and the driver's state for it.
pub(crate) type Srq<T> = Object<bindings::ib_srq, <T as Driver>::Srq>;
/// A memory window (`struct ib_mw`) and the driver's state for it.
pub(crate) type Mw<T> = Object<bindings::ib_mw, <T as Driver>::Mw>;
/// A memory region (`struct ib_mr`) and the driver's state for it.
pub(crate) type Mr<T> = Object<bindings::ib_mr, <T as Driver>::Mr>;
/// An XRC domain (`struct ib_xrcd`) and the number the driver gave it.
pub(crate) type Xrcd = Object<bindings::ib_xrcd, XrcdId>;
/// A user context (`struct ib_ucontext`) and the driver's state for it.
pub(crate) type UContext<T> = Object<bindings::ib_ucontext, <T as Driver>::UContext>;
/// A device of driver `T`.
pub(crate) type DeviceOf<T> = Device<<T as Driver>::Data>;

/// An RDMA driver: the operations of its devices' `struct ib_device_ops`.
#[vtable]
pub(crate) trait Driver: Sized + 'static {
    /// Per-device state, stored right behind the `struct ib_device`.
    type Data: Send + Sync;
    /// Per-user-context state.
    type UContext: Send + Sync;
    /// Per-protection-domain state.
    type Pd: Send + Sync;
    /// Per-completion-queue state.
    type Cq: Send + Sync;
    /// Per-memory-region state.
    type Mr: Send + Sync;
    /// Per-memory-window state.
    type Mw: Send + Sync;
    /// Per-queue-pair state.
    type Qp: Send + Sync;
    /// Per-address-handle state.
    type Ah: Send + Sync;
    /// Per-shared-receive-queue state.
    type Srq: Send + Sync;

    /// `enum rdma_driver_id` reported to userspace; rdma-core picks its provider by it.
    const DRIVER_ID: u32;
    /// Version of the driver-specific uverbs ABI.
    const UVERBS_ABI_VERSION: u32;
    /// Node description (`node_desc`).
    const NODE_DESC: &'static [u8];

    /// Fills the device attributes.
    fn query_device(dev: &DeviceOf<Self>, attr: &mut DeviceAttr) -> Result;
    /// Fills the attributes of `port`.
    fn query_port(dev: &DeviceOf<Self>, port: u32, attr: &mut PortAttr) -> Result;
    /// Returns the P_Key at `index` of `port`'s table.
    fn query_pkey(dev: &DeviceOf<Self>, port: u32, index: u16) -> Result<u16>;
    /// Fills the properties of `port` fixed for the device's lifetime.
    fn port_immutable(dev: &DeviceOf<Self>, port: u32, immutable: &mut PortImmutable) -> Result;
    /// Returns the link layer of `port`.
    fn link_layer(dev: &DeviceOf<Self>, port: u32) -> LinkLayer;
    /// The netdev `port` runs over, if it is still registered.
    fn netdev(dev: &DeviceOf<Self>, port: u32) -> Option<ARef<NetDevice>>;
    /// The names of the counters of `port` that `rdma statistic` shows.
    fn counters(port: u32) -> CounterDescs;
    /// Reads the counters of `port`, in the order of [`Driver::counters`].
    fn read_counters(dev: &DeviceOf<Self>, port: u32, values: &mut [u64]);
    /// Answers a management datagram the core asks `port` about itself (no wire involved:
    /// the core's PerfMgmt queries behind the port's `counters/` in sysfs). A driver that
    /// implements it gets those counters.
    fn answer_mad(
        dev: &DeviceOf<Self>,
        port: u32,
        request: &[u8; MAD_SIZE],
        response: &mut [u8; MAD_SIZE],
    ) -> MadAnswer {
        let _ = (dev, port, request, response);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the state of a new user context.
    fn alloc_ucontext(dev: &DeviceOf<Self>) -> Result<Self::UContext>;
    /// Creates the state of a new protection domain.
    fn alloc_pd(dev: &DeviceOf<Self>) -> Result<Self::Pd>;
    /// Allocates an XRC domain (IBA 11.2.10.1); returns its number. A driver that
    /// implements it offers XRC: the core then offers the XRC verbs, and passes XRC SRQs
    /// and XRC QPs to [`Driver::create_srq`] and [`Driver::create_qp`].
    fn alloc_xrcd(dev: &DeviceOf<Self>) -> Result<XrcdId> {
        let _ = dev;
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Deallocates an XRC domain no SRQ or target QP uses any more (the core checks).
    fn dealloc_xrcd(dev: &DeviceOf<Self>, xrcd: XrcdId) {
        let _ = (dev, xrcd);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a completion queue; `udata` is present for userspace CQs. Returns the CQ's
    /// state and its capacity (at least `attr.entries`).
    fn create_cq(
        dev: &DeviceOf<Self>,
        cq: CqHandle,
        attr: &CqInit,
        udata: Option<&mut UData>,
    ) -> Result<(Self::Cq, u32)>;
    /// Gives a CQ room for at least `entries` completions, keeping those it holds; returns
    /// the new capacity.
    fn resize_cq(cq: &Self::Cq, entries: u32, udata: Option<&mut UData>) -> Result<u32> {
        let _ = (cq, entries, udata);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Moves up to `wc.len()` completions into `wc`; returns how many.
    fn poll_cq(cq: &Self::Cq, wc: &mut [WorkCompletion]) -> Result<usize>;
    /// Arms the CQ's completion event; returns whether completions are already waiting
    /// (when `report_missed` is set).
    fn req_notify_cq(cq: &Self::Cq, solicited_only: bool, report_missed: bool) -> bool;

    /// Registers user memory pinned in `umem` (its first byte at `iova` in the MR's address
    /// space) in protection domain `pd`; returns the MR and its key (used as both L_Key and
    /// R_Key). The core has checked `access` (`ib_check_mr_access`).
    fn reg_user_mr(
        dev: &DeviceOf<Self>,
        pd: PdId,
        umem: Umem,
        iova: u64,
        length: u64,
        access: i32,
    ) -> Result<(Self::Mr, u32)>;
    /// Creates an MR covering all kernel memory in kernel protection domain `pd`, for kernel
    /// consumers; returns it and its key.
    fn get_dma_mr(
        dev: &DeviceOf<Self>,
        pd: PdId,
        memory: KernelMemory,
        access: i32,
    ) -> Result<(Self::Mr, u32)>;
    /// Reregisters user MR `mr` (IBA 11.2.8.2) as `req` asks, pinning memory with `pin`:
    /// returns the MR replacing it, with its key. The core then destroys `mr` (`dereg_mr`),
    /// which must succeed; on failure `mr` stays as it was.
    fn rereg_user_mr(
        dev: &DeviceOf<Self>,
        mr: &Self::Mr,
        req: &MrRereg,
        pin: &UmemPinner,
    ) -> Result<(Self::Mr, u32)> {
        let _ = (dev, mr, req, pin);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Creates a fast-register MR in kernel protection domain `pd` for up to `max_num_sg`
    /// pages, free until a Fast Register WQE validates it; returns it and its key. A driver
    /// that implements it implements [`Driver::map_mr_page`] too.
    fn alloc_mr(
        dev: &DeviceOf<Self>,
        pd: PdId,
        memory: KernelMemory,
        max_num_sg: u32,
    ) -> Result<(Self::Mr, u32)> {
        let _ = (dev, pd, memory, max_num_sg);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Starts a new page list of `page_size`-byte pages for a fast-register MR, then
    /// appends the page at `addr` (a kernel virtual address: see `map_mr_sg`) for each call
    /// of [`Driver::map_mr_page`]; `ENOMEM` when it is full.
    fn map_mr_begin(mr: &Self::Mr, page_size: u32) -> Result {
        let _ = (mr, page_size);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// See [`Driver::map_mr_begin`].
    fn map_mr_page(mr: &Self::Mr, addr: u64) -> Result {
        let _ = (mr, addr);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Destroys an MR; on failure the MR stays as it was and the core keeps it.
    fn dereg_mr(dev: &DeviceOf<Self>, mr: &Self::Mr) -> Result;

    /// Creates a memory window of type 1 (`type2` false) or 2 in protection domain `pd`;
    /// returns it and its R_Key.
    fn alloc_mw(dev: &DeviceOf<Self>, pd: PdId, type2: bool) -> Result<(Self::Mw, u32)> {
        let _ = (dev, pd, type2);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Destroys a memory window (bound or not).
    fn dealloc_mw(dev: &DeviceOf<Self>, mw: &Self::Mw) {
        let _ = (dev, mw);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a QP, reachable through `qp`; sets `init.caps` to what it grants and returns
    /// its state and QP number.
    fn create_qp(
        dev: &DeviceOf<Self>,
        qp: QpHandle,
        init: &mut QpInit<'_, Self::Cq, Self::Srq>,
        udata: Option<&mut UData>,
    ) -> Result<(Self::Qp, u32)>;
    /// Applies a Modify QP; all of it or nothing.
    fn modify_qp(dev: &DeviceOf<Self>, qp: &Self::Qp, modify: &QpModify) -> Result;
    /// Reports the QP's attributes.
    fn query_qp(qp: &Self::Qp) -> Result<QpAttributes>;
    /// Stops all activity of a QP about to be freed; its state is dropped afterwards. May
    /// be called from the QP's own completion or event handler.
    fn destroy_qp(dev: &DeviceOf<Self>, qp: &Self::Qp);
    /// Send WRs were posted: to a kernel QP through [`Driver::post_send`], or to a user
    /// QP's shared send queue, which rings with an empty list (`user`).
    fn post_send_doorbell(dev: &DeviceOf<Self>, qp: &Self::Qp, user: bool) -> Result;
    /// Posts one kernel send WR (any context; must not sleep).
    fn post_send(qp: &Self::Qp, wr: &SendWr<'_, Self::Ah>) -> Result;
    /// Posts one kernel receive WR (any context; must not sleep).
    fn post_recv(qp: &Self::Qp, wr: &RecvWr<'_>) -> Result;
    /// Receive WRs were posted: to a kernel QP through [`Driver::post_recv`], or to a user
    /// QP's shared receive queue, which rings with an empty list (`user`) when the driver
    /// asked for it.
    fn post_recv_doorbell(dev: &DeviceOf<Self>, qp: &Self::Qp, user: bool);
    /// Attaches UD QP `qp` to the multicast group of GID `gid`. Process context.
    fn attach_mcast(dev: &DeviceOf<Self>, qp: &Self::Qp, gid: &[u8; 16]) -> Result {
        let _ = (dev, qp, gid);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Detaches UD QP `qp` from the multicast group of GID `gid`. Process context.
    fn detach_mcast(dev: &DeviceOf<Self>, qp: &Self::Qp, gid: &[u8; 16]) -> Result {
        let _ = (dev, qp, gid);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Creates an address handle for `av` in PD `pd`; must not sleep unless `sleepable`.
    fn create_ah(
        dev: &DeviceOf<Self>,
        pd: PdId,
        av: &AddressVector,
        sleepable: bool,
        udata: Option<&mut UData>,
    ) -> Result<Self::Ah>;
    /// Destroys an address handle; its state is dropped afterwards.
    fn destroy_ah(dev: &DeviceOf<Self>, ah: &Self::Ah);

    /// Creates a shared receive queue in protection domain `pd`, reachable through `srq`;
    /// sets `attr` to the sizes it grants. `xrc` is present for an XRC SRQ (IBA 11.2.3.1),
    /// whose SRQ number the driver returns then: the number an XRC initiator names it by.
    fn create_srq(
        dev: &DeviceOf<Self>,
        srq: SrqHandle,
        pd: PdId,
        attr: &mut SrqAttr,
        xrc: Option<XrcSrqInit<'_, Self::Cq>>,
        udata: Option<&mut UData>,
    ) -> Result<(Self::Srq, u32)> {
        let _ = (dev, srq, pd, attr, xrc, udata);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Applies a Modify SRQ; all of it or nothing.
    fn modify_srq(srq: &Self::Srq, modify: &SrqModify, udata: Option<&mut UData>) -> Result {
        let _ = (srq, modify, udata);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Reports the SRQ's attributes.
    fn query_srq(srq: &Self::Srq) -> Result<SrqAttr> {
        let _ = srq;
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Stops all use of an SRQ no QP is attached to; its state is dropped afterwards.
    fn destroy_srq(dev: &DeviceOf<Self>, srq: &Self::Srq) {
        let _ = (dev, srq);
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
}
