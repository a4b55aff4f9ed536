// SPDX-License-Identifier: GPL-2.0

//! Queue pairs and address handles: the `ib_device_ops` entries that create, modify, query
//! and destroy them, and safe views of the core's attribute structures.

use super::bindings;
use super::rdma::{
    eopnotsupp, Cq, Device, DeviceRegistry, Driver, Object, PdId, UData, WcFields, WorkCompletion,
};
use super::srq::Srq;
use core::ffi::c_int;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::error::from_result;
use kernel::prelude::*;

/// A queue pair (`struct ib_qp`) and the driver's state for it.
pub(crate) type Qp<T> = Object<bindings::ib_qp, <T as Driver>::Qp>;
/// An address handle (`struct ib_ah`) and the driver's state for it.
pub(crate) type Ah<T> = Object<bindings::ib_ah, <T as Driver>::Ah>;

/// Transport service of a QP (IBA 9.8.1); the General Service Interface QP is UD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpKind {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
    /// QP1, the GSI QP (UD semantics).
    Gsi,
}

/// Work queue sizes of a QP (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QpCaps {
    /// Send WRs.
    pub(crate) max_send_wr: u32,
    /// Receive WRs.
    pub(crate) max_recv_wr: u32,
    /// Gather entries per send WR.
    pub(crate) max_send_sge: u32,
    /// Scatter entries per receive WR.
    pub(crate) max_recv_sge: u32,
    /// Bytes of inline data per send WR.
    pub(crate) max_inline_data: u32,
}

/// What a new QP is asked for (`struct ib_qp_init_attr`).
pub(crate) struct QpInit<'a, T: Driver> {
    /// Transport service.
    pub(crate) kind: QpKind,
    /// Requested sizes; the driver returns the ones it grants.
    pub(crate) caps: QpCaps,
    /// The SRQ receives come from, if any; it outlives the QP (the core holds a use count
    /// on it until the QP is destroyed).
    pub(crate) srq: Option<&'a Srq<T>>,
    /// Whether every send WR completes (IB_SIGNAL_ALL_WR) rather than only signaled ones.
    pub(crate) signal_all: bool,
}

/// A RoCEv2 address vector (IBA 11.2.4.2 primary path), from `struct rdma_ah_attr`: the
/// GIDs are the IP addresses of the two ends (IPv4 ones in IPv4-mapped IPv6 form).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AddressVector {
    /// Source GID: a GID table entry of the port.
    pub(crate) sgid: [u8; 16],
    /// Index of the source GID in the port's table.
    pub(crate) sgid_index: u8,
    /// Destination GID.
    pub(crate) dgid: [u8; 16],
    /// Traffic class (IPv4 TOS / IPv6 traffic class).
    pub(crate) traffic_class: u8,
    /// Hop limit (TTL).
    pub(crate) hop_limit: u8,
    /// Flow label.
    pub(crate) flow_label: u32,
    /// Service level.
    pub(crate) sl: u8,
    /// Whether the GID table entry is a RoCEv2 one (UDP encapsulated); RoCEv1 entries
    /// cannot be used by rrxe.
    pub(crate) roce_v2: bool,
}

impl AddressVector {
    /// Reads a RoCE `rdma_ah_attr` whose source GID attribute the core resolved.
    fn from_raw(ah: &bindings::rdma_ah_attr) -> Result<Self> {
        if ah.ah_flags & bindings::ib_ah_flags_IB_AH_GRH as u8 == 0 {
            // RoCE addresses always carry a GRH (the IP header).
            return Err(EINVAL);
        }
        let grh = &ah.grh;
        // SAFETY: for RoCE the core resolves `sgid_attr` (rdma_fill_sgid_attr) before it
        // calls the driver and holds it for the call; it is null only on a core bug.
        let sgid_attr = unsafe { grh.sgid_attr.as_ref() }.ok_or(EINVAL)?;
        // SAFETY: `ib_gid` is a union of byte views of the same 16 bytes.
        let (sgid, dgid) = unsafe { (sgid_attr.gid.raw, grh.dgid.raw) };
        Ok(Self {
            sgid,
            sgid_index: grh.sgid_index,
            dgid,
            traffic_class: grh.traffic_class,
            hop_limit: grh.hop_limit,
            flow_label: grh.flow_label,
            sl: ah.sl,
            roce_v2: sgid_attr.gid_type == bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
        })
    }

