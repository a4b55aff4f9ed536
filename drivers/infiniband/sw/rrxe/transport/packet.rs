// SPDX-License-Identifier: GPL-2.0

//! Whole-packet parsing and header building.
//!
//! The unit here is the UDP payload of a RoCEv2 packet (IBA Annex A17):
//!
//! ```text
//!   BTH | extended headers (per opcode) | payload | pad (0..3) | ICRC (4)
//! ```
//!
//! [`parse`] validates the framing that IBA 9.6 requires a receiver to check
//! before any QP state is consulted (known opcode, transport version, header
//! lengths, pad count, payload presence and size) and returns a borrowed
//! view. It does not check the ICRC, which also covers the IP and UDP
//! headers; see [`super::icrc`].

use super::headers::{
    Aeth, AtomicAckEth, AtomicEth, Bth, CnpReserved, Deth, ExtHeader, Feth, Header, HeaderError,
    Ieth, ImmDt, Rdeth, Reth, Xrceth,
};
use super::icrc::{self, ICRC_LEN};
use super::opcode::{self, OpcodeInfo};

/// Errors parsing or building a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketError {
    /// A header is malformed (includes a BTH shorter than 12 bytes).
    Header(HeaderError),
    /// The opcode is reserved or not supported.
    UnknownOpcode(u8),
    /// The buffer is shorter than the opcode's headers plus the ICRC.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The length from BTH to ICRC is not a multiple of 4; the pad count
    /// exists precisely to make it one (IBA 9.2, PadCnt).
    UnalignedLength(usize),
    /// The BTH pad count is larger than the bytes after the headers.
    PadExceedsPayload {
        /// BTH pad count.
        pad_count: u8,
        /// Bytes between the headers and the ICRC.
        available: usize,
    },
    /// Bytes follow the headers of an opcode that carries no payload.
    UnexpectedPayload(usize),
    /// The payload is longer than the path MTU.
    PayloadExceedsMtu {
        /// Payload length.
        len: usize,
        /// Path MTU.
        mtu: usize,
    },
    /// On build: the opcode needs an extended header that was not given.
    MissingHeader(ExtHeader),
    /// On build: an extended header was given that the opcode does not
    /// carry.
    UnexpectedHeader(ExtHeader),
}

impl From<HeaderError> for PacketError {
    #[inline]
    fn from(err: HeaderError) -> Self {
        Self::Header(err)
    }
}

/// InfiniBand path MTU, as in the verbs `enum ib_mtu`. RoCE uses the IB
/// values, which count payload bytes only, never headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// Decodes the verbs `enum ib_mtu` value.
    #[inline]
    #[must_use]
    pub const fn from_ib(value: u8) -> Option<Self> {
        Some(match value {
            1 => Self::Mtu256,
            2 => Self::Mtu512,
            3 => Self::Mtu1024,
            4 => Self::Mtu2048,
            5 => Self::Mtu4096,
            _ => return None,
        })
    }

    /// Payload bytes per packet.
    #[inline]
    #[must_use]
    pub const fn bytes(self) -> usize {
        128 << self as u8
    }

    /// The largest MTU not exceeding `bytes`, e.g. for a netdev MTU minus
    /// the RoCEv2 headers; `None` below 256.
    #[must_use]
    pub const fn largest_within(bytes: usize) -> Option<Self> {
        let mut value = Self::Mtu4096 as u8;
        while value >= Self::Mtu256 as u8 {
            if let Some(mtu) = Self::from_ib(value) {
                if mtu.bytes() <= bytes {
                    return Some(mtu);
                }
            }
            value -= 1;
        }
        None
    }
}

