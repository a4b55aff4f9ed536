// SPDX-License-Identifier: GPL-2.0

//! Attributes the core passes to and takes from the driver's create, modify and query ops,
//! as safe views: device and port attributes, address vectors, QP, SRQ and CQ attributes.
//!
//! QP attributes are translated into the transport engine's own types here, so that one QP
//! type, one state and one set of Modify QP attributes serve from the core down to the
//! engine; what only the device can resolve (address vectors, P_Key indices) travels beside
//! them for the driver to resolve.

use super::super::bindings;
use super::super::error::eopnotsupp;
use super::object::{PdId, XrcdId};
use crate::transport::qp::context::{
    AccessFlags, MigState, ModifyQp, PKey, QpQuery, MAX_RD_ATOMIC,
};
use crate::transport::qp::state::{QpState, QpType};
use crate::transport::qp::transition::AttrMask;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// Device attributes reported by `query_device` (`struct ib_device_attr`).
pub(crate) type DeviceAttr = bindings::ib_device_attr;
/// Port attributes reported by `query_port` (`struct ib_port_attr`).
pub(crate) type PortAttr = bindings::ib_port_attr;
/// Port properties fixed at registration (`struct ib_port_immutable`).
pub(crate) type PortImmutable = bindings::ib_port_immutable;

/// Link layer of a port.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LinkLayer {
    /// RoCE runs over Ethernet.
    Ethernet,
}

/// Attributes of a new CQ.
pub(crate) struct CqInit {
    /// Entries requested.
    pub(crate) entries: u32,
}

/// A Reregister Memory Region request (IBA 11.2.8.2, `ib_uverbs_rereg_mr`), after the
/// core's checks (known flags, at least one; the new access flags; the iova's page offset).
pub(crate) struct MrRereg {
    /// Protection domain of the new registration: the MR's own unless IB_MR_REREG_PD.
    pub(crate) pd: PdId,
    /// IB_MR_REREG_TRANS: the new user address, length and iova.
    pub(crate) trans: Option<(u64, u64, u64)>,
    /// IB_MR_REREG_ACCESS: the new `IB_ACCESS_*` flags.
    pub(crate) access: Option<i32>,
}

/// A RoCEv2 address vector (IBA 11.2.4.2 path attributes), from `struct rdma_ah_attr`: the
/// GIDs are the IP addresses of the two ends (IPv4 ones in IPv4-mapped IPv6 form).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AddressVector {
    /// Local port.
    pub(crate) port: u8,
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
    pub(super) fn from_raw(ah: &bindings::rdma_ah_attr) -> Result<Self> {
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
            port: u8::try_from(ah.port_num).map_err(|_| EINVAL)?,
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
    fn to_raw(self, ah: &mut bindings::rdma_ah_attr) {
        ah.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        ah.port_num = u32::from(self.port);
        ah.sl = self.sl;
        ah.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        ah.grh.dgid.raw = self.dgid;
        ah.grh.sgid_index = self.sgid_index;
        ah.grh.traffic_class = self.traffic_class;
        ah.grh.hop_limit = self.hop_limit;
        ah.grh.flow_label = self.flow_label;
    }
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

impl QpCaps {
    pub(super) fn from_raw(cap: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: cap.max_send_wr,
            max_recv_wr: cap.max_recv_wr,
            max_send_sge: cap.max_send_sge,
            max_recv_sge: cap.max_recv_sge,
            max_inline_data: cap.max_inline_data,
        }
    }

    pub(super) fn to_raw(self, cap: &mut bindings::ib_qp_cap) {
        cap.max_send_wr = self.max_send_wr;
        cap.max_recv_wr = self.max_recv_wr;
        cap.max_send_sge = self.max_send_sge;
        cap.max_recv_sge = self.max_recv_sge;
        cap.max_inline_data = self.max_inline_data;
    }
}

/// The QP type of `enum ib_qp_type`, if the engine has it.
pub(super) fn qp_type_from_raw(t: bindings::ib_qp_type) -> Result<QpType> {
    Ok(match t {
        bindings::ib_qp_type_IB_QPT_RC => QpType::Rc,
        bindings::ib_qp_type_IB_QPT_UC => QpType::Uc,
        bindings::ib_qp_type_IB_QPT_UD => QpType::Ud,
        bindings::ib_qp_type_IB_QPT_GSI => QpType::Gsi,
        bindings::ib_qp_type_IB_QPT_XRC_INI => QpType::XrcIni,
        bindings::ib_qp_type_IB_QPT_XRC_TGT => QpType::XrcTgt,
        _ => return Err(eopnotsupp()),
    })
}

