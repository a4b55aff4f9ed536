// SPDX-License-Identifier: GPL-2.0

//! What a QP is (its type, and the transport service the type speaks) and
//! the states it moves through (IBA 10.3.1).

use super::super::opcode::Transport;

/// QP type (IBA 9.8.1 transport services; the General Service Interface QP
/// is a UD QP with rules of its own), and the two halves of an XRC
/// connection (IBA Annex A14), which speak RC's protocol with XRC opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
    /// QP1, the GSI QP (IBA 3.5.1): UD on the wire.
    Gsi,
    /// XRC initiator: RC's requester, no receive queue; each request names
    /// the remote XRC SRQ in its XRCETH.
    XrcIni,
    /// XRC target: RC's responder, no send queue of its own; each request
    /// lands in the XRC SRQ its XRCETH names.
    XrcTgt,
}

/// The transport service a QP type speaks on the wire: what the requester,
/// responder and completer decide by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Service {
    Rc,
    Uc,
    Ud,
}

impl QpType {
    /// The transport service of the QP type.
    pub(super) const fn service(self) -> Service {
        match self {
            Self::Rc | Self::XrcIni | Self::XrcTgt => Service::Rc,
            Self::Uc => Service::Uc,
            Self::Ud | Self::Gsi => Service::Ud,
        }
    }

    /// The BTH transport of the QP type's packets.
    pub(super) const fn transport(self) -> Transport {
        if self.is_xrc() {
            return Transport::Xrc;
        }
        match self.service() {
            Service::Rc => Transport::Rc,
            Service::Uc => Transport::Uc,
            Service::Ud => Transport::Ud,
        }
    }

    /// Whether the QP talks to one peer QP over a path of its own.
    #[must_use]
    pub const fn is_connected(self) -> bool {
        matches!(self, Self::Rc | Self::Uc | Self::XrcIni | Self::XrcTgt)
    }

    /// Whether the QP is one half of an XRC connection.
    #[must_use]
    pub const fn is_xrc(self) -> bool {
        matches!(self, Self::XrcIni | Self::XrcTgt)
    }
}

/// QP states (IBA 10.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    /// Reset.
    Reset,
    /// Initialized.
    Init,
    /// Ready to Receive.
    Rtr,
    /// Ready to Send.
    Rts,
    /// Send Queue Drain.
    Sqd,
    /// Send Queue Error (UC and UD only).
    Sqe,
    /// Error.
    Err,
}
