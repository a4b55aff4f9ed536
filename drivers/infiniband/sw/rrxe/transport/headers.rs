// SPDX-License-Identifier: GPL-2.0

//! Transport headers: the BTH and the extended transport headers.
//!
//! Layouts follow IBA 9.2 (BTH) and 9.3 (extended headers), plus the
//! XRCETH of IBA Annex A14 and the FETH of the IBA 1.5 memory placement
//! extensions. All multi-byte fields are big-endian on the wire. Parsing
//! reads the first `LEN` bytes of a slice and ignores anything after them;
//! writing fills exactly `LEN` bytes. Reserved bits are written as zero and
//! ignored on receive, as IBA 9.2 requires, except where the spec makes a
//! value invalid (BTH TVer, AETH syndrome).

use super::aeth::{AethError, Syndrome};
use super::psn::{Msn, Psn, SEQ_MASK};

/// Errors parsing or writing a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// The buffer is shorter than the header.
    Truncated {
        /// Bytes the header needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
    /// The BTH transport header version is not 0, the only version defined
    /// (IBA 9.2: packets with another TVer are silently dropped).
    UnsupportedTransportVersion(u8),
    /// The AETH syndrome uses a reserved encoding; carries the byte.
    ReservedSyndrome(u8),
    /// On write: a value does not fit in its wire field (a QPN or SRQ
    /// number above 24 bits, a pad count above 3, ...).
    FieldTooWide,
}

impl From<AethError> for HeaderError {
    #[inline]
    fn from(err: AethError) -> Self {
        match err {
            AethError::ReservedSyndrome(byte) => Self::ReservedSyndrome(byte),
        }
    }
}

/// A fixed-size header that can be read from and written to the wire.
pub trait Header: Sized {
    /// Size of the header on the wire, in bytes.
    const LEN: usize;

    /// Reads the header from the start of `buf`.
    fn parse(buf: &[u8]) -> Result<Self, HeaderError>;

    /// Writes the header to the start of `buf`, returning [`Header::LEN`].
    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError>;
}

/// Panic-free big-endian reader over a slice whose length was checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    #[inline]
    fn new(buf: &'a [u8], needed: usize) -> Result<Self, HeaderError> {
        if buf.len() < needed {
            return Err(HeaderError::Truncated {
                needed,
                available: buf.len(),
            });
        }
        Ok(Self(buf))
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], HeaderError> {
        let Some((head, rest)) = self.0.split_first_chunk::<N>() else {
            return Err(HeaderError::Truncated {
                needed: N,
                available: self.0.len(),
            });
        };
        self.0 = rest;
        Ok(*head)
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, HeaderError> {
        Ok(self.array::<1>()?[0])
    }

    #[inline]
    fn u16(&mut self) -> Result<u16, HeaderError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, HeaderError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    #[inline]
    fn u64(&mut self) -> Result<u64, HeaderError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

/// Panic-free big-endian writer, the counterpart of [`Reader`].
struct Writer<'a>(&'a mut [u8]);

impl<'a> Writer<'a> {
    #[inline]
    fn new(buf: &'a mut [u8], needed: usize) -> Result<Self, HeaderError> {
        if buf.len() < needed {
            return Err(HeaderError::Truncated {
                needed,
                available: buf.len(),
            });
        }
        Ok(Self(buf))
    }

    #[inline]
    fn array<const N: usize>(&mut self, bytes: [u8; N]) -> Result<(), HeaderError> {
        let buf = core::mem::take(&mut self.0);
        let available = buf.len();
        let Some((head, rest)) = buf.split_first_chunk_mut::<N>() else {
            return Err(HeaderError::Truncated {
                needed: N,
                available,
            });
        };
        *head = bytes;
        self.0 = rest;
        Ok(())
    }

    #[inline]
    fn u8(&mut self, v: u8) -> Result<(), HeaderError> {
        self.array([v])
    }

