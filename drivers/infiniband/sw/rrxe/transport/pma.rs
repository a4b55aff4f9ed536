// SPDX-License-Identifier: GPL-2.0

//! The port's Performance Management Agent (IBA 16.1): answers the PerfMgmt
//! MADs the RDMA core asks a device for its port counters with — the ones
//! behind `/sys/class/infiniband/DEV/ports/N/counters/` (PortCounters,
//! PortCountersExtended and, first, ClassPortInfo to learn whether the
//! extended ones exist).
//!
//! A MAD is 256 bytes: the common header (IBA 13.4.2), 40 reserved bytes of
//! the PerfMgmt class, then 192 bytes of attribute data (IBA 16.1.2).
//!
//! ```text
//!   0  BaseVersion  MgmtClass  ClassVersion  R|Method
//!   4  Status (16)             ClassSpecific (16)
//!   8  TransactionID (64)
//!  16  AttributeID (16)        Reserved (16)
//!  20  AttributeModifier (32)
//!  24  reserved (40 bytes)
//!  64  attribute data (192 bytes)
//! ```
//!
//! The data counters count octets divided by four (IBA 16.1.3.5: the octets
//! between the start delimiter and the VCRC). A RoCEv2 port has neither; it
//! counts the InfiniBand transport packet it carries in a UDP datagram, BTH
//! through ICRC, so a loopback exchange shows the same figure sent and
//! received.

/// Size of a MAD.
pub const MAD_SIZE: usize = 256;

const BASE_VERSION: u8 = 1;
/// Management class of PerfMgmt MADs (IBA 13.4.4).
pub const CLASS_PERF_MGMT: u8 = 0x04;
const CLASS_VERSION: u8 = 1;
const METHOD_GET: u8 = 0x01;
const METHOD_GET_RESP: u8 = 0x81;

const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
const ATTR_PORT_COUNTERS: u16 = 0x0012;
const ATTR_PORT_COUNTERS_EXT: u16 = 0x001D;

/// MAD status (IBA 13.4.7), bits 4..2: the class version is not supported.
const STATUS_BAD_VERSION: u16 = 1 << 2;
/// ... the method is not supported.
const STATUS_UNSUPPORTED_METHOD: u16 = 2 << 2;
/// ... the method and attribute combination is not supported.
const STATUS_UNSUPPORTED_ATTR: u16 = 3 << 2;
/// ... an attribute field (here PortSelect) has an invalid value.
const STATUS_INVALID_FIELD: u16 = 7 << 2;

/// ClassPortInfo:CapabilityMask bit 9: PortCountersExtended is supported
/// with all its counters (IBA 16.1.2, ClassPortInfo).
const CAP_EXTENDED_WIDTH: u16 = 1 << 9;
/// PortSelect value meaning all ports (IBA 16.1.3.5).
const ALL_PORTS: u8 = 0xff;

const HDR_STATUS: usize = 4;
const HDR_ATTR_ID: usize = 16;
const DATA: usize = 64;

/// What a port has moved since the device was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortTraffic {
    /// Octets of the packets sent (BTH through ICRC).
    pub xmit_octets: u64,
    /// Octets of the packets received for the port (BTH through ICRC).
    pub rcv_octets: u64,
    /// Packets sent.
    pub xmit_pkts: u64,
    /// Packets received.
    pub rcv_pkts: u64,
    /// Of the packets sent, those to a multicast GID.
    pub mcast_xmit_pkts: u64,
    /// Of the packets received, those for a multicast GID.
    pub mcast_rcv_pkts: u64,
}

/// What to do with a MAD handed to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadAnswer {
    /// Not a PerfMgmt request for this agent: the MAD layer handles it.
    NotMine,
    /// The response is in the output MAD.
    Reply,
}

