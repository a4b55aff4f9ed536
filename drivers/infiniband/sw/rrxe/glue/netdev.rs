// SPDX-License-Identifier: GPL-2.0

//! Network devices: references to `struct net_device` and netdevice notifications.

use super::bindings;
use core::marker::PhantomData;
use core::ptr::{self, addr_of_mut, NonNull};
use kernel::c_str;
use kernel::error::to_result;
use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::types::{ARef, AlwaysRefCounted, Opaque};

/// A network device (`struct net_device`).
#[repr(transparent)]
pub(crate) struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: `dev_hold`/`dev_put` are the net_device's reference count; a held reference keeps
// the structure allocated.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: `self` is a live net_device, so taking another reference is allowed.
        unsafe { bindings::rrxe_dev_hold(self.0.get()) }
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: the caller owns a reference taken by `inc_ref`.
        unsafe { bindings::rrxe_dev_put(obj.cast().as_ptr()) }
    }
}

// SAFETY: every accessor below is callable from any context that holds a reference: the
// fields read are either fixed at registration or read with READ_ONCE in the C shim.
unsafe impl Send for NetDevice {}
// SAFETY: as above; no accessor needs exclusive access.
unsafe impl Sync for NetDevice {}

impl NetDevice {
    /// Borrows a net_device the caller holds a reference to.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live net_device that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper; the caller guarantees liveness.
        unsafe { &*ptr.cast() }
    }

    /// The netdev the `port2` module parameter pairs with this one, for a device's second
    /// port: `Ok(None)` if it names none, `ENODEV` (with a message) if the name it gives is no
    /// netdev of this one's namespace. Process context.
    pub(crate) fn paired_by_param(&self) -> Result<Option<ARef<NetDevice>>> {
        let mut name = [0u8; bindings::RRXE_IFNAMSIZ as usize];
        let mut second = ptr::null_mut();
        // SAFETY: `self` is live; `name` has the IFNAMSIZ bytes the shim may write; a netdev
        // it returns comes with a reference, which `ARef` takes over.
        let found = unsafe {
            bindings::rrxe_param_port2(self.as_raw(), name.as_mut_ptr().cast(), &mut second)
        };
        match found {
            0 => Ok(None),
            1 => match NonNull::new(second) {
                // SAFETY: a held reference, see above.
                Some(p) => Ok(Some(unsafe { ARef::from_raw(p.cast()) })),
                None => Err(ENODEV),
            },
            _ => {
                // strscpy() ended the name with a NUL inside the array.
                let end = name.iter().position(|&c| c == 0).unwrap_or(name.len() - 1);
                let name = CStr::from_bytes_with_nul(&name[..=end]).unwrap_or(c_str!("?"));
                pr_err!(
                    "{}: port2 names {} for port 2, which is no netdev here\n",
                    self.name(),
                    name
                );
                Err(ENODEV)
            }
        }
    }

    /// The raw pointer, for the glue layer.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// The interface name.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array inside the live net_device. A concurrent
        // rename rewrites it in place under RTNL but always keeps a NUL inside the array.
        unsafe { CStr::from_char_ptr((*self.0.get()).name.as_ptr()) }
    }

    /// Whether the device is administratively up and its queues started.
    pub(crate) fn is_running(&self) -> bool {
        // SAFETY: the net_device is live.
        unsafe { bindings::rrxe_netif_running(self.0.get()) }
    }

    /// Whether the device has link (carrier).
    pub(crate) fn has_carrier(&self) -> bool {
        // SAFETY: the net_device is live.
        unsafe { bindings::rrxe_netif_carrier_ok(self.0.get()) }
    }

    /// Whether the device is administratively up (`IFF_UP`).
    pub(crate) fn is_admin_up(&self) -> bool {
        // SAFETY: the net_device is live.
        unsafe { bindings::dev_get_flags(self.0.get()) & bindings::RRXE_IFF_UP != 0 }
    }

    /// Whether the device is still registered (not being unregistered).
    pub(crate) fn is_registered(&self) -> bool {
        // SAFETY: the net_device is live.
        unsafe { bindings::rrxe_netdev_is_registered(self.0.get()) }
    }

    /// Whether this is an Ethernet device, the only link layer RoCE runs over.
    pub(crate) fn is_ethernet(&self) -> bool {
        // SAFETY: `type_` is set before registration and never changes after it.
        u32::from(unsafe { (*self.0.get()).type_ }) == bindings::RRXE_ARPHRD_ETHER
    }

    /// Whether this is an L3-only device (a tun device): no link-layer header and no
    /// address. RoCEv2 packets are UDP datagrams, which such a device carries as they are.
    pub(crate) fn is_l3_only(&self) -> bool {
        // SAFETY: as for `is_ethernet`.
        u32::from(unsafe { (*self.0.get()).type_ }) == bindings::RRXE_ARPHRD_NONE
    }

    /// Whether this is a VLAN device stacked on another netdev.
    pub(crate) fn is_vlan(&self) -> bool {
        // SAFETY: the net_device is live.
        unsafe { bindings::rrxe_netdev_is_vlan(self.0.get()) }
    }

    /// The MTU.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: the net_device is live.
        unsafe { bindings::rrxe_netdev_mtu(self.0.get()) }
    }

    /// The Ethernet address, for devices where [`NetDevice::is_ethernet`] holds.
    pub(crate) fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: Ethernet devices have a 6-byte `dev_addr`, allocated before registration.
        // A concurrent address change may tear the copy; the caller only uses it to derive
        // a GUID once, as rdma_rxe does.
        unsafe {
            let dev = self.0.get();
            if !(*dev).dev_addr.is_null() && (*dev).addr_len == 6 {
                core::ptr::copy_nonoverlapping((*dev).dev_addr, mac.as_mut_ptr(), 6);
            }
        }
        mac
    }

    /// The Ethernet address or, on a device without one (L3-only), a random locally
    /// administered unicast address, new at each call: what a device's GUID is made from.
    pub(crate) fn mac_or_random(&self) -> [u8; 6] {
        if self.is_ethernet() {
            return self.mac();
        }
        let mut mac = [0u8; 6];
        // SAFETY: `mac` is 6 writable bytes.
        unsafe { bindings::get_random_bytes(mac.as_mut_ptr().cast(), mac.len()) };
        // IEEE 802: bit 0 of the first octet is multicast, bit 1 locally administered.
        mac[0] = (mac[0] & !1) | 2;
        mac
    }

    /// Joins the IP multicast group of multicast GID `gid` on this netdev: IGMP for an
    /// IPv4-mapped GID, MLD for any other. Counted by the IP layer: every join needs its
    /// [`NetDevice::leave_ip_multicast`]. Process context; may sleep.
    pub(crate) fn join_ip_multicast(&self, gid: &[u8; 16]) -> Result {
        // SAFETY: the net_device is live and `gid` is 16 readable bytes.
        to_result(unsafe { bindings::rrxe_ip_mc_group(self.0.get(), gid.as_ptr(), true) })
    }

    /// Leaves a group joined by [`NetDevice::join_ip_multicast`]. A netdev whose IP state is
    /// already gone (being unregistered) has left every group; that is not an error.
    /// Process context; may sleep.
    pub(crate) fn leave_ip_multicast(&self, gid: &[u8; 16]) {
        // SAFETY: the net_device is live and `gid` is 16 readable bytes.
        let _ = unsafe { bindings::rrxe_ip_mc_group(self.0.get(), gid.as_ptr(), false) };
    }

    /// The parent of the netdev's `struct device` (e.g. the virtio or PCI device), if any.
    pub(crate) fn parent_device(&self) -> *mut bindings::device {
        // SAFETY: `dev.parent` is set before registration and fixed while registered.
        unsafe { (*self.0.get()).dev.parent }
    }
}

