// SPDX-License-Identifier: GPL-2.0

//! The rrxe device: one RoCEv2 CA with a port over an Ethernet netdev, or two ports over
//! two. It composes the object tables, the state its QPs share, and its place on the
//! RoCEv2 ports, and answers the device and port queries.

use crate::counters::Counter;
use crate::glue::bindings as b;
use crate::glue::module_param::Limit;
use crate::glue::net::{RxBinding, RxHandler, RxPacket};
use crate::glue::netdev::NetDevice;
use crate::glue::rcu::RcuSection;
use crate::glue::rdma::attr::{DeviceAttr, PortAttr, PortImmutable};
use crate::glue::rdma::object::XrcdId;
use crate::glue::task::{Kick, Kicks};
use crate::mcast::{self, McastTable, MULTICAST_QPN};
use crate::params;
use crate::port::Ports;
use crate::qp::object::{LastQp, QpTable};
use crate::quota::Quotas;
use crate::shared::DeviceShared;
use crate::srq;
use crate::transport::icrc::ICRC_LEN;
use crate::transport::qp::context::MAX_RD_ATOMIC;

/// Automatic path migration (IBA 17.2.8), claimed only where the RDMA core lets a RoCE QP
/// load an alternate path: with the project's core patch, which Kbuild detects
/// (`rrxe_core_apm`). The core lets a RoCE device load alternate paths only if it claims
/// this, so on an unpatched core rrxe claims nothing it cannot be given.
const APM_CAP: b::ib_device_cap_flags = if cfg!(rrxe_core_apm) {
    b::ib_device_cap_flags_IB_DEVICE_AUTO_PATH_MIG
} else {
    0
};
use crate::wq;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::ARef;

/// What the receive path reaches of a device: its QPs and what they share.
#[pin_data]
pub(crate) struct DeviceCore {
    /// QPs by QP number.
    #[pin]
    pub(crate) qps: QpTable,
    /// Multicast groups and their UD QPs.
    #[pin]
    pub(crate) mcast: McastTable,
    /// The state the QPs share.
    pub(crate) shared: Arc<DeviceShared>,
}

/// Where a received packet goes.
enum Route<'a> {
    /// The QP at this table index ([`QpTable::index_of`]).
    Qp(u32),
    /// The members of its multicast group.
    Multicast,
    /// Nowhere: dropped (counted).
    Drop(&'a Counter),
    /// Nowhere: its ICRC is wrong (counted by the check).
    Bad,
}

impl DeviceCore {
    /// Where `pkt` goes, by the BTH's destination QP (IBA 9.2, bytes 5..8; the QP's task
    /// parses the rest); counts it in its port's traffic. Only a packet for one QP may
    /// still have its ICRC to check ([`RxPacket::icrc_ok`]), by that QP's run: any other is
    /// checked here, before it is counted (a group's once, before its copies). Inlined into
    /// the two receive paths (a call a packet otherwise).
    #[inline(always)]
    fn route(&self, pkt: &mut RxPacket) -> Route<'_> {
        let counters = &self.shared.counters;
        let Some(&[_, _, _, _, _, q0, q1, q2]) = pkt.payload().first_chunk::<8>() else {
            return Route::Drop(&counters.rx_malformed);
        };
        let qpn = u32::from_be_bytes([0, q0, q1, q2]);
        // Each port's netdev is bound to this handler; anything else it is given arrived over
        // a netdev stacked on port 1's.
        let ports = &self.shared.ports;
        let port = ports
            .of_netdev(pkt.netdev())
            .unwrap_or_else(|| ports.first());
        let index = QpTable::index_of(qpn, port.num).filter(|_| qpn != MULTICAST_QPN);
        if index.is_none() && !pkt.icrc_ok() {
            return Route::Bad;
        }
        let traffic = &port.traffic;
        traffic.rcvd_pkts.inc();
        traffic
            .rcvd_octets
            .add((pkt.payload().len() + ICRC_LEN) as u64);
        if qpn == MULTICAST_QPN {
            traffic.rcvd_mcast_pkts.inc();
            Route::Multicast
        } else if let Some(index) = index {
            Route::Qp(index)
        } else {
            Route::Drop(&counters.rx_no_qp)
        }
    }
}

impl RxHandler for DeviceCore {
    fn receive(&self, mut pkt: RxPacket, rcu: &RcuSection) -> Option<Kick> {
        match self.route(&mut pkt) {
            Route::Qp(index) => self.qps.deliver(&self.shared, index, pkt, rcu),
            Route::Multicast => {
                // Kicks each member QP's task itself.
                self.mcast.deliver(&self.qps, &self.shared, pkt, rcu);
                None
            }
            Route::Drop(counter) => {
                counter.inc();
                pkt.discard();
                None
            }
            Route::Bad => {
                pkt.discard();
                None
            }
        }
    }

