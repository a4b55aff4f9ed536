// SPDX-License-Identifier: GPL-2.0

//! The rdma link type (`rdma link add NAME type TYPE netdev NETDEV`) and the driver's
//! registration with the kernel: its device registry, the netdev notifier and the link type,
//! set up at module init and torn down at exit in the order that keeps every callback away
//! from state that is gone.

use super::super::bindings;
use super::super::global::Global;
use super::super::netdev::{NetDevice, NetdevEvent, NetdevEvents, NetdevNotifier};
use super::adapter::Adapter;
use super::driver::Driver;
use super::registry::{DeviceRegistry, NewDevice};
use core::marker::PhantomData;
use core::ptr::addr_of_mut;
use kernel::error::from_result;
use kernel::ffi::{c_char, c_int};
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::types::Opaque;
use kernel::ThisModule;

/// A driver as the kernel reaches it without a device: `rdma link add` and netdev events.
pub(crate) trait RdmaDriver: Driver {
    /// The rdma link type.
    const LINK_TYPE: &'static CStr;
    /// The static that holds the driver's devices while it is registered.
    fn devices_slot() -> &'static Global<DeviceRegistry<Self>>;
    /// Creates device `name` over `netdev` and registers it with `devices`.
    fn newlink(devices: Devices<'_, Self>, name: &CStr, netdev: &NetDevice) -> Result;
    /// Reacts to `event` on `netdev` (RTNL held).
    fn netdev_event(devices: &DeviceRegistry<Self>, event: NetdevEvent, netdev: &NetDevice);
}

/// The driver's device registry as `newlink` gets it: it registers devices with the
/// driver's ops table.
pub(crate) struct Devices<'a, T: Driver> {
    registry: Pin<&'a DeviceRegistry<T>>,
}

impl<T: Driver> Devices<'_, T> {
    /// Allocates, initialises and registers a device with `data`.
    pub(crate) fn register(&self, new: NewDevice<'_>, data: T::Data) -> Result {
        let mut ops = Adapter::<T>::OPS;
        // The ops' owner: uverbs pins the module while a user has the device open.
        ops.owner = self.registry.owner();
        self.registry.register(new, data, &ops)
    }
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
    /// Registers driver `T` of `module`; fails with `EBUSY` if it already is.
    pub(crate) fn new(module: &'static ThisModule) -> Result<Self> {
        T::devices_slot().publish(KBox::pin_init(DeviceRegistry::new(module), GFP_KERNEL)?)?;
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
            let registry = unsafe { Registration::<T>::devices() }.ok_or(ENODEV)?;
            T::newlink(Devices { registry }, name, netdev).map(|()| 0)
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