/// A netdevice event, as rrxe distinguishes them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NetdevEvent {
    /// The device came up (`NETDEV_UP`).
    Up,
    /// The device went down (`NETDEV_DOWN`).
    Down,
    /// State such as the carrier changed (`NETDEV_CHANGE`).
    Change,
    /// The MTU changed (`NETDEV_CHANGEMTU`).
    ChangeMtu,
    /// The device is being unregistered (`NETDEV_UNREGISTER`).
    Unregister,
}

impl NetdevEvent {
    fn from_raw(event: c_ulong) -> Option<Self> {
        let event = u32::try_from(event).ok()?;
        Some(match event {
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => return None,
        })
    }
}

/// Receives netdevice events; called in process context with RTNL held.
pub(crate) trait NetdevEvents {
    /// Handles `event` on `netdev`.
    fn event(event: NetdevEvent, netdev: &NetDevice);
}

/// A registered netdevice notifier; dropping it unregisters it.
pub(crate) struct NetdevNotifier<T: NetdevEvents> {
    nb: Opaque<bindings::notifier_block>,
    _handler: PhantomData<T>,
}

// SAFETY: the notifier block is only touched by the notifier chain, under its own locking.
unsafe impl<T: NetdevEvents> Send for NetdevNotifier<T> {}
// SAFETY: as above; no method takes `&self` to mutate it.
unsafe impl<T: NetdevEvents> Sync for NetdevNotifier<T> {}

impl<T: NetdevEvents> NetdevNotifier<T> {
    /// Registers a notifier that forwards events to `T`.
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        // SAFETY: on success every field is initialised and the block is registered at its
        // final, pinned address; on failure nothing was registered.
        unsafe {
            kernel::init::pin_init_from_closure(move |slot: *mut Self| {
                let nb = Opaque::raw_get(addr_of_mut!((*slot).nb));
                nb.write(bindings::notifier_block {
                    notifier_call: Some(Self::notifier_call),
                    ..Default::default()
                });
                addr_of_mut!((*slot)._handler).write(PhantomData);
                to_result(bindings::register_netdevice_notifier(nb))
            })
        }
    }

    /// # Safety
    ///
    /// Called by the netdevice notifier chain with a `netdev_notifier_info`.
    unsafe extern "C" fn notifier_call(
        _nb: *mut bindings::notifier_block,
        event: c_ulong,
        info: *mut c_void,
    ) -> c_int {
        if let Some(event) = NetdevEvent::from_raw(event) {
            // SAFETY: the chain passes a valid info whose netdev is live for the call.
            let netdev =
                unsafe { NetDevice::from_raw(bindings::rrxe_netdev_notifier_info_to_dev(info)) };
            T::event(event, netdev);
        }
        bindings::NOTIFY_OK as c_int
    }
}

impl<T: NetdevEvents> Drop for NetdevNotifier<T> {
    fn drop(&mut self) {
        // SAFETY: the block was registered by `register` (a `NetdevNotifier` only exists once
        // registration succeeded); unregistering waits for running callbacks.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