    #[inline]
    fn u16(&mut self, v: u16) -> Result<(), HeaderError> {
        self.array(v.to_be_bytes())
    }

    #[inline]
    fn u32(&mut self, v: u32) -> Result<(), HeaderError> {
        self.array(v.to_be_bytes())
    }

    #[inline]
    fn u64(&mut self, v: u64) -> Result<(), HeaderError> {
        self.array(v.to_be_bytes())
    }
}

/// Checks that a 24-bit identifier (QPN, EECN, SRQ number) fits its field.
#[inline]
fn check_24(value: u32) -> Result<u32, HeaderError> {
    if value > SEQ_MASK {
        Err(HeaderError::FieldTooWide)
    } else {
        Ok(value)
    }
}

/// Largest 24-bit identifier: QPN `0xFFFFFF` is the multicast QP.
pub const MAX_24BIT_ID: u32 = SEQ_MASK;

/// Base Transport Header (IBA 9.2), present in every transport packet.
///
/// ```text
///  byte 0   OpCode
///  byte 1   SE | M | PadCnt(2) | TVer(4)
///  byte 2-3 P_Key
///  byte 4   FECN | BECN | resv6a
///  byte 5-7 DestQP
///  byte 8   AckReq | resv7
///  byte 9-11 PSN
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bth {
    /// Opcode: transport service in bits 7..5, operation in bits 4..0.
    pub opcode: u8,
    /// Solicited Event: the responder should raise a completion event.
    pub solicited_event: bool,
    /// MigReq: automatic path migration state of the sender.
    pub mig_req: bool,
    /// Pad count: bytes (0..=3) appended to the payload to reach a 4-byte
    /// multiple.
    pub pad_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qp: u32,
    /// AckReq: the requester asks for an acknowledgement of this packet.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

const BTH_SE: u8 = 0x80;
const BTH_MIG: u8 = 0x40;
const BTH_PAD_SHIFT: u8 = 4;
const BTH_PAD_MASK: u8 = 0x3;
const BTH_TVER_MASK: u8 = 0x0F;
const BTH_FECN: u8 = 0x80;
const BTH_BECN: u8 = 0x40;
const BTH_ACK_REQ: u8 = 0x80;

impl Bth {
    /// The only defined transport header version.
    pub const TVER: u8 = 0;

    /// Byte offset of FECN/BECN/resv6a, which the ICRC treats as all ones
    /// because switches may rewrite it (IBA A17.4).
    pub const RESV8A_OFFSET: usize = 4;
}

impl Header for Bth {
    const LEN: usize = 12;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        let opcode = r.u8()?;
        let flags = r.u8()?;
        let tver = flags & BTH_TVER_MASK;
        if tver != Self::TVER {
            return Err(HeaderError::UnsupportedTransportVersion(tver));
        }
        let pkey = r.u16()?;
        let fecn_becn_qp = r.u32()?;
        let ack_psn = r.u32()?;
        let [fecn_becn, ..] = fecn_becn_qp.to_be_bytes();
        let [ack, ..] = ack_psn.to_be_bytes();
        Ok(Self {
            opcode,
            solicited_event: flags & BTH_SE != 0,
            mig_req: flags & BTH_MIG != 0,
            pad_count: (flags >> BTH_PAD_SHIFT) & BTH_PAD_MASK,
            pkey,
            fecn: fecn_becn & BTH_FECN != 0,
            becn: fecn_becn & BTH_BECN != 0,
            dest_qp: fecn_becn_qp & SEQ_MASK,
            ack_req: ack & BTH_ACK_REQ != 0,
            psn: Psn::new(ack_psn),
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        if self.pad_count > BTH_PAD_MASK {
            return Err(HeaderError::FieldTooWide);
        }
        let dest_qp = check_24(self.dest_qp)?;
        let mut w = Writer::new(buf, Self::LEN)?;
        w.u8(self.opcode)?;
        let mut flags = (self.pad_count << BTH_PAD_SHIFT) | Self::TVER;
        if self.solicited_event {
            flags |= BTH_SE;
        }
        if self.mig_req {
            flags |= BTH_MIG;
        }
        w.u8(flags)?;
        w.u16(self.pkey)?;
        let mut fecn_becn = 0;
        if self.fecn {
            fecn_becn |= BTH_FECN;
        }
        if self.becn {
            fecn_becn |= BTH_BECN;
        }
        w.u32(u32::from(fecn_becn) << 24 | dest_qp)?;
        let ack = if self.ack_req { BTH_ACK_REQ } else { 0 };
        w.u32(u32::from(ack) << 24 | self.psn.get())?;
        Ok(Self::LEN)
    }
}

/// Reliable Datagram Extended Transport Header (IBA 9.3.1): the EE context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Rdeth {
    /// End-to-end context number (24 bits).
    pub ee_context: u32,
}

impl Header for Rdeth {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        Ok(Self {
            ee_context: r.u32()? & SEQ_MASK,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        let ee_context = check_24(self.ee_context)?;
        Writer::new(buf, Self::LEN)?.u32(ee_context)?;
        Ok(Self::LEN)
    }
}

/// Datagram Extended Transport Header (IBA 9.3.2), on UD and RD requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Deth {
    /// Queue key the receiving QP must match.
    pub qkey: u32,
    /// Source QP number (24 bits), needed to reply to a datagram.
    pub src_qp: u32,
}

impl Header for Deth {
    const LEN: usize = 8;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        Ok(Self {
            qkey: r.u32()?,
            src_qp: r.u32()? & SEQ_MASK,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        let src_qp = check_24(self.src_qp)?;
        let mut w = Writer::new(buf, Self::LEN)?;
        w.u32(self.qkey)?;
        w.u32(src_qp)?;
        Ok(Self::LEN)
    }
}

/// XRC Extended Transport Header (IBA Annex A14): the target SRQ of an XRC
/// request. It immediately follows the BTH, before any other extended
/// header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Xrceth {
    /// XRC shared receive queue number (24 bits).
    pub xrc_srq: u32,
}

impl Header for Xrceth {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        Ok(Self {
            xrc_srq: r.u32()? & SEQ_MASK,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        let xrc_srq = check_24(self.xrc_srq)?;
        Writer::new(buf, Self::LEN)?.u32(xrc_srq)?;
        Ok(Self::LEN)
    }
}

/// RDMA Extended Transport Header (IBA 9.3.3): the remote buffer of an RDMA
/// write or read, sent in the first (or only) packet of the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key of the target memory region.
    pub rkey: u32,
    /// Total length of the whole message, not of this packet.
    pub dma_len: u32,
}

impl Header for Reth {
    const LEN: usize = 16;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        Ok(Self {
            va: r.u64()?,
            rkey: r.u32()?,
            dma_len: r.u32()?,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        let mut w = Writer::new(buf, Self::LEN)?;
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u32(self.dma_len)?;
        Ok(Self::LEN)
    }
}

/// Flush Extended Transport Header (IBA 1.5 memory placement extensions),
/// preceding the RETH of an RDMA FLUSH request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Feth {
    /// Selectivity level (2 bits): which memory the flush applies to.
    pub selectivity_level: u8,
    /// Placement type (4 bits): global visibility and/or persistence.
    pub placement_type: u8,
}

const FETH_SEL_SHIFT: u8 = 4;
const FETH_SEL_MASK: u8 = 0x3;
const FETH_PLT_MASK: u8 = 0xF;

impl Header for Feth {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        let [.., bits] = r.u32()?.to_be_bytes();
        Ok(Self {
            selectivity_level: (bits >> FETH_SEL_SHIFT) & FETH_SEL_MASK,
            placement_type: bits & FETH_PLT_MASK,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        if self.selectivity_level > FETH_SEL_MASK || self.placement_type > FETH_PLT_MASK {
            return Err(HeaderError::FieldTooWide);
        }
        let bits = self.selectivity_level << FETH_SEL_SHIFT | self.placement_type;
        Writer::new(buf, Self::LEN)?.u32(u32::from(bits))?;
        Ok(Self::LEN)
    }
}

/// Atomic Extended Transport Header (IBA 9.3.4) of Compare&Swap and
/// Fetch&Add requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicEth {
    /// Remote virtual address; must be 8-byte aligned (checked by the
    /// responder, not here).
    pub va: u64,
    /// Remote key of the target memory region.
    pub rkey: u32,
    /// Swap value (Compare&Swap) or addend (Fetch&Add).
    pub swap_add: u64,
    /// Compare value (Compare&Swap only).
    pub compare: u64,
}

impl Header for AtomicEth {
    const LEN: usize = 28;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        Ok(Self {
            va: r.u64()?,
            rkey: r.u32()?,
            swap_add: r.u64()?,
            compare: r.u64()?,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        let mut w = Writer::new(buf, Self::LEN)?;
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u64(self.swap_add)?;
        w.u64(self.compare)?;
        Ok(Self::LEN)
    }
}

/// ACK Extended Transport Header (IBA 9.3.5): syndrome and MSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aeth {
    /// ACK / RNR NAK / NAK and its 5-bit value.
    pub syndrome: Syndrome,
    /// Message sequence number of the last message completed by the
    /// responder.
    pub msn: Msn,
}

impl Header for Aeth {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        let word = r.u32()?;
        let [syndrome, ..] = word.to_be_bytes();
        Ok(Self {
            syndrome: Syndrome::from_byte(syndrome)?,
            msn: Msn::new(word),
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        let word = u32::from(self.syndrome.to_byte()) << 24 | self.msn.get();
        Writer::new(buf, Self::LEN)?.u32(word)?;
        Ok(Self::LEN)
    }
}

/// Atomic ACK Extended Transport Header (IBA 9.3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicAckEth {
    /// Value of the target location before the atomic operation.
    pub orig_remote_data: u64,
}

impl Header for AtomicAckEth {
    const LEN: usize = 8;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        Ok(Self {
            orig_remote_data: r.u64()?,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        Writer::new(buf, Self::LEN)?.u64(self.orig_remote_data)?;
        Ok(Self::LEN)
    }
}

/// Immediate Data Extended Transport Header (IBA 9.3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ImmDt {
    /// The immediate data read as a big-endian number; `to_be_bytes()`
    /// gives back the wire bytes, which is also the in-memory form of the
    /// verbs' `__be32 imm_data`.
    pub imm_data: u32,
}

impl Header for ImmDt {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        Ok(Self { imm_data: r.u32()? })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        Writer::new(buf, Self::LEN)?.u32(self.imm_data)?;
        Ok(Self::LEN)
    }
}

