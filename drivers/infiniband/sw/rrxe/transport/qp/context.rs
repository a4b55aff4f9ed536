// SPDX-License-Identifier: GPL-2.0

//! The QP context: everything a QP is programmed with (the QP context
//! seed: type, port, paths, PSNs, retry counts, timers, rights; IBA
//! 11.2.4.2), the Modify QP request that changes it and the answer of Query
//! QP (IBA 11.2.4.3).
//!
//! The engine owns the context whole. The driver owns what only it can
//! resolve: a path's address vector is named here by a [`PathHandle`] the
//! driver maps to GIDs and a port, and a P_Key index comes with the P_Key it
//! indexes ([`PKey`]), since the P_Key table is the port's.

use super::super::packet::Mtu;
use super::super::psn::Psn;
use super::super::timer::{AckTimeout, RnrTimer};
use super::state::{QpState, QpType, Service};
use super::transition::{self, AttrMask, TransitionError};

/// Local ACK timeout before Modify QP sets one: code 14, about 67 ms
/// (evaluated at compile time).
const DEFAULT_ACK_TIMEOUT: AckTimeout = match AckTimeout::new(14) {
    Some(t) => t,
    None => panic!("ACK timeout code out of range"),
};

/// Upper bound of max_dest_rd_atomic (and max_rd_atomic): the number of
/// RDMA Read / atomic responder resources a QP can hold. rdma_rxe offers
/// 128, and peers negotiate from what the other side advertises (perftest
/// asks for the remote's full depth), so rrxe matches it.
pub const MAX_RD_ATOMIC: usize = 128;

/// Path migration state (IBA 17.2.8), numbered as the verbs layer's
/// `enum ib_mig_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigState {
    /// The alternate path is not (or no longer) usable: after a migration,
    /// or before one is armed.
    Migrated,
    /// Software asks to arm: the QP arms once the alternate path is loaded
    /// and the peer shows it is armed too.
    Rearm,
    /// Both paths are usable; a migration may happen.
    Armed,
}

impl MigState {
    /// Decodes `enum ib_mig_state`.
    #[must_use]
    pub const fn from_ib(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Migrated,
            1 => Self::Rearm,
            2 => Self::Armed,
            _ => return None,
        })
    }

    /// The `enum ib_mig_state` value.
    #[must_use]
    pub const fn to_ib(self) -> u32 {
        match self {
            Self::Migrated => 0,
            Self::Rearm => 1,
            Self::Armed => 2,
        }
    }
}

/// Remote access rights enabled on the QP (IBA 11.2.4.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessFlags(u8);

impl AccessFlags {
    /// Incoming RDMA Writes allowed.
    pub const REMOTE_WRITE: Self = Self(1);
    /// Incoming RDMA Reads allowed.
    pub const REMOTE_READ: Self = Self(2);
    /// Incoming atomics allowed.
    pub const REMOTE_ATOMIC: Self = Self(4);
    /// All three.
    pub const ALL: Self = Self(7);

    /// The rights of both.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether every right in `other` is enabled.
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

/// A P_Key table entry as a path uses it: its index (what Modify and Query
/// QP name) and the P_Key there (what goes in the BTH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PKey {
    /// Index in the port's P_Key table.
    pub index: u16,
    /// The partition key.
    pub value: u16,
}

impl PKey {
    /// The default partition, full membership (IBA 10.9.1.1): the only one
    /// RoCE has.
    pub const DEFAULT: Self = Self {
        index: 0,
        value: 0xFFFF,
    };

    /// Whether a packet carrying `pkey` belongs to this partition (IBA
    /// 10.9.3, C10-119): the 15-bit keys are equal and not the invalid key
    /// 0, and at least one of the two is a full member (bit 15).
    #[must_use]
    pub const fn admits(self, pkey: u16) -> bool {
        let base = self.value & 0x7FFF;
        base != 0 && base == pkey & 0x7FFF && (self.value | pkey) & 0x8000 != 0
    }
}