/// What an XRC SRQ is created in besides its PD (IBA 11.2.3.1): its XRC domain and the CQ
/// its receive completions go to (an XRC target QP has no CQ of its own), with the driver's
/// state `C` of that CQ, which outlives the SRQ (the core holds a use count on it).
pub(crate) struct XrcSrqInit<'a, C> {
    /// The XRC domain.
    pub(crate) xrcd: XrcdId,
    /// The completion queue.
    pub(crate) cq: &'a C,
}

/// What a new QP is asked for (`struct ib_qp_init_attr`), with the driver's state of the
/// objects it names: `C` of its CQs, `S` of its SRQ.
pub(crate) struct QpInit<'a, C, S> {
    /// QP type.
    pub(crate) qp_type: QpType,
    /// Its protection domain; none for an XRC target QP, which checks keys against the PD
    /// of the SRQ each message goes to (IBA Annex A14).
    pub(crate) pd: Option<PdId>,
    /// The XRC domain of an XRC target QP.
    pub(crate) xrcd: Option<XrcdId>,
    /// Requested sizes; the driver sets the ones it grants.
    pub(crate) caps: QpCaps,
    /// The CQ of the send queue; it outlives the QP (the core holds a use count on it
    /// until the QP is destroyed).
    pub(crate) send_cq: Option<&'a C>,
    /// The CQ of the receive queue; likewise.
    pub(crate) recv_cq: Option<&'a C>,
    /// The SRQ receives come from, if any; likewise.
    pub(crate) srq: Option<&'a S>,
    /// Whether every send WR completes (IB_SIGNAL_ALL_WR) rather than only signaled ones.
    pub(crate) signal_all: bool,
    /// The port of a GSI QP (each port has its own QP1, IBA 3.5.1); 0 for other types.
    pub(crate) port: u8,
}

/// `enum ib_qp_state` of an engine state.
fn state_to_raw(s: QpState) -> bindings::ib_qp_state {
    match s {
        QpState::Reset => bindings::ib_qp_state_IB_QPS_RESET,
        QpState::Init => bindings::ib_qp_state_IB_QPS_INIT,
        QpState::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
        QpState::Rts => bindings::ib_qp_state_IB_QPS_RTS,
        QpState::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
        QpState::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
        QpState::Err => bindings::ib_qp_state_IB_QPS_ERR,
    }
}

fn state_from_raw(v: bindings::ib_qp_state) -> Result<QpState> {
    Ok(match v {
        bindings::ib_qp_state_IB_QPS_RESET => QpState::Reset,
        bindings::ib_qp_state_IB_QPS_INIT => QpState::Init,
        bindings::ib_qp_state_IB_QPS_RTR => QpState::Rtr,
        bindings::ib_qp_state_IB_QPS_RTS => QpState::Rts,
        bindings::ib_qp_state_IB_QPS_SQD => QpState::Sqd,
        bindings::ib_qp_state_IB_QPS_SQE => QpState::Sqe,
        bindings::ib_qp_state_IB_QPS_ERR => QpState::Err,
        _ => return Err(EINVAL),
    })
}

/// `IB_ACCESS_*` rights a QP may enable.
const QP_ACCESS: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;

fn access_from_raw(v: c_int) -> Result<AccessFlags> {
    let v = v as u32;
    if v & !QP_ACCESS != 0 {
        return Err(EINVAL);
    }
    let mut a = AccessFlags::default();
    for (bit, flag) in [
        (
            bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
            AccessFlags::REMOTE_WRITE,
        ),
        (
            bindings::ib_access_flags_IB_ACCESS_REMOTE_READ,
            AccessFlags::REMOTE_READ,
        ),
        (
            bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
            AccessFlags::REMOTE_ATOMIC,
        ),
    ] {
        if v & bit != 0 {
            a = a.union(flag);
        }
    }
    Ok(a)
}

fn access_to_raw(a: AccessFlags) -> c_int {
    let mut v = 0;
    for (bit, flag) in [
        (
            bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
            AccessFlags::REMOTE_WRITE,
        ),
        (
            bindings::ib_access_flags_IB_ACCESS_REMOTE_READ,
            AccessFlags::REMOTE_READ,
        ),
        (
            bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
            AccessFlags::REMOTE_ATOMIC,
        ),
    ] {
        if a.contains(flag) {
            v |= bit;
        }
    }
    v as c_int
}

/// The alternate path of a Modify QP (IB_QP_ALT_PATH), before the driver resolves it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AltPathAttr {
    /// Its address vector.
    pub(crate) av: AddressVector,
    /// Local port.
    pub(crate) port: u8,
    /// Index of its P_Key in the port's table.
    pub(crate) pkey_index: u16,
    /// Local ACK timeout code.
    pub(crate) timeout: u8,
}