/// Invalidate Extended Transport Header (IBA 9.3.8) of Send with
/// Invalidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Ieth {
    /// R_Key the responder must invalidate on completion.
    pub rkey: u32,
}

impl Header for Ieth {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let mut r = Reader::new(buf, Self::LEN)?;
        Ok(Self { rkey: r.u32()? })
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        Writer::new(buf, Self::LEN)?.u32(self.rkey)?;
        Ok(Self::LEN)
    }
}

/// The 16 reserved bytes that follow the BTH of a RoCEv2 Congestion
/// Notification Packet (IBA Annex A17, congestion management); sent as
/// zero, ignored on receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CnpReserved;

impl Header for CnpReserved {
    const LEN: usize = 16;

    fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        Reader::new(buf, Self::LEN)?;
        Ok(Self)
    }

    fn write(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        Writer::new(buf, Self::LEN)?.array([0; 16])?;
        Ok(Self::LEN)
    }
}

/// Kinds of extended transport header, as listed per opcode in
/// [`super::opcode`]. Their wire order is the order of the opcode's list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    /// [`Rdeth`].
    Rdeth,
    /// [`Deth`].
    Deth,
    /// [`Xrceth`].
    Xrceth,
    /// [`Reth`].
    Reth,
    /// [`Feth`].
    Feth,
    /// [`AtomicEth`].
    AtomicEth,
    /// [`Aeth`].
    Aeth,
    /// [`AtomicAckEth`].
    AtomicAckEth,
    /// [`ImmDt`].
    ImmDt,
    /// [`Ieth`].
    Ieth,
    /// [`CnpReserved`].
    CnpReserved,
}