/// The driver's name for the address vector of a path: GIDs, traffic class,
/// hop limit, flow label and port, which the driver resolves when it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathHandle(pub u8);

/// One path of a connected QP (IBA 11.2.4.2 primary and alternate path
/// attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path {
    /// The address vector; `None` until loaded.
    pub av: Option<PathHandle>,
    /// The local port.
    pub port: u8,
    /// The P_Key the path's packets carry.
    pub pkey: PKey,
    /// Local ACK timeout while this path is in use.
    pub ack_timeout: AckTimeout,
}

/// The QP context (IBA 11.2.4.2 attributes, as the engine holds them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpContext {
    /// QP type (fixed at creation).
    pub qp_type: QpType,
    /// This QP's number (fixed at creation).
    pub qpn: u32,
    /// State.
    pub state: QpState,
    /// The path in use. A UD QP's port and P_Key live here too.
    pub primary: Path,
    /// The alternate path, once loaded.
    pub alternate: Option<Path>,
    /// Path migration state.
    pub mig_state: MigState,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Destination QP (connected QPs).
    pub dest_qpn: u32,
    /// Starting send PSN, as last set (the requester holds the current one).
    pub sq_psn: Psn,
    /// Starting expected receive PSN, as last set (the responder holds the
    /// current one).
    pub rq_psn: Psn,
    /// Transport retry count, 0..=7.
    pub retry_cnt: u8,
    /// RNR retry count, 0..=7, 7 meaning infinite.
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer this responder advertises.
    pub min_rnr_timer: RnrTimer,
    /// Reads and atomics this requester may have outstanding; 0 forbids
    /// them.
    pub max_rd_atomic: u8,
    /// Responder resources for incoming Reads and atomics; 0 refuses them.
    pub max_dest_rd_atomic: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Remote access rights.
    pub access: AccessFlags,
    /// Whether reaching SQD with an empty send queue raises an event.
    pub sqd_notify: bool,
    /// Whether the responder reports end-to-end credits (IBA 9.7.7.2: an
    /// HCA's RC receive queue must). Set at creation, not by Modify QP.
    pub advertise_credits: bool,
    /// The XRC domain of an XRC target (the driver's number): the XRC SRQs
    /// it may deliver to. Set at creation, not by Modify QP.
    pub xrcd: u32,
}

impl QpContext {
    /// The context of a new QP in RESET.
    #[must_use]
    pub const fn new(qp_type: QpType, qpn: u32) -> Self {
        Self {
            qp_type,
            qpn,
            state: QpState::Reset,
            primary: Path {
                av: None,
                port: 1,
                pkey: PKey::DEFAULT,
                ack_timeout: DEFAULT_ACK_TIMEOUT,
            },
            alternate: None,
            mig_state: MigState::Migrated,
            path_mtu: Mtu::Mtu1024,
            dest_qpn: 0,
            sq_psn: Psn::ZERO,
            rq_psn: Psn::ZERO,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: RnrTimer::from_bits(12),
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            qkey: 0,
            access: AccessFlags(0),
            sqd_notify: false,
            advertise_credits: true,
            xrcd: 0,
        }
    }

    /// The transport service of the QP.
    pub(super) const fn service(&self) -> Service {
        self.qp_type.service()
    }

    /// The local ACK timeout of the path in use.
    pub(super) const fn ack_timeout(&self) -> AckTimeout {
        self.primary.ack_timeout
    }

    /// The P_Key the QP's packets carry.
    pub(super) const fn pkey(&self) -> u16 {
        self.primary.pkey.value
    }
}

/// The alternate path attributes of a Modify QP (IBA 11.2.4.2, loaded
/// together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AltPath {
    /// Address vector.
    pub av: PathHandle,
    /// Local port.
    pub port: u8,
    /// P_Key.
    pub pkey: PKey,
    /// Local ACK timeout code, 0..=31.
    pub timeout: u8,
}