    /// Fills a RoCE `rdma_ah_attr` for query_qp (without the GID attribute reference).
    fn to_raw(self, port: u32, ah: &mut bindings::rdma_ah_attr) {
        ah.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        ah.port_num = port;
        ah.sl = self.sl;
        ah.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        ah.grh.dgid.raw = self.dgid;
        ah.grh.sgid_index = self.sgid_index;
        ah.grh.traffic_class = self.traffic_class;
        ah.grh.hop_limit = self.hop_limit;
        ah.grh.flow_label = self.flow_label;
    }
}

/// A Modify QP request (`struct ib_qp_attr` with its mask), each attribute present only if
/// its mask bit is set. Values are raw; the transport validates them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpModify {
    /// IB_QP_STATE: `enum ib_qp_state`.
    pub(crate) state: Option<u32>,
    /// IB_QP_CUR_STATE: the state the consumer believes the QP is in.
    pub(crate) cur_state: Option<u32>,
    /// IB_QP_EN_SQD_ASYNC_NOTIFY.
    pub(crate) sqd_notify: Option<bool>,
    /// IB_QP_ACCESS_FLAGS: `IB_ACCESS_*`.
    pub(crate) access: Option<u32>,
    /// IB_QP_PKEY_INDEX.
    pub(crate) pkey_index: Option<u16>,
    /// IB_QP_PORT.
    pub(crate) port: Option<u32>,
    /// IB_QP_QKEY.
    pub(crate) qkey: Option<u32>,
    /// IB_QP_AV.
    pub(crate) av: Option<AddressVector>,
    /// IB_QP_PATH_MTU: `enum ib_mtu`.
    pub(crate) path_mtu: Option<u32>,
    /// IB_QP_TIMEOUT.
    pub(crate) timeout: Option<u8>,
    /// IB_QP_RETRY_CNT.
    pub(crate) retry_cnt: Option<u8>,
    /// IB_QP_RNR_RETRY.
    pub(crate) rnr_retry: Option<u8>,
    /// IB_QP_RQ_PSN.
    pub(crate) rq_psn: Option<u32>,
    /// IB_QP_MAX_QP_RD_ATOMIC.
    pub(crate) max_rd_atomic: Option<u8>,
    /// IB_QP_MIN_RNR_TIMER.
    pub(crate) min_rnr_timer: Option<u8>,
    /// IB_QP_SQ_PSN.
    pub(crate) sq_psn: Option<u32>,
    /// IB_QP_MAX_DEST_RD_ATOMIC.
    pub(crate) max_dest_rd_atomic: Option<u8>,
    /// IB_QP_CAP: a resize request, which rrxe does not support.
    pub(crate) cap: Option<QpCaps>,
    /// IB_QP_DEST_QPN.
    pub(crate) dest_qpn: Option<u32>,
    /// The raw `enum ib_qp_attr_mask`, for [`transition_is_ok`].
    pub(crate) mask: u32,
}

/// Whether IBA 10.3.1 allows `cur` to `next` (`enum ib_qp_state`) for a QP of `kind` with
/// exactly the attributes in `mask`: every one the transition requires (IBA 11.2.4.2), none
/// outside those it allows. This is the core's table, `ib_modify_qp_is_ok()`, which uverbs
/// leaves to the provider to consult.
pub(crate) fn transition_is_ok(cur: u32, next: u32, kind: QpKind, mask: u32) -> bool {
    let qp_type = match kind {
        QpKind::Rc => bindings::ib_qp_type_IB_QPT_RC,
        QpKind::Uc => bindings::ib_qp_type_IB_QPT_UC,
        QpKind::Ud => bindings::ib_qp_type_IB_QPT_UD,
        QpKind::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
    };
    // SAFETY: a pure function of its arguments; it bounds-checks both states itself.
    unsafe { bindings::ib_modify_qp_is_ok(cur, next, qp_type, mask) }
}

