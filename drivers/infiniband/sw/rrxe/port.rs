// SPDX-License-Identifier: GPL-2.0

//! The device's ports. Each port of a CA is its own attachment to a subnet (IBA 7.1): here,
//! its own netdev, with the GIDs of that netdev's addresses, its own state and its own
//! traffic counts. Port 1 runs over the netdev `rdma link add` names; port 2, on a
//! two-port device, over the netdev the `port2` module parameter pairs with it. A QP's
//! primary and alternate paths each name a port (IBA 17.2.8), so with two ports the
//! alternate path can leave over another wire.

use crate::counters::PortCounters;
use crate::glue::netdev::NetDevice;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::types::ARef;

/// One port.
pub(crate) struct Port {
    /// The port number (1-based, as the RDMA core and IBA count).
    pub(crate) num: u8,
    /// The netdev the port runs over.
    pub(crate) netdev: ARef<NetDevice>,
    /// What the port moved.
    pub(crate) traffic: PortCounters,
    /// Whether the port was last reported active, so events go out on transitions only.
    active: AtomicBool,
}

impl Port {
    fn new(num: u8, netdev: ARef<NetDevice>) -> Self {
        let active = is_active(&netdev);
        Self {
            num,
            netdev,
            traffic: PortCounters::default(),
            active: AtomicBool::new(active),
        }
    }

    /// Whether the port is up: its netdev runs and has a carrier.
    pub(crate) fn is_active(&self) -> bool {
        is_active(&self.netdev)
    }

    /// Re-evaluates the port after a netdev event: `Some(active)` if its state changed.
    pub(crate) fn transition(&self) -> Option<bool> {
        let active = self.is_active();
        (self.active.swap(active, Ordering::AcqRel) != active).then_some(active)
    }
}

fn is_active(netdev: &NetDevice) -> bool {
    netdev.is_running() && netdev.has_carrier()
}

/// The ports of a device: one, or two.
pub(crate) struct Ports {
    first: Port,
    second: Option<Port>,
}

impl Ports {
    /// Port 1 over `first`, and port 2 over `second` if there is one.
    pub(crate) fn new(first: &NetDevice, second: Option<ARef<NetDevice>>) -> Self {
        Self {
            first: Port::new(1, first.into()),
            second: second.map(|n| Port::new(2, n)),
        }
    }

    /// How many ports the device has.
    pub(crate) fn count(&self) -> u8 {
        if self.second.is_some() {
            2
        } else {
            1
        }
    }

    /// Port 1.
    pub(crate) fn first(&self) -> &Port {
        &self.first
    }

    /// Port `num`, if the device has it.
    pub(crate) fn get(&self, num: u32) -> Option<&Port> {
        match num {
            1 => Some(&self.first),
            2 => self.second.as_ref(),
            _ => None,
        }
    }

    /// The port that runs over `netdev`.
    pub(crate) fn of_netdev(&self, netdev: &NetDevice) -> Option<&Port> {
        self.iter()
            .find(|p| core::ptr::eq(p.netdev.as_raw(), netdev.as_raw()))
    }

    /// Every port, in number order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Port> {
        [Some(&self.first), self.second.as_ref()]
            .into_iter()
            .flatten()
    }
}
