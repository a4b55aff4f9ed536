// SPDX-License-Identifier: GPL-2.0

//! Device registration: allocation, registration and teardown of a driver's
//! `struct ib_device`s.
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
//! op of the driver can run once it is gone.

use super::super::bindings;
use super::super::netdev::NetDevice;
use super::driver::{DeviceOf, Driver};
use super::object::Device;
use core::marker::PhantomData;
use core::mem::size_of;
use core::ptr::{self, addr_of_mut, NonNull};
use kernel::error::to_result;
use kernel::ffi::{c_char, c_int, c_void};
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Mutex;
use kernel::ThisModule;

/// What [`DeviceRegistry::register`] needs besides the driver's data.
pub(crate) struct NewDevice<'a> {
    /// Name requested by `rdma link add`.
    pub(crate) name: &'a CStr,
    /// The netdev the device runs over (its first port).
    pub(crate) netdev: &'a NetDevice,
    /// The netdev of its second port, if it has one.
    pub(crate) second: Option<&'a NetDevice>,
    /// Node GUID, in host order (the core stores it big-endian).
    pub(crate) node_guid: u64,
    /// Number of ports.
    pub(crate) ports: u8,
}

/// A device the registry keeps a `struct device` reference on.
struct Entry {
    ibdev: NonNull<bindings::ib_device>,
    /// Identities of the ports' netdevs (null: no second port), compared but never
    /// dereferenced.
    netdevs: [*const bindings::net_device; 2],
    /// Cleared by `dealloc_driver`: the driver data is gone.
    alive: bool,
}

// SAFETY: the pointers are a counted device reference and an identity; both can move threads.
unsafe impl Send for Entry {}

impl Entry {
    /// Whether a port of the device runs over the netdev `key`.
    fn runs_over(&self, key: *const bindings::net_device) -> bool {
        self.alive && !key.is_null() && self.netdevs.contains(&key)
    }

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
    /// The module the driver's ops belong to.
    owner: &'static ThisModule,
    _driver: PhantomData<T>,
}

// SAFETY: all state is behind the mutex.
unsafe impl<T: Driver> Sync for DeviceRegistry<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Send for DeviceRegistry<T> {}

impl<T: Driver> DeviceRegistry<T> {
    /// An empty registry of the devices of `owner`'s driver.
    pub(crate) fn new(owner: &'static ThisModule) -> impl PinInit<Self> {
        pin_init!(Self {
            entries <- kernel::new_mutex!(KVec::new(), "rrxe_device_registry"),
            owner,
            _driver: PhantomData,
        })
    }