/// A Modify QP request (`struct ib_qp_attr` with its mask): the engine's request with every
/// attribute the mask names, except those the driver resolves, which come beside it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpModify {
    /// The engine's attributes; `av`, `pkey` and `alt_path` are left for the driver.
    pub(crate) attrs: ModifyQp,
    /// IB_QP_AV: the primary path's address vector.
    pub(crate) av: Option<AddressVector>,
    /// IB_QP_PKEY_INDEX.
    pub(crate) pkey_index: Option<u16>,
    /// IB_QP_ALT_PATH.
    pub(crate) alt_path: Option<AltPathAttr>,
}

/// `enum ib_qp_attr_mask` bits and the engine attributes they name.
const MASK_BITS: [(u32, AttrMask); 22] = [
    (bindings::ib_qp_attr_mask_IB_QP_STATE, AttrMask::STATE),
    (
        bindings::ib_qp_attr_mask_IB_QP_CUR_STATE,
        AttrMask::CUR_STATE,
    ),
    (
        bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY,
        AttrMask::EN_SQD_ASYNC_NOTIFY,
    ),
    (
        bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS,
        AttrMask::ACCESS_FLAGS,
    ),
    (
        bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX,
        AttrMask::PKEY_INDEX,
    ),
    (bindings::ib_qp_attr_mask_IB_QP_PORT, AttrMask::PORT),
    (bindings::ib_qp_attr_mask_IB_QP_QKEY, AttrMask::QKEY),
    (bindings::ib_qp_attr_mask_IB_QP_AV, AttrMask::AV),
    (bindings::ib_qp_attr_mask_IB_QP_PATH_MTU, AttrMask::PATH_MTU),
    (bindings::ib_qp_attr_mask_IB_QP_TIMEOUT, AttrMask::TIMEOUT),
    (
        bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT,
        AttrMask::RETRY_CNT,
    ),
    (
        bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY,
        AttrMask::RNR_RETRY,
    ),
    (bindings::ib_qp_attr_mask_IB_QP_RQ_PSN, AttrMask::RQ_PSN),
    (
        bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC,
        AttrMask::MAX_QP_RD_ATOMIC,
    ),
    (bindings::ib_qp_attr_mask_IB_QP_ALT_PATH, AttrMask::ALT_PATH),
    (
        bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER,
        AttrMask::MIN_RNR_TIMER,
    ),
    (bindings::ib_qp_attr_mask_IB_QP_SQ_PSN, AttrMask::SQ_PSN),
    (
        bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC,
        AttrMask::MAX_DEST_RD_ATOMIC,
    ),
    (
        bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE,
        AttrMask::PATH_MIG_STATE,
    ),
    (bindings::ib_qp_attr_mask_IB_QP_CAP, AttrMask::CAP),
    (bindings::ib_qp_attr_mask_IB_QP_DEST_QPN, AttrMask::DEST_QPN),
    (
        bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT,
        AttrMask::RATE_LIMIT,
    ),
];

/// A small value of a Modify QP attribute: out of `u8` range is as invalid as out of the
/// attribute's own range, which the engine checks.
fn small(v: u32) -> u8 {
    v.min(u32::from(u8::MAX)) as u8
}

impl QpModify {
    pub(super) fn from_raw(attr: &bindings::ib_qp_attr, mask: u32) -> Result<Self> {
        let known = MASK_BITS.iter().fold(0, |m, (bit, _)| m | bit);
        if mask & !known != 0 {
            return Err(EINVAL);
        }
        let has = |bit: u32| mask & bit != 0;
        let mut m = ModifyQp::default();
        if has(bindings::ib_qp_attr_mask_IB_QP_STATE) {
            m.state = Some(state_from_raw(attr.qp_state)?);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE) {
            m.cur_state = Some(state_from_raw(attr.cur_qp_state)?);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY) {
            m.sqd_notify = Some(attr.en_sqd_async_notify != 0);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS) {
            m.access = Some(access_from_raw(attr.qp_access_flags)?);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_PORT) {
            m.port = Some(u8::try_from(attr.port_num).map_err(|_| EINVAL)?);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_QKEY) {
            m.qkey = Some(attr.qkey);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_PATH_MTU) {
            m.path_mtu = Some(small(attr.path_mtu));
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_TIMEOUT) {
            m.timeout = Some(attr.timeout);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT) {
            m.retry_cnt = Some(attr.retry_cnt);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY) {
            m.rnr_retry = Some(attr.rnr_retry);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_RQ_PSN) {
            m.rq_psn = Some(attr.rq_psn);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC) {
            m.max_rd_atomic = Some(attr.max_rd_atomic);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER) {
            m.min_rnr_timer = Some(attr.min_rnr_timer);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_SQ_PSN) {
            m.sq_psn = Some(attr.sq_psn);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC) {
            m.max_dest_rd_atomic = Some(attr.max_dest_rd_atomic);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE) {
            m.path_mig_state = Some(attr.path_mig_state);
        }
        if has(bindings::ib_qp_attr_mask_IB_QP_DEST_QPN) {
            m.dest_qpn = Some(attr.dest_qp_num);
        }
        // Attributes the engine does not hold: the transition table refuses them.
        for (bit, a) in MASK_BITS {
            if has(bit) && (a == AttrMask::CAP || a == AttrMask::RATE_LIMIT) {
                m.other = m.other.union(a);
            }
        }
        let av = if has(bindings::ib_qp_attr_mask_IB_QP_AV) {
            Some(AddressVector::from_raw(&attr.ah_attr)?)
        } else {
            None
        };
        let alt_path = if has(bindings::ib_qp_attr_mask_IB_QP_ALT_PATH) {
            Some(AltPathAttr {
                av: AddressVector::from_raw(&attr.alt_ah_attr)?,
                port: u8::try_from(attr.alt_port_num).map_err(|_| EINVAL)?,
                pkey_index: attr.alt_pkey_index,
                timeout: attr.alt_timeout,
            })
        } else {
            None
        };
        Ok(Self {
            attrs: m,
            av,
            pkey_index: has(bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX).then_some(attr.pkey_index),
            alt_path,
        })
    }
}