/// Mask bits rrxe does not implement: alternate paths and migration state (automatic path
/// migration), rate limits.
const UNSUPPORTED_MASK: u32 = bindings::ib_qp_attr_mask_IB_QP_ALT_PATH
    | bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE
    | bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT;

impl QpModify {
    fn from_raw(attr: &bindings::ib_qp_attr, mask: u32) -> Result<Self> {
        if mask & UNSUPPORTED_MASK != 0 {
            return Err(eopnotsupp());
        }
        let has = |bit: u32| mask & bit != 0;
        let opt = |bit: u32, v| has(bit).then_some(v);
        Ok(Self {
            state: opt(bindings::ib_qp_attr_mask_IB_QP_STATE, attr.qp_state),
            cur_state: opt(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE, attr.cur_qp_state),
            sqd_notify: has(bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY)
                .then_some(attr.en_sqd_async_notify != 0),
            access: opt(
                bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS,
                attr.qp_access_flags as u32,
            ),
            pkey_index: has(bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX).then_some(attr.pkey_index),
            port: opt(bindings::ib_qp_attr_mask_IB_QP_PORT, attr.port_num),
            qkey: opt(bindings::ib_qp_attr_mask_IB_QP_QKEY, attr.qkey),
            av: if has(bindings::ib_qp_attr_mask_IB_QP_AV) {
                Some(AddressVector::from_raw(&attr.ah_attr)?)
            } else {
                None
            },
            path_mtu: opt(bindings::ib_qp_attr_mask_IB_QP_PATH_MTU, attr.path_mtu),
            timeout: has(bindings::ib_qp_attr_mask_IB_QP_TIMEOUT).then_some(attr.timeout),
            retry_cnt: has(bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT).then_some(attr.retry_cnt),
            rnr_retry: has(bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY).then_some(attr.rnr_retry),
            rq_psn: opt(bindings::ib_qp_attr_mask_IB_QP_RQ_PSN, attr.rq_psn),
            max_rd_atomic: has(bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC)
                .then_some(attr.max_rd_atomic),
            min_rnr_timer: has(bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER)
                .then_some(attr.min_rnr_timer),
            sq_psn: opt(bindings::ib_qp_attr_mask_IB_QP_SQ_PSN, attr.sq_psn),
            max_dest_rd_atomic: has(bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC)
                .then_some(attr.max_dest_rd_atomic),
            cap: has(bindings::ib_qp_attr_mask_IB_QP_CAP).then_some(caps_from_raw(&attr.cap)),
            dest_qpn: opt(bindings::ib_qp_attr_mask_IB_QP_DEST_QPN, attr.dest_qp_num),
            mask,
        })
    }
}

/// What query_qp reports (IBA 11.2.4.3).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpQuery {
    /// `enum ib_qp_state`.
    pub(crate) state: u32,
    /// `enum ib_mtu`.
    pub(crate) path_mtu: u32,
    /// Q_Key.
    pub(crate) qkey: u32,
    /// Expected receive PSN.
    pub(crate) rq_psn: u32,
    /// Next send PSN.
    pub(crate) sq_psn: u32,
    /// Destination QP.
    pub(crate) dest_qpn: u32,
    /// `IB_ACCESS_*` remote rights.
    pub(crate) access: u32,
    /// Granted sizes.
    pub(crate) caps: QpCaps,
    /// Primary path, once set.
    pub(crate) av: Option<AddressVector>,
    /// P_Key index.
    pub(crate) pkey_index: u16,
    /// Whether SQD entry is reported with an event.
    pub(crate) sqd_notify: bool,
    /// Whether the send queue is still draining in SQD.
    pub(crate) sq_draining: bool,
    /// Initiator depth.
    pub(crate) max_rd_atomic: u8,
    /// Responder resources.
    pub(crate) max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer code.
    pub(crate) min_rnr_timer: u8,
    /// Local ACK timeout code.
    pub(crate) timeout: u8,
    /// Retry count.
    pub(crate) retry_cnt: u8,
    /// RNR retry count.
    pub(crate) rnr_retry: u8,
}