/// A Modify QP request (IBA 11.2.4.2): every attribute is optional, given
/// as the raw value the verbs layer passes (resolved by the driver where the
/// device owns the meaning: address vectors, P_Keys), and validated here.
/// Which attributes are present is what the transition table checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModifyQp {
    /// Next state.
    pub state: Option<QpState>,
    /// The state the consumer believes the QP is in.
    pub cur_state: Option<QpState>,
    /// Event on reaching SQD with an empty send queue.
    pub sqd_notify: Option<bool>,
    /// Remote access rights.
    pub access: Option<AccessFlags>,
    /// P_Key of the primary path (of the QP, for UD).
    pub pkey: Option<PKey>,
    /// Port of the primary path (of the QP, for UD).
    pub port: Option<u8>,
    /// Q_Key.
    pub qkey: Option<u32>,
    /// Address vector of the primary path.
    pub av: Option<PathHandle>,
    /// Path MTU as `enum ib_mtu` (1 = 256 ... 5 = 4096).
    pub path_mtu: Option<u8>,
    /// Local ACK timeout code of the primary path, 0..=31.
    pub timeout: Option<u8>,
    /// Retry count, 0..=7.
    pub retry_cnt: Option<u8>,
    /// RNR retry count, 0..=7.
    pub rnr_retry: Option<u8>,
    /// Expected receive PSN (24 bits).
    pub rq_psn: Option<u32>,
    /// Initiator depth, 0..=[`MAX_RD_ATOMIC`].
    pub max_rd_atomic: Option<u8>,
    /// The alternate path.
    pub alt_path: Option<AltPath>,
    /// Minimum RNR NAK timer code, 0..=31.
    pub min_rnr_timer: Option<u8>,
    /// Send PSN (24 bits).
    pub sq_psn: Option<u32>,
    /// Responder resources, 0..=[`MAX_RD_ATOMIC`].
    pub max_dest_rd_atomic: Option<u8>,
    /// Path migration state, as `enum ib_mig_state`.
    pub path_mig_state: Option<u32>,
    /// Destination QP number (24 bits).
    pub dest_qpn: Option<u32>,
    /// Attributes the engine does not hold but the transition table judges:
    /// work queue sizes ([`AttrMask::CAP`]) and rate limits.
    pub other: AttrMask,
}

impl ModifyQp {
    /// The attributes present.
    #[must_use]
    pub fn mask(&self) -> AttrMask {
        let mut mask = self.other;
        let mut add = |present: bool, bit: AttrMask| {
            if present {
                mask = mask.union(bit);
            }
        };
        add(self.state.is_some(), AttrMask::STATE);
        add(self.cur_state.is_some(), AttrMask::CUR_STATE);
        add(self.sqd_notify.is_some(), AttrMask::EN_SQD_ASYNC_NOTIFY);
        add(self.access.is_some(), AttrMask::ACCESS_FLAGS);
        add(self.pkey.is_some(), AttrMask::PKEY_INDEX);
        add(self.port.is_some(), AttrMask::PORT);
        add(self.qkey.is_some(), AttrMask::QKEY);
        add(self.av.is_some(), AttrMask::AV);
        add(self.path_mtu.is_some(), AttrMask::PATH_MTU);
        add(self.timeout.is_some(), AttrMask::TIMEOUT);
        add(self.retry_cnt.is_some(), AttrMask::RETRY_CNT);
        add(self.rnr_retry.is_some(), AttrMask::RNR_RETRY);
        add(self.rq_psn.is_some(), AttrMask::RQ_PSN);
        add(self.max_rd_atomic.is_some(), AttrMask::MAX_QP_RD_ATOMIC);
        add(self.alt_path.is_some(), AttrMask::ALT_PATH);
        add(self.min_rnr_timer.is_some(), AttrMask::MIN_RNR_TIMER);
        add(self.sq_psn.is_some(), AttrMask::SQ_PSN);
        add(
            self.max_dest_rd_atomic.is_some(),
            AttrMask::MAX_DEST_RD_ATOMIC,
        );
        add(self.path_mig_state.is_some(), AttrMask::PATH_MIG_STATE);
        add(self.dest_qpn.is_some(), AttrMask::DEST_QPN);
        mask
    }
}

