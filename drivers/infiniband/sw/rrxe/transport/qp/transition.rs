// SPDX-License-Identifier: GPL-2.0

//! The QP state transitions of IBA 10.3.1 and the attributes each one
//! requires or allows (IBA 11.2.4.2, Modify QP input modifiers), per QP type.
//!
//! This is the one table rrxe consults: Modify QP is validated against it,
//! and Query QP reports exactly the attributes some transition of the QP's
//! type can set ([`applicable`]). It agrees row for row with the verbs
//! layer's `qp_state_table` (drivers/infiniband/core/verbs.c,
//! `ib_modify_qp_is_ok()`), which uverbs leaves to providers to consult.

use super::state::{QpState, QpType};

/// A set of Modify QP attributes (IBA 11.2.4.2), named as the verbs layer
/// names its mask bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttrMask(u32);

impl AttrMask {
    /// No attribute.
    pub const NONE: Self = Self(0);
    /// Next state.
    pub const STATE: Self = Self(1 << 0);
    /// The state the consumer believes the QP is in.
    pub const CUR_STATE: Self = Self(1 << 1);
    /// Request an event when the send queue has drained (SQD).
    pub const EN_SQD_ASYNC_NOTIFY: Self = Self(1 << 2);
    /// Remote access rights.
    pub const ACCESS_FLAGS: Self = Self(1 << 3);
    /// P_Key index of the primary path (of the QP, for UD).
    pub const PKEY_INDEX: Self = Self(1 << 4);
    /// Port of the primary path (of the QP, for UD).
    pub const PORT: Self = Self(1 << 5);
    /// Q_Key.
    pub const QKEY: Self = Self(1 << 6);
    /// Address vector of the primary path.
    pub const AV: Self = Self(1 << 7);
    /// Path MTU.
    pub const PATH_MTU: Self = Self(1 << 8);
    /// Local ACK timeout of the primary path.
    pub const TIMEOUT: Self = Self(1 << 9);
    /// Transport retry count.
    pub const RETRY_CNT: Self = Self(1 << 10);
    /// RNR retry count.
    pub const RNR_RETRY: Self = Self(1 << 11);
    /// Expected receive PSN.
    pub const RQ_PSN: Self = Self(1 << 12);
    /// Reads and atomics outstanding as initiator.
    pub const MAX_QP_RD_ATOMIC: Self = Self(1 << 13);
    /// The alternate path: address vector, port, P_Key index, ACK timeout.
    pub const ALT_PATH: Self = Self(1 << 14);
    /// Minimum RNR NAK timer.
    pub const MIN_RNR_TIMER: Self = Self(1 << 15);
    /// Send PSN.
    pub const SQ_PSN: Self = Self(1 << 16);
    /// Responder resources.
    pub const MAX_DEST_RD_ATOMIC: Self = Self(1 << 17);
    /// Path migration state.
    pub const PATH_MIG_STATE: Self = Self(1 << 18);
    /// Work queue sizes (a resize, which no transition allows here).
    pub const CAP: Self = Self(1 << 19);
    /// Destination QP number.
    pub const DEST_QPN: Self = Self(1 << 20);
    /// Rate limit (raw packet QPs only).
    pub const RATE_LIMIT: Self = Self(1 << 21);

