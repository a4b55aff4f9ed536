// SPDX-License-Identifier: GPL-2.0

//! Automatic path migration (IBA 17.2.8): the migration state machine of a
//! connected QP and the path check of every packet it receives.
//!
//! ```text
//!            Modify QP (REARM)            a packet with MigReq = 0
//!   MIGRATED ------------------> REARM --------------------------> ARMED
//!      ^                                                             |
//!      +-------------------------------------------------------------+
//!        Modify QP (MIGRATED); retry exhaustion; a MigReq = 1 packet
//!        over the alternate path
//! ```
//!
//! A QP sends MigReq = 1 in every packet while MIGRATED and 0 while REARM or
//! ARMED, so a peer that re-arms learns from the first packet it receives
//! that this side is armed too, and a peer that is armed learns from the
//! first packet over the new path that this side has migrated.
//!
//! Migrating copies the alternate path into the primary one; the alternate
//! path stays loaded (it now names the path in use) until software loads
//! another and re-arms, which is how a QP fails back.

use super::context::{MigState, QpContext};
use super::io::Arrival;

/// What a connected QP makes of the path a packet came over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PathCheck {
    /// It came over the path in use: process it.
    Accept,
    /// A migration request (MigReq = 1) over the alternate path of an ARMED
    /// QP: migrate, then process it.
    Migrate,
    /// A migration request of an ARMED QP that does not match its alternate
    /// path: drop it, keep the state, report a Path Migration Request Failed
    /// error (17.2.8).
    Refuse,
    /// It came over no path of the QP: drop it (IBA 9.6.1.1).
    WrongPath,
}

/// Why a QP migrated, for its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cause {
    /// Its retry counter ran out on the path in use.
    RetryExhausted,
    /// Software moved it from ARMED to MIGRATED (Modify QP).
    Commanded,
    /// The peer migrated: its packet with MigReq = 1 came over the
    /// alternate path.
    PeerRequest,
}

impl QpContext {
    /// The BTH MigReq bit of this QP's packets: 1 while MIGRATED, for
    /// connected services only (a datagram QP has no second path).
    pub(super) fn mig_req(&self) -> bool {
        self.qp_type.is_connected() && self.mig_state == MigState::Migrated
    }

    /// Checks a packet's path against the migration state; `None` before
    /// INIT to RTR has loaded a path, when a connected QP takes no packet.
    pub(super) fn check_path(&self, mig_req: bool, arrival: Arrival) -> Option<PathCheck> {
        let primary = self.primary.av?;
        if mig_req && self.mig_state == MigState::Armed {
            // 17.2.8: the request is compared with the alternate path only,
            // even when it came over the primary one.
            return Some(match self.alternate.and_then(|p| p.av) {
                Some(alt) if arrival.matches(alt) => PathCheck::Migrate,
                _ => PathCheck::Refuse,
            });
        }
        Some(if arrival.matches(primary) {
            PathCheck::Accept
        } else {
            PathCheck::WrongPath
        })
    }

    /// An accepted packet with MigReq = 0 shows the peer armed: a QP that
    /// software re-armed becomes ARMED. Returns whether it did.
    pub(super) fn note_peer_armed(&mut self, mig_req: bool) -> bool {
        let arms = !mig_req && self.mig_state == MigState::Rearm && self.alternate.is_some();
        if arms {
            self.mig_state = MigState::Armed;
        }
        arms
    }

    /// Migrates an ARMED QP: the alternate path becomes the primary one.
    /// Returns whether it did (a QP not ARMED has nowhere to go).
    pub(super) fn migrate(&mut self) -> bool {
        let Some(alt) = self.alternate.filter(|p| p.av.is_some()) else {
            return false;
        };
        if self.mig_state != MigState::Armed {
            return false;
        }
        self.primary = alt;
        self.mig_state = MigState::Migrated;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::context::{AltPath, ModifyQp, PKey, PathHandle};
    use super::super::state::{QpState, QpType};
    use super::*;

    const P: PathHandle = PathHandle(0);
    const ALT: PathHandle = PathHandle(1);

    fn armed() -> QpContext {
        let mut c = QpContext::new(QpType::Rc, 1);
        c.state = QpState::Rts;
        c.primary.av = Some(P);
        let m = ModifyQp {
            alt_path: Some(AltPath {
                av: ALT,
                port: 1,
                pkey: PKey::DEFAULT,
                timeout: 10,
            }),
            path_mig_state: Some(MigState::Rearm.to_ib()),
            ..ModifyQp::default()
        };
        let mut c = c.modified(&m).expect("rearm");
        assert!(c.note_peer_armed(false));
        c
    }

    #[test]
    fn rearm_arms_on_a_packet_without_mig_req_only() {
        let mut c = armed();
        c.mig_state = MigState::Rearm;
        assert!(!c.note_peer_armed(true));
        assert_eq!(c.mig_state, MigState::Rearm);
        assert!(c.note_peer_armed(false));
        assert_eq!(c.mig_state, MigState::Armed);
    }

    #[test]
    fn a_migration_request_must_match_the_alternate_path() {
        let c = armed();
        let over_alt = Arrival::NONE.with(ALT);
        let over_primary = Arrival::NONE.with(P);
        assert_eq!(c.check_path(true, over_alt), Some(PathCheck::Migrate));
        assert_eq!(c.check_path(true, over_primary), Some(PathCheck::Refuse));
        assert_eq!(c.check_path(true, Arrival::NONE), Some(PathCheck::Refuse));
        assert_eq!(c.check_path(false, over_primary), Some(PathCheck::Accept));
        // Without MigReq the alternate path is no path of the QP yet.
        assert_eq!(c.check_path(false, over_alt), Some(PathCheck::WrongPath));
    }

    #[test]
    fn migrating_makes_the_alternate_path_primary_and_sets_mig_req() {
        let mut c = armed();
        assert!(!c.mig_req());
        assert!(c.migrate());
        assert_eq!(c.primary.av, Some(ALT));
        assert_eq!(c.primary.ack_timeout.code(), 10);
        assert_eq!(c.mig_state, MigState::Migrated);
        assert!(c.mig_req());
        // Once migrated, MigReq packets are the peer following: accepted.
        assert_eq!(
            c.check_path(true, Arrival::NONE.with(ALT)),
            Some(PathCheck::Accept)
        );
        assert!(!c.migrate(), "a migrated QP has no armed path to move to");
    }

    #[test]
    fn datagram_qps_never_set_mig_req() {
        let c = QpContext::new(QpType::Ud, 2);
        assert_eq!(c.mig_state, MigState::Migrated);
        assert!(!c.mig_req());
    }
}
