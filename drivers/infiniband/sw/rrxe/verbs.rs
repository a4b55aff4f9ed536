// SPDX-License-Identifier: GPL-2.0

//! The verbs: rrxe's implementation of the RDMA core's driver contract, and of the `rrxe`
//! link type. Each verb hands over to the module of the object it concerns; this is the one
//! module that knows them all.

use crate::ah::RrxeAh;
use crate::counters;
use crate::cq::{self, RrxeCq};
use crate::device::RrxeDevice;
use crate::glue::bindings as b;
use crate::glue::error::eopnotsupp;
use crate::glue::global::Global;
use crate::glue::module_param::Limit;
use crate::glue::netdev::{NetDevice, NetdevEvent};
use crate::glue::rdma::attr::{
    AddressVector, CqInit, DeviceAttr, LinkLayer, MrRereg, PortAttr, PortImmutable, QpAttributes,
    QpInit, QpModify, SrqAttr, SrqModify, XrcSrqInit,
};
use crate::glue::rdma::driver::{DeviceOf, Driver};
use crate::glue::rdma::link::{Devices, RdmaDriver};
use crate::glue::rdma::object::{
    ibdev_print, CqHandle, PdId, PortEvent, QpHandle, SrqHandle, WorkCompletion, XrcdId,
};
use crate::glue::rdma::registry::{name_in_use, DeviceRegistry, NewDevice};
use crate::glue::rdma::udata::UData;
use crate::glue::rdma::wr::{RecvWr, SendWr};
use crate::glue::stats::CounterDescs;
use crate::glue::umem::{KernelMemory, Umem, UmemPinner};
use crate::mr::{self, RrxeMr};
use crate::mw::RrxeMw;
use crate::params;
use crate::qp::object::{self as qp, RrxeQp};
use crate::quota::Charge;
use crate::srq::{self, RrxeSrq};
use crate::transport::pma::{self, MadAnswer, MAD_SIZE};
use kernel::c_str;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::types::ARef;

/// The rrxe driver.
pub(crate) struct Rrxe;

/// State of one user context.
pub(crate) struct RrxeUContext;

/// State of one protection domain: the PD is an identity objects are checked against.
pub(crate) struct RrxePd {
    /// The PD's place in the device's count.
    _charge: Charge,
}

static DEVICES: Global<DeviceRegistry<Rrxe>> = Global::new();

/// Counts a new object of `kind` on `dev`, or refuses it with `ENOMEM` at the device's limit.
fn charge(dev: &DeviceOf<Rrxe>, kind: Limit) -> Result<Charge> {
    dev.data().quotas.charge(kind)
}

/// Tells the device's consumers which of its ports went up or down.
fn update_port_state(dev: &DeviceOf<Rrxe>) {
    for port in dev.data().ports().iter() {
        let Some(active) = port.transition() else {
            continue;
        };
        let name = port.netdev.name();
        if active {
            ibdev_print!(dev, Info, "port {} active on {}", port.num, name);
            dev.dispatch_port_event(u32::from(port.num), PortEvent::Active);
        } else {
            ibdev_print!(dev, Info, "port {} down on {}", port.num, name);
            dev.dispatch_port_event(u32::from(port.num), PortEvent::Error);
        }
    }
}