/// The extended headers of a packet; exactly those the opcode lists are
/// `Some`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ExtHeaders {
    /// RDETH (RD only).
    pub rdeth: Option<Rdeth>,
    /// DETH (UD and RD requests).
    pub deth: Option<Deth>,
    /// XRCETH (XRC requests).
    pub xrceth: Option<Xrceth>,
    /// RETH (first/only RDMA write, read request, flush, atomic write).
    pub reth: Option<Reth>,
    /// FETH (flush).
    pub feth: Option<Feth>,
    /// AtomicETH (compare & swap, fetch & add).
    pub atomic_eth: Option<AtomicEth>,
    /// AETH (ACK, atomic ACK, read response first/last/only).
    pub aeth: Option<Aeth>,
    /// AtomicAckETH (atomic ACK).
    pub atomic_ack_eth: Option<AtomicAckEth>,
    /// ImmDt (with-immediate sends and writes).
    pub imm_dt: Option<ImmDt>,
    /// IETH (send with invalidate).
    pub ieth: Option<Ieth>,
}

impl ExtHeaders {
    /// Whether the header `kind` is present. The CNP reserved block has no
    /// contents to carry and counts as always present.
    #[must_use]
    pub const fn contains(&self, kind: ExtHeader) -> bool {
        match kind {
            ExtHeader::Rdeth => self.rdeth.is_some(),
            ExtHeader::Deth => self.deth.is_some(),
            ExtHeader::Xrceth => self.xrceth.is_some(),
            ExtHeader::Reth => self.reth.is_some(),
            ExtHeader::Feth => self.feth.is_some(),
            ExtHeader::AtomicEth => self.atomic_eth.is_some(),
            ExtHeader::Aeth => self.aeth.is_some(),
            ExtHeader::AtomicAckEth => self.atomic_ack_eth.is_some(),
            ExtHeader::ImmDt => self.imm_dt.is_some(),
            ExtHeader::Ieth => self.ieth.is_some(),
            ExtHeader::CnpReserved => true,
        }
    }

    /// The headers present, as a set of [`ExtHeader::bit`]s (the CNP reserved block, with
    /// nothing to carry, is left out).
    #[must_use]
    pub const fn set(&self) -> u16 {
        let present = [
            (self.rdeth.is_some(), ExtHeader::Rdeth),
            (self.deth.is_some(), ExtHeader::Deth),
            (self.xrceth.is_some(), ExtHeader::Xrceth),
            (self.reth.is_some(), ExtHeader::Reth),
            (self.feth.is_some(), ExtHeader::Feth),
            (self.atomic_eth.is_some(), ExtHeader::AtomicEth),
            (self.aeth.is_some(), ExtHeader::Aeth),
            (self.atomic_ack_eth.is_some(), ExtHeader::AtomicAckEth),
            (self.imm_dt.is_some(), ExtHeader::ImmDt),
            (self.ieth.is_some(), ExtHeader::Ieth),
        ];
        let mut set = 0;
        let mut i = 0;
        while i < present.len() {
            if present[i].0 {
                set |= present[i].1.bit();
            }
            i += 1;
        }
        set
    }

    fn parse_one(&mut self, kind: ExtHeader, buf: &[u8]) -> Result<(), HeaderError> {
        match kind {
            ExtHeader::Rdeth => self.rdeth = Some(Rdeth::parse(buf)?),
            ExtHeader::Deth => self.deth = Some(Deth::parse(buf)?),
            ExtHeader::Xrceth => self.xrceth = Some(Xrceth::parse(buf)?),
            ExtHeader::Reth => self.reth = Some(Reth::parse(buf)?),
            ExtHeader::Feth => self.feth = Some(Feth::parse(buf)?),
            ExtHeader::AtomicEth => self.atomic_eth = Some(AtomicEth::parse(buf)?),
            ExtHeader::Aeth => self.aeth = Some(Aeth::parse(buf)?),
            ExtHeader::AtomicAckEth => self.atomic_ack_eth = Some(AtomicAckEth::parse(buf)?),
            ExtHeader::ImmDt => self.imm_dt = Some(ImmDt::parse(buf)?),
            ExtHeader::Ieth => self.ieth = Some(Ieth::parse(buf)?),
            ExtHeader::CnpReserved => {
                CnpReserved::parse(buf)?;
            }
        }
        Ok(())
    }

