// SPDX-License-Identifier: GPL-2.0

//! The RDMA core: allocation, registration and teardown of `struct ib_device`, its ops table,
//! port events, user contexts and rdma link types.
//!
//! # Device lifetime
//!
//! The core frees a device after calling `ops.dealloc_driver`, from whichever path unregisters
//! it: `rdma link delete`, a netdev going away (queued to the core's unregistration
//! workqueue), or module exit. A [`DeviceRegistry`] keeps a `struct device` reference on every
//! device it created, so its memory outlives all of those paths; an entry is marked dead by
//! `dealloc_driver` and dropped later only after `ib_unregister_device` on it has returned,
//! which fences a `dealloc_driver` still running on another thread (the core calls it under
//! the device's unregistration lock). Dropping the registry unregisters every device, so no
//! op of ours can run once it is gone.

use super::bindings;
use super::global::Global;
use super::netdev::{NetDevice, NetdevEvent, NetdevEvents, NetdevNotifier};
use super::qp::{AddressVector, Ah, Qp, QpInit, QpModify, QpQuery, QpRef, RecvWr, SendWr};
use super::queue;
use super::srq::{Srq, SrqAttr, SrqModify, SrqRef};
use super::stats::CounterDescs;
use super::sync::{IrqSpinLock, LockClass};
use super::umem::{KernelMemory, Umem};
use core::fmt;
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use core::ptr::{self, addr_of_mut, NonNull};
use kernel::c_str;
use kernel::error::{from_result, to_result};
use kernel::ffi::{c_char, c_int, c_uint, c_void};
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{Arc, Mutex};
use kernel::types::{ARef, Opaque};
use kernel::uaccess::UserSlice;

/// Device attributes reported by `query_device` (`struct ib_device_attr`).
pub(crate) type DeviceAttr = bindings::ib_device_attr;
/// Port attributes reported by `query_port` (`struct ib_port_attr`).
pub(crate) type PortAttr = bindings::ib_port_attr;
/// Port properties fixed at registration (`struct ib_port_immutable`).
pub(crate) type PortImmutable = bindings::ib_port_immutable;

/// Link layer of a port.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LinkLayer {
    /// RoCE runs over Ethernet.
    Ethernet,
}

/// A port event delivered to the device's consumers (`ib_dispatch_event`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortEvent {
    /// The port became active (`IB_EVENT_PORT_ACTIVE`).
    Active,
    /// The port left the active state (`IB_EVENT_PORT_ERR`).
    Error,
}

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