/// Why a Modify QP was refused; the QP is left unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModifyError {
    /// The consumer's idea of the current state is wrong (IBA 11.2.4.2).
    WrongCurrentState {
        /// The state the QP is in.
        actual: QpState,
    },
    /// The transition, or the attributes given for it, break IBA 10.3.1 /
    /// 11.2.4.2.
    Transition(TransitionError),
    /// An attribute is out of range, or inconsistent with the QP.
    InvalidValue(&'static str),
}

impl QpContext {
    /// The context `m` makes of this one, or why it cannot: every value is
    /// checked, the transition and its attributes against the table. Pure:
    /// [`super::Qp::modify`] applies the result.
    pub(super) fn modified(&self, m: &ModifyQp) -> Result<Self, ModifyError> {
        use ModifyError::InvalidValue as Bad;
        let from = self.state;
        if let Some(cur) = m.cur_state {
            if cur != from {
                return Err(ModifyError::WrongCurrentState { actual: from });
            }
        }
        let to = m.state.unwrap_or(from);
        transition::check(self.qp_type, from, to, m.mask()).map_err(ModifyError::Transition)?;
        let max = MAX_RD_ATOMIC as u8;
        let mut c = *self;
        c.state = to;
        if let Some(v) = m.sqd_notify {
            c.sqd_notify = v;
        }
        if let Some(v) = m.access {
            c.access = v;
        }
        if let Some(v) = m.pkey {
            c.primary.pkey = v;
        }
        if let Some(v) = m.port {
            c.primary.port = v;
        }
        if let Some(v) = m.qkey {
            c.qkey = v;
        }
        if let Some(v) = m.av {
            c.primary.av = Some(v);
        }
        if let Some(v) = m.path_mtu {
            c.path_mtu = Mtu::from_ib(v).ok_or(Bad("path_mtu"))?;
        }
        if let Some(v) = m.timeout {
            c.primary.ack_timeout = AckTimeout::new(v).ok_or(Bad("timeout"))?;
        }
        if let Some(v) = m.retry_cnt {
            c.retry_cnt = (v <= 7).then_some(v).ok_or(Bad("retry_cnt"))?;
        }
        if let Some(v) = m.rnr_retry {
            c.rnr_retry = (v <= 7).then_some(v).ok_or(Bad("rnr_retry"))?;
        }
        if let Some(v) = m.rq_psn {
            c.rq_psn = Psn::try_new(v).ok_or(Bad("rq_psn"))?;
        }
        if let Some(v) = m.max_rd_atomic {
            c.max_rd_atomic = (v <= max).then_some(v).ok_or(Bad("max_rd_atomic"))?;
        }
        if let Some(p) = m.alt_path {
            c.alternate = Some(Path {
                av: Some(p.av),
                port: p.port,
                pkey: p.pkey,
                ack_timeout: AckTimeout::new(p.timeout).ok_or(Bad("alt_timeout"))?,
            });
        }
        if let Some(v) = m.min_rnr_timer {
            c.min_rnr_timer = RnrTimer::new(v).ok_or(Bad("min_rnr_timer"))?;
        }
        if let Some(v) = m.sq_psn {
            c.sq_psn = Psn::try_new(v).ok_or(Bad("sq_psn"))?;
        }
        if let Some(v) = m.max_dest_rd_atomic {
            c.max_dest_rd_atomic = (v <= max).then_some(v).ok_or(Bad("max_dest_rd_atomic"))?;
        }
        if let Some(v) = m.dest_qpn {
            c.dest_qpn = Psn::try_new(v).ok_or(Bad("dest_qpn"))?.get();
        }
        if let Some(v) = m.path_mig_state {
            let mig = MigState::from_ib(v).ok_or(Bad("path_mig_state"))?;
            // IBA 17.2.8: software re-arms a migrated QP (MIGRATED to REARM,
            // with an alternate path to arm) or migrates an armed one (ARMED
            // to MIGRATED, here: the caller raises the event); asking for
            // the state the QP is in changes nothing. ARMED is the CA's to
            // declare, and a QP re-arming cannot be migrated.
            match (c.mig_state, mig) {
                (_, MigState::Armed) | (MigState::Armed, MigState::Rearm) => {
                    return Err(Bad("path_mig_state"))
                }
                (MigState::Rearm, MigState::Migrated) => return Err(Bad("path_mig_state")),
                (_, MigState::Rearm) if c.alternate.is_none() => return Err(Bad("path_mig_state")),
                (MigState::Armed, MigState::Migrated) => {
                    c.migrate();
                }
                _ => c.mig_state = mig,
            }
        }
        Ok(c)
    }
}