    // Out of line: inlined into `write_headers`' loop, every header's fields were byte-swapped
    // in front of it, for the one or two headers a packet carries.
    #[inline(never)]
    fn write_one(&self, kind: ExtHeader, buf: &mut [u8]) -> Result<usize, PacketError> {
        let missing = PacketError::MissingHeader(kind);
        let written = match kind {
            ExtHeader::Rdeth => self.rdeth.ok_or(missing)?.write(buf),
            ExtHeader::Deth => self.deth.ok_or(missing)?.write(buf),
            ExtHeader::Xrceth => self.xrceth.ok_or(missing)?.write(buf),
            ExtHeader::Reth => self.reth.ok_or(missing)?.write(buf),
            ExtHeader::Feth => self.feth.ok_or(missing)?.write(buf),
            ExtHeader::AtomicEth => self.atomic_eth.ok_or(missing)?.write(buf),
            ExtHeader::Aeth => self.aeth.ok_or(missing)?.write(buf),
            ExtHeader::AtomicAckEth => self.atomic_ack_eth.ok_or(missing)?.write(buf),
            ExtHeader::ImmDt => self.imm_dt.ok_or(missing)?.write(buf),
            ExtHeader::Ieth => self.ieth.ok_or(missing)?.write(buf),
            ExtHeader::CnpReserved => CnpReserved.write(buf),
        };
        Ok(written?)
    }
}

/// Every extended header kind that [`ExtHeaders`] can hold, for the
/// "given but not wanted" check of [`write_headers`].
const CARRIED_KINDS: [ExtHeader; 10] = [
    ExtHeader::Rdeth,
    ExtHeader::Deth,
    ExtHeader::Xrceth,
    ExtHeader::Reth,
    ExtHeader::Feth,
    ExtHeader::AtomicEth,
    ExtHeader::Aeth,
    ExtHeader::AtomicAckEth,
    ExtHeader::ImmDt,
    ExtHeader::Ieth,
];

/// A parsed packet, borrowing its payload from the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Base transport header.
    pub bth: Bth,
    /// What the opcode implies.
    pub info: &'static OpcodeInfo,
    /// Extended headers.
    pub ext: ExtHeaders,
    /// Payload, without pad.
    pub payload: &'a [u8],
    /// The ICRC as found on the wire, in the representation of
    /// [`super::icrc`].
    pub icrc: u32,
    /// BTH through pad: the part of the UDP payload the ICRC covers.
    pub icrc_covered: &'a [u8],
}

/// Number of pad bytes that bring `payload_len` to a multiple of 4.
#[inline]
#[must_use]
pub const fn pad_count(payload_len: usize) -> u8 {
    (payload_len.wrapping_neg() & 3) as u8
}

/// Size of the UDP payload of a packet with opcode `info` and a payload of
/// `payload_len` bytes: headers, payload, pad and ICRC.
#[inline]
#[must_use]
pub const fn packet_len(info: &OpcodeInfo, payload_len: usize) -> usize {
    info.header_len() + payload_len + pad_count(payload_len) as usize + ICRC_LEN
}