/// A scatter/gather element of a kernel work request (`struct ib_sge`): kernel virtual
/// addresses, on a software device.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KernelSge {
    /// Address.
    pub(crate) addr: u64,
    /// Length in bytes.
    pub(crate) length: u32,
    /// L_Key.
    pub(crate) lkey: u32,
}

/// The destination of a kernel UD send (`struct ib_ud_wr`).
pub(crate) struct UdTarget<'a, T: Driver> {
    /// Address handle.
    pub(crate) ah: &'a Ah<T>,
    /// Destination QP.
    pub(crate) remote_qpn: u32,
    /// Q_Key.
    pub(crate) remote_qkey: u32,
    /// P_Key index (GSI only).
    pub(crate) pkey_index: u16,
}

/// A kernel send work request (IBA 11.4.1.1), read from the consumer's `ib_send_wr` and the
/// opcode-specific structure around it.
pub(crate) struct SendWr<'a, T: Driver> {
    raw: &'a bindings::ib_send_wr,
    /// `enum ib_wr_opcode`.
    pub(crate) opcode: u32,
    /// `IB_SEND_*` flags.
    pub(crate) flags: u32,
    /// Remote address and key (RDMA and atomic operations).
    pub(crate) remote: (u64, u32),
    /// Compare/add and swap operands (atomics).
    pub(crate) atomic: (u64, u64),
    /// Destination (UD and GSI QPs).
    pub(crate) ud: Option<UdTarget<'a, T>>,
    /// What a Fast Register (`IB_WR_REG_MR`) registers.
    pub(crate) reg: Option<RegWr>,
}

/// A Fast Register work request (`struct ib_reg_wr`): the new key and rights, with the
/// range the MR's last `map_mr_sg` set (`ib_mr.iova`, `ib_mr.length`), read at post time.
pub(crate) struct RegWr {
    pub(crate) key: u32,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) length: u64,
}

impl<T: Driver> SendWr<'_, T> {
    /// The WR id (or the consumer's `ib_cqe` pointer, carried the same way).
    pub(crate) fn wr_id(&self) -> u64 {
        // SAFETY: both union members are 8 bytes wide; the value is only carried.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// Immediate data or invalidated R_Key, as the raw union bits.
    pub(crate) fn ex(&self) -> u32 {
        // SAFETY: both union members are 4-byte integers.
        unsafe { self.raw.ex.invalidate_rkey }
    }

    /// Number of SGEs.
    pub(crate) fn num_sge(&self) -> usize {
        usize::try_from(self.raw.num_sge).unwrap_or(0)
    }

    /// SGE `i`.
    pub(crate) fn sge(&self, i: usize) -> Option<KernelSge> {
        // SAFETY: the consumer passes `num_sge` SGEs at `sg_list` for the post.
        unsafe { sge_at(self.raw.sg_list, self.num_sge(), i) }
    }

    /// The bytes SGE `i` names, for inline sends: kernel consumers pass kernel virtual
    /// addresses of memory they own for the duration of the post.
    pub(crate) fn inline_bytes(&self, i: usize) -> Option<&[u8]> {
        let s = self.sge(i)?;
        if s.length == 0 {
            return Some(&[]);
        }
        let addr = usize::try_from(s.addr).ok()? as *const u8;
        if addr.is_null() {
            return None;
        }
        // SAFETY: per IB_SEND_INLINE's contract, the SGE names `length` readable bytes of
        // kernel memory until ib_post_send returns.
        Some(unsafe { core::slice::from_raw_parts(addr, s.length as usize) })
    }
}

/// SGE `i` of a work request's list of `n` at `list`.
///
/// # Safety
///
/// A non-null `list` must point at `n` readable `struct ib_sge`s.
unsafe fn sge_at(list: *const bindings::ib_sge, n: usize, i: usize) -> Option<KernelSge> {
    if i >= n || list.is_null() {
        return None;
    }
    // SAFETY: `i < n` and, per the function contract, `list` holds `n` SGEs.
    let s = unsafe { &*list.add(i) };
    Some(KernelSge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    })
}

/// A kernel receive work request (`struct ib_recv_wr`).
pub(crate) struct RecvWr<'a> {
    raw: &'a bindings::ib_recv_wr,
}