/// What Query QP reports (IBA 11.2.4.3): the attributes of the QP's type
/// ([`transition::applicable`]), the others `None`. PSNs are the current
/// ones: the next PSN the requester will use, the responder's ePSN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpQuery {
    /// State.
    pub state: Option<QpState>,
    /// Whether the send queue is still draining (SQD).
    pub sq_draining: bool,
    /// Event on reaching SQD.
    pub sqd_notify: Option<bool>,
    /// Remote access rights.
    pub access: Option<AccessFlags>,
    /// P_Key of the primary path.
    pub pkey: Option<PKey>,
    /// Port of the primary path.
    pub port: Option<u8>,
    /// Q_Key.
    pub qkey: Option<u32>,
    /// Primary path address vector, once loaded.
    pub av: Option<PathHandle>,
    /// Path MTU as `enum ib_mtu`.
    pub path_mtu: Option<u8>,
    /// Local ACK timeout code of the primary path.
    pub timeout: Option<u8>,
    /// Retry count.
    pub retry_cnt: Option<u8>,
    /// RNR retry count.
    pub rnr_retry: Option<u8>,
    /// Expected receive PSN.
    pub rq_psn: Option<u32>,
    /// Initiator depth.
    pub max_rd_atomic: Option<u8>,
    /// Alternate path, once loaded.
    pub alt_path: Option<AltPath>,
    /// Minimum RNR NAK timer code.
    pub min_rnr_timer: Option<u8>,
    /// Next send PSN.
    pub sq_psn: Option<u32>,
    /// Responder resources.
    pub max_dest_rd_atomic: Option<u8>,
    /// Path migration state.
    pub path_mig_state: Option<MigState>,
    /// Destination QP.
    pub dest_qpn: Option<u32>,
}