/// Prints a message prefixed with the RDMA device (and its parent) name.
macro_rules! ibdev_print {
    ($dev:expr, $level:ident, $($arg:tt)*) => {
        $dev.print($crate::glue::rdma::Level::$level, format_args!($($arg)*))
    };
}
pub(crate) use ibdev_print;

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
    /// The part of a device the packet receive path reaches (softirq context).
    type Shared: Send + Sync;

    /// The receive-path part of a device's state.
    fn shared(data: &Self::Data) -> Arc<Self::Shared>;

    /// `enum rdma_driver_id` reported to userspace; rdma-core picks its provider by it.
    const DRIVER_ID: u32;
    /// Version of the driver-specific uverbs ABI.
    const UVERBS_ABI_VERSION: u32;
    /// Node description (`node_desc`).
    const NODE_DESC: &'static [u8];

    /// Fills the device attributes.
    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr) -> Result;
    /// Fills the attributes of `port`.
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result;
    /// Returns the P_Key at `index` of `port`'s table.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;
    /// Fills the properties of `port` fixed for the device's lifetime.
    fn port_immutable(dev: &Device<Self>, port: u32, immutable: &mut PortImmutable) -> Result;
    /// Returns the link layer of `port`.
    fn link_layer(dev: &Device<Self>, port: u32) -> LinkLayer;
    /// Creates the state of a new user context.
    fn alloc_ucontext(dev: &Device<Self>) -> Result<Self::UContext>;
    /// The netdev `port` runs over, if it is still registered.
    fn netdev(dev: &Device<Self>, port: u32) -> Option<ARef<NetDevice>>;
    /// Creates the state of a new protection domain.
    fn alloc_pd(dev: &Device<Self>) -> Result<Self::Pd>;
    /// Creates a completion queue; `udata` is present for userspace CQs.
    /// Returns the CQ's state and its capacity (at least `attr.entries`).
    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInit,
        udata: Option<&mut UData>,
    ) -> Result<(Self::Cq, u32)>;
    /// Gives a CQ room for at least `entries` completions, keeping those it holds; returns
    /// the new capacity.
    fn resize_cq(cq: &Cq<Self>, entries: u32, udata: Option<&mut UData>) -> Result<u32>;
    /// Moves up to `wc.len()` completions into `wc`; returns how many.
    fn poll_cq(cq: &Cq<Self>, wc: &mut [WorkCompletion]) -> Result<usize>;
    /// Registers user memory pinned in `umem` (its first byte at `iova` in the MR's address
    /// space) in protection domain `pd`; returns the MR and its key (used as both L_Key and
    /// R_Key). The core has checked `access` (`ib_check_mr_access`).
    fn reg_user_mr(
        dev: &Device<Self>,
        pd: PdId,
        umem: Umem,
        iova: u64,
        length: u64,
        access: i32,
    ) -> Result<(Self::Mr, u32)>;
    /// Creates an MR covering all kernel memory in kernel protection domain `pd`, for kernel
    /// consumers; returns it and its key.
    fn get_dma_mr(
        dev: &Device<Self>,
        pd: PdId,
        memory: KernelMemory,
        access: i32,
    ) -> Result<(Self::Mr, u32)>;
    /// Reregisters user MR `mr` (IBA 11.2.8.2) as `req` asks: returns the MR replacing it,
    /// with its key. The core then destroys `mr` (`dereg_mr`), which must succeed; on
    /// failure `mr` stays as it was.
    fn rereg_user_mr(dev: &Device<Self>, mr: &Self::Mr, req: &MrRereg) -> Result<(Self::Mr, u32)>;
    /// Creates a fast-register MR in kernel protection domain `pd` for up to `max_num_sg`
    /// pages, free until a Fast Register WQE validates it; returns it and its key.
    fn alloc_mr(
        dev: &Device<Self>,
        pd: PdId,
        memory: KernelMemory,
        max_num_sg: u32,
    ) -> Result<(Self::Mr, u32)>;
    /// Starts a new page list of `page_size`-byte pages for a fast-register MR.
    fn map_mr_begin(mr: &Self::Mr, page_size: u32) -> Result;
    /// Appends the page at `addr` (a kernel virtual address: see `map_mr_sg`) to a
    /// fast-register MR's list; `ENOMEM` when it is full.
    fn map_mr_page(mr: &Self::Mr, addr: u64) -> Result;
    /// Destroys an MR; on failure the MR stays as it was and the core keeps it.
    fn dereg_mr(dev: &Device<Self>, mr: &Self::Mr) -> Result;
    /// Creates a memory window of type 1 (`type2` false) or 2 in protection domain `pd`;
    /// returns it and its R_Key.
    fn alloc_mw(dev: &Device<Self>, pd: PdId, type2: bool) -> Result<(Self::Mw, u32)>;
    /// Destroys a memory window (bound or not).
    fn dealloc_mw(dev: &Device<Self>, mw: &Self::Mw);
    /// Arms the CQ's completion event; returns whether completions are already waiting
    /// (when `report_missed` is set).
    fn req_notify_cq(cq: &Cq<Self>, solicited_only: bool, report_missed: bool) -> bool;
    /// Creates a QP; `qp` names the core's half, whose device, PD and CQs are set. Adjusts
    /// `init.caps` to what it grants and returns its state and QP number.
    fn create_qp(
        dev: &Device<Self>,
        qp: QpRef<Self>,
        init: &mut QpInit<'_, Self>,
        udata: Option<&mut UData>,
    ) -> Result<(Self::Qp, u32)>;
    /// Applies a Modify QP; all of it or nothing.
    fn modify_qp(qp: &Qp<Self>, modify: &QpModify) -> Result;
    /// Reports the QP's attributes.
    fn query_qp(qp: &Qp<Self>) -> Result<QpQuery>;
    /// Stops all activity of a QP about to be freed; its state is dropped afterwards.
    fn destroy_qp(qp: &Qp<Self>);
    /// A user QP's doorbell: new WQEs are in its shared send queue. Also rung after kernel
    /// WRs were posted.
    fn post_send_doorbell(qp: &Qp<Self>) -> Result;
    /// Posts one kernel send WR (any context; must not sleep).
    fn post_send(qp: &Qp<Self>, wr: &SendWr<'_, Self>) -> Result;
    /// Posts one kernel receive WR (any context; must not sleep).
    fn post_recv(qp: &Qp<Self>, wr: &RecvWr<'_>) -> Result;
    /// Receive WRs were posted to a kernel QP.
    fn post_recv_doorbell(qp: &Qp<Self>);
    /// Creates an address handle for `av` in PD `pd`; must not sleep unless `sleepable`.
    fn create_ah(
        dev: &Device<Self>,
        pd: PdId,
        av: &AddressVector,
        sleepable: bool,
        udata: Option<&mut UData>,
    ) -> Result<Self::Ah>;
    /// The names of the port counters `rdma statistic` shows.
    const COUNTERS: CounterDescs;
    /// Reads the port counters, in the order of [`Driver::COUNTERS`].
    fn read_counters(dev: &Device<Self>, values: &mut [u64]);
    /// Destroys an address handle; its state is dropped afterwards.
    fn destroy_ah(dev: &Device<Self>, ah: &Ah<Self>);
    /// Creates a shared receive queue; `srq` names the core's half, whose device, PD and
    /// event handler are set. Adjusts `attr` to the sizes it grants.
    fn create_srq(
        dev: &Device<Self>,
        srq: SrqRef<Self>,
        attr: &mut SrqAttr,
        udata: Option<&mut UData>,
    ) -> Result<Self::Srq>;
    /// Applies a Modify SRQ; all of it or nothing.
    fn modify_srq(srq: &Srq<Self>, modify: &SrqModify, udata: Option<&mut UData>) -> Result;
    /// Reports the SRQ's attributes.
    fn query_srq(srq: &Srq<Self>) -> Result<SrqAttr>;
    /// Stops all use of an SRQ no QP is attached to; its state is dropped afterwards.
    fn destroy_srq(dev: &Device<Self>, srq: &Srq<Self>);
}

/// Attributes of a new CQ.
pub(crate) struct CqInit {
    /// Entries requested.
    pub(crate) entries: u32,
}

/// A completion as kernel consumers read it (`struct ib_wc`).
pub(crate) type WorkCompletion = bindings::ib_wc;

/// The driver-specific input and output of a uverbs call.
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

    /// Copies an `mminfo` to userspace at byte `offset` of the driver-specific output,
    /// leaving the bytes before it as they are; fails with `EINVAL` if the output is shorter
    /// than `total`.
    pub(crate) fn respond_mmap_info_at(
        &mut self,
        offset: usize,
        total: usize,
        mi: &queue::MmapInfo,
    ) -> Result {
        let bytes = mmap_info_bytes(mi);
        let end = offset.checked_add(bytes.len()).ok_or(EINVAL)?;
        if self.out_len() < total.max(end) {
            return Err(EINVAL);
        }
        // SAFETY: the udata is valid for the call.
        let outbuf = unsafe { self.raw.as_ref().outbuf };
        // `outbuf` is a user address; the copy checks it.
        UserSlice::new(outbuf as usize + offset, bytes.len())
            .writer()
            .write_slice(&bytes)
    }

    /// The user context of the call.
    pub(crate) fn ucontext(&self) -> *mut bindings::ib_ucontext {
        // SAFETY: the udata belongs to a uverbs call, whose bundle names its context.
        unsafe { bindings::rrxe_udata_to_ucontext(self.raw.as_ptr()) }
    }
}

