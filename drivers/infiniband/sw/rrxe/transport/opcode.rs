// SPDX-License-Identifier: GPL-2.0

//! The BTH opcode table, as data.
//!
//! An opcode (the first byte of the BTH, IBA 9.2) is a 3-bit transport
//! service and a 5-bit operation. Everything the rest of the transport needs
//! to know about a packet before looking at its contents follows from it:
//! which extended headers follow the BTH and in which order (IBA 9.3),
//! whether a payload may follow, and the
//! packet's place in its message. Keeping that in one table, rather than in
//! scattered `match`es, means the parser, the builder and the state machines
//! cannot disagree about a packet's shape.
//!
//! Header order rules the table encodes: RD requests carry RDETH then DETH,
//! RD responses RDETH only; UD carries DETH; an XRC request carries XRCETH
//! immediately after the BTH (IBA Annex A14) while XRC responses look exactly
//! like RC ones; then come RETH or AtomicETH (or FETH+RETH for FLUSH), AETH
//! then AtomicAckETH on responses, and ImmDt or IETH last.

use super::headers::ExtHeader;

/// Transport service, bits 7..5 of the opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected, `000b`.
    Rc,
    /// Unreliable Connected, `001b`.
    Uc,
    /// Reliable Datagram, `010b`. Described in the table for completeness;
    /// nothing in Linux implements it.
    Rd,
    /// Unreliable Datagram, `011b`.
    Ud,
    /// RoCEv2 Congestion Notification Packet, `100b` (IBA Annex A17).
    Cnp,
    /// Extended Reliable Connected, `101b` (IBA Annex A14).
    Xrc,
}

impl Transport {
    /// Decodes the transport bits of an opcode; `None` for `110b`
    /// (reserved) and `111b` (manufacturer specific).
    #[inline]
    #[must_use]
    pub const fn of_opcode(opcode: u8) -> Option<Self> {
        Some(match opcode >> 5 {
            0 => Self::Rc,
            1 => Self::Uc,
            2 => Self::Rd,
            3 => Self::Ud,
            4 => Self::Cnp,
            5 => Self::Xrc,
            _ => return None,
        })
    }

    /// Whether the service acknowledges requests (RC, RD and XRC), which is
    /// what brings PSN duplicate detection, ACK/NAK and retries with it.
    #[inline]
    #[must_use]
    pub const fn is_reliable(self) -> bool {
        matches!(self, Self::Rc | Self::Rd | Self::Xrc)
    }
}

/// What a packet does, independent of transport and position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Send (optionally with immediate data or invalidate).
    Send,
    /// RDMA Write (optionally with immediate data).
    RdmaWrite,
    /// RDMA Read request.
    RdmaReadRequest,
    /// RDMA Read response, carrying the data read.
    RdmaReadResponse,
    /// ACK or NAK.
    Acknowledge,
    /// Response to an atomic request, carrying the original data.
    AtomicAcknowledge,
    /// Atomic Compare & Swap request.
    CompareSwap,
    /// Atomic Fetch & Add request.
    FetchAdd,
    /// RD Resync request.
    Resync,
    /// RDMA Flush request (IBA 1.5 memory placement extensions).
    Flush,
    /// RDMA Atomic Write request (IBA 1.5 memory placement extensions).
    AtomicWrite,
    /// RoCEv2 congestion notification.
    CongestionNotification,
}

/// Where a packet sits in its message: a multi-packet message is sent as
/// First, Middle..., Last, a single-packet one as Only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message in one packet.
    Only,
}

impl Position {
    /// Whether this packet starts a message.
    #[inline]
    #[must_use]
    pub const fn starts_message(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }

    /// Whether this packet ends a message.
    #[inline]
    #[must_use]
    pub const fn ends_message(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }
}

/// Everything the opcode says about a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The opcode byte itself.
    pub opcode: u8,
    /// The IBA name, prefixed with the transport, for tracing.
    pub name: &'static str,
    /// Transport service.
    pub transport: Transport,
    /// Operation.
    pub operation: Operation,
    /// Position in the message.
    pub position: Position,
    /// Extended headers following the BTH, in wire order.
    pub headers: &'static [ExtHeader],
    /// Whether a payload may follow the headers (it may still be empty).
    pub has_payload: bool,
    /// `headers` as a set ([`ExtHeader::bit`]), computed by the table: every packet built
    /// or parsed asks which headers its opcode carries.
    header_set: u16,
    /// Length of the BTH and `headers`, computed by the table.
    headers_len: usize,
}