/// Answers `request`, a MAD for `port`, with the port's `traffic`; the
/// response goes to `response`. Every PerfMgmt request gets a response,
/// an error status when it asks for what this agent does not have.
pub fn answer(
    request: &[u8; MAD_SIZE],
    port: u8,
    traffic: &PortTraffic,
    response: &mut [u8; MAD_SIZE],
) -> MadAnswer {
    if request[0] != BASE_VERSION || request[1] != CLASS_PERF_MGMT {
        return MadAnswer::NotMine;
    }
    // A response is not a request (IBA 13.4.5: the R bit, 0x80, marks it).
    if request[3] & 0x80 != 0 {
        return MadAnswer::NotMine;
    }
    *response = [0; MAD_SIZE];
    response[..DATA].copy_from_slice(&request[..DATA]);
    response[3] = METHOD_GET_RESP;
    let status = if request[2] != CLASS_VERSION {
        STATUS_BAD_VERSION
    } else if request[3] != METHOD_GET {
        STATUS_UNSUPPORTED_METHOD
    } else {
        let attr = u16::from_be_bytes([request[HDR_ATTR_ID], request[HDR_ATTR_ID + 1]]);
        let select = request[DATA + 1];
        let data = &mut response[DATA..];
        match attr {
            ATTR_CLASS_PORT_INFO => {
                data[0] = BASE_VERSION;
                data[1] = CLASS_VERSION;
                data[2..4].copy_from_slice(&CAP_EXTENDED_WIDTH.to_be_bytes());
                0
            }
            ATTR_PORT_COUNTERS | ATTR_PORT_COUNTERS_EXT
                if select != port && select != ALL_PORTS =>
            {
                STATUS_INVALID_FIELD
            }
            ATTR_PORT_COUNTERS => {
                data[1] = select;
                port_counters(traffic, data);
                0
            }
            ATTR_PORT_COUNTERS_EXT => {
                data[1] = select;
                port_counters_ext(traffic, data);
                0
            }
            _ => STATUS_UNSUPPORTED_ATTR,
        }
    };
    response[HDR_STATUS..HDR_STATUS + 2].copy_from_slice(&status.to_be_bytes());
    MadAnswer::Reply
}

/// The 32-bit PortCounters (IBA 16.1.3.5): they stop at their maximum rather
/// than wrap. The error counters stay zero: a soft port has no link errors.
fn port_counters(t: &PortTraffic, data: &mut [u8]) {
    let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX).to_be_bytes();
    data[24..28].copy_from_slice(&sat(t.xmit_octets / 4));
    data[28..32].copy_from_slice(&sat(t.rcv_octets / 4));
    data[32..36].copy_from_slice(&sat(t.xmit_pkts));
    data[36..40].copy_from_slice(&sat(t.rcv_pkts));
}

