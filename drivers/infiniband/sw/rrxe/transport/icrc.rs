// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 Invariant CRC (IBA Annex A17.4).
//!
//! The ICRC is the IEEE 802.3 CRC-32 (reflected polynomial `0xEDB88320`,
//! register preset to all ones, result inverted) over every byte of the
//! packet that no router may change:
//!
//! 1. eight `0xFF` bytes standing for the LRH that RoCEv2 does not carry
//!    (InfiniBand computes the ICRC with the LRH masked to all ones);
//! 2. the IP header with the fields routers rewrite masked to all ones:
//!    IPv4 Type of Service, Time to Live and Header Checksum; IPv6 Traffic
//!    Class, Flow Label and Hop Limit;
//! 3. the UDP header with its checksum masked to `0xFFFF`;
//! 4. the BTH with byte 4 (FECN, BECN and resv6a, "resv8a" in RoCEv2) masked
//!    to `0xFF`, since congestion marking may set those bits in flight;
//! 5. the remaining transport headers, the payload and the pad.
//!
//! rdma_rxe skips step 1 by seeding the CRC register with `0xDEBB20E3`, the
//! register value after those eight bytes; a test below checks that.
//!
//! Byte order on the wire: rdma_rxe (`rxe_icrc.c`) computes with
//! `crc32_le()`, whose register holds the CRC in CPU order, and stores
//! `~crc` through a `__be32 *` without any byte swap. Despite the `__be32`
//! annotation, on the little-endian hosts rxe runs on this puts the least
//! significant byte first on the wire, which is also how Ethernet sends its
//! FCS. This module therefore represents an ICRC as the `u32` result of the
//! standard CRC-32 and converts with little-endian byte order
//! ([`to_wire`], [`from_wire`]). (A big-endian rxe host would emit the
//! reverse order and fail to interoperate; we follow the de facto format.)

/// Size of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// IPv4 header size; RoCEv2 senders never use IPv4 options.
pub const IPV4_HEADER_LEN: usize = 20;

/// IPv6 fixed header size.
pub const IPV6_HEADER_LEN: usize = 40;

/// UDP header size.
pub const UDP_HEADER_LEN: usize = 8;

/// UDP destination port of RoCEv2 (IANA assignment cited by IBA A17).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// Reflected IEEE 802.3 polynomial.
const CRC32_POLY: u32 = 0xEDB8_8320;

/// CRC register after the eight `0xFF` bytes of the masked LRH, starting
/// from the all-ones preset; rdma_rxe hardcodes this seed.
pub const MASKED_LRH_SEED: u32 = 0xDEBB_20E3;

const BTH_RESV8A_OFFSET: usize = 4;

/// UDP length of the smallest RoCEv2 packet: a bare BTH and the ICRC.
const MIN_UDP_LEN: usize = UDP_HEADER_LEN + 12 + ICRC_LEN;
const IP_PROTO_UDP: u8 = 17;

/// Byte-at-a-time lookup table, built at compile time.
static CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ CRC32_POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// Feeds `data` into a CRC-32 register, without the preset or final
/// inversion, so that a computation can be split over several buffers
/// (the `crc32_le()` convention).
#[must_use]
pub fn crc32_update(mut crc: u32, data: &[u8]) -> u32 {
    for &byte in data {
        crc = (crc >> 8) ^ CRC32_TABLE[usize::from((crc as u8) ^ byte)];
    }
    crc
}

/// The CRC-32 register update the ICRC is computed with, in the `crc32_le()`
/// convention of [`crc32_update`].
///
/// The table loop here is the reference, and what the host tests use. The
/// kernel glue supplies the kernel library's `crc32_le()` instead, which
/// processes eight bytes a step (and is what rdma_rxe uses); it must give the
/// same register for every input, which the glue checks against
/// [`CHECK_VALUE`] before the module registers anything.
pub trait Crc32 {
    /// Feeds `data` into the register `crc`.
    fn update(crc: u32, data: &[u8]) -> u32;
}

