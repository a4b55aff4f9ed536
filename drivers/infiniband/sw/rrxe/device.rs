// SPDX-License-Identifier: GPL-2.0

//! The rrxe device: one RoCEv2 CA with one port over an Ethernet netdev.

use crate::ah::{self, AhState, RrxeAh};
use crate::cq::{self, RrxeCq};
use crate::glue::bindings as b;
use crate::glue::net::{self, RxHandler, RxPacket, TunnelRef};
use crate::glue::netdev::NetDevice;
use crate::glue::qp::{AddressVector, Ah, Qp, QpInit, QpModify, QpQuery, QpRef, RecvWr, SendWr};
use crate::glue::rdma::{
    find_rx_state, ibdev_print, Cq, CqInit, Device, DeviceAttr, Driver, LinkLayer, MrRereg, PdId,
    PortAttr, PortEvent, PortImmutable, UData, WorkCompletion,
};
use crate::glue::srq::{Srq, SrqAttr, SrqModify, SrqRef};
use crate::glue::stats::{CounterDescs, CounterNames};
use crate::glue::table::IndexTable;
use crate::glue::umem::{KernelMemory, Umem};
use crate::mr::{self, MrState, RrxeMr};
use crate::mw::{self, MwState, RrxeMw};
use crate::params;
use crate::qp::{self, QpShared, RrxeQp};
use crate::srq::{self, RrxeSrq, SrqShared};
use crate::transport::qp::responder::MAX_RD_ATOMIC;
use crate::transport::qp::{QpStats, TransportEvent};
use crate::wq;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::ARef;

/// The only port of an rrxe device (IBA numbers CA ports from 1).
pub(crate) const PORT: u32 = 1;

/// Port counters. The `wire_*` ones count packets dropped before they could be matched
/// to a device (bad ICRC, truncated or malformed IP/UDP, no device on the netdev): they
/// are the same on every rrxe device of the host.
static COUNTER_NAMES: CounterNames<{ PORT_COUNTERS + TransportEvent::COUNT + MEM_COUNTERS }> =
    CounterNames::new([
        c_str!("sent_pkts"),
        c_str!("rcvd_pkts"),
        c_str!("retransmitted_pkts"),
        c_str!("rcvd_no_qp"),
        c_str!("rcvd_queue_full"),
        c_str!("rcvd_malformed"),
        c_str!("send_errors"),
        c_str!("send_no_path"),
        c_str!("wire_icrc_errors"),
        c_str!("wire_truncated"),
        c_str!("wire_malformed"),
        c_str!("wire_no_device"),
        // The QPs' transport events, in `TransportEvent::ALL` order.
        c_str!("ack_timeouts"),
        c_str!("seq_naks_rcvd"),
        c_str!("rnr_naks_rcvd"),
        c_str!("error_naks_rcvd"),
        c_str!("implied_naks"),
        c_str!("retry_exceeded"),
        c_str!("rnr_retry_exceeded"),
        c_str!("seq_naks_sent"),
        c_str!("rnr_naks_sent"),
        c_str!("error_naks_sent"),
        c_str!("duplicate_requests"),
        c_str!("out_of_seq_requests"),
        c_str!("duplicate_responses"),
        // Memory management extensions, after the transport events.
        c_str!("fast_reg_mrs"),
        c_str!("local_invalidates"),
        c_str!("remote_invalidates"),
    ]);

/// Counters before the transport events in [`COUNTER_NAMES`].
const PORT_COUNTERS: usize = 12;

/// Counters after the transport events in [`COUNTER_NAMES`].
const MEM_COUNTERS: usize = 3;

/// The rrxe driver.
pub(crate) struct Rrxe;