impl ExtHeader {
    /// The header's bit in a set of headers (`OpcodeInfo::header_set`, `ExtHeaders::set`).
    #[inline]
    #[must_use]
    pub const fn bit(self) -> u16 {
        1 << self as u8
    }

    /// Size of the header on the wire, in bytes.
    #[inline]
    #[must_use]
    pub const fn wire_len(self) -> usize {
        match self {
            Self::Rdeth => Rdeth::LEN,
            Self::Deth => Deth::LEN,
            Self::Xrceth => Xrceth::LEN,
            Self::Reth => Reth::LEN,
            Self::Feth => Feth::LEN,
            Self::AtomicEth => AtomicEth::LEN,
            Self::Aeth => Aeth::LEN,
            Self::AtomicAckEth => AtomicAckEth::LEN,
            Self::ImmDt => ImmDt::LEN,
            Self::Ieth => Ieth::LEN,
            Self::CnpReserved => CnpReserved::LEN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::aeth::{CreditCode, NakCode};
    use super::*;
    use proptest::prelude::*;

    fn roundtrip<H: Header + PartialEq + core::fmt::Debug>(h: &H) {
        let mut buf = [0u8; 64];
        assert_eq!(h.write(&mut buf).unwrap(), H::LEN);
        assert_eq!(&H::parse(&buf[..H::LEN]).unwrap(), h);
        // One byte short must be rejected without touching anything.
        assert_eq!(
            H::parse(&buf[..H::LEN - 1]),
            Err(HeaderError::Truncated {
                needed: H::LEN,
                available: H::LEN - 1
            })
        );
        let mut short = [0u8; 64];
        assert!(matches!(
            h.write(&mut short[..H::LEN - 1]),
            Err(HeaderError::Truncated { .. })
        ));
    }

    #[test]
    fn bth_wire_layout() {
        let bth = Bth {
            opcode: 0x04,
            solicited_event: true,
            mig_req: true,
            pad_count: 3,
            pkey: 0xFFFF,
            fecn: false,
            becn: true,
            dest_qp: 0x12_3456,
            ack_req: true,
            psn: Psn::new(0xAB_CDEF),
        };
        let mut buf = [0u8; 12];
        bth.write(&mut buf).unwrap();
        assert_eq!(
            buf,
            [0x04, 0xF0, 0xFF, 0xFF, 0x40, 0x12, 0x34, 0x56, 0x80, 0xAB, 0xCD, 0xEF]
        );
        roundtrip(&bth);
    }

    #[test]
    fn bth_rejects_tver_and_ignores_reserved() {
        let mut buf = [0u8; 12];
        Bth::default().write(&mut buf).unwrap();
        buf[1] |= 0x01;
        assert_eq!(
            Bth::parse(&buf),
            Err(HeaderError::UnsupportedTransportVersion(1))
        );
        buf[1] = 0;
        buf[4] = 0x3F; // resv6a
        buf[8] = 0x7F; // resv7
        assert_eq!(Bth::parse(&buf), Ok(Bth::default()));
    }

    #[test]
    fn bth_write_rejects_wide_fields() {
        let mut buf = [0u8; 12];
        let wide_qp = Bth {
            dest_qp: 0x100_0000,
            ..Bth::default()
        };
        assert_eq!(wide_qp.write(&mut buf), Err(HeaderError::FieldTooWide));
        let wide_pad = Bth {
            pad_count: 4,
            ..Bth::default()
        };
        assert_eq!(wide_pad.write(&mut buf), Err(HeaderError::FieldTooWide));
    }

    #[test]
    fn extended_headers_roundtrip() {
        roundtrip(&Rdeth {
            ee_context: 0xAB_CDEF,
        });
        roundtrip(&Deth {
            qkey: 0x8001_0000,
            src_qp: 0x00_0001,
        });
        roundtrip(&Xrceth { xrc_srq: 0xFF_FFFF });
        roundtrip(&Reth {
            va: 0x0123_4567_89AB_CDEF,
            rkey: 0xDEAD_BEEF,
            dma_len: 0x1000,
        });
        roundtrip(&Feth {
            selectivity_level: 1,
            placement_type: 2,
        });
        roundtrip(&AtomicEth {
            va: 0x1000,
            rkey: 7,
            swap_add: u64::MAX,
            compare: 0x5555_AAAA_5555_AAAA,
        });
        roundtrip(&Aeth {
            syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
            msn: Msn::new(0x12_3456),
        });
        roundtrip(&AtomicAckEth {
            orig_remote_data: 42,
        });
        roundtrip(&ImmDt {
            imm_data: 0x0102_0304,
        });
        roundtrip(&Ieth { rkey: 0x1234 });
        roundtrip(&CnpReserved);
    }

    #[test]
    fn reth_wire_layout() {
        let mut buf = [0u8; 16];
        Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x090A_0B0C,
            dma_len: 0x0D0E_0F10,
        }
        .write(&mut buf)
        .unwrap();
        assert_eq!(buf, core::array::from_fn(|i| i as u8 + 1));
    }

    #[test]
    fn aeth_wire_layout_and_reserved_syndrome() {
        let mut buf = [0u8; 4];
        Aeth {
            syndrome: Syndrome::Ack(CreditCode::from_posted_wqes(6)),
            msn: Msn::new(0x18),
        }
        .write(&mut buf)
        .unwrap();
        assert_eq!(buf, [0x05, 0x00, 0x00, 0x18]);
        buf[0] = 0x40;
        assert_eq!(Aeth::parse(&buf), Err(HeaderError::ReservedSyndrome(0x40)));
    }

    #[test]
    fn deth_masks_reserved_byte() {
        let buf = [0x11, 0x22, 0x33, 0x44, 0xFF, 0x00, 0x00, 0x02];
        assert_eq!(
            Deth::parse(&buf),
            Ok(Deth {
                qkey: 0x1122_3344,
                src_qp: 2
            })
        );
    }

    #[test]
    fn ext_header_lengths() {
        assert_eq!(ExtHeader::AtomicEth.wire_len(), 28);
        assert_eq!(ExtHeader::Reth.wire_len(), 16);
        assert_eq!(ExtHeader::CnpReserved.wire_len(), 16);
    }

    proptest! {
        #[test]
        fn bth_roundtrips(
            opcode in any::<u8>(),
            flags in any::<[bool; 5]>(),
            pad_count in 0u8..4,
            pkey in any::<u16>(),
            dest_qp in 0u32..=MAX_24BIT_ID,
            psn in any::<u32>(),
        ) {
            let bth = Bth {
                opcode,
                solicited_event: flags[0],
                mig_req: flags[1],
                pad_count,
                pkey,
                fecn: flags[2],
                becn: flags[3],
                dest_qp,
                ack_req: flags[4],
                psn: Psn::new(psn),
            };
            let mut buf = [0u8; 12];
            prop_assert_eq!(bth.write(&mut buf), Ok(12));
            prop_assert_eq!(Bth::parse(&buf), Ok(bth));
        }

        #[test]
        fn bth_parse_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..20)) {
            let _ = Bth::parse(&buf);
            let _ = AtomicEth::parse(&buf);
            let _ = Aeth::parse(&buf);
        }
    }
}