/// PortCountersExtended (IBA 16.1.4): 64-bit data and packet counters,
/// unicast and multicast apart.
fn port_counters_ext(t: &PortTraffic, data: &mut [u8]) {
    let fields = [
        t.xmit_octets / 4,
        t.rcv_octets / 4,
        t.xmit_pkts,
        t.rcv_pkts,
        t.xmit_pkts.saturating_sub(t.mcast_xmit_pkts),
        t.rcv_pkts.saturating_sub(t.mcast_rcv_pkts),
        t.mcast_xmit_pkts,
        t.mcast_rcv_pkts,
    ];
    for (i, v) in fields.iter().enumerate() {
        data[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(attr: u16, select: u8) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m[0] = BASE_VERSION;
        m[1] = CLASS_PERF_MGMT;
        m[2] = CLASS_VERSION;
        m[3] = METHOD_GET;
        m[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m[DATA + 1] = select;
        m
    }

    fn status(r: &[u8; MAD_SIZE]) -> u16 {
        u16::from_be_bytes([r[4], r[5]])
    }

    fn be32(r: &[u8; MAD_SIZE], at: usize) -> u32 {
        u32::from_be_bytes(r[DATA + at..DATA + at + 4].try_into().unwrap())
    }

    fn be64(r: &[u8; MAD_SIZE], at: usize) -> u64 {
        u64::from_be_bytes(r[DATA + at..DATA + at + 8].try_into().unwrap())
    }

    const T: PortTraffic = PortTraffic {
        xmit_octets: 4 * 1000 + 3,
        rcv_octets: 4 * 2000,
        xmit_pkts: 30,
        rcv_pkts: 40,
        mcast_xmit_pkts: 5,
        mcast_rcv_pkts: 7,
    };

    #[test]
    fn class_port_info_announces_the_extended_counters() {
        let mut r = [0xaa; MAD_SIZE];
        assert_eq!(
            answer(&get(ATTR_CLASS_PORT_INFO, 0), 1, &T, &mut r),
            MadAnswer::Reply
        );
        assert_eq!(r[3], METHOD_GET_RESP);
        assert_eq!(status(&r), 0);
        // The transaction ID comes back (IBA 13.4.6.4).
        assert_eq!(r[8..16], 0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(
            u16::from_be_bytes([r[DATA + 2], r[DATA + 3]]),
            CAP_EXTENDED_WIDTH
        );
        // The kernel tests the mask as a big-endian 16-bit field (sysfs.c).
        assert_eq!(r[DATA + 2], 0x02);
    }

    #[test]
    fn port_counters_count_words_and_saturate() {
        let mut r = [0; MAD_SIZE];
        answer(&get(ATTR_PORT_COUNTERS, 1), 1, &T, &mut r);
        assert_eq!(status(&r), 0);
        assert_eq!(r[DATA + 1], 1);
        assert_eq!(be32(&r, 24), 1000, "octets / 4, rounded down");
        assert_eq!(be32(&r, 28), 2000);
        assert_eq!(be32(&r, 32), 30);
        assert_eq!(be32(&r, 36), 40);
        assert!(
            r[DATA + 4..DATA + 24].iter().all(|&b| b == 0),
            "no link errors"
        );
        let big = PortTraffic {
            xmit_octets: 4 * (u64::from(u32::MAX) + 10),
            xmit_pkts: u64::MAX,
            ..T
        };
        answer(&get(ATTR_PORT_COUNTERS, 1), 1, &big, &mut r);
        assert_eq!(be32(&r, 24), u32::MAX);
        assert_eq!(be32(&r, 32), u32::MAX);
    }

    #[test]
    fn extended_counters_split_unicast_and_multicast() {
        let mut r = [0; MAD_SIZE];
        answer(&get(ATTR_PORT_COUNTERS_EXT, ALL_PORTS), 1, &T, &mut r);
        assert_eq!(status(&r), 0);
        let want = [1000, 2000, 30, 40, 25, 33, 5, 7];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(be64(&r, 8 + 8 * i), *w, "field {i}");
        }
    }

    #[test]
    fn errors_come_back_as_statuses() {
        let mut r = [0; MAD_SIZE];
        assert_eq!(
            answer(&get(ATTR_PORT_COUNTERS, 2), 1, &T, &mut r),
            MadAnswer::Reply
        );
        assert_eq!(status(&r), STATUS_INVALID_FIELD, "another port");
        assert_eq!(be32(&r, 24), 0, "no counters with an error");
        answer(&get(0x0013, 1), 1, &T, &mut r);
        assert_eq!(status(&r), STATUS_UNSUPPORTED_ATTR);
        let mut set = get(ATTR_PORT_COUNTERS, 1);
        set[3] = 0x02;
        answer(&set, 1, &T, &mut r);
        assert_eq!(status(&r), STATUS_UNSUPPORTED_METHOD);
        let mut v2 = get(ATTR_PORT_COUNTERS, 1);
        v2[2] = 2;
        answer(&v2, 1, &T, &mut r);
        assert_eq!(status(&r), STATUS_BAD_VERSION);
    }

    #[test]
    fn other_mads_are_not_mine() {
        let mut r = [0x5a; MAD_SIZE];
        let mut cm = get(ATTR_PORT_COUNTERS, 1);
        cm[1] = 0x07; // CM
        assert_eq!(answer(&cm, 1, &T, &mut r), MadAnswer::NotMine);
        let mut resp = get(ATTR_PORT_COUNTERS, 1);
        resp[3] = METHOD_GET_RESP;
        assert_eq!(answer(&resp, 1, &T, &mut r), MadAnswer::NotMine);
        assert!(r.iter().all(|&b| b == 0x5a), "output untouched");
    }
}