/// What query_qp reports (IBA 11.2.4.3): the engine's answer, with the address vectors of
/// its paths and the granted queue sizes.
pub(crate) struct QpAttributes {
    /// The engine's answer.
    pub(crate) query: QpQuery,
    /// The primary path's address vector.
    pub(crate) av: Option<AddressVector>,
    /// The alternate path's address vector.
    pub(crate) alt_av: Option<AddressVector>,
    /// Granted sizes.
    pub(crate) caps: QpCaps,
}

impl QpAttributes {
    pub(super) fn to_raw(&self, attr: &mut bindings::ib_qp_attr) {
        let q = &self.query;
        if let Some(s) = q.state {
            attr.qp_state = state_to_raw(s);
            attr.cur_qp_state = state_to_raw(s);
        }
        attr.sq_draining = u8::from(q.sq_draining);
        attr.en_sqd_async_notify = u8::from(q.sqd_notify.unwrap_or(false));
        attr.qp_access_flags = q.access.map_or(0, access_to_raw);
        attr.pkey_index = q.pkey.map_or(0, |p: PKey| p.index);
        attr.port_num = q.port.map_or(0, u32::from);
        attr.qkey = q.qkey.unwrap_or(0);
        if let Some(av) = self.av {
            av.to_raw(&mut attr.ah_attr);
        }
        attr.path_mtu = q.path_mtu.map_or(0, u32::from);
        attr.timeout = q.timeout.unwrap_or(0);
        attr.retry_cnt = q.retry_cnt.unwrap_or(0);
        attr.rnr_retry = q.rnr_retry.unwrap_or(0);
        attr.rq_psn = q.rq_psn.unwrap_or(0);
        attr.max_rd_atomic = q.max_rd_atomic.unwrap_or(0);
        attr.min_rnr_timer = q.min_rnr_timer.unwrap_or(0);
        attr.sq_psn = q.sq_psn.unwrap_or(0);
        attr.max_dest_rd_atomic = q.max_dest_rd_atomic.unwrap_or(0);
        attr.path_mig_state = q.path_mig_state.unwrap_or(MigState::Migrated).to_ib();
        attr.dest_qp_num = q.dest_qpn.unwrap_or(0);
        if let (Some(alt), Some(av)) = (q.alt_path, self.alt_av) {
            av.to_raw(&mut attr.alt_ah_attr);
            attr.alt_port_num = u32::from(alt.port);
            attr.alt_pkey_index = alt.pkey.index;
            attr.alt_timeout = alt.timeout;
        }
        self.caps.to_raw(&mut attr.cap);
    }
}

// `max_rd_atomic` and `max_dest_rd_atomic` are `u8` in `struct ib_qp_attr`: the engine's
// bound must fit.
const _: () = assert!(MAX_RD_ATOMIC <= u8::MAX as usize);

/// Sizes and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SrqAttr {
    /// Receive WRs the SRQ holds.
    pub(crate) max_wr: u32,
    /// Scatter entries per receive WR.
    pub(crate) max_sge: u32,
    /// The armed limit; 0 when disarmed.
    pub(crate) limit: u32,
}

/// A Modify SRQ request (IBA 11.2.3.3), each attribute present only if its mask bit is set.
pub(crate) struct SrqModify {
    /// IB_SRQ_MAX_WR: resize to at least this many WRs.
    pub(crate) max_wr: Option<u32>,
    /// IB_SRQ_LIMIT: arm the limit event at this level (0 disarms).
    pub(crate) limit: Option<u32>,
    /// Where a user SRQ's new ring is announced after a resize: `mmap_info_addr` of
    /// rdma_rxe's `rxe_modify_srq_cmd`.
    pub(crate) mmap_info_addr: Option<u64>,
}
