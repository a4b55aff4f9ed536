// SPDX-License-Identifier: GPL-2.0

//! rrxe: a soft-RoCE (RoCEv2) RDMA provider.
//!
//! `rdma link add NAME type rrxe netdev NETDEV` creates an RDMA device over an Ethernet
//! netdev; stock rdma-core binds it through the rdma_rxe uverbs ABI.

mod ah;
mod cq;
mod device;
mod glue;
mod memory;
mod mr;
#[cfg(rrxe_selftest)]
mod mr_selftest;
mod mw;
mod params;
mod qp;
mod srq;
/// The IBA transport as a sans-IO state machine; also built and tested on the host.
pub mod transport;
mod wq;

pub(crate) use device::Rrxe;
use device::RrxeDevice;
use glue::global::Global;
use glue::netdev::{NetDevice, NetdevEvent};
use glue::rdma::{eopnotsupp, DeviceRegistry, NewDevice, RdmaDriver, Registration};
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

static DEVICES: Global<DeviceRegistry<Rrxe>> = Global::new();

impl RdmaDriver for Rrxe {
    const LINK_TYPE: &'static CStr = c_str!("rrxe");

    fn devices_slot() -> &'static Global<DeviceRegistry<Self>> {
        &DEVICES
    }

    fn newlink(devices: Pin<&DeviceRegistry<Self>>, name: &CStr, netdev: &NetDevice) -> Result {
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
        let data = RrxeDevice::new(netdev)?;
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

    fn netdev_event(devices: &DeviceRegistry<Self>, event: NetdevEvent, netdev: &NetDevice) {
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

struct RrxeModule {
    _registration: Registration<Rrxe>,
}

impl kernel::Module for RrxeModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let registration = Registration::new()?;
        pr_info!("loaded\n");
        Ok(Self {
            _registration: registration,
        })
    }
}