/// Parses the UDP payload of a RoCEv2 packet.
///
/// `pmtu`, when given, is the path MTU in bytes that the payload must not
/// exceed; receivers of connected QPs pass theirs, UD receivers the port's.
pub fn parse(buf: &[u8], pmtu: Option<usize>) -> Result<Packet<'_>, PacketError> {
    let bth = Bth::parse(buf)?;
    let info = opcode::lookup(bth.opcode).ok_or(PacketError::UnknownOpcode(bth.opcode))?;
    let header_len = info.header_len();
    let needed = header_len + ICRC_LEN;
    if buf.len() < needed {
        return Err(PacketError::Truncated {
            needed,
            available: buf.len(),
        });
    }
    if buf.len() % 4 != 0 {
        return Err(PacketError::UnalignedLength(buf.len()));
    }
    let Some((covered, wire_icrc)) = buf.split_last_chunk::<ICRC_LEN>() else {
        return Err(PacketError::Truncated {
            needed,
            available: buf.len(),
        });
    };
    let (headers, body) = covered.split_at(header_len);

    let mut ext = ExtHeaders::default();
    let mut offset = Bth::LEN;
    for &kind in info.headers {
        let rest = headers.get(offset..).unwrap_or_default();
        ext.parse_one(kind, rest)?;
        offset += kind.wire_len();
    }

    if !info.has_payload && !body.is_empty() {
        return Err(PacketError::UnexpectedPayload(body.len()));
    }
    let Some(payload_len) = body.len().checked_sub(usize::from(bth.pad_count)) else {
        return Err(PacketError::PadExceedsPayload {
            pad_count: bth.pad_count,
            available: body.len(),
        });
    };
    let (payload, _pad) = body.split_at(payload_len);
    if let Some(mtu) = pmtu {
        if payload.len() > mtu {
            return Err(PacketError::PayloadExceedsMtu {
                len: payload.len(),
                mtu,
            });
        }
    }

    Ok(Packet {
        bth,
        info,
        ext,
        payload,
        icrc: icrc::from_wire(*wire_icrc),
        icrc_covered: covered,
    })
}

/// Writes the BTH and the extended headers required by `bth.opcode` to the
/// start of `buf` and returns their total length (the payload offset).
///
/// `ext` must hold exactly the headers the opcode carries, so that a state
/// machine bug shows up as an error here rather than as a malformed packet
/// on the wire.
pub fn write_headers(buf: &mut [u8], bth: &Bth, ext: &ExtHeaders) -> Result<usize, PacketError> {
    let info = opcode::lookup(bth.opcode).ok_or(PacketError::UnknownOpcode(bth.opcode))?;
    let unexpected = ext.set() & !info.header_set();
    if unexpected != 0 {
        let kind = CARRIED_KINDS
            .into_iter()
            .find(|k| unexpected & k.bit() != 0);
        return Err(PacketError::UnexpectedHeader(
            kind.unwrap_or(ExtHeader::CnpReserved),
        ));
    }
    let header_len = info.header_len();
    if buf.len() < header_len {
        return Err(PacketError::Truncated {
            needed: header_len,
            available: buf.len(),
        });
    }
    let mut offset = bth.write(buf)?;
    for &kind in info.headers {
        let rest = buf.get_mut(offset..).unwrap_or_default();
        offset += ext.write_one(kind, rest)?;
    }
    Ok(offset)
}