/// An event counter.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Counts one event.
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` events.
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The count so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Packets the device moved and dropped, by reason: the port counters of `rdma
/// statistic`.
#[derive(Default)]
pub(crate) struct Counters {
    /// Packets sent (requests and responses, first transmissions and retries).
    pub(crate) sent_pkts: Counter,
    /// Of those, retransmissions (IBA 9.7.6.1.3: after a timeout or a NAK).
    pub(crate) retransmitted_pkts: Counter,
    /// Packets received for a QP of this device.
    pub(crate) rcvd_pkts: Counter,
    /// Received for a QP number that does not exist.
    pub(crate) rx_no_qp: Counter,
    /// Dropped because the QP's receive queue of packets was full.
    pub(crate) rx_queue_full: Counter,
    /// Headers that did not parse (unknown opcode, truncated, bad length).
    pub(crate) rx_malformed: Counter,
    /// Packets the IP stack refused to send.
    pub(crate) tx_errors: Counter,
    /// Packets without a destination (a UD send naming no valid AH of its PD).
    pub(crate) tx_no_path: Counter,
    /// The QPs' transport events (retries, NAKs, duplicates), by [`TransportEvent`].
    pub(crate) transport: [Counter; TransportEvent::COUNT],
    /// Fast Register WQEs executed (an MR became valid).
    pub(crate) fast_reg_mrs: Counter,
    /// Local Invalidate WQEs executed (an MR or window became free).
    pub(crate) local_invalidates: Counter,
    /// Send with Invalidate messages that invalidated an R_Key of ours.
    pub(crate) remote_invalidates: Counter,
}

impl Counters {
    /// Adds the events a QP engine counted since it was last asked.
    pub(crate) fn add_transport(&self, stats: &QpStats) {
        for (c, e) in self.transport.iter().zip(TransportEvent::ALL) {
            let n = stats.get(e);
            if n != 0 {
                c.add(u64::from(n));
            }
        }
    }
}

/// The part of a device the receive path and QP tasks reach.
#[pin_data]
pub(crate) struct DeviceShared {
    /// QPs by QP number.
    #[pin]
    pub(crate) qps: IndexTable<QpShared>,
    /// Address handles by number.
    #[pin]
    pub(crate) ahs: IndexTable<AhState>,
    /// Data-path counters.
    pub(crate) counters: Counters,
}

/// State of one rrxe device.
pub(crate) struct RrxeDevice {
    /// What the receive path reaches.
    shared: Arc<DeviceShared>,
    netdev: ARef<NetDevice>,
    /// EUI-64 from the netdev's MAC (IBA 4.1.1: the GUID is an EUI-64).
    guid: u64,
    /// Whether the port was last reported active, so events go out on transitions only.
    port_active: AtomicBool,
    /// The registered MRs, by key index.
    mrs: Pin<KBox<IndexTable<MrState>>>,
    /// The SRQs, by SRQ number.
    srqs: Pin<KBox<IndexTable<SrqShared>>>,
    /// The allocated memory windows, by key index.
    mws: Pin<KBox<IndexTable<MwState>>>,
    /// Low byte of the next MR key.
    pub(crate) key_variant: AtomicU32,
    /// Keeps the RoCEv2 UDP port open while the device exists.
    _tunnel: TunnelRef,
}

/// State of one user context.
pub(crate) struct RrxeUContext;

/// State of one protection domain: the PD is an identity objects are checked against.
pub(crate) struct RrxePd;