/// [`crc32_update`] as a [`Crc32`].
pub struct TableCrc32;

impl Crc32 for TableCrc32 {
    #[inline]
    fn update(crc: u32, data: &[u8]) -> u32 {
        crc32_update(crc, data)
    }
}

/// The standard CRC-32 check: the CRC of the ASCII bytes "123456789" (preset
/// and final inversion included) is `0xCBF43926`.
pub const CHECK_INPUT: &[u8] = b"123456789";

/// See [`CHECK_INPUT`].
pub const CHECK_VALUE: u32 = 0xCBF4_3926;

/// Whether `C` computes the standard CRC-32 of [`CHECK_INPUT`], whole and
/// split at every point (a register carried between calls), and carries the
/// masked-LRH preset to [`MASKED_LRH_SEED`].
#[must_use]
pub fn crc32_agrees<C: Crc32>() -> bool {
    (0..=CHECK_INPUT.len()).all(|cut| {
        let (a, b) = CHECK_INPUT.split_at(cut);
        !C::update(C::update(!0, a), b) == CHECK_VALUE
    }) && C::update(!0, &[0xFF; 8]) == MASKED_LRH_SEED
}

/// Errors verifying an ICRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcrcError {
    /// The buffer ends before the headers or the ICRC.
    Truncated,
    /// The IP version nibble is neither 4 nor 6.
    NotIp(u8),
    /// The IPv4 header carries options (IHL other than 5), which RoCEv2
    /// does not use and whose ICRC treatment rdma_rxe does not define.
    Ipv4Options,
    /// The IP payload is not UDP (or, for IPv6, is preceded by extension
    /// headers).
    NotUdp(u8),
    /// The UDP length field is shorter than a UDP header, BTH and ICRC, or
    /// longer than the buffer.
    BadUdpLength(u16),
    /// The ICRC does not match the packet.
    Mismatch {
        /// ICRC computed over the packet.
        computed: u32,
        /// ICRC found in the packet.
        received: u32,
    },
}