impl QpContext {
    /// The Query QP answer, given the current send and receive PSNs.
    pub(super) fn query(&self, sq_psn: Psn, rq_psn: Psn) -> QpQuery {
        let has = transition::applicable(self.qp_type);
        let when = |bit: AttrMask| has.contains(bit);
        QpQuery {
            state: Some(self.state),
            sq_draining: false,
            sqd_notify: when(AttrMask::EN_SQD_ASYNC_NOTIFY).then_some(self.sqd_notify),
            access: when(AttrMask::ACCESS_FLAGS).then_some(self.access),
            pkey: when(AttrMask::PKEY_INDEX).then_some(self.primary.pkey),
            port: Some(self.primary.port),
            qkey: when(AttrMask::QKEY).then_some(self.qkey),
            av: if when(AttrMask::AV) {
                self.primary.av
            } else {
                None
            },
            path_mtu: when(AttrMask::PATH_MTU).then_some(self.path_mtu as u8),
            timeout: when(AttrMask::TIMEOUT).then_some(self.primary.ack_timeout.code()),
            retry_cnt: when(AttrMask::RETRY_CNT).then_some(self.retry_cnt),
            rnr_retry: when(AttrMask::RNR_RETRY).then_some(self.rnr_retry),
            rq_psn: when(AttrMask::RQ_PSN).then_some(rq_psn.get()),
            max_rd_atomic: when(AttrMask::MAX_QP_RD_ATOMIC).then_some(self.max_rd_atomic),
            alt_path: if when(AttrMask::ALT_PATH) {
                self.alternate.and_then(|p| {
                    Some(AltPath {
                        av: p.av?,
                        port: p.port,
                        pkey: p.pkey,
                        timeout: p.ack_timeout.code(),
                    })
                })
            } else {
                None
            },
            min_rnr_timer: when(AttrMask::MIN_RNR_TIMER).then_some(self.min_rnr_timer.code()),
            sq_psn: when(AttrMask::SQ_PSN).then_some(sq_psn.get()),
            max_dest_rd_atomic: when(AttrMask::MAX_DEST_RD_ATOMIC)
                .then_some(self.max_dest_rd_atomic),
            path_mig_state: when(AttrMask::PATH_MIG_STATE).then_some(self.mig_state),
            dest_qpn: when(AttrMask::DEST_QPN).then_some(self.dest_qpn),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_membership() {
        let full = PKey::DEFAULT;
        assert!(full.admits(0xFFFF));
        // A limited member of the same partition talks to a full member.
        assert!(full.admits(0x7FFF));
        let limited = PKey {
            index: 0,
            value: 0x7FFF,
        };
        assert!(limited.admits(0xFFFF));
        // Two limited members may not talk (C10-119).
        assert!(!limited.admits(0x7FFF));
        // Another partition, and the invalid key.
        assert!(!full.admits(0x8001));
        assert!(!PKey {
            index: 0,
            value: 0x8000
        }
        .admits(0x8000));
    }

    #[test]
    fn arming_needs_an_alternate_path_and_armed_is_the_ca_s_to_declare() {
        let mut c = QpContext::new(QpType::Rc, 5);
        c.state = QpState::Rts;
        let rearm = ModifyQp {
            state: Some(QpState::Rts),
            path_mig_state: Some(MigState::Rearm.to_ib()),
            ..ModifyQp::default()
        };
        assert_eq!(
            c.modified(&rearm),
            Err(ModifyError::InvalidValue("path_mig_state"))
        );
        let with_alt = ModifyQp {
            alt_path: Some(AltPath {
                av: PathHandle(1),
                port: 1,
                pkey: PKey::DEFAULT,
                timeout: 14,
            }),
            ..rearm
        };
        let armed = c.modified(&with_alt).expect("rearm with an alternate path");
        assert_eq!(armed.mig_state, MigState::Rearm);
        assert_eq!(armed.alternate.and_then(|p| p.av), Some(PathHandle(1)));
        let declare = ModifyQp {
            path_mig_state: Some(MigState::Armed.to_ib()),
            ..rearm
        };
        assert!(armed.modified(&declare).is_err());
        let migrate = ModifyQp {
            path_mig_state: Some(MigState::Migrated.to_ib()),
            ..rearm
        };
        assert!(
            armed.modified(&migrate).is_err(),
            "a QP re-arming is not armed yet: nothing to migrate to"
        );
        let mut armed = armed;
        armed.primary.av = Some(PathHandle(0));
        armed.mig_state = MigState::Armed;
        assert!(armed.modified(&rearm).is_err(), "already armed");
        let moved = armed.modified(&migrate).expect("commanded migration");
        assert_eq!(moved.mig_state, MigState::Migrated);
        assert_eq!(moved.primary.av, Some(PathHandle(1)));
        assert_eq!(moved.primary.ack_timeout.code(), 14);
        assert_eq!(moved.modified(&migrate), Ok(moved), "migrated already");
    }

    #[test]
    fn all_or_nothing() {
        let c = QpContext::new(QpType::Ud, 9);
        let m = ModifyQp {
            state: Some(QpState::Init),
            pkey: Some(PKey::DEFAULT),
            port: Some(1),
            qkey: Some(7),
            ..ModifyQp::default()
        };
        assert_eq!(c.modified(&m).map(|c| c.qkey), Ok(7));
        let wrong = ModifyQp {
            cur_state: Some(QpState::Rts),
            ..m
        };
        assert_eq!(
            c.modified(&wrong),
            Err(ModifyError::WrongCurrentState {
                actual: QpState::Reset
            })
        );
    }
}