    // Inlined into the handover's thunk, which only calls it (a call a handover).
    #[inline(always)]
    fn receive_all(&self, pkts: &mut [Option<RxPacket>], kicks: &mut Kicks, rcu: &RcuSection) {
        self.shared.counters.loopback_handovers.inc();
        let mut last = LastQp::new();
        for mut pkt in pkts.iter_mut().filter_map(Option::take) {
            match self.route(&mut pkt) {
                Route::Qp(index) => {
                    self.qps
                        .deliver_batched(&self.shared, index, pkt, &mut last, kicks, rcu)
                }
                Route::Multicast => self.mcast.deliver(&self.qps, &self.shared, pkt, rcu),
                Route::Drop(counter) => {
                    counter.inc();
                    pkt.discard();
                }
                Route::Bad => pkt.discard(),
            }
        }
        last.finish(kicks);
    }
}

/// State of one rrxe device.
pub(crate) struct RrxeDevice {
    /// What the receive path and the QPs reach.
    pub(crate) core: Arc<DeviceCore>,
    /// How many objects of each kind the device may hold and holds.
    pub(crate) quotas: Arc<Quotas>,
    /// Numbers for new XRC domains.
    next_xrcd: AtomicU32,
    /// EUI-64 from the netdev's MAC, or a random one on an L3-only netdev (IBA 4.1.1: the
    /// GUID is an EUI-64).
    guid: u64,
    /// Deliver the ports' RoCEv2 packets to `core` while the device exists, port 1's first.
    _rx: KVec<RxBinding>,
}

impl RrxeDevice {
    /// Device state for a new device over `netdev`, with a second port over `second`.
    pub(crate) fn new(netdev: &NetDevice, second: Option<ARef<NetDevice>>) -> Result<Self> {
        let shared = Arc::pin_init(DeviceShared::new(netdev, second), GFP_KERNEL)?;
        let core = Arc::pin_init(
            pin_init!(DeviceCore {
                qps <- QpTable::new(),
                mcast <- McastTable::new(netdev),
                shared,
            }),
            GFP_KERNEL,
        )?;
        let mut rx = KVec::with_capacity(usize::from(core.shared.ports.count()), GFP_KERNEL)?;
        for port in core.shared.ports.iter() {
            let netdev = &port.netdev;
            let binding = RxBinding::bind(netdev, core.clone()).inspect_err(|e| {
                if e.to_errno() == -b::RRXE_EADDRINUSE {
                    pr_err!(
                        "{}: UDP port {} (RoCEv2) is in use, by rdma_rxe or another socket: EADDRINUSE\n",
                        netdev.name(),
                        b::RRXE_ROCE_V2_UDP_DPORT
                    );
                } else if *e == EEXIST {
                    pr_err!("{}: already a port of an rrxe device\n", netdev.name());
                } else {
                    pr_err!(
                        "{}: opening UDP port {} (RoCEv2) failed: {:?}\n",
                        netdev.name(),
                        b::RRXE_ROCE_V2_UDP_DPORT,
                        e
                    );
                }
            })?;
            rx.push(binding, GFP_KERNEL)?;
        }
        Ok(Self {
            core,
            quotas: Quotas::from_params()?,
            next_xrcd: AtomicU32::new(0),
            guid: eui64_from_mac(netdev.mac_or_random()),
            _rx: rx,
        })
    }

    /// A number for a new XRC domain. It wraps after 2^32 allocations; a domain that lives
    /// that long while others come and go could share its number with a new one, and only
    /// then could an XRC target of one reach an SRQ of the other.
    pub(crate) fn new_xrcd(&self) -> XrcdId {
        XrcdId(self.next_xrcd.fetch_add(1, Ordering::Relaxed))
    }

    /// The device's limit of objects of `kind`, as Query HCA reports it.
    fn limit(&self, kind: Limit) -> i32 {
        // Every capacity fits an i32 (the largest is 2^24 - 1).
        self.quotas.limit(kind) as i32
    }

    /// The state the device's QPs share.
    pub(crate) fn shared(&self) -> &Arc<DeviceShared> {
        &self.core.shared
    }

    /// The node GUID.
    pub(crate) fn guid(&self) -> u64 {
        self.guid
    }

    /// The ports.
    pub(crate) fn ports(&self) -> &Ports {
        &self.core.shared.ports
    }