/// Writes a complete packet (headers, payload, zeroed pad and a zeroed ICRC
/// slot) and returns its length. The BTH pad count is derived from the
/// payload length; the ICRC must be filled in by [`super::icrc`] once the
/// IP and UDP headers are known.
pub fn write_packet(
    buf: &mut [u8],
    bth: &Bth,
    ext: &ExtHeaders,
    payload: &[u8],
) -> Result<usize, PacketError> {
    let info = opcode::lookup(bth.opcode).ok_or(PacketError::UnknownOpcode(bth.opcode))?;
    if !info.has_payload && !payload.is_empty() {
        return Err(PacketError::UnexpectedPayload(payload.len()));
    }
    let total = packet_len(info, payload.len());
    if buf.len() < total {
        return Err(PacketError::Truncated {
            needed: total,
            available: buf.len(),
        });
    }
    let bth = Bth {
        pad_count: pad_count(payload.len()),
        ..*bth
    };
    let header_len = write_headers(buf, &bth, ext)?;
    let (_, rest) = buf.split_at_mut(header_len);
    let (payload_dst, trailer) = rest.split_at_mut(payload.len());
    payload_dst.copy_from_slice(payload);
    let trailer_len = total - header_len - payload.len();
    trailer.get_mut(..trailer_len).unwrap_or_default().fill(0);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::super::aeth::{CreditCode, NakCode, Syndrome};
    use super::super::opcode::codes;
    use super::super::psn::{Msn, Psn};
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn bth(opcode: u8) -> Bth {
        Bth {
            opcode,
            pkey: 0xFFFF,
            dest_qp: 0x11,
            ack_req: true,
            psn: Psn::new(0x42),
            ..Bth::default()
        }
    }

    fn build(bth: &Bth, ext: &ExtHeaders, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0xAAu8; 8192];
        let len = write_packet(&mut buf, bth, ext, payload).unwrap();
        buf.truncate(len);
        buf
    }

    #[test]
    fn send_only_roundtrip_with_pad() {
        let payload = [1, 2, 3, 4, 5];
        let wire = build(&bth(codes::RC_SEND_ONLY), &ExtHeaders::default(), &payload);
        assert_eq!(wire.len(), 12 + 5 + 3 + 4);
        assert_eq!(&wire[17..20], &[0, 0, 0]);
        let pkt = parse(&wire, Some(256)).unwrap();
        assert_eq!(pkt.bth.pad_count, 3);
        assert_eq!(pkt.payload, &payload);
        assert_eq!(pkt.info.opcode, codes::RC_SEND_ONLY);
        assert_eq!(pkt.ext, ExtHeaders::default());
        assert_eq!(pkt.icrc_covered.len(), wire.len() - 4);
    }

    #[test]
    fn write_only_imm_roundtrip() {
        let ext = ExtHeaders {
            reth: Some(Reth {
                va: 0x1000,
                rkey: 0xABCD,
                dma_len: 8,
            }),
            imm_dt: Some(ImmDt {
                imm_data: 0xCAFE_F00D,
            }),
            ..ExtHeaders::default()
        };
        let wire = build(
            &bth(codes::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE),
            &ext,
            &[9; 8],
        );
        let pkt = parse(&wire, None).unwrap();
        assert_eq!(pkt.ext, ext);
        assert_eq!(pkt.payload, &[9; 8]);
        // ImmDt sits after the RETH on the wire.
        assert_eq!(&wire[28..32], &[0xCA, 0xFE, 0xF0, 0x0D]);
    }

    #[test]
    fn ack_roundtrip() {
        let ext = ExtHeaders {
            aeth: Some(Aeth {
                syndrome: Syndrome::Ack(CreditCode::from_posted_wqes(100)),
                msn: Msn::new(7),
            }),
            ..ExtHeaders::default()
        };
        let wire = build(&bth(codes::RC_ACKNOWLEDGE), &ext, &[]);
        assert_eq!(wire.len(), 20);
        assert_eq!(parse(&wire, None).unwrap().ext, ext);
    }

    #[test]
    fn xrc_and_ud_layouts() {
        let ext = ExtHeaders {
            xrceth: Some(Xrceth { xrc_srq: 0x77 }),
            atomic_eth: Some(AtomicEth::default()),
            ..ExtHeaders::default()
        };
        let wire = build(&bth(codes::XRC_BASE + codes::RC_FETCH_ADD), &ext, &[]);
        assert_eq!(wire.len(), 12 + 4 + 28 + 4);
        assert_eq!(&wire[12..16], &[0, 0, 0, 0x77]);
        assert_eq!(parse(&wire, None).unwrap().ext, ext);

        let ext = ExtHeaders {
            deth: Some(Deth {
                qkey: 0x8001_0000,
                src_qp: 1,
            }),
            imm_dt: Some(ImmDt { imm_data: 5 }),
            ..ExtHeaders::default()
        };
        let wire = build(&bth(codes::UD_SEND_ONLY_WITH_IMMEDIATE), &ext, &[1; 3]);
        let pkt = parse(&wire, None).unwrap();
        assert_eq!(pkt.ext, ext);
        assert_eq!(pkt.payload, &[1; 3]);
    }

    #[test]
    fn cnp_layout() {
        let wire = build(&bth(codes::CNP), &ExtHeaders::default(), &[]);
        assert_eq!(wire.len(), 12 + 16 + 4);
        assert!(wire[12..28].iter().all(|&b| b == 0));
        assert!(parse(&wire, None).is_ok());
    }

    #[test]
    fn rejects_malformed() {
        let ack = ExtHeaders {
            aeth: Some(Aeth {
                syndrome: Syndrome::Nak(NakCode::InvalidRequest),
                msn: Msn::ZERO,
            }),
            ..ExtHeaders::default()
        };
        let wire = build(&bth(codes::RC_ACKNOWLEDGE), &ack, &[]);

        assert_eq!(
            parse(&wire[..11], None),
            Err(PacketError::Header(HeaderError::Truncated {
                needed: 12,
                available: 11
            }))
        );
        assert_eq!(
            parse(&wire[..16], None),
            Err(PacketError::Truncated {
                needed: 20,
                available: 16
            })
        );

        let mut long = wire.clone();
        long.extend_from_slice(&[0; 4]);
        assert_eq!(parse(&long, None), Err(PacketError::UnexpectedPayload(4)));

        let mut odd = build(&bth(codes::RC_SEND_ONLY), &ExtHeaders::default(), &[0; 4]);
        odd.push(0);
        assert_eq!(parse(&odd, None), Err(PacketError::UnalignedLength(21)));

        let mut pad = wire.clone();
        pad[1] |= 0x10; // pad count 1 on a packet without payload
        assert_eq!(
            parse(&pad, None),
            Err(PacketError::PadExceedsPayload {
                pad_count: 1,
                available: 0
            })
        );

        let mut tver = wire.clone();
        tver[1] |= 0x02;
        assert_eq!(
            parse(&tver, None),
            Err(PacketError::Header(
                HeaderError::UnsupportedTransportVersion(2)
            ))
        );

        let mut bad_syndrome = wire.clone();
        bad_syndrome[12] = 0x40;
        assert_eq!(
            parse(&bad_syndrome, None),
            Err(PacketError::Header(HeaderError::ReservedSyndrome(0x40)))
        );

        let mut reserved_op = wire;
        reserved_op[0] = 0x15;
        assert_eq!(
            parse(&reserved_op, None),
            Err(PacketError::UnknownOpcode(0x15))
        );

        let big = build(
            &bth(codes::RC_SEND_MIDDLE),
            &ExtHeaders::default(),
            &[0; 260],
        );
        assert_eq!(
            parse(&big, Some(Mtu::Mtu256.bytes())),
            Err(PacketError::PayloadExceedsMtu { len: 260, mtu: 256 })
        );
        assert!(parse(&big, Some(Mtu::Mtu512.bytes())).is_ok());
    }

    #[test]
    fn builder_checks_headers() {
        let mut buf = [0u8; 64];
        assert_eq!(
            write_headers(
                &mut buf,
                &bth(codes::RC_RDMA_READ_REQUEST),
                &ExtHeaders::default()
            ),
            Err(PacketError::MissingHeader(ExtHeader::Reth))
        );
        let extra = ExtHeaders {
            ieth: Some(Ieth { rkey: 1 }),
            ..ExtHeaders::default()
        };
        assert_eq!(
            write_headers(&mut buf, &bth(codes::RC_SEND_ONLY), &extra),
            Err(PacketError::UnexpectedHeader(ExtHeader::Ieth))
        );
        assert_eq!(
            write_headers(&mut buf, &bth(0x15), &ExtHeaders::default()),
            Err(PacketError::UnknownOpcode(0x15))
        );
        assert_eq!(
            write_headers(&mut buf, &bth(codes::RC_SEND_ONLY_WITH_INVALIDATE), &extra),
            Ok(16)
        );
        assert_eq!(
            write_headers(
                &mut buf[..15],
                &bth(codes::RC_SEND_ONLY_WITH_INVALIDATE),
                &extra
            ),
            Err(PacketError::Truncated {
                needed: 16,
                available: 15
            })
        );
        assert_eq!(
            write_packet(
                &mut buf,
                &bth(codes::RC_ACKNOWLEDGE),
                &ExtHeaders::default(),
                &[1]
            ),
            Err(PacketError::UnexpectedPayload(1))
        );
    }

    #[test]
    fn mtu_values() {
        assert_eq!(Mtu::Mtu256.bytes(), 256);
        assert_eq!(Mtu::Mtu4096.bytes(), 4096);
        assert_eq!(Mtu::from_ib(0), None);
        assert_eq!(Mtu::from_ib(3), Some(Mtu::Mtu1024));
        // 1500-byte Ethernet minus IPv4 (20), UDP (8), BTH (12), RETH (16)
        // and ICRC (4) leaves room for 1024.
        assert_eq!(Mtu::largest_within(1440), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::largest_within(255), None);
        assert_eq!(Mtu::largest_within(9000), Some(Mtu::Mtu4096));
    }

    #[test]
    fn pad_counts() {
        assert_eq!(pad_count(0), 0);
        assert_eq!(pad_count(1), 3);
        assert_eq!(pad_count(2), 2);
        assert_eq!(pad_count(3), 1);
        assert_eq!(pad_count(4), 0);
    }

    proptest! {
        #[test]
        fn parse_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = parse(&buf, Some(64));
        }

        #[test]
        fn every_opcode_roundtrips(
            index in 0usize..opcode::OPCODES.len(),
            payload in proptest::collection::vec(any::<u8>(), 0..40),
            word in any::<u32>(),
        ) {
            let info = &opcode::OPCODES[index];
            let payload: &[u8] = if info.has_payload { &payload } else { &[] };
            let mut ext = ExtHeaders::default();
            for &kind in info.headers {
                match kind {
                    ExtHeader::Rdeth => ext.rdeth = Some(Rdeth { ee_context: word & 0xFF_FFFF }),
                    ExtHeader::Deth => ext.deth = Some(Deth { qkey: word, src_qp: word >> 8 }),
                    ExtHeader::Xrceth => ext.xrceth = Some(Xrceth { xrc_srq: word >> 8 }),
                    ExtHeader::Reth => ext.reth = Some(Reth { va: u64::from(word) << 3, rkey: word, dma_len: 40 }),
                    ExtHeader::Feth => ext.feth = Some(Feth { selectivity_level: 1, placement_type: 1 }),
                    ExtHeader::AtomicEth => ext.atomic_eth = Some(AtomicEth { va: 8, rkey: word, swap_add: 1, compare: 2 }),
                    ExtHeader::Aeth => ext.aeth = Some(Aeth { syndrome: Syndrome::ACK_NO_CREDIT_INFO, msn: Msn::new(word) }),
                    ExtHeader::AtomicAckEth => ext.atomic_ack_eth = Some(AtomicAckEth { orig_remote_data: u64::from(word) }),
                    ExtHeader::ImmDt => ext.imm_dt = Some(ImmDt { imm_data: word }),
                    ExtHeader::Ieth => ext.ieth = Some(Ieth { rkey: word }),
                    ExtHeader::CnpReserved => {}
                }
            }
            let wire = build(&bth(info.opcode), &ext, payload);
            prop_assert_eq!(wire.len(), packet_len(info, payload.len()));
            prop_assert_eq!(wire.len() % 4, 0);
            let pkt = parse(&wire, None).unwrap();
            prop_assert_eq!(pkt.info, info);
            prop_assert_eq!(pkt.ext, ext);
            prop_assert_eq!(pkt.payload, payload);
        }
    }
}