/// Whether a port can run over `netdev`.
fn check_port_netdev(netdev: &NetDevice) -> Result {
    // RoCEv2 packets are UDP datagrams: Ethernet carries them, and so does an L3-only
    // netdev (tun), whose GIDs are its IP addresses as well.
    if !netdev.is_ethernet() && !netdev.is_l3_only() {
        pr_err!(
            "{}: neither Ethernet nor L3-only (tun); RoCEv2 runs over one of them\n",
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
    Ok(())
}

/// Whether `second` can be port 2 of a device whose port 1 is `first`: another netdev a
/// port can run over.
fn check_second_port(first: &NetDevice, second: &NetDevice) -> Result {
    if core::ptr::eq(first.as_raw(), second.as_raw()) {
        pr_err!("{}: port2 pairs it with itself\n", first.name());
        return Err(EINVAL);
    }
    check_port_netdev(second)
}

impl RdmaDriver for Rrxe {
    const LINK_TYPE: &'static CStr = c_str!("rrxe");

    fn devices_slot() -> &'static Global<DeviceRegistry<Self>> {
        &DEVICES
    }

    fn newlink(devices: Devices<'_, Self>, name: &CStr, netdev: &NetDevice) -> Result {
        check_port_netdev(netdev)?;
        if name_in_use(name) {
            pr_err!("{}: an RDMA device of that name exists\n", name);
            return Err(EEXIST);
        }
        let second = netdev.paired_by_param()?;
        if let Some(second) = &second {
            check_second_port(netdev, second)?;
        }
        let data = RrxeDevice::new(netdev, second.clone())?;
        let new = NewDevice {
            name,
            netdev,
            second: second.as_deref(),
            node_guid: data.guid(),
            ports: data.ports().count(),
        };
        match devices.register(new, data) {
            Ok(()) => {
                match &second {
                    Some(second) => pr_info!(
                        "{}: added over {} (port 1) and {} (port 2)\n",
                        name,
                        netdev.name(),
                        second.name()
                    ),
                    None => pr_info!("{}: added over {}\n", name, netdev.name()),
                }
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
                devices.with_netdev(netdev, update_port_state)
            }
            // The port computes its active MTU from the netdev on every query.
            NetdevEvent::ChangeMtu => {}
        }
    }
}

#[vtable]
impl Driver for Rrxe {
    type Data = RrxeDevice;
    type UContext = RrxeUContext;
    type Pd = RrxePd;
    type Cq = RrxeCq;
    type Mr = RrxeMr;
    type Mw = RrxeMw;
    type Qp = RrxeQp;
    type Ah = RrxeAh;
    type Srq = RrxeSrq;

    const DRIVER_ID: u32 = b::rdma_driver_id_RDMA_DRIVER_RXE;
    const UVERBS_ABI_VERSION: u32 = params::UVERBS_ABI_VERSION;
    const NODE_DESC: &'static [u8] = params::NODE_DESC;

    fn query_device(dev: &DeviceOf<Self>, attr: &mut DeviceAttr) -> Result {
        *attr = dev.data().attributes();
        Ok(())
    }

    fn query_port(dev: &DeviceOf<Self>, port: u32, attr: &mut PortAttr) -> Result {
        *attr = dev.data().port_attributes(port)?;
        match dev.eth_speed(port, &mut attr.active_speed, &mut attr.active_width) {
            // A netdev being unregistered is no longer the port's (see `netdev`), so the
            // core has no speed for it; the port is down, and says so. Failing instead would
            // make the core drop the PORT_ERR event of that moment (its cache task passes an
            // event on only after a successful query), the event that tells user consumers
            // to close their contexts, which the device's unregistration waits for.
            Err(e)
                if e == ENODEV
                    && dev
                        .data()
                        .ports()
                        .get(port)
                        .is_some_and(|p| !p.netdev.is_registered()) =>
            {
                attr.active_speed = b::ib_port_speed_IB_SPEED_SDR as u16;
                attr.active_width = b::ib_port_width_IB_WIDTH_1X as u8;
                Ok(())
            }
            result => result,
        }
    }

    fn query_pkey(dev: &DeviceOf<Self>, port: u32, index: u16) -> Result<u16> {
        dev.data().pkey(port, index)
    }

    fn port_immutable(dev: &DeviceOf<Self>, port: u32, immutable: &mut PortImmutable) -> Result {
        *immutable = dev.data().port_immutable(port)?;
        Ok(())
    }

    fn link_layer(_dev: &DeviceOf<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn netdev(dev: &DeviceOf<Self>, port: u32) -> Option<ARef<NetDevice>> {
        let netdev = &dev.data().ports().get(port)?.netdev;
        // Once unregistration starts the device is on its way out; consumers (GID
        // management, rdma_cm) must not pick the netdev up again.
        netdev.is_registered().then(|| netdev.clone())
    }

    fn counters(port: u32) -> CounterDescs {
        if port == 1 {
            counters::DESCS
        } else {
            counters::PORT_DESCS
        }
    }

    fn read_counters(dev: &DeviceOf<Self>, port: u32, values: &mut [u64]) {
        let data = dev.data();
        let Some(p) = data.ports().get(port) else {
            return;
        };
        if port == 1 {
            let shared = data.shared();
            shared
                .counters
                .read(&p.traffic, shared.buffers.allocated(), values);
        } else {
            p.traffic.read(values);
        }
    }

    fn answer_mad(
        dev: &DeviceOf<Self>,
        port: u32,
        request: &[u8; MAD_SIZE],
        response: &mut [u8; MAD_SIZE],
    ) -> MadAnswer {
        let Ok(port) = u8::try_from(port) else {
            return MadAnswer::NotMine;
        };
        let Some(p) = dev.data().ports().get(u32::from(port)) else {
            return MadAnswer::NotMine;
        };
        pma::answer(request, port, &p.traffic.traffic(), response)
    }

    fn alloc_ucontext(_dev: &DeviceOf<Self>) -> Result<RrxeUContext> {
        Ok(RrxeUContext)
    }

    fn alloc_pd(dev: &DeviceOf<Self>) -> Result<RrxePd> {
        Ok(RrxePd {
            _charge: charge(dev, Limit::Pd)?,
        })
    }

    fn alloc_xrcd(dev: &DeviceOf<Self>) -> Result<XrcdId> {
        Ok(dev.data().new_xrcd())
    }

    fn dealloc_xrcd(_dev: &DeviceOf<Self>, _xrcd: XrcdId) {}

    fn create_cq(
        dev: &DeviceOf<Self>,
        cq: CqHandle,
        attr: &CqInit,
        udata: Option<&mut UData>,
    ) -> Result<(RrxeCq, u32)> {
        cq::create(cq, attr, udata, charge(dev, Limit::Cq)?)
    }

    fn resize_cq(cq: &RrxeCq, entries: u32, udata: Option<&mut UData>) -> Result<u32> {
        cq::resize(cq, entries, udata)
    }

    fn poll_cq(cq: &RrxeCq, wc: &mut [WorkCompletion]) -> Result<usize> {
        cq::poll(cq, wc)
    }

    fn req_notify_cq(cq: &RrxeCq, solicited_only: bool, report_missed: bool) -> bool {
        cq::req_notify(cq, solicited_only, report_missed)
    }

    fn reg_user_mr(
        dev: &DeviceOf<Self>,
        pd: PdId,
        umem: Umem,
        iova: u64,
        length: u64,
        access: i32,
    ) -> Result<(RrxeMr, u32)> {
        dev.data()
            .shared()
            .mrs
            .reg_user(charge(dev, Limit::Mr)?, pd, umem, iova, length, access)
    }

    fn get_dma_mr(
        dev: &DeviceOf<Self>,
        pd: PdId,
        memory: KernelMemory,
        access: i32,
    ) -> Result<(RrxeMr, u32)> {
        dev.data().shared().mrs.dma(pd, memory, access)
    }

    fn rereg_user_mr(
        dev: &DeviceOf<Self>,
        mr: &RrxeMr,
        req: &MrRereg,
        pin: &UmemPinner,
    ) -> Result<(RrxeMr, u32)> {
        // The new registration is counted before the core destroys the old one: at the
        // limit, a reregistration fails with ENOMEM and leaves `mr` as it was.
        dev.data()
            .shared()
            .mrs
            .rereg_user(charge(dev, Limit::Mr)?, mr, req, pin)
    }

    fn alloc_mr(
        dev: &DeviceOf<Self>,
        pd: PdId,
        memory: KernelMemory,
        max_num_sg: u32,
    ) -> Result<(RrxeMr, u32)> {
        dev.data()
            .shared()
            .mrs
            .alloc_fast(charge(dev, Limit::Mr)?, pd, memory, max_num_sg)
    }

    fn map_mr_begin(mr: &RrxeMr, page_size: u32) -> Result {
        mr::map_begin(mr, page_size)
    }

    fn map_mr_page(mr: &RrxeMr, addr: u64) -> Result {
        mr::map_page(mr, addr)
    }

    fn dereg_mr(dev: &DeviceOf<Self>, mr: &RrxeMr) -> Result {
        dev.data().shared().mrs.dereg(mr)
    }

    fn alloc_mw(dev: &DeviceOf<Self>, pd: PdId, type2: bool) -> Result<(RrxeMw, u32)> {
        dev.data()
            .shared()
            .mws
            .alloc(charge(dev, Limit::Mw)?, pd, type2)
    }

    fn dealloc_mw(dev: &DeviceOf<Self>, mw: &RrxeMw) {
        dev.data().shared().mws.dealloc(mw)
    }

    fn create_qp(
        dev: &DeviceOf<Self>,
        handle: QpHandle,
        init: &mut QpInit<'_, RrxeCq, RrxeSrq>,
        udata: Option<&mut UData>,
    ) -> Result<(RrxeQp, u32)> {
        let data = dev.data();
        let charge = charge(dev, Limit::Qp)?;
        qp::create(&data.core.qps, data.shared(), handle, init, udata, charge)
    }

    fn modify_qp(_dev: &DeviceOf<Self>, qp: &RrxeQp, modify: &QpModify) -> Result {
        qp::modify(qp, modify)
    }

    fn query_qp(qp: &RrxeQp) -> Result<QpAttributes> {
        qp::query(qp)
    }

    fn destroy_qp(dev: &DeviceOf<Self>, qp: &RrxeQp) {
        let core = &dev.data().core;
        core.mcast.forget_qp(qp.qpn());
        qp::destroy(&core.qps, qp)
    }

    fn post_send_doorbell(dev: &DeviceOf<Self>, qp: &RrxeQp, user: bool) -> Result {
        let counters = &dev.data().shared().counters;
        if user {
            counters.send_doorbells.inc();
        }
        qp::doorbell(qp, counters)
    }

    fn post_send(qp: &RrxeQp, wr: &SendWr<'_, RrxeAh>) -> Result {
        qp::post_send(qp, wr)
    }

    fn post_recv(qp: &RrxeQp, wr: &RecvWr<'_>) -> Result {
        qp::post_recv(qp, wr)
    }

    fn post_recv_doorbell(dev: &DeviceOf<Self>, qp: &RrxeQp, user: bool) {
        if user {
            dev.data().shared().counters.recv_doorbells.inc();
        }
        qp::recv_doorbell(qp, user)
    }

    fn attach_mcast(dev: &DeviceOf<Self>, qp: &RrxeQp, gid: &[u8; 16]) -> Result {
        dev.data().core.mcast.attach(gid, qp.qpn())
    }

    fn detach_mcast(dev: &DeviceOf<Self>, qp: &RrxeQp, gid: &[u8; 16]) -> Result {
        dev.data().core.mcast.detach(gid, qp.qpn())
    }

    fn create_ah(
        dev: &DeviceOf<Self>,
        pd: PdId,
        av: &AddressVector,
        sleepable: bool,
        udata: Option<&mut UData>,
    ) -> Result<RrxeAh> {
        dev.data()
            .shared()
            .ahs
            .create(charge(dev, Limit::Ah)?, pd, av, sleepable, udata)
    }

    fn destroy_ah(dev: &DeviceOf<Self>, ah: &RrxeAh) {
        dev.data().shared().ahs.destroy(ah)
    }

    fn create_srq(
        dev: &DeviceOf<Self>,
        srq: SrqHandle,
        pd: PdId,
        attr: &mut SrqAttr,
        xrc: Option<XrcSrqInit<'_, RrxeCq>>,
        udata: Option<&mut UData>,
    ) -> Result<(RrxeSrq, u32)> {
        let charge = charge(dev, Limit::Srq)?;
        srq::create(&dev.data().shared().srqs, srq, pd, attr, xrc, udata, charge)
    }

    fn modify_srq(srq: &RrxeSrq, modify: &SrqModify, udata: Option<&mut UData>) -> Result {
        srq::modify(srq, modify, udata)
    }

    fn query_srq(srq: &RrxeSrq) -> Result<SrqAttr> {
        srq::query(srq)
    }

    fn destroy_srq(dev: &DeviceOf<Self>, srq: &RrxeSrq) {
        srq::destroy(&dev.data().shared().srqs, srq)
    }
}