    /// The netdev port 1 runs over, the one `rdma link add` named.
    pub(crate) fn netdev(&self) -> &NetDevice {
        &self.ports().first().netdev
    }

    /// The device attributes (IBA 11.2.1.2 Query HCA).
    pub(crate) fn attributes(&self) -> DeviceAttr {
        DeviceAttr {
            sys_image_guid: self.guid.to_be(),
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
                | b::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS
                // XRC domains, XRC SRQs and XRC QPs (IBA 11.2.10, Annex A14).
                | b::ib_device_cap_flags_IB_DEVICE_XRC
                | APM_CAP) as u64,
            max_pkeys: params::PKEY_TABLE_LEN,
            max_pd: self.limit(Limit::Pd),
            max_cq: self.limit(Limit::Cq),
            max_cqe: params::MAX_CQE as i32,
            max_mr: self.limit(Limit::Mr),
            max_mw: self.limit(Limit::Mw),
            max_mr_size: u64::MAX,
            max_qp: self.limit(Limit::Qp),
            max_qp_wr: wq::MAX_WR as i32,
            max_send_sge: wq::MAX_SGE as i32,
            max_recv_sge: wq::MAX_SGE as i32,
            max_sge_rd: wq::MAX_SGE as i32,
            // Reads and atomics in flight per QP, as initiator and as responder.
            max_qp_rd_atom: MAX_RD_ATOMIC as i32,
            max_qp_init_rd_atom: MAX_RD_ATOMIC as i32,
            max_res_rd_atom: MAX_RD_ATOMIC as i32 * self.limit(Limit::Qp),
            // Atomics are atomic among all QPs of the host (one lock serialises them).
            atomic_cap: b::ib_atomic_cap_IB_ATOMIC_HCA,
            max_ah: self.limit(Limit::Ah),
            max_srq: self.limit(Limit::Srq),
            max_srq_wr: srq::MAX_SRQ_WR as i32,
            max_srq_sge: srq::MAX_SRQ_SGE as i32,
            page_size_cap: params::PAGE_SIZE_CAP,
            max_fast_reg_page_list_len: params::MAX_FAST_REG_PAGES,
            // UD multicast (IBA 10.5), the limits `mcast.rs` enforces.
            max_mcast_grp: mcast::MAX_GROUPS as i32,
            max_mcast_qp_attach: mcast::MAX_QPS_PER_GROUP as i32,
            max_total_mcast_qp_attach: mcast::MAX_ATTACHMENTS as i32,
            local_ca_ack_delay: params::LOCAL_CA_ACK_DELAY,
            ..Default::default()
        }
    }

    /// The attributes of `port` (IBA 11.2.1.2 Query HCA, port attributes); the speed and
    /// width are the caller's to fill from the netdev.
    pub(crate) fn port_attributes(&self, port: u32) -> Result<PortAttr> {
        let port = self.ports().get(port).ok_or(EINVAL)?;
        let netdev = &port.netdev;
        let active = port.is_active();
        Ok(PortAttr {
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
        })
    }

    /// The P_Key at `index` of `port`'s table.
    pub(crate) fn pkey(&self, port: u32, index: u16) -> Result<u16> {
        if self.ports().get(port).is_none() || index >= params::PKEY_TABLE_LEN {
            return Err(EINVAL);
        }
        Ok(b::RRXE_IB_DEFAULT_PKEY_FULL)
    }

    /// The properties of `port` fixed for the device's lifetime.
    pub(crate) fn port_immutable(&self, port: u32) -> Result<PortImmutable> {
        self.ports().get(port).ok_or(EINVAL)?;
        Ok(PortImmutable {
            // RoCEv2 only: packets are UDP/IP encapsulated, GIDs are IP addresses.
            core_cap_flags: b::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP,
            pkey_tbl_len: params::PKEY_TABLE_LEN.into(),
            gid_tbl_len: params::GID_TABLE_LEN,
            max_mad_size: b::RRXE_IB_MGMT_MAD_SIZE as u32,
        })
    }
}

impl Drop for RrxeDevice {
    fn drop(&mut self) {
        // Every QP is gone, and with it every attachment; a group still joined would be a
        // consumer's leak, which must not outlive the device on the netdev.
        self.core.mcast.leave_all();
        let c = &self.core.shared.counters;
        pr_info!(
            "{}: device gone; rx dropped: no qp {}, queue full {}, malformed {}; tx errors {}, no path {}\n",
            self.netdev().name(),
            c.rx_no_qp.get(),
            c.rx_queue_full.get(),
            c.rx_malformed.get(),
            c.tx_errors.get(),
            c.tx_no_path.get()
        );
    }
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
