// SPDX-License-Identifier: GPL-2.0

//! What a device's QPs reach of it: the key tables their memory accesses resolve through,
//! the address handles of UD sends, the SRQs XRC targets deliver to, the ports' netdevs
//! packets go out of, the counters, and the gauge of what spinning for a run costs on its
//! host.

use crate::ah::AhTable;
use crate::counters::Counters;
use crate::glue::net::BufferPool;
use crate::glue::netdev::NetDevice;
use crate::mr::MrTable;
use crate::mw::MwTable;
use crate::port::Ports;
use crate::srq::SrqTable;
use crate::transport::qp::MAX_PACKET_LEN;
use crate::transport::wait_gauge::WaitGauge;
use kernel::prelude::*;
use kernel::types::ARef;

/// The part of a device its QPs and their tasks reach (any context).
#[pin_data]
pub(crate) struct DeviceShared {
    /// Memory regions, by key index.
    #[pin]
    pub(crate) mrs: MrTable,
    /// Memory windows, by key index.
    #[pin]
    pub(crate) mws: MwTable,
    /// Address handles, by number.
    #[pin]
    pub(crate) ahs: AhTable,
    /// Shared receive queues, by SRQ number: XRC target QPs look up the SRQ each message
    /// names (IBA Annex A14).
    #[pin]
    pub(crate) srqs: SrqTable,
    /// Packets moved and dropped, transport events.
    pub(crate) counters: Counters,
    /// The ports, each with the netdev its packets go out of.
    pub(crate) ports: Ports,
    /// The packet buffers its QPs pass to each other in loopback.
    #[pin]
    pub(crate) buffers: BufferPool,
    /// Whether its answers' doorbells and QP runs spin for each other.
    pub(crate) waits: WaitGauge,
}

impl DeviceShared {
    /// The state of a new device over `netdev`, with a second port over `second`.
    pub(crate) fn new(
        netdev: &NetDevice,
        second: Option<ARef<NetDevice>>,
    ) -> impl PinInit<Self, Error> + '_ {
        try_pin_init!(Self {
            mrs <- MrTable::new(),
            mws <- MwTable::new(),
            ahs <- AhTable::new(),
            srqs <- SrqTable::new(),
            counters: Counters::default(),
            ports: Ports::new(netdev, second),
            buffers <- BufferPool::new(MAX_PACKET_LEN),
            waits: WaitGauge::new(),
        })
    }
}