/// The IP header of a RoCEv2 packet, which the ICRC covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpHeader<'a> {
    /// An IPv4 header without options.
    V4(&'a [u8; IPV4_HEADER_LEN]),
    /// An IPv6 fixed header, directly followed by UDP.
    V6(&'a [u8; IPV6_HEADER_LEN]),
}

/// Converts an ICRC value to its wire bytes.
#[inline]
#[must_use]
pub const fn to_wire(icrc: u32) -> [u8; ICRC_LEN] {
    icrc.to_le_bytes()
}

/// Reads an ICRC value from its wire bytes.
#[inline]
#[must_use]
pub const fn from_wire(bytes: [u8; ICRC_LEN]) -> u32 {
    u32::from_le_bytes(bytes)
}

/// Computes the ICRC of a packet from its IP header, its UDP header and
/// the UDP payload from the BTH through the pad (the ICRC itself excluded).
#[must_use]
pub fn compute(ip: IpHeader<'_>, udp: &[u8; UDP_HEADER_LEN], bth_to_pad: &[u8]) -> u32 {
    compute_with::<TableCrc32>(ip, udp, bth_to_pad)
}

/// [`compute`] with the CRC-32 of `C`.
#[must_use]
pub fn compute_with<C: Crc32>(
    ip: IpHeader<'_>,
    udp: &[u8; UDP_HEADER_LEN],
    bth_to_pad: &[u8],
) -> u32 {
    let mut crc = MASKED_LRH_SEED;
    match ip {
        IpHeader::V4(header) => {
            let mut masked = *header;
            masked[1] = 0xFF; // Type of Service
            masked[8] = 0xFF; // Time to Live
            masked[10] = 0xFF; // Header Checksum
            masked[11] = 0xFF;
            crc = C::update(crc, &masked);
        }
        IpHeader::V6(header) => {
            let mut masked = *header;
            masked[0] |= 0x0F; // Traffic Class, high nibble
            masked[1] = 0xFF; // Traffic Class low nibble, Flow Label
            masked[2] = 0xFF;
            masked[3] = 0xFF;
            masked[7] = 0xFF; // Hop Limit
            crc = C::update(crc, &masked);
        }
    }
    let mut udp = *udp;
    udp[6] = 0xFF; // Checksum
    udp[7] = 0xFF;
    crc = C::update(crc, &udp);

    if bth_to_pad.len() > BTH_RESV8A_OFFSET {
        let (head, tail) = bth_to_pad.split_at(BTH_RESV8A_OFFSET);
        crc = C::update(crc, head);
        crc = C::update(crc, &[0xFF]);
        crc = C::update(crc, &tail[1..]);
    } else {
        crc = C::update(crc, bth_to_pad);
    }
    !crc
}

/// [`compute`] for IPv4.
#[inline]
#[must_use]
pub fn icrc_ipv4(ip: &[u8; IPV4_HEADER_LEN], udp: &[u8; UDP_HEADER_LEN], bth_to_pad: &[u8]) -> u32 {
    compute(IpHeader::V4(ip), udp, bth_to_pad)
}

/// [`compute`] for IPv6.
#[inline]
#[must_use]
pub fn icrc_ipv6(ip: &[u8; IPV6_HEADER_LEN], udp: &[u8; UDP_HEADER_LEN], bth_to_pad: &[u8]) -> u32 {
    compute(IpHeader::V6(ip), udp, bth_to_pad)
}

/// Checks the ICRC of a packet whose UDP payload (BTH through ICRC) is
/// `udp_payload`.
pub fn verify(
    ip: IpHeader<'_>,
    udp: &[u8; UDP_HEADER_LEN],
    udp_payload: &[u8],
) -> Result<(), IcrcError> {
    verify_with::<TableCrc32>(ip, udp, udp_payload)
}

/// [`verify`] with the CRC-32 of `C`.
pub fn verify_with<C: Crc32>(
    ip: IpHeader<'_>,
    udp: &[u8; UDP_HEADER_LEN],
    udp_payload: &[u8],
) -> Result<(), IcrcError> {
    let (covered, wire) = udp_payload
        .split_last_chunk::<ICRC_LEN>()
        .ok_or(IcrcError::Truncated)?;
    let computed = compute_with::<C>(ip, udp, covered);
    let received = from_wire(*wire);
    if computed == received {
        Ok(())
    } else {
        Err(IcrcError::Mismatch { computed, received })
    }
}

/// Computes the ICRC of a packet being sent and stores it in the last four
/// bytes of `udp_payload` (BTH through ICRC slot).
pub fn fill_with<C: Crc32>(
    ip: IpHeader<'_>,
    udp: &[u8; UDP_HEADER_LEN],
    udp_payload: &mut [u8],
) -> Result<(), IcrcError> {
    let len = udp_payload.len();
    let covered_len = len.checked_sub(ICRC_LEN).ok_or(IcrcError::Truncated)?;
    let (covered, slot) = udp_payload.split_at_mut(covered_len);
    slot.copy_from_slice(&to_wire(compute_with::<C>(ip, udp, covered)));
    Ok(())
}

/// Splits a RoCEv2 IP packet (starting at the IP header) into its IP
/// header, UDP header and UDP payload, the latter bounded by the UDP length
/// field so that Ethernet padding after it is ignored.
pub fn split_ip_packet(packet: &[u8]) -> Result<(IpHeader<'_>, &[u8; 8], &[u8]), IcrcError> {
    let version = packet.first().ok_or(IcrcError::Truncated)? >> 4;
    let (ip, rest) = match version {
        4 => {
            let (header, rest) = packet
                .split_first_chunk::<IPV4_HEADER_LEN>()
                .ok_or(IcrcError::Truncated)?;
            if header[0] & 0x0F != 5 {
                return Err(IcrcError::Ipv4Options);
            }
            if header[9] != IP_PROTO_UDP {
                return Err(IcrcError::NotUdp(header[9]));
            }
            (IpHeader::V4(header), rest)
        }
        6 => {
            let (header, rest) = packet
                .split_first_chunk::<IPV6_HEADER_LEN>()
                .ok_or(IcrcError::Truncated)?;
            if header[6] != IP_PROTO_UDP {
                return Err(IcrcError::NotUdp(header[6]));
            }
            (IpHeader::V6(header), rest)
        }
        other => return Err(IcrcError::NotIp(other)),
    };
    let (udp, rest) = rest
        .split_first_chunk::<UDP_HEADER_LEN>()
        .ok_or(IcrcError::Truncated)?;
    let udp_len = u16::from_be_bytes([udp[4], udp[5]]);
    if usize::from(udp_len) < MIN_UDP_LEN {
        return Err(IcrcError::BadUdpLength(udp_len));
    }
    let payload = rest
        .get(..usize::from(udp_len) - UDP_HEADER_LEN)
        .ok_or(IcrcError::BadUdpLength(udp_len))?;
    Ok((ip, udp, payload))
}

/// Checks the ICRC of a whole RoCEv2 IP packet, starting at the IP header,
/// e.g. a frame captured from rdma_rxe with the Ethernet header stripped.
pub fn verify_ip_packet(packet: &[u8]) -> Result<(), IcrcError> {
    let (ip, udp, payload) = split_ip_packet(packet)?;
    verify(ip, udp, payload)
}

#[cfg(test)]
mod captured {
    //! Packets rdma_rxe (Linux 6.12) put on the wire between two VMs, recorded with QEMU's
    //! filter-dump while `ibv_rc_pingpong -g 1 -s 64` ran; each starts at the IPv4 header.
    use super::*;

    fn hex(s: &str) -> std::vec::Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RC SEND Only, 64-byte payload; Wireshark shows ICRC 0x178970ee.
    const RC_SEND_ONLY: &str = "4500006c2bca40004011828fc6120001c6120002c12112b700580000\
        0400ffff000000118021e9e0\
        7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
        7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
        178970ee";

    /// RC Acknowledge with AETH (credit code 0x1F: rdma_rxe never reports credits).
    const RC_ACK: &str = "45000030dd2c40004011d168c6120002c6120001c12112b7001c0000\
        1100ffff000000110021e9e01f000001806c79c8";

    #[test]
    fn rdma_rxe_send_only_verifies() {
        let pkt = hex(RC_SEND_ONLY);
        assert_eq!(verify_ip_packet(&pkt), Ok(()));
    }

    #[test]
    fn rdma_rxe_ack_verifies() {
        let pkt = hex(RC_ACK);
        assert_eq!(verify_ip_packet(&pkt), Ok(()));
    }

    #[test]
    fn rdma_rxe_packets_with_a_flipped_payload_bit_fail() {
        for src in [RC_SEND_ONLY, RC_ACK] {
            let mut pkt = hex(src);
            let last_payload = pkt.len() - 5;
            pkt[last_payload] ^= 0x01;
            assert!(verify_ip_packet(&pkt).is_err());
        }
    }

    #[test]
    fn rdma_rxe_packets_with_changed_ttl_still_verify() {
        // TTL is a masked variant field of the RoCEv2 ICRC: routers may change it without breaking the ICRC.
        for src in [RC_SEND_ONLY, RC_ACK] {
            let mut pkt = hex(src);
            pkt[8] = 1;
            assert_eq!(verify_ip_packet(&pkt), Ok(()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RC SEND_ONLY "hello" over IPv4, built by hand; the ICRC was computed
    /// independently with Python's `zlib.crc32` over the masked bytes.
    fn ipv4_vector() -> Vec<u8> {
        let mut pkt = hex(concat!(
            "45020034123440004011a52fc0a80101c0a80102",
            "c00012b700201234",
            "0470ffff000000118000002a68656c6c6f000000",
        ));
        pkt.extend_from_slice(&[0x27, 0xF5, 0x13, 0xF5]);
        pkt
    }

    #[test]
    fn crc32_check_value() {
        // The standard CRC-32 check value of "123456789".
        assert_eq!(!crc32_update(!0, b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn the_load_time_check_accepts_the_table_and_refuses_near_misses() {
        assert!(crc32_agrees::<TableCrc32>());
        // The unreflected polynomial's register, a register without the carry between
        // calls, and one that skips each call's last byte are all CRCs of something.
        struct Unreflected;
        impl Crc32 for Unreflected {
            fn update(crc: u32, data: &[u8]) -> u32 {
                crc32_update(crc.reverse_bits(), data).reverse_bits()
            }
        }
        struct Restarts;
        impl Crc32 for Restarts {
            fn update(_crc: u32, data: &[u8]) -> u32 {
                crc32_update(!0, data)
            }
        }
        struct ShortByOne;
        impl Crc32 for ShortByOne {
            fn update(crc: u32, data: &[u8]) -> u32 {
                crc32_update(crc, &data[..data.len().saturating_sub(1)])
            }
        }
        assert!(!crc32_agrees::<Unreflected>());
        assert!(!crc32_agrees::<Restarts>());
        assert!(!crc32_agrees::<ShortByOne>());
    }

    #[test]
    fn rxe_seed_is_masked_lrh() {
        assert_eq!(crc32_update(0xFFFF_FFFF, &[0xFF; 8]), MASKED_LRH_SEED);
    }

    #[test]
    fn hand_built_ipv4_vector() {
        let pkt = ipv4_vector();
        assert_eq!(verify_ip_packet(&pkt), Ok(()));
        let (ip, udp, payload) = split_ip_packet(&pkt).unwrap();
        let IpHeader::V4(ip4) = ip else {
            panic!("not IPv4")
        };
        assert_eq!(
            icrc_ipv4(ip4, udp, &payload[..payload.len() - 4]),
            0xF513_F527
        );
        assert_eq!(to_wire(0xF513_F527), [0x27, 0xF5, 0x13, 0xF5]);
    }

    #[test]
    fn hand_built_ipv6_vector() {
        let ip: [u8; 40] = hex(concat!(
            "6123456700201140",
            "0102030405060708090a0b0c0d0e0f10",
            "1112131415161718191a1b1c1d1e1f20",
        ))
        .try_into()
        .unwrap();
        let udp: [u8; 8] = hex("c00012b700201234").try_into().unwrap();
        let rest = hex("0470ffff000000118000002a68656c6c6f000000");
        assert_eq!(icrc_ipv6(&ip, &udp, &rest), 0xC802_529E);
    }

    #[test]
    fn ethernet_padding_is_ignored() {
        let mut pkt = ipv4_vector();
        pkt.extend_from_slice(&[0; 6]);
        assert_eq!(verify_ip_packet(&pkt), Ok(()));
    }

    #[test]
    fn fill_then_verify() {
        let mut pkt = ipv4_vector();
        let n = pkt.len();
        pkt[n - 4..].fill(0);
        let (ip_bytes, rest) = pkt.split_at_mut(20);
        let (udp_bytes, payload) = rest.split_at_mut(8);
        let ip: &[u8; 20] = (&*ip_bytes).try_into().unwrap();
        let udp: &[u8; 8] = (&*udp_bytes).try_into().unwrap();
        fill_with::<TableCrc32>(IpHeader::V4(ip), udp, payload).unwrap();
        assert_eq!(&pkt[n - 4..], &[0x27, 0xF5, 0x13, 0xF5]);
    }

    #[test]
    fn malformed_packets() {
        let pkt = ipv4_vector();
        assert_eq!(verify_ip_packet(&[]), Err(IcrcError::Truncated));
        assert_eq!(verify_ip_packet(&pkt[..25]), Err(IcrcError::Truncated));
        let mut bad = pkt.clone();
        bad[0] = 0x55;
        assert_eq!(verify_ip_packet(&bad), Err(IcrcError::NotIp(5)));
        bad[0] = 0x46;
        assert_eq!(verify_ip_packet(&bad), Err(IcrcError::Ipv4Options));
        let mut tcp = pkt.clone();
        tcp[9] = 6;
        assert_eq!(verify_ip_packet(&tcp), Err(IcrcError::NotUdp(6)));
        let mut long = pkt.clone();
        long[25] += 4;
        assert_eq!(verify_ip_packet(&long), Err(IcrcError::BadUdpLength(0x24)));
        let mut short = pkt.clone();
        short[24] = 0;
        short[25] = 8;
        assert_eq!(verify_ip_packet(&short), Err(IcrcError::BadUdpLength(8)));
        let mut corrupt = pkt;
        corrupt[40] ^= 1;
        assert!(matches!(
            verify_ip_packet(&corrupt),
            Err(IcrcError::Mismatch { .. })
        ));
    }

    /// Byte offsets (from the IPv4 header) that the ICRC masks, and which
    /// bits of them.
    fn ipv4_masked_bits(offset: usize) -> u8 {
        match offset {
            1 | 8 | 10 | 11 => 0xFF, // TOS, TTL, IP checksum
            26 | 27 => 0xFF,         // UDP checksum
            32 => 0xFF,              // BTH FECN/BECN/resv6a
            _ => 0,
        }
    }

    fn ipv6_packet() -> Vec<u8> {
        let mut pkt = hex(concat!(
            "6123456700201140",
            "0102030405060708090a0b0c0d0e0f10",
            "1112131415161718191a1b1c1d1e1f20",
            "c00012b700201234",
            "0470ffff000000118000002a68656c6c6f000000",
        ));
        pkt.extend_from_slice(&to_wire(0xC802_529E));
        pkt
    }

    fn ipv6_masked_bits(offset: usize) -> u8 {
        match offset {
            0 => 0x0F,         // Traffic Class, high nibble
            1..=3 | 7 => 0xFF, // Traffic Class, Flow Label, Hop Limit
            46 | 47 => 0xFF,   // UDP checksum
            52 => 0xFF,        // BTH FECN/BECN/resv6a
            _ => 0,
        }
    }

    #[test]
    fn ipv6_packet_verifies() {
        assert_eq!(verify_ip_packet(&ipv6_packet()), Ok(()));
        let mut ext_hdr = ipv6_packet();
        ext_hdr[6] = 0; // Hop-by-Hop options
        assert_eq!(verify_ip_packet(&ext_hdr), Err(IcrcError::NotUdp(0)));
    }

    proptest! {
        #[test]
        fn masked_fields_do_not_matter_v4(offset in 0usize..48, bit in 0u8..8) {
            let mut pkt = ipv4_vector();
            // Keep the framing fields intact so the packet still parses.
            prop_assume!(!matches!(offset, 0 | 9 | 24 | 25));
            pkt[offset] ^= 1 << bit;
            let masked = ipv4_masked_bits(offset) & (1 << bit) != 0;
            prop_assert_eq!(verify_ip_packet(&pkt).is_ok(), masked);
        }

        #[test]
        fn masked_fields_do_not_matter_v6(offset in 0usize..68, bit in 0u8..8) {
            let mut pkt = ipv6_packet();
            // Keep the version nibble, next header and UDP length intact so
            // the packet still parses.
            let framing = (offset == 0 && bit >= 4) || matches!(offset, 6 | 44 | 45);
            prop_assume!(!framing);
            pkt[offset] ^= 1 << bit;
            let masked = ipv6_masked_bits(offset) & (1 << bit) != 0;
            prop_assert_eq!(verify_ip_packet(&pkt).is_ok(), masked);
        }

        #[test]
        fn split_computation_matches(data in proptest::collection::vec(any::<u8>(), 0..64), cut in 0usize..64) {
            let cut = cut.min(data.len());
            let whole = crc32_update(!0, &data);
            let split = crc32_update(crc32_update(!0, &data[..cut]), &data[cut..]);
            prop_assert_eq!(whole, split);
        }

        #[test]
        fn verify_ip_packet_never_panics(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = verify_ip_packet(&data);
        }
    }
}