/// `struct mminfo` as userspace reads it.
pub(super) fn mmap_info_bytes(mi: &queue::MmapInfo) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&mi.offset.to_ne_bytes());
    bytes[8..12].copy_from_slice(&mi.size.to_ne_bytes());
    bytes[12..].copy_from_slice(&mi.pad.to_ne_bytes());
    bytes
}

/// A registered RDMA device of driver `T`: the `struct ib_device` and the driver's data.
///
/// The core allocates it (`_ib_alloc_device` with our size) with the `ib_device` first,
/// which `#[repr(C)]` and the field order guarantee.
#[repr(C)]
pub(crate) struct Device<T: Driver> {
    ibdev: Opaque<bindings::ib_device>,
    registry: NonNull<DeviceRegistry<T>>,
    data: T::Data,
}

// SAFETY: the C parts are protected by the RDMA core's own locking; `T::Data` is `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Device<T> {
    /// # Safety
    ///
    /// `ptr` must be an `ib_device` allocated by [`DeviceRegistry::register`] for driver `T`
    /// whose `dealloc_driver` has not run, and must stay so for `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: the ib_device is the first field of the `#[repr(C)]` `Device<T>`.
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ibdev.get()
    }

    /// The driver's data.
    pub(crate) fn data(&self) -> &T::Data {
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
                c_str!("%pA\n").as_char_ptr(),
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
    fn unregister_queued(&self) {
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

static RX_INDEX_LOCK: LockClass = LockClass::new();

/// What [`DeviceRegistry::register`] needs besides the driver's data.
pub(crate) struct NewDevice<'a> {
    /// Name requested by `rdma link add`.
    pub(crate) name: &'a CStr,
    /// The netdev the device runs over (port 1).
    pub(crate) netdev: &'a NetDevice,
    /// Node GUID, in host order (the core stores it big-endian).
    pub(crate) node_guid: u64,
}

/// A device the registry keeps a `struct device` reference on.
struct Entry {
    ibdev: NonNull<bindings::ib_device>,
    /// Identity of the netdev, compared but never dereferenced.
    netdev: *const bindings::net_device,
    /// Cleared by `dealloc_driver`: the driver data is gone.
    alive: bool,
}

// SAFETY: the pointers are a counted device reference and an identity; both can move threads.
unsafe impl Send for Entry {}

impl Entry {
    /// Fences a `dealloc_driver` that may still run elsewhere, then drops the reference.
    fn release(self) {
        // SAFETY: we hold a struct device reference, so the ib_device is allocated.
        // ib_unregister_device returns once no unregistration of it is in flight (it takes the
        // device's unregistration lock); on a dead device it does nothing else.
        unsafe {
            bindings::ib_unregister_device(self.ibdev.as_ptr());
            bindings::put_device(addr_of_mut!((*self.ibdev.as_ptr()).__bindgen_anon_1.dev));
        }
    }
}

/// The devices of driver `T`. See the module documentation for the lifetime rules.
#[pin_data(PinnedDrop)]
pub(crate) struct DeviceRegistry<T: Driver> {
    #[pin]
    entries: Mutex<KVec<Option<Entry>>>,
    /// The receive-path state of each live device, by netdev identity, for lookups from
    /// softirq context (where the mutex above cannot be taken).
    #[pin]
    rx: IrqSpinLock<KVec<Option<(usize, Arc<T::Shared>)>>>,
    _driver: PhantomData<T>,
}

// SAFETY: all state is behind the mutex.
unsafe impl<T: Driver> Sync for DeviceRegistry<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Send for DeviceRegistry<T> {}

impl<T: Driver> DeviceRegistry<T> {
    /// An empty registry.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            entries <- kernel::new_mutex!(KVec::new(), "rrxe_device_registry"),
            rx <- IrqSpinLock::new(KVec::new(), c_str!("rrxe_device_rx"), &RX_INDEX_LOCK),
            _driver: PhantomData,
        })
    }

    /// Releases the entries of devices already deallocated.
    fn prune(&self) {
        loop {
            let dead = {
                let mut entries = self.entries.lock();
                entries
                    .iter_mut()
                    .find(|e| matches!(e, Some(e) if !e.alive))
                    .and_then(Option::take)
            };
            match dead {
                Some(entry) => entry.release(),
                None => return,
            }
        }
    }

    /// Calls `f` on the live device running over `netdev`, if there is one.
    pub(crate) fn with_netdev(&self, netdev: &NetDevice, f: impl FnOnce(&Device<T>)) {
        let entries = self.entries.lock();
        let found = entries
            .iter()
            .flatten()
            .find(|e| e.alive && e.netdev == netdev.as_raw().cast_const());
        if let Some(entry) = found {
            // SAFETY: the entry is alive and we hold the lock `dealloc_driver` takes to mark
            // it dead before dropping the data.
            f(unsafe { Device::from_raw(entry.ibdev.as_ptr()) });
        }
    }

    /// The receive-path state of the device over `netdev` (any context).
    pub(crate) fn rx_lookup(&self, netdev: &NetDevice) -> Option<Arc<T::Shared>> {
        let key = netdev.as_raw() as usize;
        let rx = self.rx.lock();
        rx.iter()
            .flatten()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| s.clone())
    }

    fn rx_remove(&self, key: usize) {
        let removed = {
            let mut rx = self.rx.lock();
            rx.iter_mut()
                .find(|e| matches!(e, Some((k, _)) if *k == key))
                .and_then(Option::take)
        };
        // The last reference may be this one: dropped outside the spinlock.
        drop(removed);
    }

    /// Starts unregistering the device running over `netdev`, which is going away.
    pub(crate) fn unregister_netdev(&self, netdev: &NetDevice) {
        self.with_netdev(netdev, |dev| dev.unregister_queued());
    }

    /// Allocates, initialises and registers a device of driver `T` with `data`.
    pub(crate) fn register(self: Pin<&Self>, new: NewDevice<'_>, data: T::Data) -> Result {
        self.prune();

        // SAFETY: allocates a zeroed `Device<T>`-sized object with the ib_device at offset 0
        // and initialises the core's part; the remaining fields are written below before use.
        let raw = unsafe { bindings::_ib_alloc_device(size_of::<Device<T>>()) };
        let Some(ibdev) = NonNull::new(raw) else {
            return Err(ENOMEM);
        };
        let dev = ibdev.as_ptr().cast::<Device<T>>();
        // SAFETY: `dev` is a fresh allocation large enough for `Device<T>`, whose alignment
        // (checked below at compile time) kmalloc honours.
        unsafe {
            addr_of_mut!((*dev).registry).write(NonNull::from(self.get_ref()));
            addr_of_mut!((*dev).data).write(data);
        }
        const { assert!(core::mem::align_of::<Device<T>>() <= 8) };

        let ops = Self::ops();
        // SAFETY: the ib_device is initialised by _ib_alloc_device. From here on,
        // ib_dealloc_device calls our dealloc_driver, which drops the data.
        unsafe {
            bindings::ib_set_device_ops(ibdev.as_ptr(), &ops);
            let ib = ibdev.as_ptr();
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ib).phys_port_cnt = 1;
            (*ib).num_comp_vectors = bindings::rrxe_num_possible_cpus() as c_int;
            (*ib).node_guid = new.node_guid.to_be();
            let desc = &mut (*ib).node_desc;
            let n = T::NODE_DESC.len().min(desc.len() - 1);
            for (d, s) in desc.iter_mut().zip(&T::NODE_DESC[..n]) {
                *d = *s as c_char;
            }
            // The netdev's parent is the device's parent, so that
            // /sys/class/infiniband/<dev>/device/net/ names the netdev (rdma_cm users
            // find the interface that way).
            (*ib).__bindgen_anon_1.dev.parent = new.netdev.parent_device();
            // Commands uverbs only enables for drivers that ask (as rdma_rxe does).
            (*ib).uverbs_cmd_mask |= 1u64
                << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND
                | 1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
        }
        let entry = Entry {
            ibdev,
            netdev: new.netdev.as_raw().cast_const(),
            alive: true,
        };
        // SAFETY: the entry's reference (dropped by `Entry::release`, or below).
        unsafe { bindings::get_device(addr_of_mut!((*ibdev.as_ptr()).__bindgen_anon_1.dev)) };
        if let Err(e) = self.track(entry) {
            // SAFETY: not registered, so ib_dealloc_device is the unwind; it calls
            // dealloc_driver, which drops the data (finding no entry). Then the reference
            // taken above goes.
            unsafe {
                bindings::ib_dealloc_device(ibdev.as_ptr());
                bindings::put_device(addr_of_mut!((*ibdev.as_ptr()).__bindgen_anon_1.dev));
            }
            return Err(e);
        }

        let key = new.netdev.as_raw() as usize;
        // SAFETY: the data was written above and lives until dealloc_driver.
        let shared = T::shared(unsafe { &(*dev).data });
        let pushed = {
            let mut rx = self.rx.lock();
            match rx.iter_mut().find(|e| e.is_none()) {
                Some(free) => {
                    *free = Some((key, shared));
                    Ok(())
                }
                None => rx.push(Some((key, shared)), GFP_ATOMIC),
            }
        };
        if let Err(e) = pushed {
            // SAFETY: not registered: as for a failed `track` above, except that the entry
            // is tracked and its reference is dropped when it is pruned.
            unsafe { bindings::ib_dealloc_device(ibdev.as_ptr()) };
            return Err(e.into());
        }

        // The netdev is reported through `ops.get_netdev`, not `ib_device_set_netdev`: the
        // latter also files the device in the core's netdev hash, where rdma_rxe's notifier
        // looks up *its* devices by driver id (`ib_device_get_by_netdev(ndev,
        // RDMA_DRIVER_RXE)`) and would take ours, which share that id, for an rxe_dev.
        //
        // SAFETY: the device is initialised; on failure ib_dealloc_device is the documented
        // unwind before registration succeeds (it calls dealloc_driver, which marks the entry
        // dead; the entry's reference keeps the memory until it is pruned).
        unsafe {
            let err = bindings::ib_register_device(
                ibdev.as_ptr(),
                new.name.as_char_ptr(),
                ptr::null_mut(),
            );
            if err != 0 {
                bindings::ib_dealloc_device(ibdev.as_ptr());
                return to_result(err);
            }
        }

        // The netdev may have started unregistering while we registered, before the device
        // could be found by its NETDEV_UNREGISTER event: unregister it ourselves.
        if !new.netdev.is_registered() {
            self.unregister_netdev(new.netdev);
        }
        Ok(())
    }

    /// Adds `entry`, unless its netdev already has a live device: the check and the
    /// insertion share one critical section, so concurrent `rdma link add`s on one netdev
    /// (nldev runs them in parallel) cannot both succeed.
    fn track(&self, entry: Entry) -> Result {
        let mut entries = self.entries.lock();
        if entries
            .iter()
            .flatten()
            .any(|e| e.alive && e.netdev == entry.netdev)
        {
            return Err(EEXIST);
        }
        match entries.iter_mut().find(|e| e.is_none()) {
            Some(free) => *free = Some(entry),
            None => entries.push(Some(entry), GFP_KERNEL)?,
        }
        Ok(())
    }

    /// Unregisters every device and waits until each is gone.
    fn unregister_all(&self) {
        loop {
            let next = self.entries.lock().iter_mut().find_map(Option::take);
            match next {
                Some(entry) => entry.release(),
                None => return,
            }
        }
    }

    fn ops() -> bindings::ib_device_ops {
        bindings::ib_device_ops {
            owner: module_ptr(),
            driver_id: T::DRIVER_ID,
            uverbs_abi_ver: T::UVERBS_ABI_VERSION,
            query_device: Some(Self::query_device),
            query_port: Some(Self::query_port),
            query_pkey: Some(Self::query_pkey),
            get_port_immutable: Some(Self::get_port_immutable),
            get_link_layer: Some(Self::get_link_layer),
            alloc_ucontext: Some(Self::alloc_ucontext),
            dealloc_ucontext: Some(Self::dealloc_ucontext),
            mmap: Some(Self::mmap),
            get_netdev: Some(Self::get_netdev),
            mmap_free: Some(Self::mmap_free),
            alloc_pd: Some(Self::alloc_pd),
            dealloc_pd: Some(Self::dealloc_pd),
            create_cq: Some(Self::create_cq),
            destroy_cq: Some(Self::destroy_cq),
            poll_cq: Some(Self::poll_cq),
            resize_cq: Some(Self::resize_cq),
            req_notify_cq: Some(Self::req_notify_cq),
            reg_user_mr: Some(Self::reg_user_mr),
            get_dma_mr: Some(Self::get_dma_mr),
            rereg_user_mr: Some(Self::rereg_user_mr),
            dereg_mr: Some(Self::dereg_mr),
            alloc_mr: Some(Self::alloc_mr),
            map_mr_sg: Some(Self::map_mr_sg),
            alloc_mw: Some(Self::alloc_mw),
            dealloc_mw: Some(Self::dealloc_mw),
            create_qp: Some(Self::create_qp),
            modify_qp: Some(Self::modify_qp),
            query_qp: Some(Self::query_qp),
            destroy_qp: Some(Self::destroy_qp),
            post_send: Some(Self::post_send),
            post_recv: Some(Self::post_recv),
            create_ah: Some(Self::create_ah),
            create_user_ah: Some(Self::create_ah),
            destroy_ah: Some(Self::destroy_ah),
            create_srq: Some(Self::create_srq),
            modify_srq: Some(Self::modify_srq),
            query_srq: Some(Self::query_srq),
            destroy_srq: Some(Self::destroy_srq),
            // post_srq_recv stays unset: user SRQs are posted to in their shared ring
            // without a system call; kernel SRQs are refused until kernel posting exists.
            alloc_hw_port_stats: Some(Self::alloc_hw_port_stats),
            get_hw_stats: Some(Self::get_hw_stats),
            size_ib_qp: size_of::<Qp<T>>(),
            size_ib_ah: size_of::<Ah<T>>(),
            size_ib_srq: size_of::<Srq<T>>(),
            size_ib_pd: size_of::<Pd<T>>(),
            size_ib_cq: size_of::<Cq<T>>(),
            size_ib_mw: size_of::<Mw<T>>(),
            dealloc_driver: Some(Self::dealloc_driver),
            size_ib_ucontext: size_of::<UContext<T>>(),
            ..Default::default()
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core on a device of ours (as every op below).
    unsafe extern "C" fn query_device(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: ops are only called on live devices, with a valid `attr` and `udata`.
        let (dev, attr) = unsafe { (Device::<T>::from_raw(ibdev), &mut *attr) };
        // SAFETY: as above; `udata` may be null for in-kernel callers.
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
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn query_port(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        // SAFETY: ops are only called on live devices, with a valid `attr`.
        let (dev, attr) = unsafe { (Device::<T>::from_raw(ibdev), &mut *attr) };
        from_result(|| T::query_port(dev, port, attr).map(|()| 0))
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn query_pkey(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        // SAFETY: ops are only called on live devices, with a valid `pkey`.
        let (dev, pkey) = unsafe { (Device::<T>::from_raw(ibdev), &mut *pkey) };
        from_result(|| {
            *pkey = T::query_pkey(dev, port, index)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn get_port_immutable(
        ibdev: *mut bindings::ib_device,
        port: u32,
        immutable: *mut bindings::ib_port_immutable,
    ) -> c_int {
        // SAFETY: ops are only called on live devices, with a valid `immutable`.
        let (dev, immutable) = unsafe { (Device::<T>::from_raw(ibdev), &mut *immutable) };
        from_result(|| T::port_immutable(dev, port, immutable).map(|()| 0))
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn get_link_layer(
        ibdev: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: ops are only called on live devices.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        match T::link_layer(dev, port) {
            LinkLayer::Ethernet => bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn alloc_ucontext(
        ibuc: *mut bindings::ib_ucontext,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core passes a zeroed `UContext<T>` whose `device` is one of ours.
        let dev = unsafe { Device::<T>::from_raw((*ibuc).device) };
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
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn dealloc_ucontext(ibuc: *mut bindings::ib_ucontext) {
        // SAFETY: alloc_ucontext succeeded on this context and the core calls this once.
        unsafe { UContext::<T>::drop_data(ibuc) };
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn mmap(
        ibuc: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: called by the core's mmap path for this context.
        from_result(|| unsafe { queue::mmap(ibuc, vma) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
        // SAFETY: every entry of our contexts was inserted by a `SharedQueue`.
        unsafe { queue::mmap_free(entry) }
    }

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

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn reg_user_mr(
        ibpd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // SAFETY: a live PD of one of our devices, in a uverbs call of the owning process.
        let dev = unsafe { Device::<T>::from_raw((*ibpd).device) };
        let pd = PdId::from_raw(ibpd);
        Self::new_mr(iova, length, || {
            let umem = Umem::get(dev, start, length, access)?;
            T::reg_user_mr(dev, pd, umem, iova, length, access)
        })
        .unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on an MR of driver `T`.
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
        // SAFETY: uverbs holds the MR's uobject for writing (no dereg or other rereg runs)
        // and passes a live PD of the same device (the MR's own without IB_MR_REREG_PD);
        // the MR came from `new_mr`, which initialised its data and its iova and length.
        let (data, dev, old_iova, old_length) = unsafe {
            (
                (*ibmr.cast::<Mr<T>>()).data.assume_init_ref(),
                Device::<T>::from_raw((*ibmr).device),
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
        Self::new_mr(iova, length, || T::rereg_user_mr(dev, data, &req))
            .unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn get_dma_mr(
        ibpd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: a live PD of one of our devices.
        let dev = unsafe { Device::<T>::from_raw((*ibpd).device) };
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
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
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
        // SAFETY: a live PD of one of our devices.
        let (dev, user) = unsafe {
            (
                Device::<T>::from_raw((*ibpd).device),
                !(*ibpd).uobject.is_null(),
            )
        };
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
    /// Called by the RDMA core through `ib_device_ops` (`ib_map_mr_sg`), on an MR of
    /// driver `T` from `alloc_mr`, with a DMA-mapped scatterlist of `sg_nents` entries.
    unsafe extern "C" fn map_mr_sg(
        ibmr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        // SAFETY: the MR came from `new_mr`, which initialised its data; the core set its
        // page size (`ib_map_mr_sg`) before calling.
        let (data, page_size) = unsafe {
            (
                (*ibmr.cast::<Mr<T>>()).data.assume_init_ref(),
                (*ibmr).page_size,
            )
        };
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
        let data = unsafe { (*ibmr.cast::<Mr<T>>()).data.assume_init_ref() };
        match T::map_mr_page(data, addr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn dereg_mr(
        ibmr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the MR came from `new_mr` (a `KBox<Mr<T>>` handed to the core, which
        // deregisters it on a live device and keeps it if deregistration fails); `new_mr`
        // initialised its data.
        let (data, dev) = unsafe {
            (
                (*ibmr.cast::<Mr<T>>()).data.assume_init_ref(),
                Device::<T>::from_raw((*ibmr).device),
            )
        };
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
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn alloc_mw(
        ibmw: *mut bindings::ib_mw,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core allocated the MW zeroed (`size_ib_mw` bytes) and set its device,
        // PD and type; it is ours until this returns.
        let (dev, pd, mw_type) = unsafe {
            (
                Device::<T>::from_raw((*ibmw).device),
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
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn dealloc_mw(ibmw: *mut bindings::ib_mw) -> c_int {
        // SAFETY: an MW `alloc_mw` initialised, destroyed once on a live device.
        let (mw, dev) = unsafe {
            (
                Mw::<T>::from_raw(ibmw),
                Device::<T>::from_raw((*ibmw).device),
            )
        };
        T::dealloc_mw(dev, mw.data());
        // SAFETY: nothing uses the state after this; the core frees the MW.
        unsafe { Mw::<T>::drop_data(ibmw) };
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn alloc_pd(
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core passes a zeroed `Pd<T>` of one of our devices.
        let dev = unsafe { Device::<T>::from_raw((*ibpd).device) };
        from_result(|| {
            let data = T::alloc_pd(dev)?;
            // SAFETY: a fresh PD; dealloc_pd drops the state.
            unsafe { Pd::<T>::init(ibpd, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn dealloc_pd(
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: alloc_pd succeeded on this PD and the core deallocates it once.
        unsafe { Pd::<T>::drop_data(ibpd) };
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn create_cq(
        ibcq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        // SAFETY: the core passes a zeroed `Cq<T>` of one of our devices, valid
        // attributes, and a bundle for user calls (null for kernel ones).
        let (dev, attr, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*ibcq).device),
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
            let (data, capacity) = T::create_cq(dev, &init, udata.as_mut())?;
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
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
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
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn resize_cq(
        ibcq: *mut bindings::ib_cq,
        cqe: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: a live CQ of ours; `udata` belongs to the uverbs call (null for kernel
        // callers).
        let (cq, mut udata) = unsafe { (Cq::<T>::from_raw(ibcq), UData::from_raw(udata)) };
        from_result(|| {
            let entries = u32::try_from(cqe).map_err(|_| EINVAL)?;
            let capacity = T::resize_cq(cq, entries, udata.as_mut())?;
            // SAFETY: uverbs reports `cqe` back as the CQ's size; the core serialises verbs on
            // one CQ object.
            unsafe { (*ibcq).cqe = capacity as c_int };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
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
        // SAFETY: a live CQ of ours; the consumer passes room for `num` completions.
        let (cq, wc) = unsafe {
            (
                Cq::<T>::from_raw(ibcq),
                core::slice::from_raw_parts_mut(wc, num),
            )
        };
        from_result(|| T::poll_cq(cq, wc).map(|n| n as c_int))
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn req_notify_cq(
        ibcq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        // SAFETY: a live CQ of ours.
        let cq = unsafe { Cq::<T>::from_raw(ibcq) };
        let solicited_only = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
        let report = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
        c_int::from(T::req_notify_cq(cq, solicited_only, report))
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn alloc_hw_port_stats(
        _ibdev: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        let descs = T::COUNTERS.0;
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
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`, with
    /// stats from `alloc_hw_port_stats`.
    unsafe extern "C" fn get_hw_stats(
        ibdev: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        _port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: a live device of ours; `stats` holds `num_counters` values (allocated by
        // `alloc_hw_port_stats` with our descriptors), under the core's stats lock.
        let (dev, values) = unsafe {
            let n = usize::try_from((*stats).num_counters).unwrap_or(0);
            (Device::<T>::from_raw(ibdev), (*stats).value.as_mut_slice(n))
        };
        T::read_counters(dev, values);
        values.len() as c_int
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn get_netdev(
        ibdev: *mut bindings::ib_device,
        port: u32,
    ) -> *mut bindings::net_device {
        // SAFETY: ops are only called on live devices.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        // The caller owns the reference we return (it calls dev_put).
        T::netdev(dev, port).map_or(ptr::null_mut(), |n| ARef::into_raw(n).as_ptr().cast())
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn dealloc_driver(ibdev: *mut bindings::ib_device) {
        let dev = ibdev.cast::<Device<T>>();
        // SAFETY: the registry outlives its devices (its drop unregisters them all).
        let registry = unsafe { (*dev).registry.as_ref() };
        let netdev = {
            let mut entries = registry.entries.lock();
            entries
                .iter_mut()
                .flatten()
                .find(|e| e.ibdev.as_ptr() == ibdev)
                .map(|entry| {
                    entry.alive = false;
                    entry.netdev as usize
                })
        };
        if let Some(key) = netdev {
            registry.rx_remove(key);
        }
        // SAFETY: dealloc_driver is the last op the core calls, once; the entry is dead, so
        // the registry no longer hands out references to the data.
        unsafe { ptr::drop_in_place(addr_of_mut!((*dev).data)) };
    }
}

#[pinned_drop]
impl<T: Driver> PinnedDrop for DeviceRegistry<T> {
    fn drop(self: Pin<&mut Self>) {
        self.unregister_all();
    }
}

/// An RDMA object: the core's `struct ib_*` first (`#[repr(C)]`), then the driver's state.
///
/// The core allocates PDs, CQs and user contexts zeroed, `size_ib_*` bytes (we report
/// `size_of` this type), and hands them to the create op; the driver allocates MRs itself.
/// The state is written when the create op succeeds and dropped by the matching destroy op.
#[repr(C)]
pub(crate) struct Object<I, D> {
    ib: Opaque<I>,
    data: MaybeUninit<D>,
}

impl<I, D> Object<I, D> {
    /// Stores the driver's state of a freshly created object.
    ///
    /// # Safety
    ///
    /// `ib` must be the core part of an `Object<I, D>` whose state is not initialised.
    pub(super) unsafe fn init(ib: *mut I, data: D) {
        // SAFETY: per the caller, `ib` starts an `Object<I, D>` valid for writes.
        unsafe { addr_of_mut!((*ib.cast::<Self>()).data).write(MaybeUninit::new(data)) };
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

/// A protection domain (`struct ib_pd`) and the driver's state for it.
pub(crate) type Pd<T> = Object<bindings::ib_pd, <T as Driver>::Pd>;

/// The identity of a protection domain, which MRs, QPs and the like are checked against
/// (the address of its `struct ib_pd`, unique while the PD exists; objects of a PD keep it
/// alive, since the core refuses to deallocate a PD still in use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PdId(usize);

impl PdId {
    pub(super) fn from_raw(ibpd: *mut bindings::ib_pd) -> Self {
        Self(ibpd as usize)
    }

    /// An identity no PD has (no PD lives at address 0), for the MR self-test's
    /// wrong-PD checks.
    #[cfg(rrxe_selftest)]
    pub(crate) fn none() -> Self {
        Self(0)
    }
}

/// A memory window (`struct ib_mw`) and the driver's state for it.
pub(crate) type Mw<T> = Object<bindings::ib_mw, <T as Driver>::Mw>;

/// A completion queue (`struct ib_cq`) and the driver's state for it.
pub(crate) type Cq<T> = Object<bindings::ib_cq, <T as Driver>::Cq>;
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

impl WcFields {
    pub(super) fn flags(&self) -> u32 {
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

    /// The completion as a user CQ holds it (`struct ib_uverbs_wc`).
    pub(crate) fn to_user(self) -> bindings::ib_uverbs_wc {
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
}

impl<D> Object<bindings::ib_cq, D> {
    fn raw(&self) -> *mut bindings::ib_cq {
        ptr::from_ref(self).cast_mut().cast()
    }

    /// Signals the CQ's completion event (IBA 11.4.2.2) to its consumer.
    pub(crate) fn completion_event(&self) {
        let cq = self.raw();
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
        let cq = self.raw();
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

/// A Reregister Memory Region request (IBA 11.2.8.2, `ib_uverbs_rereg_mr`), after the
/// core's checks (known flags, at least one; the new access flags; the iova's page offset).
pub(crate) struct MrRereg {
    /// Protection domain of the new registration: the MR's own unless IB_MR_REREG_PD.
    pub(crate) pd: PdId,
    /// IB_MR_REREG_TRANS: the new user address, length and iova.
    pub(crate) trans: Option<(u64, u64, u64)>,
    /// IB_MR_REREG_ACCESS: the new `IB_ACCESS_*` flags.
    pub(crate) access: Option<i32>,
}

/// A memory region (`struct ib_mr`) and the driver's state for it.
type Mr<T> = Object<bindings::ib_mr, <T as Driver>::Mr>;
/// A user context (`struct ib_ucontext`) and the driver's state for it.
type UContext<T> = Object<bindings::ib_ucontext, <T as Driver>::UContext>;

/// `EOPNOTSUPP`, which `kernel::error::code` lacks in 6.12.
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-bindings::RRXE_EOPNOTSUPP)
}

fn module_ptr() -> *mut bindings::module {
    // The ops' owner: uverbs pins the module while a user has the device open.
    crate::THIS_MODULE.as_ptr().cast()
}

/// A driver as the kernel reaches it without a device: `rdma link add` and netdev events.
pub(crate) trait RdmaDriver: Driver {
    /// The rdma link type (`rdma link add NAME type TYPE netdev NETDEV`).
    const LINK_TYPE: &'static CStr;
    /// The static that holds the driver's devices while it is registered.
    fn devices_slot() -> &'static Global<DeviceRegistry<Self>>;
    /// Creates device `name` over `netdev`.
    fn newlink(devices: Pin<&DeviceRegistry<Self>>, name: &CStr, netdev: &NetDevice) -> Result;
    /// Reacts to `event` on `netdev` (RTNL held).
    fn netdev_event(devices: &DeviceRegistry<Self>, event: NetdevEvent, netdev: &NetDevice);
}

/// The receive-path state of `T`'s device over `netdev`, for a packet received on it.
///
/// Callers are receive callbacks of sockets that devices of `T` hold open (so they close,
/// waiting for running callbacks, before the registry is taken back at unload).
pub(crate) fn find_rx_state<T: RdmaDriver>(netdev: &NetDevice) -> Option<Arc<T::Shared>> {
    // SAFETY: see above: the registry outlives every device, and the callback cannot run
    // once the last device is gone.
    let registry = unsafe { T::devices_slot().get() }?;
    registry.rx_lookup(netdev)
}

/// A registered driver: its device registry, netdev notifier and link type.
///
/// The registry is published first and taken back last (fields drop in declaration order):
/// the link type and the notifier, the only callbacks that reach the registry through the
/// static, are unregistered (which waits for running calls) before it is dropped, and
/// dropping it unregisters every device.
pub(crate) struct Registration<T: RdmaDriver> {
    _link: Pin<KBox<LinkRegistration<T>>>,
    _notifier: Pin<KBox<NetdevNotifier<RegistryEvents<T>>>>,
    _devices: RegistryGuard<T>,
}

impl<T: RdmaDriver> Registration<T> {
    /// Registers driver `T`; fails with `EBUSY` if it already is.
    pub(crate) fn new() -> Result<Self> {
        T::devices_slot().publish(KBox::pin_init(DeviceRegistry::new(), GFP_KERNEL)?)?;
        let devices = RegistryGuard(PhantomData);
        let notifier = KBox::pin_init(NetdevNotifier::register(), GFP_KERNEL)?;
        let link = KBox::pin_init(LinkRegistration::register(), GFP_KERNEL)?;
        Ok(Self {
            _link: link,
            _notifier: notifier,
            _devices: devices,
        })
    }

    /// The registry, for the callbacks `Registration` orders around it.
    ///
    /// # Safety
    ///
    /// Only callable from the link type's and the notifier's callbacks.
    unsafe fn devices() -> Option<Pin<&'static DeviceRegistry<T>>> {
        // SAFETY: those callbacks are unregistered before `RegistryGuard` takes the value.
        unsafe { T::devices_slot().get() }
    }
}

/// Takes the registry back, unregistering every device.
struct RegistryGuard<T: RdmaDriver>(PhantomData<T>);

impl<T: RdmaDriver> Drop for RegistryGuard<T> {
    fn drop(&mut self) {
        drop(T::devices_slot().take());
    }
}

/// Forwards netdev events to the driver with its registry.
struct RegistryEvents<T>(PhantomData<T>);

impl<T: RdmaDriver> NetdevEvents for RegistryEvents<T> {
    fn event(event: NetdevEvent, netdev: &NetDevice) {
        // SAFETY: this is the notifier's callback.
        if let Some(devices) = unsafe { Registration::<T>::devices() } {
            T::netdev_event(&devices, event, netdev);
        }
    }
}

/// The driver's rdma link type, registered while it exists.
struct LinkRegistration<T: RdmaDriver> {
    ops: Opaque<bindings::rdma_link_ops>,
    _link: PhantomData<T>,
}

// SAFETY: the ops structure is only touched by the RDMA core under its link_ops rwsem.
unsafe impl<T: RdmaDriver> Send for LinkRegistration<T> {}
// SAFETY: as above.
unsafe impl<T: RdmaDriver> Sync for LinkRegistration<T> {}

impl<T: RdmaDriver> LinkRegistration<T> {
    fn register() -> impl PinInit<Self, Error> {
        // SAFETY: initialises every field, then registers the ops at their pinned address.
        unsafe {
            kernel::init::pin_init_from_closure(move |slot: *mut Self| {
                let ops = Opaque::raw_get(addr_of_mut!((*slot).ops));
                ops.write(bindings::rdma_link_ops {
                    type_: T::LINK_TYPE.as_char_ptr(),
                    newlink: Some(Self::newlink),
                    ..Default::default()
                });
                addr_of_mut!((*slot)._link).write(PhantomData);
                bindings::rdma_link_register(ops);
                Ok(())
            })
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA netlink code with a NUL-terminated name and a referenced netdev.
    unsafe extern "C" fn newlink(name: *const c_char, ndev: *mut bindings::net_device) -> c_int {
        // SAFETY: the caller passes a NUL-terminated name and holds a netdev reference for the
        // duration of the call.
        let (name, netdev) = unsafe { (CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
        from_result(|| {
            // SAFETY: this is the link type's callback.
            let devices = unsafe { Registration::<T>::devices() }.ok_or(ENODEV)?;
            T::newlink(devices, name, netdev).map(|()| 0)
        })
    }
}

impl<T: RdmaDriver> Drop for LinkRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; unregistering waits out running newlink calls
        // (the core takes link_ops_rwsem for writing).
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
    }
}
