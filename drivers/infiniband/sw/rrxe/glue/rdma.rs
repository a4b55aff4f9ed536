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
use super::netdev::NetDevice;
use core::fmt;
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use core::ptr::{self, addr_of_mut, NonNull};
use kernel::c_str;
use kernel::error::{from_result, to_result};
use kernel::ffi::{c_char, c_int, c_void};
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Mutex;
use kernel::types::{ARef, Opaque};

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
    unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: the ib_device is the first field of the `#[repr(C)]` `Device<T>`.
        unsafe { &*ptr.cast::<Self>() }
    }

    fn as_raw(&self) -> *mut bindings::ib_device {
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

    /// Starts unregistering the device running over `netdev`, which is going away.
    pub(crate) fn unregister_netdev(&self, netdev: &NetDevice) {
        self.with_netdev(netdev, |dev| dev.unregister_queued());
    }

    /// Allocates, initialises and registers a device of driver `T` with `data`.
    pub(crate) fn register(self: Pin<&Self>, new: NewDevice<'_>, data: T::Data) -> Result {
        self.prune();

        let mut exists = false;
        self.with_netdev(new.netdev, |_| exists = true);
        if exists {
            return Err(EEXIST);
        }

        // Room for the entry first: after the device exists, failing to track it would leak it.
        let slot = {
            let mut entries = self.entries.lock();
            match entries.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    entries.push(None, GFP_KERNEL)?;
                    entries.len() - 1
                }
            }
        };

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
            bindings::get_device(addr_of_mut!((*ib).__bindgen_anon_1.dev));
        }
        self.entries.lock()[slot] = Some(Entry {
            ibdev,
            netdev: new.netdev.as_raw().cast_const(),
            alive: true,
        });

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
        // SAFETY: the core passes a zeroed object of `size_ib_ucontext` bytes (a
        // `UContext<T>`) whose `device` is one of ours.
        let (dev, uc) = unsafe {
            (
                Device::<T>::from_raw((*ibuc).device),
                ibuc.cast::<UContext<T>>(),
            )
        };
        from_result(|| {
            let data = T::alloc_ucontext(dev)?;
            // SAFETY: `uc` is valid for writes; the data is dropped in dealloc_ucontext, which
            // the core calls exactly when alloc_ucontext succeeded.
            unsafe { addr_of_mut!((*uc).data).write(MaybeUninit::new(data)) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn dealloc_ucontext(ibuc: *mut bindings::ib_ucontext) {
        let uc = ibuc.cast::<UContext<T>>();
        // SAFETY: alloc_ucontext succeeded on this context, so the data is initialised, and
        // the core calls this once.
        unsafe { (*addr_of_mut!((*uc).data)).assume_init_drop() };
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    unsafe extern "C" fn mmap(
        _ibuc: *mut bindings::ib_ucontext,
        _vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // No object exports a memory region to userspace yet (the rxe ABI maps CQ, QP and
        // SRQ rings, which come with those verbs), so every offset is invalid.
        EINVAL.to_errno()
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
        {
            let mut entries = registry.entries.lock();
            if let Some(entry) = entries
                .iter_mut()
                .flatten()
                .find(|e| e.ibdev.as_ptr() == ibdev)
            {
                entry.alive = false;
            }
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

/// A user context (`struct ib_ucontext`) and the driver's state for it.
#[repr(C)]
pub(crate) struct UContext<T: Driver> {
    ibuc: Opaque<bindings::ib_ucontext>,
    data: MaybeUninit<T::UContext>,
}

/// `EOPNOTSUPP`, which `kernel::error::code` lacks in 6.12.
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-bindings::RRXE_EOPNOTSUPP)
}

fn module_ptr() -> *mut bindings::module {
    // The ops' owner: uverbs pins the module while a user has the device open.
    crate::THIS_MODULE.as_ptr().cast()
}

/// Creates devices for `rdma link add NAME type TYPE netdev NETDEV`.
pub(crate) trait LinkType {
    /// The link type name.
    const NAME: &'static CStr;
    /// Creates device `name` over `netdev`.
    fn newlink(name: &CStr, netdev: &NetDevice) -> Result;
}

/// A registered rdma link type; dropping it unregisters it.
pub(crate) struct LinkRegistration<T: LinkType> {
    ops: Opaque<bindings::rdma_link_ops>,
    _link: PhantomData<T>,
}

// SAFETY: the ops structure is only touched by the RDMA core under its link_ops rwsem.
unsafe impl<T: LinkType> Send for LinkRegistration<T> {}
// SAFETY: as above.
unsafe impl<T: LinkType> Sync for LinkRegistration<T> {}

impl<T: LinkType> LinkRegistration<T> {
    /// Registers link type `T`.
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        // SAFETY: initialises every field, then registers the ops at their pinned address.
        unsafe {
            kernel::init::pin_init_from_closure(move |slot: *mut Self| {
                let ops = Opaque::raw_get(addr_of_mut!((*slot).ops));
                ops.write(bindings::rdma_link_ops {
                    type_: T::NAME.as_char_ptr(),
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
        from_result(|| T::newlink(name, netdev).map(|()| 0))
    }
}

impl<T: LinkType> Drop for LinkRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; unregistering waits out running newlink calls
        // (the core takes link_ops_rwsem for writing).
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
    }
}
