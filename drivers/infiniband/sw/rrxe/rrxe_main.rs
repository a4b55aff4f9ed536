// SPDX-License-Identifier: GPL-2.0

//! rrxe: a soft-RoCE (RoCEv2) RDMA provider.
//!
//! `rdma link add NAME type rrxe netdev NETDEV` creates an RDMA device over an Ethernet
//! netdev; stock rdma-core binds it through the rdma_rxe uverbs ABI.

#![allow(clippy::undocumented_unsafe_blocks)]

mod device;
mod glue;
mod params;
/// The IBA transport as a sans-IO state machine; also built and tested on the host.
pub mod transport;

use device::{Rrxe, RrxeDevice};
use glue::global::Global;
use glue::netdev::{NetDevice, NetdevEvent, NetdevEvents, NetdevNotifier};
use glue::rdma::eopnotsupp;
use glue::rdma::{DeviceRegistry, LinkRegistration, LinkType, NewDevice};
use kernel::c_str;
use kernel::prelude::*;
use kernel::str::CStr;

module! {
    type: RrxeModule,
    name: "rrxe",
    author: "The rrxe developers",
    description: "Soft-RoCE (RoCEv2) RDMA provider in Rust",
    license: "GPL",
    alias: ["rdma-link-rrxe"],
}

/// The devices; reached from callbacks that carry no context (link ops, netdev events).
static DEVICES: Global<DeviceRegistry<Rrxe>> = Global::new();

fn devices() -> Option<Pin<&'static DeviceRegistry<Rrxe>>> {
    // SAFETY: `DEVICES` is published before the link type and the notifier are registered
    // and taken only after both are unregistered (`RrxeModule`'s field order), and those are
    // its only users.
    unsafe { DEVICES.get() }
}

struct RrxeLink;

impl LinkType for RrxeLink {
    const NAME: &'static CStr = c_str!("rrxe");

    fn newlink(name: &CStr, netdev: &NetDevice) -> Result {
        if !netdev.is_ethernet() {
            pr_err!(
                "{}: not an Ethernet device; RoCE runs over Ethernet\n",
                netdev.name()
            );
            return Err(eopnotsupp());
        }
        if netdev.is_vlan() {
            // The RDMA core puts a VLAN's addresses in the GID table of the device on the
            // real netdev, so one device serves the netdev and all its VLANs.
            pr_err!(
                "{}: is a VLAN; add the device on its real netdev\n",
                netdev.name()
            );
            return Err(eopnotsupp());
        }
        let devices = devices().ok_or(ENODEV)?;
        let data = RrxeDevice::new(netdev);
        let node_guid = data.guid();
        let new = NewDevice {
            name,
            netdev,
            node_guid,
        };
        match devices.register(new, data) {
            Ok(()) => {
                pr_info!("{}: added over {}\n", name, netdev.name());
                Ok(())
            }
            Err(e) => {
                if e == EEXIST {
                    pr_err!("{}: already has an rrxe device\n", netdev.name());
                } else {
                    pr_err!("{}: adding over {} failed: {:?}\n", name, netdev.name(), e);
                }
                Err(e)
            }
        }
    }
}

struct RrxeNetdevEvents;

impl NetdevEvents for RrxeNetdevEvents {
    fn event(event: NetdevEvent, netdev: &NetDevice) {
        let Some(devices) = devices() else { return };
        match event {
            NetdevEvent::Unregister => devices.unregister_netdev(netdev),
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                devices.with_netdev(netdev, device::update_port_state)
            }
            // The port computes its active MTU from the netdev on every query.
            NetdevEvent::ChangeMtu => {}
        }
    }
}

/// Takes the device registry back at module exit, unregistering every device.
struct DevicesGuard;

impl Drop for DevicesGuard {
    fn drop(&mut self) {
        drop(DEVICES.take());
    }
}

struct RrxeModule {
    // Dropped in declaration order: no new device, then no netdev events, then the devices
    // are unregistered.
    _link: Pin<KBox<LinkRegistration<RrxeLink>>>,
    _notifier: Pin<KBox<NetdevNotifier<RrxeNetdevEvents>>>,
    _devices: DevicesGuard,
}

impl kernel::Module for RrxeModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        DEVICES.publish(KBox::pin_init(DeviceRegistry::new(), GFP_KERNEL)?)?;
        let devices = DevicesGuard;
        let notifier = KBox::pin_init(NetdevNotifier::register(), GFP_KERNEL)?;
        let link = KBox::pin_init(LinkRegistration::register(), GFP_KERNEL)?;
        pr_info!("loaded\n");
        Ok(Self {
            _link: link,
            _notifier: notifier,
            _devices: devices,
        })
    }
}