impl RrxeDevice {
    /// Device state for a new device over `netdev`.
    pub(crate) fn new(netdev: &NetDevice) -> Result<Self> {
        let tunnel = TunnelRef::acquire::<Rrxe>().inspect_err(|e| {
            if e.to_errno() == -b::RRXE_EADDRINUSE {
                pr_err!(
                    "{}: UDP port {} (RoCEv2) is in use, by rdma_rxe or another socket: EADDRINUSE\n",
                    netdev.name(),
                    b::RRXE_ROCE_V2_UDP_DPORT
                );
            } else {
                pr_err!(
                    "{}: opening UDP port {} (RoCEv2) failed: {:?}\n",
                    netdev.name(),
                    b::RRXE_ROCE_V2_UDP_DPORT,
                    e
                );
            }
        })?;
        let shared = Arc::pin_init(
            pin_init!(DeviceShared {
                qps <- IndexTable::new(),
                ahs <- IndexTable::new(),
                counters: Counters::default(),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self {
            shared,
            netdev: netdev.into(),
            guid: eui64_from_mac(netdev.mac()),
            port_active: AtomicBool::new(port_is_active(netdev)),
            mrs: KBox::pin_init(IndexTable::new(), GFP_KERNEL)?,
            srqs: KBox::pin_init(IndexTable::new(), GFP_KERNEL)?,
            mws: KBox::pin_init(IndexTable::new(), GFP_KERNEL)?,
            key_variant: AtomicU32::new(0),
            _tunnel: tunnel,
        })
    }

    /// The registered MRs, by key index.
    pub(crate) fn mrs(&self) -> &IndexTable<MrState> {
        &self.mrs
    }

    /// The SRQs, by SRQ number.
    pub(crate) fn srqs(&self) -> &IndexTable<SrqShared> {
        &self.srqs
    }

    /// The allocated memory windows, by key index.
    pub(crate) fn mws(&self) -> &IndexTable<MwState> {
        &self.mws
    }

    /// The node GUID.
    pub(crate) fn guid(&self) -> u64 {
        self.guid
    }

    /// The receive-path part of the device.
    pub(crate) fn shared(&self) -> &DeviceShared {
        &self.shared
    }

    /// The netdev the port runs over.
    pub(crate) fn netdev(&self) -> &NetDevice {
        &self.netdev
    }
}

impl Drop for RrxeDevice {
    fn drop(&mut self) {
        // Until `rdma statistic` reports them, the data-path drops are only visible here.
        let c = &self.shared.counters;
        pr_info!(
            "{}: device gone; rx dropped: no qp {}, queue full {}, malformed {}; tx errors {}, no path {}\n",
            self.netdev.name(),
            c.rx_no_qp.get(),
            c.rx_queue_full.get(),
            c.rx_malformed.get(),
            c.tx_errors.get(),
            c.tx_no_path.get()
        );
    }
}

impl RxHandler for Rrxe {
    fn receive(netdev: &NetDevice, pkt: RxPacket) {
        let Some(shared) = find_rx_state::<Rrxe>(netdev) else {
            net::counters().count_no_device();
            pkt.discard();
            return;
        };
        // The BTH's destination QP (IBA 9.2, bytes 5..8); the task parses the rest.
        let Some(&[_, _, _, _, _, q0, q1, q2]) = pkt.payload().first_chunk::<8>() else {
            shared.counters.rx_malformed.inc();
            pkt.discard();
            return;
        };
        let qpn = u32::from_be_bytes([0, q0, q1, q2]);
        qp::deliver(&shared, qpn, pkt);
    }
}

fn port_is_active(netdev: &NetDevice) -> bool {
    netdev.is_running() && netdev.has_carrier()
}

/// Modified EUI-64 from a MAC (RFC 4291 appendix A), as the RDMA core and rdma_rxe derive
/// node GUIDs: insert FF:FE in the middle and flip the universal/local bit.
fn eui64_from_mac(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// The largest IB MTU whose packets fit in an Ethernet frame of `mtu` bytes (IBA 9.6.1.1.1
/// path MTU values; RoCE headers counted as `params::ROCE_OVERHEAD`).
fn ib_mtu_for(mtu: u32) -> u32 {
    let room = mtu.saturating_sub(params::ROCE_OVERHEAD);
    match room {
        4096.. => b::ib_mtu_IB_MTU_4096,
        2048.. => b::ib_mtu_IB_MTU_2048,
        1024.. => b::ib_mtu_IB_MTU_1024,
        512.. => b::ib_mtu_IB_MTU_512,
        // IBA's smallest MTU; a netdev this small cannot carry RoCE at all, and the port
        // reports it rather than an invalid value.
        _ => b::ib_mtu_IB_MTU_256,
    }
}

/// Re-evaluates the port of `dev` after a netdev event and reports a change of state.
pub(crate) fn update_port_state(dev: &Device<Rrxe>) {
    let data = dev.data();
    let active = port_is_active(&data.netdev);
    if data.port_active.swap(active, Ordering::AcqRel) == active {
        return;
    }
    if active {
        ibdev_print!(dev, Info, "port {} active on {}", PORT, data.netdev.name());
        dev.dispatch_port_event(PORT, PortEvent::Active);
    } else {
        ibdev_print!(dev, Info, "port {} down on {}", PORT, data.netdev.name());
        dev.dispatch_port_event(PORT, PortEvent::Error);
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
    type Shared = DeviceShared;

    const DRIVER_ID: u32 = b::rdma_driver_id_RDMA_DRIVER_RXE;
    const UVERBS_ABI_VERSION: u32 = params::UVERBS_ABI_VERSION;
    const NODE_DESC: &'static [u8] = params::NODE_DESC;
    const COUNTERS: CounterDescs = COUNTER_NAMES.descs();

    fn read_counters(dev: &Device<Self>, values: &mut [u64]) {
        let c = &dev.data().shared.counters;
        let wire = net::counters().snapshot();
        let all = [
            c.sent_pkts.get(),
            c.rcvd_pkts.get(),
            c.retransmitted_pkts.get(),
            c.rx_no_qp.get(),
            c.rx_queue_full.get(),
            c.rx_malformed.get(),
            c.tx_errors.get(),
            c.tx_no_path.get(),
            wire.rx_bad_icrc,
            wire.rx_truncated,
            wire.rx_malformed,
            wire.rx_no_device,
        ];
        let transport = c.transport.iter().map(Counter::get);
        let mem = [
            c.fast_reg_mrs.get(),
            c.local_invalidates.get(),
            c.remote_invalidates.get(),
        ];
        for (v, a) in values.iter_mut().zip(Iterator::chain(
            Iterator::chain(all.into_iter(), transport),
            mem,
        )) {
            *v = a;
        }
    }

    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr) -> Result {
        *attr = DeviceAttr {
            sys_image_guid: dev.data().guid.to_be(),
            vendor_id: params::VENDOR_ID,
            // Userspace may unregister the device with `rdma link delete`.
            kernel_cap_flags: u64::from(b::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG),
            device_cap_flags: (b::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT
                | b::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID
                | b::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN
                | b::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE
                | b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW
                | b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B
                // Fast Register and Local/Remote Invalidate: kernel ULPs (nvme-rdma, iSER,
                // NFS/RDMA) refuse devices without them.
                | b::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS)
                as u64,
            max_pkeys: params::PKEY_TABLE_LEN,
            max_pd: params::MAX_PD,
            max_cq: params::MAX_CQ,
            max_cqe: params::MAX_CQE as i32,
            max_mr: params::MAX_MR as i32,
            max_mw: (params::MAX_MW_INDEX - params::MIN_MW_INDEX + 1) as i32,
            max_mr_size: u64::MAX,
            max_qp: params::MAX_QP,
            max_qp_wr: wq::MAX_WR as i32,
            max_send_sge: wq::MAX_SGE as i32,
            max_recv_sge: wq::MAX_SGE as i32,
            max_sge_rd: wq::MAX_SGE as i32,
            // Reads and atomics in flight per QP, as initiator and as responder.
            max_qp_rd_atom: MAX_RD_ATOMIC as i32,
            max_qp_init_rd_atom: MAX_RD_ATOMIC as i32,
            max_res_rd_atom: MAX_RD_ATOMIC as i32 * params::MAX_QP,
            // Atomics are atomic among all QPs of the host (one lock serialises them).
            atomic_cap: b::ib_atomic_cap_IB_ATOMIC_HCA,
            max_ah: params::MAX_AH as i32,
            max_srq: params::MAX_SRQ,
            max_srq_wr: srq::MAX_SRQ_WR as i32,
            max_srq_sge: srq::MAX_SRQ_SGE as i32,
            page_size_cap: params::PAGE_SIZE_CAP,
            max_fast_reg_page_list_len: params::MAX_FAST_REG_PAGES,
            local_ca_ack_delay: params::LOCAL_CA_ACK_DELAY,
            ..Default::default()
        };
        Ok(())
    }

    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result {
        if port != PORT {
            return Err(EINVAL);
        }
        let netdev = &dev.data().netdev;
        let active = port_is_active(netdev);
        *attr = PortAttr {
            subnet_prefix: params::SUBNET_PREFIX,
            state: if active {
                b::ib_port_state_IB_PORT_ACTIVE
            } else {
                b::ib_port_state_IB_PORT_DOWN
            },
            // IBA 14.2.5.6 PortInfo:PortPhysicalState: LinkUp with a link, Polling while the
            // port is enabled and waits for one, Disabled when administratively down.
            phys_state: if active {
                b::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP
            } else if netdev.is_admin_up() {
                b::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING
            } else {
                b::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED
            } as u8,
            max_mtu: b::ib_mtu_IB_MTU_4096,
            active_mtu: ib_mtu_for(netdev.mtu()),
            phys_mtu: netdev.mtu(),
            gid_tbl_len: params::GID_TABLE_LEN,
            port_cap_flags: b::ib_port_capability_mask_bits_IB_PORT_CM_SUP,
            max_msg_sz: params::MAX_MSG_SIZE,
            pkey_tbl_len: params::PKEY_TABLE_LEN,
            // One data VL (IBA 14.2.5.6 VLCap encoding: 1 = VL0).
            max_vl_num: 1,
            ..Default::default()
        };
        dev.eth_speed(port, &mut attr.active_speed, &mut attr.active_width)
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        if port != PORT || index >= params::PKEY_TABLE_LEN {
            return Err(EINVAL);
        }
        Ok(b::RRXE_IB_DEFAULT_PKEY_FULL)
    }

    fn port_immutable(_dev: &Device<Self>, port: u32, immutable: &mut PortImmutable) -> Result {
        if port != PORT {
            return Err(EINVAL);
        }
        *immutable = PortImmutable {
            // RoCEv2 only: packets are UDP/IP encapsulated, GIDs are IP addresses.
            core_cap_flags: b::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP,
            pkey_tbl_len: params::PKEY_TABLE_LEN.into(),
            gid_tbl_len: params::GID_TABLE_LEN,
            max_mad_size: b::RRXE_IB_MGMT_MAD_SIZE as u32,
        };
        Ok(())
    }

    fn link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn alloc_ucontext(_dev: &Device<Self>) -> Result<RrxeUContext> {
        Ok(RrxeUContext)
    }

    fn alloc_pd(_dev: &Device<Self>) -> Result<RrxePd> {
        Ok(RrxePd)
    }

    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInit,
        udata: Option<&mut UData>,
    ) -> Result<(RrxeCq, u32)> {
        cq::create(dev, attr, udata)
    }

    fn reg_user_mr(
        dev: &Device<Self>,
        pd: PdId,
        umem: Umem,
        iova: u64,
        length: u64,
        access: i32,
    ) -> Result<(RrxeMr, u32)> {
        mr::reg_user(dev.data(), pd, umem, iova, length, access)
    }

    fn get_dma_mr(
        dev: &Device<Self>,
        pd: PdId,
        memory: KernelMemory,
        access: i32,
    ) -> Result<(RrxeMr, u32)> {
        mr::dma(dev.data(), pd, memory, access)
    }

    fn rereg_user_mr(dev: &Device<Self>, mr: &RrxeMr, req: &MrRereg) -> Result<(RrxeMr, u32)> {
        mr::rereg_user(dev, mr, req)
    }

    fn alloc_mr(
        dev: &Device<Self>,
        pd: PdId,
        memory: KernelMemory,
        max_num_sg: u32,
    ) -> Result<(RrxeMr, u32)> {
        mr::alloc_fast(dev.data(), pd, memory, max_num_sg)
    }

    fn map_mr_begin(mr: &RrxeMr, page_size: u32) -> Result {
        mr::map_begin(mr, page_size)
    }

    fn map_mr_page(mr: &RrxeMr, addr: u64) -> Result {
        mr::map_page(mr, addr)
    }

    fn dereg_mr(dev: &Device<Self>, mr: &RrxeMr) -> Result {
        mr::dereg(dev.data(), mr)
    }

    fn alloc_mw(dev: &Device<Self>, pd: PdId, type2: bool) -> Result<(RrxeMw, u32)> {
        mw::alloc(dev.data(), pd, type2)
    }

    fn dealloc_mw(dev: &Device<Self>, mw: &RrxeMw) {
        mw::dealloc(dev.data(), mw)
    }

    fn resize_cq(cq: &Cq<Self>, entries: u32, udata: Option<&mut UData>) -> Result<u32> {
        cq::resize(cq, entries, udata)
    }

    fn poll_cq(cq: &Cq<Self>, wc: &mut [WorkCompletion]) -> Result<usize> {
        cq::poll(cq, wc)
    }

    fn req_notify_cq(cq: &Cq<Self>, solicited_only: bool, report_missed: bool) -> bool {
        cq::req_notify(cq, solicited_only, report_missed)
    }

    fn shared(data: &RrxeDevice) -> Arc<DeviceShared> {
        data.shared.clone()
    }

    fn create_qp(
        dev: &Device<Self>,
        qp: QpRef<Self>,
        init: &mut QpInit<'_, Self>,
        udata: Option<&mut UData>,
    ) -> Result<(RrxeQp, u32)> {
        qp::create(dev, qp, init, udata)
    }

    fn modify_qp(qp: &Qp<Self>, modify: &QpModify) -> Result {
        qp::modify(qp, modify)
    }

    fn query_qp(qp: &Qp<Self>) -> Result<QpQuery> {
        qp::query(qp)
    }

    fn destroy_qp(qp: &Qp<Self>) {
        qp::destroy(qp)
    }

    fn post_send_doorbell(qp: &Qp<Self>) -> Result {
        qp::doorbell(qp)
    }

    fn post_send(qp: &Qp<Self>, wr: &SendWr<'_, Self>) -> Result {
        qp::post_send(qp, wr)
    }

    fn post_recv(qp: &Qp<Self>, wr: &RecvWr<'_>) -> Result {
        qp::post_recv(qp, wr)
    }

    fn post_recv_doorbell(qp: &Qp<Self>) {
        qp::recv_doorbell(qp)
    }

    fn create_ah(
        dev: &Device<Self>,
        pd: PdId,
        av: &AddressVector,
        sleepable: bool,
        udata: Option<&mut UData>,
    ) -> Result<RrxeAh> {
        ah::create(dev, pd, av, sleepable, udata)
    }

    fn destroy_ah(dev: &Device<Self>, ah: &Ah<Self>) {
        ah::destroy(ah, dev.data())
    }

    fn create_srq(
        dev: &Device<Self>,
        srq: SrqRef<Self>,
        attr: &mut SrqAttr,
        udata: Option<&mut UData>,
    ) -> Result<RrxeSrq> {
        srq::create(dev, srq, attr, udata)
    }

    fn modify_srq(srq: &Srq<Self>, modify: &SrqModify, udata: Option<&mut UData>) -> Result {
        srq::modify(srq, modify, udata)
    }

    fn query_srq(srq: &Srq<Self>) -> Result<SrqAttr> {
        srq::query(srq)
    }

    fn destroy_srq(dev: &Device<Self>, srq: &Srq<Self>) {
        srq::destroy(dev, srq)
    }

    fn netdev(dev: &Device<Self>, port: u32) -> Option<ARef<NetDevice>> {
        let netdev = &dev.data().netdev;
        // Once unregistration starts the device is on its way out; consumers (GID
        // management, rdma_cm) must not pick the netdev up again.
        (port == PORT && netdev.is_registered()).then(|| netdev.clone())
    }
}