impl RecvWr<'_> {
    /// The WR id (or `ib_cqe` pointer).
    pub(crate) fn wr_id(&self) -> u64 {
        // SAFETY: both union members are 8 bytes wide.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// Number of SGEs.
    pub(crate) fn num_sge(&self) -> usize {
        usize::try_from(self.raw.num_sge).unwrap_or(0)
    }

    /// SGE `i`.
    pub(crate) fn sge(&self, i: usize) -> Option<KernelSge> {
        // SAFETY: the consumer passes `num_sge` SGEs at `sg_list` for the post.
        unsafe { sge_at(self.raw.sg_list, self.num_sge(), i) }
    }
}

/// Asynchronous QP events (IBA 11.6.3), as `enum ib_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpEvent {
    /// Communication established.
    CommEstablished,
    /// Send queue drained.
    SqDrained,
    /// Local work queue catastrophic error.
    Fatal,
    /// Invalid request local work queue error.
    RequestError,
    /// Local access violation work queue error.
    AccessError,
    /// A QP on an SRQ in the error state will take no more WQEs from it (IBA 10.3.1).
    LastWqeReached,
}

fn caps_from_raw(cap: &bindings::ib_qp_cap) -> QpCaps {
    QpCaps {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
    }
}

fn caps_to_raw(caps: QpCaps, cap: &mut bindings::ib_qp_cap) {
    cap.max_send_wr = caps.max_send_wr;
    cap.max_recv_wr = caps.max_recv_wr;
    cap.max_send_sge = caps.max_send_sge;
    cap.max_recv_sge = caps.max_recv_sge;
    cap.max_inline_data = caps.max_inline_data;
}

/// A handle on a QP, used by the QP's work item and timer; it reaches the parts of the QP
/// the core owns (device, CQs, event handler), never the driver's state.
///
/// It is valid from the QP's creation until its destroy op returns: the driver keeps it only
/// in state that the destroy op takes away (after shutting down the QP's task) before it
/// returns, which is what makes its accessors sound.
pub(crate) struct QpRef<T: Driver>(NonNull<bindings::ib_qp>, PhantomData<T>);

// SAFETY: a QP is shared with the RDMA core, which calls into it from any thread.
unsafe impl<T: Driver> Send for QpRef<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Sync for QpRef<T> {}

impl<T: Driver> QpRef<T> {
    /// A handle on `qp`, for the QP's own work, which outlives a borrow.
    pub(crate) fn of(qp: &Qp<T>) -> Self {
        Self(NonNull::from(qp).cast(), PhantomData)
    }

    fn raw(&self) -> *mut bindings::ib_qp {
        self.0.as_ptr()
    }

    /// The QP number.
    pub(crate) fn qpn(&self) -> u32 {
        // SAFETY: a live QP (type invariant); `qp_num` is set at creation.
        unsafe { (*self.raw()).qp_num }
    }