/// Length of the BTH, the start of every header stack.
const BTH_LEN: usize = 12;

impl OpcodeInfo {
    /// Whether the packet is sent by a responder (read response, ACK,
    /// atomic ACK); every other opcode except CNP is a request.
    #[inline]
    #[must_use]
    pub const fn is_response(&self) -> bool {
        matches!(
            self.operation,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }

    /// Whether the packet is sent by a requester.
    #[inline]
    #[must_use]
    pub const fn is_request(&self) -> bool {
        !self.is_response() && !matches!(self.operation, Operation::CongestionNotification)
    }

    /// Whether the extended header `kind` is present.
    #[must_use]
    pub const fn has_header(&self, kind: ExtHeader) -> bool {
        self.header_set & kind.bit() != 0
    }

    /// The extended headers present, as a set of [`ExtHeader::bit`]s.
    #[inline]
    #[must_use]
    pub const fn header_set(&self) -> u16 {
        self.header_set
    }

    /// Offset of the extended header `kind` from the start of the BTH, or
    /// `None` if this opcode does not carry it.
    #[must_use]
    pub const fn header_offset(&self, kind: ExtHeader) -> Option<usize> {
        let mut offset = BTH_LEN;
        let mut i = 0;
        while i < self.headers.len() {
            // `PartialEq` is not const; compare discriminants.
            if self.headers[i] as u8 == kind as u8 {
                return Some(offset);
            }
            offset += self.headers[i].wire_len();
            i += 1;
        }
        None
    }

    /// Length of BTH plus all extended headers: the offset of the payload.
    #[must_use]
    pub const fn header_len(&self) -> usize {
        self.headers_len
    }

    /// Whether the packet carries immediate data.
    #[inline]
    #[must_use]
    pub const fn has_immediate(&self) -> bool {
        self.has_header(ExtHeader::ImmDt)
    }

    /// Whether the packet asks the responder to invalidate an R_Key.
    #[inline]
    #[must_use]
    pub const fn has_invalidate(&self) -> bool {
        self.has_header(ExtHeader::Ieth)
    }

    /// Whether the message consumes a receive WQE at the responder: Sends
    /// and RDMA Writes with immediate. These are the messages that RC
    /// end-to-end credits (IBA 9.7.7.2) and RNR NAKs are about.
    #[inline]
    #[must_use]
    pub const fn consumes_recv_wqe(&self) -> bool {
        match self.operation {
            Operation::Send => true,
            // Only the Last/Only packet carries ImmDt, but the whole
            // message is a write-with-immediate; a First or Middle packet
            // cannot tell, so the answer is about the packet.
            Operation::RdmaWrite => self.has_immediate(),
            _ => false,
        }
    }

    /// Whether the operation is an atomic request (including Atomic Write).
    #[inline]
    #[must_use]
    pub const fn is_atomic(&self) -> bool {
        matches!(
            self.operation,
            Operation::CompareSwap | Operation::FetchAdd | Operation::AtomicWrite
        )
    }
}

/// Table-building helper; the transport comes from the opcode bits so that
/// an entry cannot contradict its own opcode.
const fn op(
    opcode: u8,
    name: &'static str,
    operation: Operation,
    position: Position,
    headers: &'static [ExtHeader],
    has_payload: bool,
) -> OpcodeInfo {
    let transport = match Transport::of_opcode(opcode) {
        Some(transport) => transport,
        // Evaluated at compile time only: a bad entry fails the build.
        None => panic!("opcode table entry with reserved transport bits"),
    };
    let mut header_set = 0;
    let mut headers_len = BTH_LEN;
    let mut i = 0;
    while i < headers.len() {
        header_set |= headers[i].bit();
        headers_len += headers[i].wire_len();
        i += 1;
    }
    OpcodeInfo {
        opcode,
        name,
        transport,
        operation,
        position,
        headers,
        has_payload,
        header_set,
        headers_len,
    }
}

/// Every opcode this core knows, in opcode order.
///
/// RC `0x15` and `0x18..=0x1B` are reserved; `0x1C`/`0x1D` are the IBA 1.5
/// FLUSH and ATOMIC WRITE, which only exist for RC here. UC has no read,
/// atomic or invalidate operations; UD only has Send Only; RD `0x55` is
/// Resync.
///
/// Columns: opcode, name, operation, position, extended headers in wire
/// order, payload allowed.
#[rustfmt::skip]
pub static OPCODES: [OpcodeInfo; 85] = {
    // Scoped so that `Send` and friends do not shadow the prelude elsewhere.
    use ExtHeader::*;
    use Operation::*;
    use Position::*;
    [
        // RC
        op(0x00, "RC_SEND_FIRST",                      Send,                   First,  &[],                         true),
        op(0x01, "RC_SEND_MIDDLE",                     Send,                   Middle, &[],                         true),
        op(0x02, "RC_SEND_LAST",                       Send,                   Last,   &[],                         true),
        op(0x03, "RC_SEND_LAST_WITH_IMMEDIATE",        Send,                   Last,   &[ImmDt],                    true),
        op(0x04, "RC_SEND_ONLY",                       Send,                   Only,   &[],                         true),
        op(0x05, "RC_SEND_ONLY_WITH_IMMEDIATE",        Send,                   Only,   &[ImmDt],                    true),
        op(0x06, "RC_RDMA_WRITE_FIRST",                RdmaWrite,              First,  &[Reth],                     true),
        op(0x07, "RC_RDMA_WRITE_MIDDLE",               RdmaWrite,              Middle, &[],                         true),
        op(0x08, "RC_RDMA_WRITE_LAST",                 RdmaWrite,              Last,   &[],                         true),
        op(0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",  RdmaWrite,              Last,   &[ImmDt],                    true),
        op(0x0A, "RC_RDMA_WRITE_ONLY",                 RdmaWrite,              Only,   &[Reth],                     true),
        op(0x0B, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",  RdmaWrite,              Only,   &[Reth, ImmDt],              true),
        op(0x0C, "RC_RDMA_READ_REQUEST",               RdmaReadRequest,        Only,   &[Reth],                     false),
        op(0x0D, "RC_RDMA_READ_RESPONSE_FIRST",        RdmaReadResponse,       First,  &[Aeth],                     true),
        op(0x0E, "RC_RDMA_READ_RESPONSE_MIDDLE",       RdmaReadResponse,       Middle, &[],                         true),
        op(0x0F, "RC_RDMA_READ_RESPONSE_LAST",         RdmaReadResponse,       Last,   &[Aeth],                     true),
        op(0x10, "RC_RDMA_READ_RESPONSE_ONLY",         RdmaReadResponse,       Only,   &[Aeth],                     true),
        op(0x11, "RC_ACKNOWLEDGE",                     Acknowledge,            Only,   &[Aeth],                     false),
        op(0x12, "RC_ATOMIC_ACKNOWLEDGE",              AtomicAcknowledge,      Only,   &[Aeth, AtomicAckEth],       false),
        op(0x13, "RC_COMPARE_SWAP",                    CompareSwap,            Only,   &[AtomicEth],                false),
        op(0x14, "RC_FETCH_ADD",                       FetchAdd,               Only,   &[AtomicEth],                false),
        op(0x16, "RC_SEND_LAST_WITH_INVALIDATE",       Send,                   Last,   &[Ieth],                     true),
        op(0x17, "RC_SEND_ONLY_WITH_INVALIDATE",       Send,                   Only,   &[Ieth],                     true),
        op(0x1C, "RC_FLUSH",                           Flush,                  Only,   &[Feth, Reth],               false),
        op(0x1D, "RC_ATOMIC_WRITE",                    AtomicWrite,            Only,   &[Reth],                     true),
        // UC
        op(0x20, "UC_SEND_FIRST",                      Send,                   First,  &[],                         true),
        op(0x21, "UC_SEND_MIDDLE",                     Send,                   Middle, &[],                         true),
        op(0x22, "UC_SEND_LAST",                       Send,                   Last,   &[],                         true),
        op(0x23, "UC_SEND_LAST_WITH_IMMEDIATE",        Send,                   Last,   &[ImmDt],                    true),
        op(0x24, "UC_SEND_ONLY",                       Send,                   Only,   &[],                         true),
        op(0x25, "UC_SEND_ONLY_WITH_IMMEDIATE",        Send,                   Only,   &[ImmDt],                    true),
        op(0x26, "UC_RDMA_WRITE_FIRST",                RdmaWrite,              First,  &[Reth],                     true),
        op(0x27, "UC_RDMA_WRITE_MIDDLE",               RdmaWrite,              Middle, &[],                         true),
        op(0x28, "UC_RDMA_WRITE_LAST",                 RdmaWrite,              Last,   &[],                         true),
        op(0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",  RdmaWrite,              Last,   &[ImmDt],                    true),
        op(0x2A, "UC_RDMA_WRITE_ONLY",                 RdmaWrite,              Only,   &[Reth],                     true),
        op(0x2B, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",  RdmaWrite,              Only,   &[Reth, ImmDt],              true),
        // RD
        op(0x40, "RD_SEND_FIRST",                      Send,                   First,  &[Rdeth, Deth],              true),
        op(0x41, "RD_SEND_MIDDLE",                     Send,                   Middle, &[Rdeth, Deth],              true),
        op(0x42, "RD_SEND_LAST",                       Send,                   Last,   &[Rdeth, Deth],              true),
        op(0x43, "RD_SEND_LAST_WITH_IMMEDIATE",        Send,                   Last,   &[Rdeth, Deth, ImmDt],       true),
        op(0x44, "RD_SEND_ONLY",                       Send,                   Only,   &[Rdeth, Deth],              true),
        op(0x45, "RD_SEND_ONLY_WITH_IMMEDIATE",        Send,                   Only,   &[Rdeth, Deth, ImmDt],       true),
        op(0x46, "RD_RDMA_WRITE_FIRST",                RdmaWrite,              First,  &[Rdeth, Deth, Reth],        true),
        op(0x47, "RD_RDMA_WRITE_MIDDLE",               RdmaWrite,              Middle, &[Rdeth, Deth],              true),
        op(0x48, "RD_RDMA_WRITE_LAST",                 RdmaWrite,              Last,   &[Rdeth, Deth],              true),
        op(0x49, "RD_RDMA_WRITE_LAST_WITH_IMMEDIATE",  RdmaWrite,              Last,   &[Rdeth, Deth, ImmDt],       true),
        op(0x4A, "RD_RDMA_WRITE_ONLY",                 RdmaWrite,              Only,   &[Rdeth, Deth, Reth],        true),
        op(0x4B, "RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE",  RdmaWrite,              Only,   &[Rdeth, Deth, Reth, ImmDt], true),
        op(0x4C, "RD_RDMA_READ_REQUEST",               RdmaReadRequest,        Only,   &[Rdeth, Deth, Reth],        false),
        op(0x4D, "RD_RDMA_READ_RESPONSE_FIRST",        RdmaReadResponse,       First,  &[Rdeth, Aeth],              true),
        op(0x4E, "RD_RDMA_READ_RESPONSE_MIDDLE",       RdmaReadResponse,       Middle, &[Rdeth],                    true),
        op(0x4F, "RD_RDMA_READ_RESPONSE_LAST",         RdmaReadResponse,       Last,   &[Rdeth, Aeth],              true),
        op(0x50, "RD_RDMA_READ_RESPONSE_ONLY",         RdmaReadResponse,       Only,   &[Rdeth, Aeth],              true),
        op(0x51, "RD_ACKNOWLEDGE",                     Acknowledge,            Only,   &[Rdeth, Aeth],              false),
        op(0x52, "RD_ATOMIC_ACKNOWLEDGE",              AtomicAcknowledge,      Only,   &[Rdeth, Aeth, AtomicAckEth],false),
        op(0x53, "RD_COMPARE_SWAP",                    CompareSwap,            Only,   &[Rdeth, Deth, AtomicEth],   false),
        op(0x54, "RD_FETCH_ADD",                       FetchAdd,               Only,   &[Rdeth, Deth, AtomicEth],   false),
        op(0x55, "RD_RESYNC",                          Resync,                 Only,   &[Rdeth, Deth],              false),
        // UD
        op(0x64, "UD_SEND_ONLY",                       Send,                   Only,   &[Deth],                     true),
        op(0x65, "UD_SEND_ONLY_WITH_IMMEDIATE",        Send,                   Only,   &[Deth, ImmDt],              true),
        op(0x81, "CNP",                                CongestionNotification, Only,   &[CnpReserved],              false),
        // XRC
        op(0xA0, "XRC_SEND_FIRST",                     Send,                   First,  &[Xrceth],                   true),
        op(0xA1, "XRC_SEND_MIDDLE",                    Send,                   Middle, &[Xrceth],                   true),
        op(0xA2, "XRC_SEND_LAST",                      Send,                   Last,   &[Xrceth],                   true),
        op(0xA3, "XRC_SEND_LAST_WITH_IMMEDIATE",       Send,                   Last,   &[Xrceth, ImmDt],            true),
        op(0xA4, "XRC_SEND_ONLY",                      Send,                   Only,   &[Xrceth],                   true),
        op(0xA5, "XRC_SEND_ONLY_WITH_IMMEDIATE",       Send,                   Only,   &[Xrceth, ImmDt],            true),
        op(0xA6, "XRC_RDMA_WRITE_FIRST",               RdmaWrite,              First,  &[Xrceth, Reth],             true),
        op(0xA7, "XRC_RDMA_WRITE_MIDDLE",              RdmaWrite,              Middle, &[Xrceth],                   true),
        op(0xA8, "XRC_RDMA_WRITE_LAST",                RdmaWrite,              Last,   &[Xrceth],                   true),
        op(0xA9, "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE", RdmaWrite,              Last,   &[Xrceth, ImmDt],            true),
        op(0xAA, "XRC_RDMA_WRITE_ONLY",                RdmaWrite,              Only,   &[Xrceth, Reth],             true),
        op(0xAB, "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", RdmaWrite,              Only,   &[Xrceth, Reth, ImmDt],      true),
        op(0xAC, "XRC_RDMA_READ_REQUEST",              RdmaReadRequest,        Only,   &[Xrceth, Reth],             false),
        op(0xAD, "XRC_RDMA_READ_RESPONSE_FIRST",       RdmaReadResponse,       First,  &[Aeth],                     true),
        op(0xAE, "XRC_RDMA_READ_RESPONSE_MIDDLE",      RdmaReadResponse,       Middle, &[],                         true),
        op(0xAF, "XRC_RDMA_READ_RESPONSE_LAST",        RdmaReadResponse,       Last,   &[Aeth],                     true),
        op(0xB0, "XRC_RDMA_READ_RESPONSE_ONLY",        RdmaReadResponse,       Only,   &[Aeth],                     true),
        op(0xB1, "XRC_ACKNOWLEDGE",                    Acknowledge,            Only,   &[Aeth],                     false),
        op(0xB2, "XRC_ATOMIC_ACKNOWLEDGE",             AtomicAcknowledge,      Only,   &[Aeth, AtomicAckEth],       false),
        op(0xB3, "XRC_COMPARE_SWAP",                   CompareSwap,            Only,   &[Xrceth, AtomicEth],        false),
        op(0xB4, "XRC_FETCH_ADD",                      FetchAdd,               Only,   &[Xrceth, AtomicEth],        false),
        op(0xB6, "XRC_SEND_LAST_WITH_INVALIDATE",      Send,                   Last,   &[Xrceth, Ieth],             true),
        op(0xB7, "XRC_SEND_ONLY_WITH_INVALIDATE",      Send,                   Only,   &[Xrceth, Ieth],             true),
    ]
};

/// Marks an opcode byte that is not in [`OPCODES`].
const NO_ENTRY: u8 = u8::MAX;

const _: () = assert!(OPCODES.len() < NO_ENTRY as usize);

/// Maps an opcode byte to its index in [`OPCODES`].
static OPCODE_INDEX: [u8; 256] = {
    let mut index = [NO_ENTRY; 256];
    let mut i = 0;
    while i < OPCODES.len() {
        let opcode = OPCODES[i].opcode as usize;
        // Two entries for one opcode would shadow each other.
        assert!(index[opcode] == NO_ENTRY, "duplicate opcode table entry");
        index[opcode] = i as u8;
        i += 1;
    }
    index
};

/// Looks up an opcode; `None` for reserved or unsupported opcodes, which a
/// receiver must silently drop (IBA 9.6, "BTH OpCode").
#[inline]
#[must_use]
pub fn lookup(opcode: u8) -> Option<&'static OpcodeInfo> {
    OPCODES.get(usize::from(OPCODE_INDEX[usize::from(opcode)]))
}

/// Named opcode constants for the opcodes the state machines build.
pub mod codes {
    /// RC Send First.
    pub const RC_SEND_FIRST: u8 = 0x00;
    /// RC Send Middle.
    pub const RC_SEND_MIDDLE: u8 = 0x01;
    /// RC Send Last.
    pub const RC_SEND_LAST: u8 = 0x02;
    /// RC Send Last with Immediate.
    pub const RC_SEND_LAST_WITH_IMMEDIATE: u8 = 0x03;
    /// RC Send Only.
    pub const RC_SEND_ONLY: u8 = 0x04;
    /// RC Send Only with Immediate.
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x05;
    /// RC RDMA Write First.
    pub const RC_RDMA_WRITE_FIRST: u8 = 0x06;
    /// RC RDMA Write Middle.
    pub const RC_RDMA_WRITE_MIDDLE: u8 = 0x07;
    /// RC RDMA Write Last.
    pub const RC_RDMA_WRITE_LAST: u8 = 0x08;
    /// RC RDMA Write Last with Immediate.
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x09;
    /// RC RDMA Write Only.
    pub const RC_RDMA_WRITE_ONLY: u8 = 0x0A;
    /// RC RDMA Write Only with Immediate.
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x0B;
    /// RC RDMA Read Request.
    pub const RC_RDMA_READ_REQUEST: u8 = 0x0C;
    /// RC RDMA Read Response First.
    pub const RC_RDMA_READ_RESPONSE_FIRST: u8 = 0x0D;
    /// RC RDMA Read Response Middle.
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: u8 = 0x0E;
    /// RC RDMA Read Response Last.
    pub const RC_RDMA_READ_RESPONSE_LAST: u8 = 0x0F;
    /// RC RDMA Read Response Only.
    pub const RC_RDMA_READ_RESPONSE_ONLY: u8 = 0x10;
    /// RC Acknowledge.
    pub const RC_ACKNOWLEDGE: u8 = 0x11;
    /// RC Atomic Acknowledge.
    pub const RC_ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    /// RC Compare & Swap.
    pub const RC_COMPARE_SWAP: u8 = 0x13;
    /// RC Fetch & Add.
    pub const RC_FETCH_ADD: u8 = 0x14;
    /// RC Send Last with Invalidate.
    pub const RC_SEND_LAST_WITH_INVALIDATE: u8 = 0x16;
    /// RC Send Only with Invalidate.
    pub const RC_SEND_ONLY_WITH_INVALIDATE: u8 = 0x17;
    /// RC RDMA Flush.
    pub const RC_FLUSH: u8 = 0x1C;
    /// RC RDMA Atomic Write.
    pub const RC_ATOMIC_WRITE: u8 = 0x1D;
    /// Base of the UC opcodes: add the RC Send/Write operation code.
    pub const UC_BASE: u8 = 0x20;
    /// Base of the RD opcodes.
    pub const RD_BASE: u8 = 0x40;
    /// UD Send Only.
    pub const UD_SEND_ONLY: u8 = 0x64;
    /// UD Send Only with Immediate.
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x65;
    /// RoCEv2 Congestion Notification Packet.
    pub const CNP: u8 = 0x81;
    /// Base of the XRC opcodes: add the RC operation code.
    pub const XRC_BASE: u8 = 0xA0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExtHeader::*;
    use Operation::*;
    use Position::*;

    #[test]
    fn table_is_sorted_and_consistent() {
        for pair in OPCODES.windows(2) {
            assert!(pair[0].opcode < pair[1].opcode, "{:?}", pair[1].name);
        }
        for info in OPCODES.iter() {
            assert_eq!(lookup(info.opcode), Some(info));
            assert_eq!(Transport::of_opcode(info.opcode), Some(info.transport));
            // Extended headers are multiples of 4 bytes, so the payload
            // always starts word aligned.
            assert_eq!(info.header_len() % 4, 0);
            // AETH only ever appears on responses, and responses never
            // carry the request-side addressing headers.
            if info.has_header(Aeth) {
                assert!(info.is_response());
            }
            if info.is_response() {
                assert!(!info.has_header(Xrceth) && !info.has_header(Deth));
            }
        }
    }

    #[test]
    fn reserved_opcodes_are_absent() {
        for opcode in [
            0x15, 0x18, 0x1B, 0x1E, 0x1F, 0x2C, 0x56, 0x60, 0x66, 0x80, 0x82, 0xB5, 0xB8, 0xC0,
            0xE0, 0xFF,
        ] {
            assert!(lookup(opcode).is_none(), "{opcode:#x}");
        }
    }

    #[test]
    fn rc_shapes() {
        let send_imm = lookup(codes::RC_SEND_ONLY_WITH_IMMEDIATE).unwrap();
        assert_eq!(send_imm.headers, &[ImmDt]);
        assert_eq!(send_imm.header_len(), 16);
        assert!(send_imm.has_payload && send_imm.is_request());
        assert!(send_imm.consumes_recv_wqe());

        let write_only_imm = lookup(codes::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE).unwrap();
        assert_eq!(write_only_imm.header_offset(Reth), Some(12));
        assert_eq!(write_only_imm.header_offset(ImmDt), Some(28));
        assert_eq!(write_only_imm.header_len(), 32);

        let atomic_ack = lookup(codes::RC_ATOMIC_ACKNOWLEDGE).unwrap();
        assert_eq!(atomic_ack.headers, &[Aeth, AtomicAckEth]);
        assert!(atomic_ack.is_response() && !atomic_ack.has_payload);

        let cas = lookup(codes::RC_COMPARE_SWAP).unwrap();
        assert_eq!(cas.header_len(), 40);
        assert!(cas.is_atomic() && !cas.has_payload);

        let read_mid = lookup(codes::RC_RDMA_READ_RESPONSE_MIDDLE).unwrap();
        assert!(read_mid.headers.is_empty() && read_mid.is_response());

        let inv = lookup(codes::RC_SEND_LAST_WITH_INVALIDATE).unwrap();
        assert!(inv.has_invalidate() && inv.position == Last);

        let flush = lookup(codes::RC_FLUSH).unwrap();
        assert_eq!(flush.headers, &[Feth, Reth]);

        let write_first = lookup(codes::RC_RDMA_WRITE_FIRST).unwrap();
        assert!(!write_first.consumes_recv_wqe());
    }

    #[test]
    fn other_transports() {
        let ud = lookup(codes::UD_SEND_ONLY_WITH_IMMEDIATE).unwrap();
        assert_eq!(ud.transport, Transport::Ud);
        assert_eq!(ud.headers, &[Deth, ImmDt]);

        let rd_write = lookup(codes::RD_BASE + codes::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE).unwrap();
        assert_eq!(rd_write.headers, &[Rdeth, Deth, Reth, ImmDt]);
        let rd_ack = lookup(codes::RD_BASE + codes::RC_ATOMIC_ACKNOWLEDGE).unwrap();
        assert_eq!(rd_ack.headers, &[Rdeth, Aeth, AtomicAckEth]);
        assert_eq!(lookup(0x55).unwrap().operation, Resync);

        assert!(lookup(codes::UC_BASE + codes::RC_RDMA_READ_REQUEST).is_none());
        assert_eq!(
            lookup(codes::UC_BASE + codes::RC_RDMA_WRITE_FIRST)
                .unwrap()
                .headers,
            &[Reth]
        );

        let cnp = lookup(codes::CNP).unwrap();
        assert!(!cnp.is_request() && !cnp.is_response());
        assert_eq!(cnp.header_len(), 28);
    }

    #[test]
    fn xrc_mirrors_rc() {
        for rc in OPCODES
            .iter()
            .filter(|i| i.transport == Transport::Rc && i.opcode < 0x18)
        {
            let xrc = lookup(codes::XRC_BASE + rc.opcode).unwrap();
            assert_eq!(xrc.transport, Transport::Xrc);
            assert_eq!((xrc.operation, xrc.position), (rc.operation, rc.position));
            assert_eq!(xrc.has_payload, rc.has_payload);
            if rc.is_response() {
                assert_eq!(xrc.headers, rc.headers);
            } else {
                assert_eq!(xrc.headers[0], Xrceth);
                assert_eq!(&xrc.headers[1..], rc.headers);
            }
        }
    }

    #[test]
    fn position_helpers() {
        assert!(First.starts_message() && !First.ends_message());
        assert!(Only.starts_message() && Only.ends_message());
        assert!(!Middle.starts_message() && !Middle.ends_message());
        assert!(Transport::Xrc.is_reliable() && !Transport::Ud.is_reliable());
        assert_eq!(Transport::of_opcode(0xC0), None);
    }
}