    /// The module of the driver, the owner of its ops.
    pub(super) fn owner(&self) -> *mut bindings::module {
        self.owner.as_ptr().cast()
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

    /// Calls `f` on the live device a port of which runs over `netdev`, if there is one.
    pub(crate) fn with_netdev(&self, netdev: &NetDevice, f: impl FnOnce(&DeviceOf<T>)) {
        let entries = self.entries.lock();
        let key = netdev.as_raw().cast_const();
        let found = entries.iter().flatten().find(|e| e.runs_over(key));
        if let Some(entry) = found {
            // SAFETY: the entry is alive and we hold the lock `dealloc_driver` takes to mark
            // it dead before dropping the data.
            f(unsafe { Device::from_raw(entry.ibdev.as_ptr()) });
        }
    }

    /// Starts unregistering the device a port of which runs over `netdev`, which is going
    /// away: a port cannot lose its netdev while the device stays (its QPs' paths name it).
    pub(crate) fn unregister_netdev(&self, netdev: &NetDevice) {
        self.with_netdev(netdev, |dev| dev.unregister_queued());
    }

    /// Marks the entry of `ibdev` dead: its data is about to be dropped (`dealloc_driver`).
    pub(super) fn mark_dead(&self, ibdev: *mut bindings::ib_device) {
        let mut entries = self.entries.lock();
        if let Some(entry) = entries
            .iter_mut()
            .flatten()
            .find(|e| e.ibdev.as_ptr() == ibdev)
        {
            entry.alive = false;
        }
    }

    /// Allocates, initialises and registers a device of driver `T` with `data` and the ops
    /// table `ops`.
    pub(super) fn register(
        self: Pin<&Self>,
        new: NewDevice<'_>,
        data: T::Data,
        ops: &bindings::ib_device_ops,
    ) -> Result {
        self.prune();

        // SAFETY: allocates a zeroed `Device<T::Data>`-sized object with the ib_device at
        // offset 0 and initialises the core's part; the remaining fields are written below
        // before use.
        let raw = unsafe { bindings::_ib_alloc_device(size_of::<DeviceOf<T>>()) };
        let Some(ibdev) = NonNull::new(raw) else {
            return Err(ENOMEM);
        };
        let dev = ibdev.as_ptr().cast::<DeviceOf<T>>();
        // SAFETY: `dev` is a fresh allocation large enough for `Device<T::Data>`, whose
        // alignment (checked below at compile time) kmalloc honours.
        unsafe {
            addr_of_mut!((*dev).registry).write(ptr::from_ref(self.get_ref()).cast::<c_void>());
            addr_of_mut!((*dev).data).write(data);
        }
        const { assert!(core::mem::align_of::<DeviceOf<T>>() <= 8) };

        // SAFETY: the ib_device is initialised by _ib_alloc_device. From here on,
        // ib_dealloc_device calls our dealloc_driver, which drops the data.
        unsafe {
            bindings::ib_set_device_ops(ibdev.as_ptr(), ops);
            let ib = ibdev.as_ptr();
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ib).phys_port_cnt = u32::from(new.ports);
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
            // Commands uverbs only enables for drivers that ask (as rdma_rxe does for the
            // first two; POST_RECV is rrxe's receive doorbell).
            (*ib).uverbs_cmd_mask |= 1u64
                << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND
                | 1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ
                | 1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV;
        }
        let entry = Entry {
            ibdev,
            netdevs: [
                new.netdev.as_raw().cast_const(),
                new.second.map_or(ptr::null(), |n| n.as_raw().cast_const()),
            ],
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

        // A netdev may have started unregistering while we registered, before the device
        // could be found by its NETDEV_UNREGISTER event: unregister it ourselves.
        for netdev in [Some(new.netdev), new.second].into_iter().flatten() {
            if !netdev.is_registered() {
                self.unregister_netdev(netdev);
            }
        }
        Ok(())
    }

    /// Adds `entry`, unless one of its netdevs already has a live device: the check and
    /// the insertion share one critical section, so concurrent `rdma link add`s on one
    /// netdev (nldev runs them in parallel) cannot both succeed.
    fn track(&self, entry: Entry) -> Result {
        let mut entries = self.entries.lock();
        if entries
            .iter()
            .flatten()
            .any(|e| entry.netdevs.iter().any(|&n| e.runs_over(n)))
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
}

#[pinned_drop]
impl<T: Driver> PinnedDrop for DeviceRegistry<T> {
    fn drop(self: Pin<&mut Self>) {
        self.unregister_all();
    }
}

/// Whether an RDMA device (of any driver) is named `name`.
///
/// The core refuses a second device of a name with `ENFILE` ("too many open files"), which
/// tells a user nothing: `rdma link add` asks first, to say what is wrong. A device named
/// between the question and the registration still gets the core's answer.
pub(crate) fn name_in_use(name: &CStr) -> bool {
    // SAFETY: `name` is NUL-terminated; a device found comes with a reference, put at once.
    unsafe {
        let dev = bindings::ib_device_get_by_name(
            name.as_char_ptr(),
            bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        );
        if dev.is_null() {
            return false;
        }
        bindings::ib_device_put(dev);
        true
    }
}