    /// The device the QP belongs to.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: a live QP of one of our devices, which outlives its QPs.
        unsafe { Device::from_raw((*self.raw()).device) }
    }

    /// The CQ of the send queue.
    pub(crate) fn send_cq(&self) -> &Cq<T> {
        // SAFETY: the core sets `send_cq` before create_qp and holds a use count on the CQ
        // until the QP is destroyed, so it is live while the QP is.
        unsafe { Cq::<T>::from_raw((*self.raw()).send_cq) }
    }

    /// The CQ of the receive queue.
    pub(crate) fn recv_cq(&self) -> &Cq<T> {
        // SAFETY: as for `send_cq`.
        unsafe { Cq::<T>::from_raw((*self.raw()).recv_cq) }
    }

    /// An identity of the QP's protection domain, compared with the PDs of MRs and AHs.
    pub(crate) fn pd_id(&self) -> PdId {
        // SAFETY: a live QP; its PD is fixed at creation.
        PdId::from_raw(unsafe { (*self.raw()).pd })
    }

    /// A completion of this QP as a kernel CQ holds it (`struct ib_wc`).
    pub(crate) fn kernel_wc(&self, f: &WcFields) -> WorkCompletion {
        let mut wc = WorkCompletion {
            status: f.status,
            opcode: f.opcode,
            byte_len: f.byte_len,
            qp: self.raw(),
            src_qp: f.src_qp,
            wc_flags: f.flags() as c_int,
            port_num: 1,
            ..Default::default()
        };
        wc.__bindgen_anon_1.wr_id = f.wr_id;
        if let Some(v4) = f.network_v4 {
            wc.network_hdr_type = if v4 {
                bindings::rdma_network_type_RDMA_NETWORK_IPV4
            } else {
                bindings::rdma_network_type_RDMA_NETWORK_IPV6
            } as u8;
            wc.wc_flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as c_int;
        }
        if let Some(imm) = f.imm_data {
            wc.ex.imm_data = imm.to_be();
        } else if let Some(rkey) = f.invalidated_rkey {
            wc.ex.invalidate_rkey = rkey;
        }
        wc
    }

    /// Delivers an asynchronous event to the QP's consumer.
    pub(crate) fn dispatch_event(&self, event: QpEvent) {
        let kind = match event {
            QpEvent::CommEstablished => bindings::ib_event_type_IB_EVENT_COMM_EST,
            QpEvent::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::RequestError => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            QpEvent::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            QpEvent::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
        };
        let qp = self.raw();
        let mut ev = bindings::ib_event {
            device: self.device().as_raw(),
            event: kind,
            ..Default::default()
        };
        ev.element.qp = qp;
        // SAFETY: a live QP; the core installs `event_handler` at creation (it forwards to
        // the consumer's handler, or uverbs' event file).
        unsafe {
            if let Some(handler) = (*qp).event_handler {
                handler(&mut ev, (*qp).qp_context);
            }
        }
    }
}