    /// Every attribute of the table, with its name, for error messages.
    pub const NAMED: [(Self, &'static str); 22] = [
        (Self::STATE, "state"),
        (Self::CUR_STATE, "cur_state"),
        (Self::EN_SQD_ASYNC_NOTIFY, "en_sqd_async_notify"),
        (Self::ACCESS_FLAGS, "access_flags"),
        (Self::PKEY_INDEX, "pkey_index"),
        (Self::PORT, "port"),
        (Self::QKEY, "qkey"),
        (Self::AV, "av"),
        (Self::PATH_MTU, "path_mtu"),
        (Self::TIMEOUT, "timeout"),
        (Self::RETRY_CNT, "retry_cnt"),
        (Self::RNR_RETRY, "rnr_retry"),
        (Self::RQ_PSN, "rq_psn"),
        (Self::MAX_QP_RD_ATOMIC, "max_rd_atomic"),
        (Self::ALT_PATH, "alt_path"),
        (Self::MIN_RNR_TIMER, "min_rnr_timer"),
        (Self::SQ_PSN, "sq_psn"),
        (Self::MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic"),
        (Self::PATH_MIG_STATE, "path_mig_state"),
        (Self::CAP, "cap"),
        (Self::DEST_QPN, "dest_qpn"),
        (Self::RATE_LIMIT, "rate_limit"),
    ];

    /// Both sets.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// What `self` has that `other` does not.
    #[must_use]
    pub const fn minus(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// Whether every attribute of `other` is in `self`.
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The name of the first attribute of the set, for error messages.
    #[must_use]
    pub fn first_name(self) -> &'static str {
        Self::NAMED
            .iter()
            .find(|(a, _)| self.contains(*a))
            .map_or("", |(_, n)| n)
    }
}

/// The columns of the table: the QP types the verbs layer distinguishes
/// (SMI and raw packet QPs are not modelled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Rc,
    Uc,
    Ud,
    Gsi,
    /// XRC initiator (send side): RC rules without a receive queue.
    XrcIni,
    /// XRC target (receive side).
    XrcTgt,
}

const COLUMNS: usize = 6;

impl Column {
    const fn of(t: QpType) -> Self {
        match t {
            QpType::Rc => Self::Rc,
            QpType::Uc => Self::Uc,
            QpType::Ud => Self::Ud,
            QpType::Gsi => Self::Gsi,
            QpType::XrcIni => Self::XrcIni,
            QpType::XrcTgt => Self::XrcTgt,
        }
    }
}

/// Required and optional attributes of one transition, by column.
#[derive(Clone, Copy)]
struct Rule {
    req: [AttrMask; COLUMNS],
    opt: [AttrMask; COLUMNS],
}

const NO: [AttrMask; COLUMNS] = [AttrMask::NONE; COLUMNS];

/// Builds a per-column mask array from `(column, mask)` pairs.
const fn cols(pairs: &[(Column, AttrMask)]) -> [AttrMask; COLUMNS] {
    let mut out = NO;
    let mut i = 0;
    while i < pairs.len() {
        out[pairs[i].0 as usize] = pairs[i].1;
        i += 1;
    }
    out
}

const fn m(bits: &[AttrMask]) -> AttrMask {
    let mut out = AttrMask::NONE;
    let mut i = 0;
    while i < bits.len() {
        out = out.union(bits[i]);
        i += 1;
    }
    out
}

use AttrMask as A;
use Column as C;

/// RESET to INIT (IBA 11.2.4.2: the port, P_Key and the remote rights of a
/// connected QP, the Q_Key of a datagram QP).
const RESET_INIT: Rule = Rule {
    req: cols(&[
        (C::Rc, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
        (C::Uc, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
        (C::Ud, m(&[A::PKEY_INDEX, A::PORT, A::QKEY])),
        (C::Gsi, m(&[A::PKEY_INDEX, A::QKEY])),
        (C::XrcIni, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
        (C::XrcTgt, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
    ]),
    opt: NO,
};

/// INIT to INIT: the RESET to INIT attributes may change.
const INIT_INIT: Rule = Rule {
    req: NO,
    opt: cols(&[
        (C::Rc, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
        (C::Uc, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
        (C::Ud, m(&[A::PKEY_INDEX, A::PORT, A::QKEY])),
        (C::Gsi, m(&[A::PKEY_INDEX, A::QKEY])),
        (C::XrcIni, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
        (C::XrcTgt, m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS])),
    ]),
};

/// INIT to RTR: a connected QP gets its primary path, peer and receive PSN;
/// RC also its responder resources and minimum RNR timer.
const INIT_RTR: Rule = Rule {
    req: cols(&[
        (
            C::Rc,
            m(&[
                A::AV,
                A::PATH_MTU,
                A::DEST_QPN,
                A::RQ_PSN,
                A::MAX_DEST_RD_ATOMIC,
                A::MIN_RNR_TIMER,
            ]),
        ),
        (C::Uc, m(&[A::AV, A::PATH_MTU, A::DEST_QPN, A::RQ_PSN])),
        (C::XrcIni, m(&[A::AV, A::PATH_MTU, A::DEST_QPN, A::RQ_PSN])),
        (
            C::XrcTgt,
            m(&[
                A::AV,
                A::PATH_MTU,
                A::DEST_QPN,
                A::RQ_PSN,
                A::MAX_DEST_RD_ATOMIC,
                A::MIN_RNR_TIMER,
            ]),
        ),
    ]),
    opt: cols(&[
        (C::Rc, m(&[A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX])),
        (C::Uc, m(&[A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX])),
        (C::Ud, m(&[A::PKEY_INDEX, A::QKEY])),
        (C::Gsi, m(&[A::PKEY_INDEX, A::QKEY])),
        (C::XrcIni, m(&[A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX])),
        (C::XrcTgt, m(&[A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX])),
    ]),
};

/// RTR to RTS: the send side starts (Table 12-4 of the QP context seed).
const RTR_RTS: Rule = Rule {
    req: cols(&[
        (
            C::Rc,
            m(&[
                A::TIMEOUT,
                A::RETRY_CNT,
                A::RNR_RETRY,
                A::SQ_PSN,
                A::MAX_QP_RD_ATOMIC,
            ]),
        ),
        (C::Uc, A::SQ_PSN),
        (C::Ud, A::SQ_PSN),
        (C::Gsi, A::SQ_PSN),
        (
            C::XrcIni,
            m(&[
                A::TIMEOUT,
                A::RETRY_CNT,
                A::RNR_RETRY,
                A::SQ_PSN,
                A::MAX_QP_RD_ATOMIC,
            ]),
        ),
        (C::XrcTgt, m(&[A::TIMEOUT, A::SQ_PSN])),
    ]),
    opt: cols(&[
        (
            C::Rc,
            m(&[
                A::CUR_STATE,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::MIN_RNR_TIMER,
                A::PATH_MIG_STATE,
            ]),
        ),
        (
            C::Uc,
            m(&[
                A::CUR_STATE,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::PATH_MIG_STATE,
            ]),
        ),
        (C::Ud, m(&[A::CUR_STATE, A::QKEY])),
        (C::Gsi, m(&[A::CUR_STATE, A::QKEY])),
        (
            C::XrcIni,
            m(&[
                A::CUR_STATE,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::PATH_MIG_STATE,
            ]),
        ),
        (
            C::XrcTgt,
            m(&[
                A::CUR_STATE,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::MIN_RNR_TIMER,
                A::PATH_MIG_STATE,
            ]),
        ),
    ]),
};

/// RTS to RTS, and SQD to RTS: what may change while sending, notably a new
/// alternate path and its migration state (IBA 17.2.8).
const TO_RTS: Rule = Rule {
    req: NO,
    opt: cols(&[
        (
            C::Rc,
            m(&[
                A::CUR_STATE,
                A::ACCESS_FLAGS,
                A::ALT_PATH,
                A::PATH_MIG_STATE,
                A::MIN_RNR_TIMER,
            ]),
        ),
        (
            C::Uc,
            m(&[
                A::CUR_STATE,
                A::ACCESS_FLAGS,
                A::ALT_PATH,
                A::PATH_MIG_STATE,
            ]),
        ),
        (C::Ud, m(&[A::CUR_STATE, A::QKEY])),
        (C::Gsi, m(&[A::CUR_STATE, A::QKEY])),
        (
            C::XrcIni,
            m(&[
                A::CUR_STATE,
                A::ACCESS_FLAGS,
                A::ALT_PATH,
                A::PATH_MIG_STATE,
            ]),
        ),
        (
            C::XrcTgt,
            m(&[
                A::CUR_STATE,
                A::ACCESS_FLAGS,
                A::ALT_PATH,
                A::PATH_MIG_STATE,
                A::MIN_RNR_TIMER,
            ]),
        ),
    ]),
};

/// RTS to SQD.
const RTS_SQD: Rule = Rule {
    req: NO,
    opt: cols(&[
        (C::Rc, A::EN_SQD_ASYNC_NOTIFY),
        (C::Uc, A::EN_SQD_ASYNC_NOTIFY),
        (C::Ud, A::EN_SQD_ASYNC_NOTIFY),
        (C::Gsi, A::EN_SQD_ASYNC_NOTIFY),
        (C::XrcIni, A::EN_SQD_ASYNC_NOTIFY),
        (C::XrcTgt, A::EN_SQD_ASYNC_NOTIFY),
    ]),
};

/// SQD to SQD: with the send queue drained, even the primary path and the
/// send-side attributes may change.
const SQD_SQD: Rule = Rule {
    req: NO,
    opt: cols(&[
        (
            C::Rc,
            m(&[
                A::PORT,
                A::AV,
                A::TIMEOUT,
                A::RETRY_CNT,
                A::RNR_RETRY,
                A::MAX_QP_RD_ATOMIC,
                A::MAX_DEST_RD_ATOMIC,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::PKEY_INDEX,
                A::MIN_RNR_TIMER,
                A::PATH_MIG_STATE,
            ]),
        ),
        (
            C::Uc,
            m(&[
                A::AV,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::PKEY_INDEX,
                A::PATH_MIG_STATE,
            ]),
        ),
        (C::Ud, m(&[A::PKEY_INDEX, A::QKEY])),
        (C::Gsi, m(&[A::PKEY_INDEX, A::QKEY])),
        (
            C::XrcIni,
            m(&[
                A::PORT,
                A::AV,
                A::TIMEOUT,
                A::RETRY_CNT,
                A::RNR_RETRY,
                A::MAX_QP_RD_ATOMIC,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::PKEY_INDEX,
                A::PATH_MIG_STATE,
            ]),
        ),
        (
            C::XrcTgt,
            m(&[
                A::PORT,
                A::AV,
                A::TIMEOUT,
                A::MAX_DEST_RD_ATOMIC,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::PKEY_INDEX,
                A::MIN_RNR_TIMER,
                A::PATH_MIG_STATE,
            ]),
        ),
    ]),
};

/// SQE to RTS: the consumer resumes a send queue that took a local error
/// (IBA 10.3.1.6; RC never is in SQE).
const SQE_RTS: Rule = Rule {
    req: NO,
    opt: cols(&[
        (C::Uc, m(&[A::CUR_STATE, A::ACCESS_FLAGS])),
        (C::Ud, m(&[A::CUR_STATE, A::QKEY])),
        (C::Gsi, m(&[A::CUR_STATE, A::QKEY])),
    ]),
};

/// Transitions without attributes: to RESET and ERR from any state but
/// RESET, and RESET to RESET.
const BARE: Rule = Rule { req: NO, opt: NO };

/// The rule of `from` to `to`, or `None` if IBA 10.3.1 has no such
/// transition.
const fn rule(from: QpState, to: QpState) -> Option<Rule> {
    use QpState as S;
    Some(match (from, to) {
        (S::Reset, S::Reset) => BARE,
        (S::Reset, S::Init) => RESET_INIT,
        (S::Reset, _) => return None,
        (_, S::Reset | S::Err) => BARE,
        (S::Init, S::Init) => INIT_INIT,
        (S::Init, S::Rtr) => INIT_RTR,
        (S::Rtr, S::Rts) => RTR_RTS,
        (S::Rts | S::Sqd, S::Rts) => TO_RTS,
        (S::Rts, S::Sqd) => RTS_SQD,
        (S::Sqd, S::Sqd) => SQD_SQD,
        (S::Sqe, S::Rts) => SQE_RTS,
        _ => return None,
    })
}

/// Why a set of attributes does not fit a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionError {
    /// IBA 10.3.1 has no transition from `from` to `to`.
    Invalid {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// The transition requires these attributes and they were not given.
    Missing(AttrMask),
    /// The transition does not allow these attributes for the QP type.
    NotAllowed(AttrMask),
}

/// Checks a Modify QP of a `qp_type` QP from `from` to `to` with exactly
/// the attributes `given`: every attribute the transition requires, none it
/// does not allow. The next state ([`AttrMask::STATE`]) is always allowed;
/// the current state ([`AttrMask::CUR_STATE`]) only where the table says.
pub fn check(
    qp_type: QpType,
    from: QpState,
    to: QpState,
    given: AttrMask,
) -> Result<(), TransitionError> {
    let r = rule(from, to).ok_or(TransitionError::Invalid { from, to })?;
    let c = Column::of(qp_type) as usize;
    let missing = r.req[c].minus(given);
    if !missing.is_empty() {
        return Err(TransitionError::Missing(missing));
    }
    let extra = given.minus(r.req[c].union(r.opt[c]).union(AttrMask::STATE));
    if !extra.is_empty() {
        return Err(TransitionError::NotAllowed(extra));
    }
    Ok(())
}

/// Every attribute some transition lets a `qp_type` QP set: what Query QP
/// reports for it (IBA 11.2.4.3 returns the attributes of the QP's type).
#[must_use]
pub const fn applicable(qp_type: QpType) -> AttrMask {
    const RULES: [Rule; 8] = [
        RESET_INIT, INIT_INIT, INIT_RTR, RTR_RTS, TO_RTS, RTS_SQD, SQD_SQD, SQE_RTS,
    ];
    let c = Column::of(qp_type) as usize;
    let mut out = AttrMask::NONE;
    let mut i = 0;
    while i < RULES.len() {
        out = out.union(RULES[i].req[c]).union(RULES[i].opt[c]);
        i += 1;
    }
    out.minus(AttrMask::CUR_STATE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use QpState as S;

    const STATES: [QpState; 7] = [S::Reset, S::Init, S::Rtr, S::Rts, S::Sqd, S::Sqe, S::Err];

    /// `enum ib_qp_attr_mask` bit of each attribute, for comparing with the
    /// verbs layer's table below.
    fn ib_bits(mask: AttrMask) -> u32 {
        // IB_QP_STATE .. IB_QP_DEST_QPN are bits 0..=20 in that order;
        // IB_QP_RATE_LIMIT is bit 25.
        let mut bits = mask.0 & ((1 << 21) - 1);
        if mask.contains(AttrMask::RATE_LIMIT) {
            bits |= 1 << 25;
        }
        bits
    }

    // `enum ib_qp_attr_mask` (include/rdma/ib_verbs.h).
    const IB_QP_STATE: u32 = 1;
    const IB_QP_CUR_STATE: u32 = 1 << 1;
    const IB_QP_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    const IB_QP_ACCESS_FLAGS: u32 = 1 << 3;
    const IB_QP_PKEY_INDEX: u32 = 1 << 4;
    const IB_QP_PORT: u32 = 1 << 5;
    const IB_QP_QKEY: u32 = 1 << 6;
    const IB_QP_AV: u32 = 1 << 7;
    const IB_QP_PATH_MTU: u32 = 1 << 8;
    const IB_QP_TIMEOUT: u32 = 1 << 9;
    const IB_QP_RETRY_CNT: u32 = 1 << 10;
    const IB_QP_RNR_RETRY: u32 = 1 << 11;
    const IB_QP_RQ_PSN: u32 = 1 << 12;
    const IB_QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    const IB_QP_ALT_PATH: u32 = 1 << 14;
    const IB_QP_MIN_RNR_TIMER: u32 = 1 << 15;
    const IB_QP_SQ_PSN: u32 = 1 << 16;
    const IB_QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    const IB_QP_PATH_MIG_STATE: u32 = 1 << 18;
    const IB_QP_DEST_QPN: u32 = 1 << 20;

    /// The verbs layer's table for one QP type, as `ib_modify_qp_is_ok()`
    /// reads it: (valid, required, optional) for `from` to `to`. Written out
    /// independently of the table above, from verbs.c of Linux 6.12, as the
    /// oracle the table is tested against.
    fn kernel_rule(t: QpType, from: QpState, to: QpState) -> Option<(u32, u32)> {
        let (rc, uc, ud, gsi) = (
            t == QpType::Rc,
            t == QpType::Uc,
            t == QpType::Ud,
            t == QpType::Gsi,
        );
        let pick = |rcv: u32, ucv: u32, udv: u32, gsiv: u32| {
            if rc {
                rcv
            } else if uc {
                ucv
            } else if ud {
                udv
            } else if gsi {
                gsiv
            } else {
                0
            }
        };
        Some(match (from, to) {
            (S::Reset, S::Reset) => (0, 0),
            (S::Reset, S::Init) => (
                pick(
                    IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS,
                    IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS,
                    IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY,
                    IB_QP_PKEY_INDEX | IB_QP_QKEY,
                ),
                0,
            ),
            (_, S::Reset) if from != S::Reset => (0, 0),
            (_, S::Err) if from != S::Reset => (0, 0),
            (S::Init, S::Init) => (
                0,
                pick(
                    IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS,
                    IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS,
                    IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY,
                    IB_QP_PKEY_INDEX | IB_QP_QKEY,
                ),
            ),
            (S::Init, S::Rtr) => (
                pick(
                    IB_QP_AV
                        | IB_QP_PATH_MTU
                        | IB_QP_DEST_QPN
                        | IB_QP_RQ_PSN
                        | IB_QP_MAX_DEST_RD_ATOMIC
                        | IB_QP_MIN_RNR_TIMER,
                    IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN,
                    0,
                    0,
                ),
                pick(
                    IB_QP_ALT_PATH | IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX,
                    IB_QP_ALT_PATH | IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX,
                    IB_QP_PKEY_INDEX | IB_QP_QKEY,
                    IB_QP_PKEY_INDEX | IB_QP_QKEY,
                ),
            ),
            (S::Rtr, S::Rts) => (
                pick(
                    IB_QP_TIMEOUT
                        | IB_QP_RETRY_CNT
                        | IB_QP_RNR_RETRY
                        | IB_QP_SQ_PSN
                        | IB_QP_MAX_QP_RD_ATOMIC,
                    IB_QP_SQ_PSN,
                    IB_QP_SQ_PSN,
                    IB_QP_SQ_PSN,
                ),
                pick(
                    IB_QP_CUR_STATE
                        | IB_QP_ALT_PATH
                        | IB_QP_ACCESS_FLAGS
                        | IB_QP_MIN_RNR_TIMER
                        | IB_QP_PATH_MIG_STATE,
                    IB_QP_CUR_STATE | IB_QP_ALT_PATH | IB_QP_ACCESS_FLAGS | IB_QP_PATH_MIG_STATE,
                    IB_QP_CUR_STATE | IB_QP_QKEY,
                    IB_QP_CUR_STATE | IB_QP_QKEY,
                ),
            ),
            (S::Rts, S::Rts) | (S::Sqd, S::Rts) => (
                0,
                pick(
                    IB_QP_CUR_STATE
                        | IB_QP_ACCESS_FLAGS
                        | IB_QP_ALT_PATH
                        | IB_QP_PATH_MIG_STATE
                        | IB_QP_MIN_RNR_TIMER,
                    IB_QP_CUR_STATE | IB_QP_ACCESS_FLAGS | IB_QP_ALT_PATH | IB_QP_PATH_MIG_STATE,
                    IB_QP_CUR_STATE | IB_QP_QKEY,
                    IB_QP_CUR_STATE | IB_QP_QKEY,
                ),
            ),
            (S::Rts, S::Sqd) => (0, IB_QP_EN_SQD_ASYNC_NOTIFY),
            (S::Sqd, S::Sqd) => (
                0,
                pick(
                    IB_QP_PORT
                        | IB_QP_AV
                        | IB_QP_TIMEOUT
                        | IB_QP_RETRY_CNT
                        | IB_QP_RNR_RETRY
                        | IB_QP_MAX_QP_RD_ATOMIC
                        | IB_QP_MAX_DEST_RD_ATOMIC
                        | IB_QP_ALT_PATH
                        | IB_QP_ACCESS_FLAGS
                        | IB_QP_PKEY_INDEX
                        | IB_QP_MIN_RNR_TIMER
                        | IB_QP_PATH_MIG_STATE,
                    IB_QP_AV
                        | IB_QP_ALT_PATH
                        | IB_QP_ACCESS_FLAGS
                        | IB_QP_PKEY_INDEX
                        | IB_QP_PATH_MIG_STATE,
                    IB_QP_PKEY_INDEX | IB_QP_QKEY,
                    IB_QP_PKEY_INDEX | IB_QP_QKEY,
                ),
            ),
            (S::Sqe, S::Rts) => (
                0,
                pick(
                    0,
                    IB_QP_CUR_STATE | IB_QP_ACCESS_FLAGS,
                    IB_QP_CUR_STATE | IB_QP_QKEY,
                    IB_QP_CUR_STATE | IB_QP_QKEY,
                ),
            ),
            _ => return None,
        })
    }

    /// The verbs layer's XRC_INI and XRC_TGT columns, as `kernel_rule`
    /// gives the others (verbs.c of Linux 6.12). SQE to RTS is valid
    /// without attributes, as for RC: a type that never enters SQE.
    fn kernel_rule_xrc(t: QpType, from: QpState, to: QpState) -> Option<(u32, u32)> {
        let ini = t == QpType::XrcIni;
        let pick = |iniv: u32, tgtv: u32| if ini { iniv } else { tgtv };
        let init = IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS;
        let path = IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN;
        let alt = IB_QP_ALT_PATH | IB_QP_ACCESS_FLAGS | IB_QP_PATH_MIG_STATE;
        let to_rts = IB_QP_CUR_STATE | alt | pick(0, IB_QP_MIN_RNR_TIMER);
        Some(match (from, to) {
            (S::Reset, S::Reset) => (0, 0),
            (S::Reset, S::Init) => (init, 0),
            (_, S::Reset | S::Err) if from != S::Reset => (0, 0),
            (S::Init, S::Init) => (0, init),
            (S::Init, S::Rtr) => (
                path | pick(0, IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER),
                IB_QP_ALT_PATH | IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX,
            ),
            (S::Rtr, S::Rts) => (
                IB_QP_TIMEOUT
                    | IB_QP_SQ_PSN
                    | pick(
                        IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC,
                        0,
                    ),
                to_rts,
            ),
            (S::Rts | S::Sqd, S::Rts) => (0, to_rts),
            (S::Rts, S::Sqd) => (0, IB_QP_EN_SQD_ASYNC_NOTIFY),
            (S::Sqd, S::Sqd) => (
                0,
                IB_QP_PORT
                    | IB_QP_AV
                    | IB_QP_TIMEOUT
                    | IB_QP_ALT_PATH
                    | IB_QP_ACCESS_FLAGS
                    | IB_QP_PKEY_INDEX
                    | IB_QP_PATH_MIG_STATE
                    | pick(
                        IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC,
                        IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER,
                    ),
            ),
            (S::Sqe, S::Rts) => (0, 0),
            _ => return None,
        })
    }

    /// `ib_modify_qp_is_ok()` over the oracle: the CUR_STATE rule, the
    /// table's validity, required and optional bits.
    fn kernel_ok(t: QpType, from: QpState, to: QpState, mask: u32) -> bool {
        if mask & IB_QP_CUR_STATE != 0 && !matches!(from, S::Rtr | S::Rts | S::Sqd | S::Sqe) {
            return false;
        }
        let rule = if t.is_xrc() {
            kernel_rule_xrc(t, from, to)
        } else {
            kernel_rule(t, from, to)
        };
        let Some((req, opt)) = rule else {
            return false;
        };
        mask & req == req && mask & !(req | opt | IB_QP_STATE) == 0
    }

    /// Every transition of every type agrees with the verbs layer for each
    /// single attribute added to or removed from the required set, which
    /// covers every bit of every row.
    #[test]
    fn agrees_with_ib_modify_qp_is_ok() {
        for t in [
            QpType::Rc,
            QpType::Uc,
            QpType::Ud,
            QpType::Gsi,
            QpType::XrcIni,
            QpType::XrcTgt,
        ] {
            for from in STATES {
                for to in STATES {
                    let base = match rule(from, to) {
                        Some(r) => r.req[Column::of(t) as usize],
                        None => AttrMask::NONE,
                    };
                    let mut masks = std::vec![base, base.union(AttrMask::STATE)];
                    for (bit, _) in AttrMask::NAMED {
                        masks.push(base.union(bit));
                        masks.push(base.minus(bit));
                    }
                    for given in masks {
                        // CUR_STATE's own rule (the states it may name) is
                        // checked against the engine's state in `Qp::modify`.
                        let cur_ok = !given.contains(AttrMask::CUR_STATE)
                            || matches!(from, S::Rtr | S::Rts | S::Sqd | S::Sqe);
                        let ours = cur_ok && check(t, from, to, given).is_ok();
                        assert_eq!(
                            ours,
                            kernel_ok(t, from, to, ib_bits(given)),
                            "{t:?} {from:?}->{to:?} with {given:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn errors_name_the_attribute() {
        assert_eq!(
            check(QpType::Rc, S::Init, S::Rtr, AttrMask::NONE),
            Err(TransitionError::Missing(m(&[
                A::AV,
                A::PATH_MTU,
                A::DEST_QPN,
                A::RQ_PSN,
                A::MAX_DEST_RD_ATOMIC,
                A::MIN_RNR_TIMER
            ])))
        );
        let Err(TransitionError::NotAllowed(extra)) = check(
            QpType::Rc,
            S::Reset,
            S::Init,
            m(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS, A::QKEY]),
        ) else {
            panic!("a Q_Key on an RC QP must be refused");
        };
        assert_eq!(extra.first_name(), "qkey");
        assert_eq!(
            check(QpType::Ud, S::Rtr, S::Sqd, AttrMask::NONE),
            Err(TransitionError::Invalid {
                from: S::Rtr,
                to: S::Sqd
            })
        );
    }

    #[test]
    fn query_reports_what_the_type_can_set() {
        let rc = applicable(QpType::Rc);
        assert!(rc.contains(m(&[A::AV, A::ALT_PATH, A::PATH_MIG_STATE, A::RQ_PSN])));
        assert!(!rc.contains(A::QKEY));
        let ud = applicable(QpType::Ud);
        assert!(ud.contains(m(&[A::QKEY, A::SQ_PSN, A::PKEY_INDEX, A::PORT])));
        assert!(!ud.contains(A::AV) && !ud.contains(A::DEST_QPN) && !ud.contains(A::PATH_MTU));
        // The GSI QP's port is fixed at creation.
        assert!(!applicable(QpType::Gsi).contains(A::PORT));
        // An XRC initiator has no responder side, an XRC target no
        // requester retries.
        let ini = applicable(QpType::XrcIni);
        assert!(ini.contains(m(&[A::RETRY_CNT, A::MAX_QP_RD_ATOMIC, A::SQ_PSN])));
        assert!(!ini.contains(A::MAX_DEST_RD_ATOMIC) && !ini.contains(A::MIN_RNR_TIMER));
        let tgt = applicable(QpType::XrcTgt);
        assert!(tgt.contains(m(&[A::MAX_DEST_RD_ATOMIC, A::MIN_RNR_TIMER, A::RQ_PSN])));
        assert!(!tgt.contains(A::RETRY_CNT) && !tgt.contains(A::MAX_QP_RD_ATOMIC));
    }
}