impl<T: Driver> DeviceRegistry<T> {
    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    pub(super) unsafe extern "C" fn create_qp(
        ibqp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core passes a zeroed `Qp<T>` with device, pd, CQs and SRQ set, the
        // consumer's init attributes, and udata for user QPs.
        let (dev, init, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            if init.create_flags != 0 || !init.rwq_ind_tbl.is_null() || !init.xrcd.is_null() {
                return Err(eopnotsupp());
            }
            if init.send_cq.is_null() || init.recv_cq.is_null() {
                return Err(EINVAL);
            }
            let kind = match init.qp_type {
                bindings::ib_qp_type_IB_QPT_RC => QpKind::Rc,
                bindings::ib_qp_type_IB_QPT_UC => QpKind::Uc,
                bindings::ib_qp_type_IB_QPT_UD => QpKind::Ud,
                bindings::ib_qp_type_IB_QPT_GSI => QpKind::Gsi,
                _ => return Err(eopnotsupp()),
            };
            // SAFETY: a non-null `srq` is an SRQ of this device (uverbs and ib_create_qp
            // look it up among the caller's objects), created by our create_srq and
            // referenced (`usecnt`) until this QP is destroyed.
            let srq = unsafe { init.srq.as_ref() }.map(|s| {
                // SAFETY: as above; its state is initialised.
                unsafe { Srq::<T>::from_raw(core::ptr::from_ref(s).cast_mut()) }
            });
            let mut qinit = QpInit {
                kind,
                caps: caps_from_raw(&init.cap),
                srq,
                signal_all: init.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            };
            // The QP being created; its core fields are set (see above).
            let handle = QpRef(NonNull::new(ibqp).ok_or(EINVAL)?, PhantomData);
            let (data, qpn) = T::create_qp(dev, handle, &mut qinit, udata.as_mut())?;
            caps_to_raw(qinit.caps, &mut init.cap);
            // SAFETY: a fresh QP; destroy_qp drops the state.
            unsafe {
                (*ibqp).qp_num = qpn;
                Qp::<T>::init(ibqp, data);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a QP of driver `T`.
    pub(super) unsafe extern "C" fn modify_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: a live QP of ours; the core passes valid attributes.
        let (qp, attr) = unsafe { (Qp::<T>::from_raw(ibqp), &*attr) };
        from_result(|| {
            let m = QpModify::from_raw(attr, mask as u32)?;
            T::modify_qp(qp, &m)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a QP of driver `T`.
    pub(super) unsafe extern "C" fn query_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        // SAFETY: a live QP of ours; the core passes zeroed output structures.
        let (qp, attr, init) = unsafe { (Qp::<T>::from_raw(ibqp), &mut *attr, &mut *init) };
        from_result(|| {
            let q = T::query_qp(qp)?;
            attr.qp_state = q.state;
            attr.cur_qp_state = q.state;
            attr.path_mtu = q.path_mtu;
            attr.path_mig_state = bindings::ib_mig_state_IB_MIG_MIGRATED;
            attr.qkey = q.qkey;
            attr.rq_psn = q.rq_psn;
            attr.sq_psn = q.sq_psn;
            attr.dest_qp_num = q.dest_qpn;
            attr.qp_access_flags = q.access as c_int;
            caps_to_raw(q.caps, &mut attr.cap);
            if let Some(av) = q.av {
                av.to_raw(1, &mut attr.ah_attr);
            }
            attr.pkey_index = q.pkey_index;
            attr.en_sqd_async_notify = u8::from(q.sqd_notify);
            attr.sq_draining = u8::from(q.sq_draining);
            attr.max_rd_atomic = q.max_rd_atomic;
            attr.max_dest_rd_atomic = q.max_dest_rd_atomic;
            attr.min_rnr_timer = q.min_rnr_timer;
            attr.port_num = 1;
            attr.timeout = q.timeout;
            attr.retry_cnt = q.retry_cnt;
            attr.rnr_retry = q.rnr_retry;
            caps_to_raw(q.caps, &mut init.cap);
            // SAFETY: a live QP; these are fixed at creation.
            unsafe {
                init.qp_type = (*ibqp).qp_type;
                init.send_cq = (*ibqp).send_cq;
                init.recv_cq = (*ibqp).recv_cq;
                init.srq = (*ibqp).srq;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a QP of driver `T`.
    pub(super) unsafe extern "C" fn destroy_qp(
        ibqp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: a live QP of ours, destroyed once.
        T::destroy_qp(unsafe { Qp::<T>::from_raw(ibqp) });
        // SAFETY: the driver has stopped all use of the QP's state.
        unsafe { Qp::<T>::drop_data(ibqp) };
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a QP of driver `T`.
    pub(super) unsafe extern "C" fn post_send(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: a live QP of ours.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        // SAFETY: as above; fixed at creation.
        let ud = unsafe {
            matches!(
                (*ibqp).qp_type,
                bindings::ib_qp_type_IB_QPT_UD | bindings::ib_qp_type_IB_QPT_GSI
            )
        };
        let mut cur = wr;
        let mut posted = false;
        let mut result = Ok(());
        while !cur.is_null() {
            // SAFETY: the consumer passes a valid list of work requests, each embedded in
            // the structure its opcode (and, for sends, the QP type) implies.
            let view = unsafe { Self::send_wr_view(cur, ud) };
            if let Err(e) = T::post_send(qp, &view) {
                // SAFETY: `bad_wr` is valid for writes.
                unsafe { *bad_wr = cur };
                result = Err(e);
                break;
            }
            posted = true;
            // SAFETY: as above.
            cur = unsafe { (*cur).next };
        }
        // A null list is a user QP's doorbell (rdma_rxe's ABI): the WQEs are in its ring.
        if wr.is_null() || posted {
            if let Err(e) = T::post_send_doorbell(qp) {
                if wr.is_null() {
                    return e.to_errno();
                }
            }
        }
        match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// `wr` must be a valid kernel send WR embedded in the structure its opcode implies
    /// (`ib_ud_wr` for sends on UD QPs when `ud`), live for the returned lifetime.
    unsafe fn send_wr_view<'a>(wr: *const bindings::ib_send_wr, ud: bool) -> SendWr<'a, T> {
        // SAFETY: per the function contract.
        let raw = unsafe { &*wr };
        let opcode = raw.opcode;
        let mut view = SendWr {
            raw,
            opcode,
            flags: raw.send_flags as u32,
            remote: (0, 0),
            atomic: (0, 0),
            ud: None,
            reg: None,
        };
        match opcode {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: RDMA WRs are `ib_rdma_wr`s.
                let r = unsafe { &*wr.cast::<bindings::ib_rdma_wr>() };
                view.remote = (r.remote_addr, r.rkey);
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: atomic WRs are `ib_atomic_wr`s.
                let a = unsafe { &*wr.cast::<bindings::ib_atomic_wr>() };
                view.remote = (a.remote_addr, a.rkey);
                view.atomic = (a.compare_add, a.swap);
            }
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                // SAFETY: Fast Register WRs are `ib_reg_wr`s.
                let r = unsafe { &*wr.cast::<bindings::ib_reg_wr>() };
                if !r.mr.is_null() {
                    // SAFETY: the consumer's MR, live for the post (it posts a WR naming it);
                    // its iova and length are plain fields `ib_map_mr_sg` set.
                    let (iova, length) = unsafe { ((*r.mr).iova, (*r.mr).length) };
                    view.reg = Some(RegWr {
                        key: r.key,
                        // Flags are a bit set; the sign bit is no access right.
                        access: r.access as u32,
                        iova,
                        length,
                    });
                }
            }
            bindings::ib_wr_opcode_IB_WR_SEND | bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM
                if ud =>
            {
                // SAFETY: sends on UD QPs are `ib_ud_wr`s, whose AH is live for the post.
                let u = unsafe { &*wr.cast::<bindings::ib_ud_wr>() };
                if !u.ah.is_null() {
                    view.ud = Some(UdTarget {
                        // SAFETY: an AH of this device (the core creates AHs per device).
                        ah: unsafe { Ah::<T>::from_raw(u.ah) },
                        remote_qpn: u.remote_qpn,
                        remote_qkey: u.remote_qkey,
                        pkey_index: u.pkey_index,
                    });
                }
            }
            _ => {}
        }
        view
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a QP of driver `T`.
    pub(super) unsafe extern "C" fn post_recv(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: a live QP of ours.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        let mut cur = wr;
        let mut result = Ok(());
        let mut posted = false;
        while !cur.is_null() {
            // SAFETY: the consumer passes a valid list of receive WRs.
            let raw = unsafe { &*cur };
            let view = RecvWr { raw };
            if let Err(e) = T::post_recv(qp, &view) {
                // SAFETY: `bad_wr` is valid for writes.
                unsafe { *bad_wr = cur };
                result = Err(e);
                break;
            }
            posted = true;
            // SAFETY: as above.
            cur = unsafe { (*cur).next };
        }
        if posted {
            T::post_recv_doorbell(qp);
        }
        match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on a device of driver `T`.
    pub(super) unsafe extern "C" fn create_ah(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core passes a zeroed `Ah<T>` with device and pd set, valid attributes
        // and udata for user AHs.
        let (dev, init, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*ibah).device),
                &*init,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            // SAFETY: the attributes outlive the call.
            let attr = unsafe { init.ah_attr.as_ref() }.ok_or(EINVAL)?;
            let av = AddressVector::from_raw(attr)?;
            // SAFETY: the core set the AH's PD before the call.
            let pd = PdId::from_raw(unsafe { (*ibah).pd });
            // The CM creates AHs under spinlocks: only with this flag may the driver sleep.
            let sleepable =
                init.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
            let data = T::create_ah(dev, pd, &av, sleepable, udata.as_mut())?;
            // SAFETY: a fresh AH; destroy_ah drops the state.
            unsafe { Ah::<T>::init(ibah, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core through `ib_device_ops`, on an AH of driver `T`.
    pub(super) unsafe extern "C" fn destroy_ah(ibah: *mut bindings::ib_ah, _flags: u32) -> c_int {
        // SAFETY: a live AH of ours, destroyed once, on a live device.
        let (dev, ah) = unsafe {
            (
                Device::<T>::from_raw((*ibah).device),
                Ah::<T>::from_raw(ibah),
            )
        };
        T::destroy_ah(dev, ah);
        // SAFETY: the driver no longer uses the state.
        unsafe { Ah::<T>::drop_data(ibah) };
        0
    }
}
