// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 wire: the kernel UDP sockets on port 4791 and the skbs sent and received on
//! them.
//!
//! - [`RxBinding`]: a device's place on the port: while it exists, packets arriving over its
//!   netdev go to its [`RxHandler`]. Bindings are found by netdev in the soft-RoCE receive
//!   index, and hold the IPv4 and IPv6 UDP tunnel sockets of the netdev's network namespace
//!   open: the first binding in a namespace opens them, dropping the last closes them, and
//!   [`NetnsWatch`] closes them when the namespace is dismantled first.
//! - RX: the sockets' `encap_rcv` runs in softirq, checks the IP and UDP lengths and the ICRC
//!   and hands each valid packet, as an owned [`RxPacket`], to the handler bound to the
//!   netdev it came in on.
//! - TX: [`transmit`] builds the IP and UDP headers around a transport packet, fills in its
//!   ICRC and sends it through the IP stack with the run's other packets of its path, as
//!   one UDP GSO datagram (a [`Train`]), in a [`TxBatch`] whose close runs the receive
//!   softirq of the packets a netdev of this host loops back; [`loopback_in_place`] hands
//!   the buffer the transport packet was built in straight to the receive path, taking one
//!   from the device's [`BufferPool`] in its place.
//!
//! Every outcome is counted in [`WireCounters`] (see [`counters`]).

use super::bindings;
use super::netdev::NetDevice;
use super::rcu::RcuSection;
use super::task::{Kick, Kicks};
use crate::transport::icrc::{self, Crc32, IcrcError, IpHeader, ICRC_LEN, UDP_HEADER_LEN};
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use kernel::error::to_result;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};
use kernel::types::ARef;

const IPV4_HEADER_LEN: usize = icrc::IPV4_HEADER_LEN;
const IPV6_HEADER_LEN: usize = icrc::IPV6_HEADER_LEN;
/// Base Transport Header size: the smallest RoCEv2 packet is a BTH and the ICRC.
const BTH_LEN: usize = 12;
const MIN_UDP_LEN: usize = UDP_HEADER_LEN + BTH_LEN + ICRC_LEN;
const IPPROTO_UDP: u8 = 17;
/// IPv4 "Don't Fragment", in the flags/fragment-offset field.
const IP_DF: u16 = 0x4000;

// ---------------------------------------------------------------------------------------
// The ICRC's CRC-32
// ---------------------------------------------------------------------------------------

/// The kernel library's `crc32_le()` as the ICRC's CRC-32: eight bytes a step (slice-by-8)
/// where the transport's reference table takes one, and the function rdma_rxe computes
/// its ICRC with. [`check_crc32`] proves it equal to the reference before any use.
pub(crate) struct KernelCrc32;

impl Crc32 for KernelCrc32 {
    #[inline]
    fn update(crc: u32, data: &[u8]) -> u32 {
        // SAFETY: crc32_le reads `len` bytes from `p` and nothing else; the slice provides
        // them.
        unsafe { bindings::crc32_le(crc, data.as_ptr(), data.len()) }
    }
}

/// Refuses to load (`EINVAL`) if the kernel's `crc32_le()` does not compute the CRC-32 the
/// ICRC is defined with (IBA A17.4): every packet would be sent with, and dropped for, a
/// wrong ICRC.
pub(crate) fn check_crc32() -> Result {
    if icrc::crc32_agrees::<KernelCrc32>() {
        Ok(())
    } else {
        pr_err!("the kernel's crc32_le() disagrees with the ICRC's CRC-32; not loading\n");
        Err(EINVAL)
    }
}

// ---------------------------------------------------------------------------------------
// Addresses and counters
// ---------------------------------------------------------------------------------------

/// An IP address as a 16-byte IPv6 address, IPv4 addresses in their IPv4-mapped form
/// (`::ffff:a.b.c.d`) as RoCEv2 GIDs carry them (IBA A17.8).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct IpAddr([u8; 16]);

impl IpAddr {
    /// The IPv4-mapped form of `addr`.
    pub(crate) const fn from_v4(addr: [u8; 4]) -> Self {
        Self([
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, addr[0], addr[1], addr[2], addr[3],
        ])
    }

    /// An address from its 16 bytes (a GID); IPv4-mapped bytes mean an IPv4 address.
    pub(crate) const fn from_octets(octets: [u8; 16]) -> Self {
        Self(octets)
    }

    /// The 16 bytes (the RoCEv2 GID of the address).
    pub(crate) const fn octets(&self) -> [u8; 16] {
        self.0
    }

    /// Whether this is an IPv4-mapped address (`::ffff:a.b.c.d`). Asked several times a
    /// packet: its first 12 bytes are compared as three words, not byte by byte.
    pub(crate) fn is_v4(&self) -> bool {
        let [a, b, c, d, e, f, g, h, i, j, k, l, ..] = self.0;
        u64::from_ne_bytes([a, b, c, d, e, f, g, h]) == 0
            && u32::from_ne_bytes([i, j, k, l]) == u32::from_ne_bytes([0, 0, 0xff, 0xff])
    }

    /// The IPv4 address, if this is an IPv4-mapped one.
    pub(crate) fn v4(&self) -> Option<[u8; 4]> {
        if self.is_v4() {
            Some([self.0[12], self.0[13], self.0[14], self.0[15]])
        } else {
            None
        }
    }

    /// Whether this is a multicast address: IPv4 224.0.0.0/4 or IPv6 ff00::/8, the
    /// multicast GIDs RoCEv2 can carry.
    pub(crate) fn is_multicast(&self) -> bool {
        match self.v4() {
            Some(v4) => v4[0] & 0xf0 == 0xe0,
            None => self.0[0] == 0xff,
        }
    }
}

/// Packet counters of the wire path, module-wide (the tunnel is shared by all devices).
pub(crate) struct WireCounters {
    /// Packets handed to the [`RxHandler`] (from the wire or [`loopback_in_place`]).
    pub(crate) rx_packets: AtomicU64,
    /// Packets whose ICRC did not match.
    pub(crate) rx_bad_icrc: AtomicU64,
    /// Packets too short for a BTH and an ICRC, or shorter than their UDP length says.
    pub(crate) rx_truncated: AtomicU64,
    /// Packets with IP headers RoCEv2 does not use (IPv4 options, IPv6 extension headers) or
    /// whose IP and UDP lengths disagree.
    pub(crate) rx_malformed: AtomicU64,
    /// Packets dropped because their skb could not be made linear (no memory).
    pub(crate) rx_nomem: AtomicU64,
    /// Packets the handler found no device or QP for (counted by the handler).
    pub(crate) rx_no_device: AtomicU64,
    /// Packets a netdev of this host looped back while a QP's run sent (a veth, `lo`):
    /// their QPs' runs were left to that run to make ([`transmit`]).
    pub(crate) rx_kicks_to_sender: AtomicU64,
    /// Packets sent (handed to the IP stack or looped back).
    pub(crate) tx_packets: AtomicU64,
    /// Packets that could not be sent (no route, no memory, dropped by the stack).
    pub(crate) tx_errors: AtomicU64,
    /// Trains handed to the IP stack: UDP GSO datagrams of two packets or more ([`TxBatch`]).
    pub(crate) tx_trains: AtomicU64,
    /// The packets those trains carried.
    pub(crate) tx_train_packets: AtomicU64,
}

/// A copy of the [`WireCounters`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WireStats {
    pub(crate) rx_packets: u64,
    pub(crate) rx_bad_icrc: u64,
    pub(crate) rx_truncated: u64,
    pub(crate) rx_malformed: u64,
    pub(crate) rx_nomem: u64,
    pub(crate) rx_no_device: u64,
    pub(crate) rx_kicks_to_sender: u64,
    pub(crate) tx_packets: u64,
    pub(crate) tx_errors: u64,
    pub(crate) tx_trains: u64,
    pub(crate) tx_train_packets: u64,
}

impl WireCounters {
    const fn new() -> Self {
        Self {
            rx_packets: AtomicU64::new(0),
            rx_bad_icrc: AtomicU64::new(0),
            rx_truncated: AtomicU64::new(0),
            rx_malformed: AtomicU64::new(0),
            rx_nomem: AtomicU64::new(0),
            rx_no_device: AtomicU64::new(0),
            rx_kicks_to_sender: AtomicU64::new(0),
            tx_packets: AtomicU64::new(0),
            tx_errors: AtomicU64::new(0),
            tx_trains: AtomicU64::new(0),
            tx_train_packets: AtomicU64::new(0),
        }
    }

    /// The current values.
    pub(crate) fn snapshot(&self) -> WireStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WireStats {
            rx_packets: get(&self.rx_packets),
            rx_bad_icrc: get(&self.rx_bad_icrc),
            rx_truncated: get(&self.rx_truncated),
            rx_malformed: get(&self.rx_malformed),
            rx_nomem: get(&self.rx_nomem),
            rx_no_device: get(&self.rx_no_device),
            rx_kicks_to_sender: get(&self.rx_kicks_to_sender),
            tx_packets: get(&self.tx_packets),
            tx_errors: get(&self.tx_errors),
            tx_trains: get(&self.tx_trains),
            tx_train_packets: get(&self.tx_train_packets),
        }
    }
}

/// The kernel error for a positive errno constant from the bindings.
fn errno(e: c_int) -> Error {
    Error::from_errno(-e)
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn bump_by(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

static COUNTERS: WireCounters = WireCounters::new();

/// The wire path's counters.
pub(crate) fn counters() -> &'static WireCounters {
    &COUNTERS
}

// ---------------------------------------------------------------------------------------
// Owned skbs
// ---------------------------------------------------------------------------------------

/// An skb this code owns; dropping it frees it as a drop (`kfree_skb`).
struct Skb(NonNull<bindings::sk_buff>);

impl Skb {
    /// Takes ownership of `skb`.
    ///
    /// # Safety
    ///
    /// `skb` must be a live skb whose reference the caller hands over.
    unsafe fn from_raw(skb: *mut bindings::sk_buff) -> Option<Self> {
        NonNull::new(skb).map(Self)
    }

    /// A new skb with `headroom` bytes reserved and room for `len` more (GFP_ATOMIC).
    fn alloc(headroom: u32, len: u32) -> Result<Self> {
        let size = headroom.checked_add(len).ok_or(EINVAL)?;
        // SAFETY: allocation has no preconditions; GFP_ATOMIC does not sleep.
        let raw = unsafe { bindings::rrxe_alloc_skb_atomic(size) };
        let skb = NonNull::new(raw).map(Self).ok_or(ENOMEM)?;
        // SAFETY: a fresh skb is empty with `size` bytes of tailroom.
        unsafe { bindings::rrxe_skb_reserve(skb.as_raw(), headroom) };
        Ok(skb)
    }

    fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Gives up ownership without freeing.
    fn into_raw(self) -> *mut bindings::sk_buff {
        let raw = self.as_raw();
        core::mem::forget(self);
        raw
    }

    fn len(&self) -> usize {
        // SAFETY: we own a live skb.
        unsafe { bindings::rrxe_skb_len(self.as_raw()) as usize }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: we own a live skb.
        unsafe { bindings::rrxe_skb_data(self.as_raw()) }
    }

    /// The linear data, from `skb->data` on. Only valid on a linear skb.
    fn linear_data(&self) -> &[u8] {
        // SAFETY: callers linearized the skb (or built it linear), so `len` bytes from `data`
        // are in the head; nothing writes to them while we hold `&self`.
        unsafe { core::slice::from_raw_parts(self.data(), self.len()) }
    }

    /// Appends `len` bytes and returns them.
    fn put(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: the skb was allocated with tailroom for the whole packet (see `alloc`), and
        // `skb_put` returns `len` writable bytes.
        unsafe {
            let p = bindings::skb_put(self.as_raw(), len as u32);
            core::slice::from_raw_parts_mut(p.cast::<u8>(), len)
        }
    }

    /// Prepends `len` bytes and returns them.
    fn push(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: the skb was allocated with headroom for every header pushed (see `build`);
        // `skb_push` returns `len` writable bytes.
        unsafe {
            let p = bindings::skb_push(self.as_raw(), len as u32);
            core::slice::from_raw_parts_mut(p.cast::<u8>(), len)
        }
    }

    /// Whether the bytes from `skb->data` to the end are in the linear head; makes them so.
    fn linearize(&mut self) -> Result {
        // SAFETY: we own the skb; skb_linearize allocates with GFP_ATOMIC.
        to_result(unsafe { bindings::rrxe_skb_linearize(self.as_raw()) })
    }

    /// Bytes from the network header to `skb->data`.
    fn network_header_len(&self) -> Option<usize> {
        // SAFETY: we own a live skb.
        let off = unsafe { bindings::rrxe_skb_network_offset(self.as_raw()) };
        usize::try_from(-(off as isize)).ok()
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: we own the skb.
        unsafe { bindings::rrxe_kfree_skb(self.as_raw()) };
    }
}

// ---------------------------------------------------------------------------------------
// Received packets
// ---------------------------------------------------------------------------------------

/// Receives the valid RoCEv2 packets that arrive over one netdev.
pub(crate) trait RxHandler: Send + Sync + 'static {
    /// Handles `pkt`, received on the netdev the handler is bound to (or a VLAN of it).
    ///
    /// Called in softirq for packets from the wire, inside an RCU read-side section
    /// (`rcu`): must not sleep. Never called once the [`RxBinding`] is dropped. Returns the
    /// kick of the task that is to take the packet, if it has one, which the receive path
    /// fires at once.
    fn receive(&self, pkt: RxPacket, rcu: &RcuSection) -> Option<Kick>;

    /// Handles the packets in `pkts` (taking each out), in order, all received on the
    /// netdev the handler is bound to: a run's looped-back packets ([`Handover::flush`]).
    /// Adds the kicks of the tasks that are to take them to `kicks`, once a task with the
    /// number of its packets ([`Kicks::add_for`]). As [`RxHandler::receive`], in the
    /// caller's context.
    fn receive_all(&self, pkts: &mut [Option<RxPacket>], kicks: &mut Kicks, rcu: &RcuSection);
}

/// What holds a received packet's bytes.
enum Backing {
    /// An skb from a UDP socket, freed as consumed when dropped (see [`RxPacket::discard`]).
    Skb(NonNull<bindings::sk_buff>),
    /// A buffer of its own: a [`loopback_in_place`] packet, which no netdev, IP layer or capture
    /// sees, so it needs neither an skb nor IP and UDP headers to be parsed again.
    Buf(KVec<u8>),
}

/// A received RoCEv2 packet whose lengths and ICRC were checked; owns its bytes (freed when
/// dropped) and a reference to the device it came in on.
pub(crate) struct RxPacket {
    backing: Backing,
    netdev: ARef<NetDevice>,
    /// BTH through pad, inside the skb's linear head or the buffer.
    payload: NonNull<u8>,
    payload_len: usize,
    src: IpAddr,
    dst: IpAddr,
    /// Whether its ICRC is still to be checked.
    icrc: IcrcCheck,
}

/// Where a received packet's ICRC check stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IcrcCheck {
    /// Made on arrival, or none to make (a packet rrxe looped back carries no ICRC).
    Done,
    /// Left to the QP run that takes the packet in ([`RxPacket::icrc_ok`]): the packet
    /// arrived in the softirq of a batch of sends of this CPU closing (`encap_rcv`), whose
    /// run makes the receiving QP's run, likely on the next CPU. `ip_len` is the length of
    /// the IP header `parse` found before the UDP header (the source address does not tell:
    /// an IPv6 packet's may be IPv4-mapped).
    Left { ip_len: u8 },
}

// SAFETY: the skb or buffer is owned exclusively (an skb's dst, which may be an RCU-only
// reference, was dropped on reception) and can be freed from any context; the payload
// pointer points into it and is only read. The netdev reference is Send.
unsafe impl Send for RxPacket {}
// SAFETY: `&RxPacket` only reads immutable data.
unsafe impl Sync for RxPacket {}

impl RxPacket {
    /// The transport packet: BTH through pad (the ICRC excluded).
    pub(crate) fn payload(&self) -> &[u8] {
        // SAFETY: `payload_len` bytes at `payload` are in the linear head of the skb or in the
        // buffer we own, which nothing changes until it is freed.
        unsafe { core::slice::from_raw_parts(self.payload.as_ptr(), self.payload_len) }
    }

    /// The UDP payload: BTH through pad, then the (verified) ICRC, as the transport's
    /// packet parser takes it.
    pub(crate) fn bth_to_icrc(&self) -> &[u8] {
        // SAFETY: the ICRC (or, looped back, its slot) follows the payload in the linear head
        // (the whole UDP payload was pulled into it before the ICRC was checked) or the
        // buffer, which we own.
        unsafe { core::slice::from_raw_parts(self.payload.as_ptr(), self.payload_len + ICRC_LEN) }
    }

    /// Whether the packet's ICRC is right (IBA A17.4), checking it now if its check was
    /// left to its receiver; a wrong one (or a packet too short to hold one) is counted
    /// here, and the caller drops the packet.
    #[inline]
    pub(crate) fn icrc_ok(&mut self) -> bool {
        let IcrcCheck::Left { ip_len } = self.icrc else {
            return true;
        };
        self.icrc = IcrcCheck::Done;
        match self.check_icrc(usize::from(ip_len)) {
            Ok(()) => true,
            Err(why) => {
                why.count();
                false
            }
        }
    }

    /// The check `parse` left to the receiver, over the `ip_len`-byte IP header and the UDP
    /// header that precede the payload in the skb's linear head.
    #[inline(never)]
    fn check_icrc(&self, ip_len: usize) -> core::result::Result<(), RxDrop> {
        // SAFETY: only a packet `parse` made from an skb has its check left; `parse` found
        // the UDP header, and the `ip_len`-byte IP header before it, right before the payload
        // in the skb's linear head, which we own and nothing changes.
        let headers = unsafe {
            core::slice::from_raw_parts(
                self.payload.as_ptr().sub(ip_len + UDP_HEADER_LEN),
                ip_len + UDP_HEADER_LEN,
            )
        };
        let (ip, udp) = headers.split_at(ip_len);
        let udp: &[u8; UDP_HEADER_LEN] = udp.try_into().map_err(|_| RxDrop::Malformed)?;
        let header = if ip_len == IPV4_HEADER_LEN {
            IpHeader::V4(ip.try_into().map_err(|_| RxDrop::Malformed)?)
        } else {
            IpHeader::V6(ip.try_into().map_err(|_| RxDrop::Malformed)?)
        };
        verify_icrc(header, udp, self.bth_to_icrc())
    }

    /// The netdev the packet arrived over.
    pub(crate) fn netdev(&self) -> &NetDevice {
        &self.netdev
    }

    /// The source IP address.
    pub(crate) fn src_ip(&self) -> IpAddr {
        self.src
    }

    /// The destination IP address.
    pub(crate) fn dst_ip(&self) -> IpAddr {
        self.dst
    }

    /// Another reference to the same packet, for one more receiver (a multicast group's
    /// next QP): an skb clone sharing the data, which neither reference writes, or a copy of
    /// a buffer. Any context.
    pub(crate) fn try_clone(&self) -> Result<Self> {
        let (backing, payload) = match &self.backing {
            Backing::Skb(skb) => {
                // SAFETY: we own the skb; a clone shares its data buffer, which stays
                // allocated (and in place) while either skb exists, so `payload` stays valid
                // for the clone.
                let clone = unsafe { bindings::rrxe_skb_clone_atomic(skb.as_ptr()) };
                (
                    Backing::Skb(NonNull::new(clone).ok_or(ENOMEM)?),
                    self.payload,
                )
            }
            Backing::Buf(buf) => {
                let copy = copy_of(buf)?;
                let payload = NonNull::from(&copy[..]).cast::<u8>();
                (Backing::Buf(copy), payload)
            }
        };
        Ok(Self {
            backing,
            netdev: self.netdev.clone(),
            payload,
            payload_len: self.payload_len,
            src: self.src,
            dst: self.dst,
            icrc: self.icrc,
        })
    }

    /// Frees the packet as a drop (`kfree_skb`, visible to drop monitors) rather than as a
    /// consumed packet.
    pub(crate) fn discard(self) {
        let (backing, netdev) = self.into_parts();
        drop(netdev);
        match backing {
            // SAFETY: we own the skb.
            Backing::Skb(skb) => unsafe { bindings::rrxe_kfree_skb(skb.as_ptr()) },
            Backing::Buf(buf) => drop(buf),
        }
    }

    /// What holds the packet's bytes and its netdev reference, which the caller now owns
    /// (an skb it must free).
    fn into_parts(self) -> (Backing, ARef<NetDevice>) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used again and not dropped: each field is read out
        // exactly once.
        unsafe { (ptr::read(&this.backing), ptr::read(&this.netdev)) }
    }
}

impl Drop for RxPacket {
    fn drop(&mut self) {
        if let Backing::Skb(skb) = self.backing {
            // SAFETY: we own the skb.
            unsafe { bindings::rrxe_consume_skb(skb.as_ptr()) };
        }
    }
}

/// Why a packet was dropped.
enum RxDrop {
    Truncated,
    Malformed,
    NoMem,
    BadIcrc,
}

impl RxDrop {
    fn count(self) {
        bump(match self {
            Self::Truncated => &COUNTERS.rx_truncated,
            Self::Malformed => &COUNTERS.rx_malformed,
            Self::NoMem => &COUNTERS.rx_nomem,
            Self::BadIcrc => &COUNTERS.rx_bad_icrc,
        });
    }
}

/// Checks a packet from a UDP socket, whose `skb->data` is its UDP header, with its network
/// header set, ICRC included, and turns it into an [`RxPacket`] for `netdev`.
fn parse(
    mut skb: Skb,
    netdev: &NetDevice,
    check_icrc: bool,
) -> core::result::Result<RxPacket, RxDrop> {
    skb.linearize().map_err(|_| RxDrop::NoMem)?;
    let ip_len = skb.network_header_len().ok_or(RxDrop::Malformed)?;
    // SAFETY: we own the skb.
    let protocol = unsafe { bindings::rrxe_skb_protocol(skb.as_raw()) };
    let data = skb.data();
    let len = skb.len();
    // SAFETY: the network header precedes `data` by `ip_len` bytes in the same linear
    // buffer (the IP layer pulled it, or `build` pushed it).
    let ip = unsafe { core::slice::from_raw_parts(data.sub(ip_len), ip_len) };
    let udp_and_rest = skb.linear_data();

    let (udp, rest) = udp_and_rest
        .split_first_chunk::<UDP_HEADER_LEN>()
        .ok_or(RxDrop::Truncated)?;
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < MIN_UDP_LEN || udp_len > len {
        return Err(RxDrop::Truncated);
    }
    let udp_payload = &rest[..udp_len - UDP_HEADER_LEN];

    let (header, src, dst) = if protocol == bindings::RRXE_ETH_P_IP {
        let v4: &[u8; IPV4_HEADER_LEN] = ip.try_into().map_err(|_| RxDrop::Malformed)?;
        let total = usize::from(u16::from_be_bytes([v4[2], v4[3]]));
        if v4[0] != 0x45 || v4[9] != IPPROTO_UDP || total != IPV4_HEADER_LEN + udp_len {
            return Err(RxDrop::Malformed);
        }
        (
            IpHeader::V4(v4),
            IpAddr::from_v4([v4[12], v4[13], v4[14], v4[15]]),
            IpAddr::from_v4([v4[16], v4[17], v4[18], v4[19]]),
        )
    } else if protocol == bindings::RRXE_ETH_P_IPV6 {
        let v6: &[u8; IPV6_HEADER_LEN] = ip.try_into().map_err(|_| RxDrop::Malformed)?;
        let payload_len = usize::from(u16::from_be_bytes([v6[4], v6[5]]));
        if v6[0] >> 4 != 6 || v6[6] != IPPROTO_UDP || payload_len != udp_len {
            return Err(RxDrop::Malformed);
        }
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&v6[8..24]);
        d.copy_from_slice(&v6[24..40]);
        (
            IpHeader::V6(v6),
            IpAddr::from_octets(s),
            IpAddr::from_octets(d),
        )
    } else {
        return Err(RxDrop::Malformed);
    };

    // Left to the receiving run, the check finds the headers where they are now: the
    // packet keeps the skb, which nothing writes.
    if check_icrc {
        verify_icrc(header, udp, udp_payload)?;
    }

    let payload_len = udp_payload.len() - ICRC_LEN;
    let payload = NonNull::from(udp_payload).cast::<u8>();
    // SAFETY: we own the skb. On reception its dst may be a reference valid only inside the
    // RCU read-side section of the receive path; the packet outlives that, and needs none.
    unsafe { bindings::rrxe_skb_dst_drop(skb.as_raw()) };
    Ok(RxPacket {
        backing: Backing::Skb(NonNull::new(skb.into_raw()).ok_or(RxDrop::Malformed)?),
        netdev: netdev.into(),
        payload,
        payload_len,
        src,
        dst,
        icrc: if check_icrc {
            IcrcCheck::Done
        } else {
            // 20 or 40 (the header checks above).
            IcrcCheck::Left {
                ip_len: ip_len as u8,
            }
        },
    })
}

/// The ICRC check of a received packet (IBA A17.4), over its IP and UDP headers and the
/// UDP payload (BTH through ICRC).
fn verify_icrc(
    header: IpHeader<'_>,
    udp: &[u8; UDP_HEADER_LEN],
    udp_payload: &[u8],
) -> core::result::Result<(), RxDrop> {
    match icrc::verify_with::<KernelCrc32>(header, udp, udp_payload) {
        Ok(()) => Ok(()),
        Err(IcrcError::Mismatch { .. }) => Err(RxDrop::BadIcrc),
        Err(_) => Err(RxDrop::Truncated),
    }
}

/// Checks `skb` and hands it to the handler bound to `netdev`, counting the outcome.
///
/// Called inside an RCU read-side section (`rcu`), which keeps the handler found alive
/// (see [`RxBinding`]'s drop).
fn deliver(skb: Skb, netdev: &NetDevice, check_icrc: bool, rcu: &RcuSection) -> Option<Kick> {
    let mut pkt = match parse(skb, netdev, check_icrc) {
        Ok(pkt) => pkt,
        Err(why) => {
            why.count();
            return None;
        }
    };
    bump(&COUNTERS.rx_packets);
    match RX_INDEX.find(netdev.as_raw(), rcu) {
        // SAFETY: the entry's data is its binding's handler, alive for the RCU read-side
        // section we are in.
        Some(found) => unsafe { (found.receive)(found.data, pkt, rcu) },
        None => {
            if pkt.icrc_ok() {
                bump(&COUNTERS.rx_no_device);
            }
            pkt.discard();
            None
        }
    }
}

/// The sockets' `encap_rcv`.
///
/// # Safety
///
/// Called by the UDP receive path in softirq, inside an RCU read-side section, with an skb
/// it hands over whose `data` is the UDP header.
unsafe extern "C" fn encap_rcv(_sk: *mut bindings::sock, skb: *mut bindings::sk_buff) -> c_int {
    // SAFETY: the UDP layer passes us its reference on the skb (we return 0: consumed).
    let Some(skb) = (unsafe { Skb::from_raw(skb) }) else {
        return 0;
    };
    // SAFETY: skb->dev of a received skb is the live receiving device; it stays alive for the
    // softirq (netdevs are freed after an RCU grace period), and `RxPacket` takes its own
    // reference before the skb outlives this call.
    let dev = unsafe { bindings::rrxe_skb_dev(skb.as_raw()) };
    if dev.is_null() {
        RxDrop::Malformed.count();
        return 0;
    }
    // SAFETY: as above.
    let netdev = unsafe { NetDevice::from_raw(dev) };
    // SAFETY: the UDP receive path calls us inside its RCU read-side section.
    let rcu = unsafe { RcuSection::assume() };
    // SAFETY: softirq context, where preemption is off. Kicks set on this CPU are those of
    // the batch of sends whose close runs this softirq (`TxBatch::close`), whose owner
    // leaves them alone until the close returns, after this softirq.
    let batch = unsafe { bindings::rrxe_rx_kicks_here() }.cast::<Kicks>();
    // A packet received as a batch of sends closes has its ICRC checked by its QP's run,
    // which the sending run makes, on the next CPU for a stream: the CPU whose sends the
    // softirq takes in has the sender's work and the kernel's receive path besides.
    let Some(kick) = deliver(skb, netdev, batch.is_null(), &rcu) else {
        return 0;
    };
    // SAFETY: as above: live, and this softirq's alone while it runs.
    match unsafe { batch.as_mut() } {
        Some(batch) => {
            bump(&COUNTERS.rx_kicks_to_sender);
            batch.add(kick);
        }
        // Dropping the kick queues the work item here.
        None => drop(kick),
    }
    0
}

// ---------------------------------------------------------------------------------------
// The tunnel sockets
// ---------------------------------------------------------------------------------------

type EncapRcv = unsafe extern "C" fn(*mut bindings::sock, *mut bindings::sk_buff) -> c_int;

/// The RoCEv2 sockets of one network namespace, open while a device there uses them.
struct NetSockets {
    /// The namespace (`struct net` address). Kernel sockets hold no reference on their
    /// namespace, so the entry leaves the table in the namespace's exit ([`net_exit`]) at the
    /// latest, closing the sockets: a device still being unregistered then finds it gone.
    net: usize,
    /// This opening, unique for the module's life: a namespace allocated later at the same
    /// address is another entry, never reached by an older [`TunnelRef`].
    id: u64,
    users: usize,
    sk4: *mut bindings::socket,
    /// Null when IPv6 is not available.
    sk6: *mut bindings::socket,
}

struct TunnelState {
    /// Free slots are `None`; the table gives its memory back when the last entry goes.
    nets: KVec<Option<NetSockets>>,
    next_id: u64,
}

impl TunnelState {
    /// The entry `pred` picks.
    fn find(&mut self, pred: impl Fn(&NetSockets) -> bool) -> Option<&mut NetSockets> {
        self.nets.iter_mut().flatten().find(|e| pred(e))
    }

    /// Takes the entry `pred` picks out of the table.
    fn take(&mut self, pred: impl Fn(&NetSockets) -> bool) -> Option<NetSockets> {
        let taken = self
            .nets
            .iter_mut()
            .find(|e| matches!(e, Some(e) if pred(e)))?
            .take();
        if self.nets.iter().all(Option::is_none) {
            self.nets = KVec::new();
        }
        taken
    }
}

/// The tunnel state behind the C mutex `rrxe_tunnel_mutex` (a sleeping lock: sockets are
/// created and released under it).
struct TunnelCell(UnsafeCell<TunnelState>);

// SAFETY: the state is only reached through `TunnelCell::lock`, which holds the mutex.
unsafe impl Sync for TunnelCell {}

static TUNNEL: TunnelCell = TunnelCell(UnsafeCell::new(TunnelState {
    nets: KVec::new(),
    next_id: 1,
}));

struct TunnelGuard(PhantomData<*mut ()>);

impl TunnelCell {
    fn lock(&self) -> TunnelGuard {
        // SAFETY: a statically initialised mutex; process context (callers may sleep).
        unsafe { bindings::rrxe_tunnel_lock() };
        TunnelGuard(PhantomData)
    }
}

impl core::ops::Deref for TunnelGuard {
    type Target = TunnelState;
    fn deref(&self) -> &TunnelState {
        // SAFETY: the guard holds the mutex.
        unsafe { &*TUNNEL.0.get() }
    }
}

impl core::ops::DerefMut for TunnelGuard {
    fn deref_mut(&mut self) -> &mut TunnelState {
        // SAFETY: the guard holds the mutex, so access is exclusive.
        unsafe { &mut *TUNNEL.0.get() }
    }
}

impl Drop for TunnelGuard {
    fn drop(&mut self) {
        // SAFETY: the guard holds the mutex.
        unsafe { bindings::rrxe_tunnel_unlock() };
    }
}

/// Opens one tunnel socket in `net`.
///
/// # Safety
///
/// `net` must be a live namespace, for which [`net_exit`] has not run.
unsafe fn open_socket(
    net: *mut bindings::net,
    ipv6: bool,
    encap: EncapRcv,
) -> Result<*mut bindings::socket> {
    let mut sock = ptr::null_mut();
    // SAFETY: `net` is live (function contract), `sock` a valid out pointer; process context.
    to_result(unsafe {
        bindings::rrxe_udp_sock_create(net, ipv6, bindings::RRXE_ROCE_V2_UDP_DPORT, &mut sock)
    })?;
    // SAFETY: `sock` is the UDP socket just created in `net`; `encap` stays valid while the
    // module is loaded, and the socket is released (see `close_socket`) before the module
    // goes away: every `TunnelRef` is dropped before then, and unregistering the namespace
    // watch closes whatever is left.
    unsafe { bindings::rrxe_setup_udp_tunnel_sock(net, sock, Some(encap)) };
    Ok(sock)
}

/// Releases one tunnel socket.
///
/// # Safety
///
/// `sock` must come from `open_socket` and not be released yet.
unsafe fn close_socket(sock: *mut bindings::socket) {
    // SAFETY: per the function contract. udp_tunnel_sock_release clears sk_user_data, waits
    // for an RCU grace period, then shuts the socket down and releases it (unhashing it).
    unsafe { bindings::udp_tunnel_sock_release(sock) };
}

/// Opens the IPv4 and (if the kernel has it) IPv6 sockets of `net`.
///
/// # Safety
///
/// As for [`open_socket`].
unsafe fn open_sockets(
    net: *mut bindings::net,
) -> Result<(*mut bindings::socket, *mut bindings::socket)> {
    let encap: EncapRcv = encap_rcv;
    // SAFETY: per the function contract.
    let sk4 = unsafe { open_socket(net, false, encap) }?;
    // SAFETY: as above.
    match unsafe { open_socket(net, true, encap) } {
        Ok(sk6) => Ok((sk4, sk6)),
        Err(e) if e.to_errno() == -bindings::RRXE_EAFNOSUPPORT => {
            pr_warn!("IPv6 is not available; RoCEv2 over IPv4 only\n");
            Ok((sk4, ptr::null_mut()))
        }
        Err(e) => {
            // SAFETY: opened above, not published.
            unsafe { close_socket(sk4) };
            synchronize_rcu();
            Err(e)
        }
    }
}

impl NetSockets {
    /// Closes the sockets, out of the table; process context (sleeps).
    ///
    /// No `encap_rcv` runs once this returns: `udp_tunnel_sock_release` waits for a grace
    /// period and then unhashes the socket, but a receiver that looked the socket up before
    /// the unhash (in an RCU read-side section) may still call `encap_rcv` on it after the
    /// release returned (the socket itself is RCU-freed, so that is memory safe). A second
    /// grace period after the release waits such receivers out, so that the caller (device
    /// teardown, ultimately module exit) may free what the handler uses.
    fn close(self, why: &str) {
        if !self.sk6.is_null() {
            // SAFETY: opened by `open_sockets`; the entry, out of the table, was its owner.
            unsafe { close_socket(self.sk6) };
        }
        // SAFETY: as above.
        unsafe { close_socket(self.sk4) };
        synchronize_rcu();
        let s = COUNTERS.snapshot();
        pr_info!(
            "RoCEv2 UDP port {} closed ({}); rx {} (bad icrc {}, truncated {}, malformed {}, nomem {}, no device {}), tx {} (errors {})\n",
            bindings::RRXE_ROCE_V2_UDP_DPORT,
            why,
            s.rx_packets,
            s.rx_bad_icrc,
            s.rx_truncated,
            s.rx_malformed,
            s.rx_nomem,
            s.rx_no_device,
            s.tx_packets,
            s.tx_errors
        );
    }
}

/// A reference to the RoCEv2 UDP sockets (port 4791, IPv4 and IPv6) of one network
/// namespace.
///
/// The first reference in a namespace opens its sockets, the last one closes them; while
/// any is held, packets arriving on the port in that namespace go to the receive index.
/// A namespace that is dismantled closes its sockets first ([`net_exit`]); references left
/// then (devices still unregistering) hold nothing.
///
/// It is `Send` and `Sync` (a number; the state is in a mutex-protected static); dropping
/// it may sleep.
struct TunnelRef {
    id: u64,
}

impl TunnelRef {
    /// Takes a reference on the sockets of `net`, opening them if there were none; process
    /// context.
    ///
    /// Fails with `EADDRINUSE` if something else (e.g. rdma_rxe) has the port there.
    ///
    /// # Safety
    ///
    /// `net` must be a live namespace, for which [`net_exit`] has not run.
    unsafe fn acquire(net: *mut bindings::net) -> Result<Self> {
        let key = net as usize;
        let mut state = TUNNEL.lock();
        if let Some(e) = state.find(|e| e.net == key) {
            e.users += 1;
            return Ok(Self { id: e.id });
        }
        // Room first, so that sockets once open always find their slot.
        if !state.nets.iter().any(Option::is_none) {
            state.nets.reserve(1, GFP_KERNEL)?;
        }
        // SAFETY: per the function contract.
        let (sk4, sk6) = unsafe { open_sockets(net) }?;
        let id = state.next_id;
        state.next_id += 1;
        let entry = NetSockets {
            net: key,
            id,
            users: 1,
            sk4,
            sk6,
        };
        match state.nets.iter_mut().find(|e| e.is_none()) {
            Some(free) => *free = Some(entry),
            // Cannot fail: capacity was reserved above.
            None => state.nets.push(Some(entry), GFP_KERNEL)?,
        }
        Ok(Self { id })
    }
}

/// Waits until every RCU read-side section that began before has ended: the UDP receive
/// path runs `encap_rcv` inside one (softirq, under `rcu_read_lock` in IP delivery).
fn synchronize_rcu() {
    // SAFETY: process context; no locks held that an RCU callback could need.
    unsafe { bindings::synchronize_rcu() };
}

impl Drop for TunnelRef {
    /// Closes the namespace's sockets with its last reference; process context (sleeps).
    fn drop(&mut self) {
        let mut state = TUNNEL.lock();
        let id = self.id;
        let Some(e) = state.find(|e| e.id == id) else {
            // The namespace was dismantled and closed them.
            return;
        };
        e.users -= 1;
        if e.users > 0 {
            return;
        }
        if let Some(e) = state.take(|e| e.id == id) {
            e.close("last device");
        }
    }
}

/// Closes the sockets of a namespace being dismantled, if a device still holds them.
///
/// # Safety
///
/// Called by the namespace code, process context, with a namespace whose netdevs are gone.
unsafe extern "C" fn net_exit(net: *mut bindings::net) {
    let key = net as usize;
    let taken = TUNNEL.lock().take(|e| e.net == key);
    if let Some(e) = taken {
        e.close("namespace dismantled");
    }
}

/// The watch over network namespaces that closes a dying namespace's sockets (see
/// [`NetSockets`]); one per module, registered before any device can be added and
/// dropped after the last is gone.
pub(crate) struct NetnsWatch {
    _private: (),
}

impl NetnsWatch {
    /// Registers the watch; process context.
    pub(crate) fn register() -> Result<Self> {
        // SAFETY: `net_exit` stays valid while the module is loaded, and `drop` unregisters
        // it before then; the module makes one watch (a field of the module object).
        to_result(unsafe { bindings::rrxe_register_pernet(Some(net_exit)) })?;
        Ok(Self { _private: () })
    }
}

impl Drop for NetnsWatch {
    fn drop(&mut self) {
        // SAFETY: registered in `register`. Unregistering runs `net_exit` for every live
        // namespace, closing whatever a device left open.
        unsafe { bindings::rrxe_unregister_pernet() };
    }
}

// ---------------------------------------------------------------------------------------
// Transmit
// ---------------------------------------------------------------------------------------

/// Where a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TxPath {
    /// Source address (one of the netdev's, from the source GID).
    pub(crate) src: IpAddr,
    /// Destination address; of the same family as `src`.
    pub(crate) dst: IpAddr,
    /// UDP source port (flow entropy); the destination port is 4791.
    pub(crate) src_port: u16,
    /// IPv4 TOS / IPv6 Traffic Class (DSCP and ECN).
    pub(crate) tclass: u8,
    /// IPv4 TTL / IPv6 Hop Limit.
    pub(crate) hop_limit: u8,
}

/// A route (`struct dst_entry` reference).
struct Dst(NonNull<bindings::dst_entry>);

// SAFETY: a reference on a route may be taken, checked and dropped on any CPU and in any
// context (the count is atomic, the route freed after an RCU grace period).
unsafe impl Send for Dst {}

impl Drop for Dst {
    fn drop(&mut self) {
        // SAFETY: we own a reference.
        unsafe { bindings::dst_release(self.0.as_ptr()) };
    }
}

impl Dst {
    /// A further reference on the same route.
    fn share(&self) -> Self {
        // SAFETY: we own a reference, so the route is live; the new one is the copy's.
        unsafe { bindings::rrxe_dst_hold(self.0.as_ptr()) };
        Self(self.0)
    }
}

/// A path's route, looked up once and used for its packets while the FIB still gives it:
/// a lookup cost a packet some 600 instructions between the devices of the benchmarks'
/// routed veth pair (`ip_route_output_key` through the policy rules and the FIB trie), the
/// check about 20. The kernel's sockets keep their routes the same way (`sk_dst_check`).
struct KeptRoute {
    key: RouteKey,
    dst: Dst,
    /// What the route's validity is checked against (IPv6: the FIB node's serial number
    /// when it was looked up; IPv4 checks the namespace's route generation and needs none).
    cookie: u32,
}

/// What a route depends on: the netdev it leaves by, the addresses and the TOS (an IPv4
/// routing key). The UDP source port and the hop limit are not routed on.
#[derive(Clone, Copy, PartialEq, Eq)]
struct RouteKey {
    netdev: usize,
    src: IpAddr,
    dst: IpAddr,
    tclass: u8,
}

/// The routes a QP's packets take, kept between packets: one for each of an RC or UC
/// QP's two paths (primary and alternate, IBA 17.2.8), or for a UD QP's two destinations
/// last used (a further one replaces the older). Owned by the QP, under its lock; the
/// routes go with it.
pub(crate) struct RouteCache {
    kept: [Option<KeptRoute>; 2],
    /// The place the next route looked up takes if neither is free.
    next: usize,
}

impl RouteCache {
    /// No routes yet.
    pub(crate) const fn new() -> Self {
        Self {
            kept: [None, None],
            next: 0,
        }
    }

    /// A reference on the route for `path` out of `netdev`: the one kept, unless the FIB
    /// has changed since (a route added or removed, the netdev gone down or away), else
    /// one looked up and kept. Does not sleep.
    fn get(&mut self, netdev: &NetDevice, path: &TxPath) -> Result<Dst> {
        let key = RouteKey {
            netdev: netdev.as_raw() as usize,
            src: path.src,
            dst: path.dst,
            tclass: path.tclass,
        };
        let mut free = None;
        for (i, place) in self.kept.iter_mut().enumerate() {
            match place {
                Some(k) if k.key == key => {
                    // SAFETY: we hold a reference on the route.
                    if unsafe { bindings::rrxe_dst_valid(k.dst.0.as_ptr(), k.cookie) } {
                        return Ok(k.dst.share());
                    }
                    *place = None;
                    free = Some(i);
                }
                None => free = free.or(Some(i)),
                Some(_) => {}
            }
        }
        let (dst, cookie) = route(netdev, path)?;
        let out = dst.share();
        let i = free.unwrap_or_else(|| {
            let i = self.next;
            self.next = (i + 1) % self.kept.len();
            i
        });
        if let Some(place) = self.kept.get_mut(i) {
            *place = Some(KeptRoute { key, dst, cookie });
        }
        Ok(out)
    }
}

fn route(netdev: &NetDevice, path: &TxPath) -> Result<(Dst, u32)> {
    let mut dst = ptr::null_mut();
    let mut cookie = 0;
    // SAFETY: the netdev is live.
    let (net, oif) = unsafe {
        (
            bindings::rrxe_dev_net(netdev.as_raw()),
            bindings::rrxe_netdev_ifindex(netdev.as_raw()),
        )
    };
    let (s, d) = (path.src.octets(), path.dst.octets());
    let ret = match (path.src.v4(), path.dst.v4()) {
        // SAFETY: the addresses are 4 readable bytes each, `dst` a valid out pointer.
        (Some(s4), Some(d4)) => unsafe {
            bindings::rrxe_route4(net, oif, s4.as_ptr(), d4.as_ptr(), path.tclass, &mut dst)
        },
        // SAFETY: the addresses are 16 readable bytes each, `dst` a valid out pointer.
        (None, None) => unsafe {
            bindings::rrxe_route6(net, oif, s.as_ptr(), d.as_ptr(), &mut dst, &mut cookie)
        },
        _ => return Err(EINVAL),
    };
    to_result(ret)?;
    let dst = NonNull::new(dst).map(Dst).ok_or(EINVAL)?;
    Ok((dst, cookie))
}

/// Builds the IP packet carrying `bth_to_icrc` (BTH through pad, then a 4-byte ICRC slot)
/// on `path`, ICRC filled in, `data` at the IP header and the network and transport
/// headers set.
///
/// Its IPv4 ID is `place`, the packet's place in its train (0 for a packet sent alone).
/// RoCEv2 packets are sent with Don't Fragment, and the ID of a datagram that is never
/// fragmented identifies nothing (RFC 6864: its source may set any value): Linux's own UDP
/// sends one from an unconnected socket with ID 0 (`ip_select_ident_segs()`), and so does
/// rrxe, sparing each packet the hash and the shared counter of the kernel's ID generator
/// that rdma_rxe draws from. Splitting a train numbers its packets' IDs on from the
/// first's, which these are (`inet_gso_segment()`), so the ICRC each was built with holds.
fn build(netdev: &NetDevice, path: &TxPath, bth_to_icrc: &[u8], place: u16) -> Result<Skb> {
    if bth_to_icrc.len() < BTH_LEN + ICRC_LEN {
        return Err(EINVAL);
    }
    let v4 = match (path.src.v4(), path.dst.v4()) {
        (Some(s), Some(d)) => Some((s, d)),
        (None, None) => None,
        _ => return Err(EINVAL),
    };
    let ip_len = if v4.is_some() {
        IPV4_HEADER_LEN
    } else {
        IPV6_HEADER_LEN
    };
    let udp_len = UDP_HEADER_LEN + bth_to_icrc.len();
    let udp_len16 = u16::try_from(udp_len).map_err(|_| errno(bindings::RRXE_EMSGSIZE))?;
    let total16 = u16::try_from(ip_len + udp_len).map_err(|_| errno(bindings::RRXE_EMSGSIZE))?;

    // SAFETY: the netdev is live.
    let ll = unsafe { bindings::rrxe_ll_reserved_space(netdev.as_raw()) };
    let headroom = ll + (ip_len + UDP_HEADER_LEN) as u32;
    let mut skb = Skb::alloc(headroom, bth_to_icrc.len() as u32)?;
    skb.put(bth_to_icrc.len()).copy_from_slice(bth_to_icrc);

    let port = path.src_port.to_be_bytes();
    let dport = bindings::RRXE_ROCE_V2_UDP_DPORT.to_be_bytes();
    let ulen = udp_len16.to_be_bytes();
    // Checksum 0: none for IPv4; for IPv6 rdma_rxe does the same and receivers' tunnel
    // sockets accept it (udp_sock_create leaves no_check6_rx set).
    let udp: [u8; UDP_HEADER_LEN] = [port[0], port[1], dport[0], dport[1], ulen[0], ulen[1], 0, 0];
    skb.push(UDP_HEADER_LEN).copy_from_slice(&udp);
    // SAFETY: we own the skb; data is at the UDP header.
    unsafe { bindings::rrxe_skb_reset_transport_header(skb.as_raw()) };

    let protocol;
    if let Some((s, d)) = v4 {
        let total = total16.to_be_bytes();
        let df = IP_DF.to_be_bytes();
        let id = place.to_be_bytes();
        let hdr: [u8; IPV4_HEADER_LEN] = [
            0x45,
            path.tclass,
            total[0],
            total[1],
            id[0],
            id[1],
            df[0],
            df[1],
            path.hop_limit,
            IPPROTO_UDP,
            0,
            0, // checksum, by ip_local_out (masked in the ICRC)
            s[0],
            s[1],
            s[2],
            s[3],
            d[0],
            d[1],
            d[2],
            d[3],
        ];
        skb.push(IPV4_HEADER_LEN).copy_from_slice(&hdr);
        // SAFETY: we own the skb; data is at the IP header just pushed.
        unsafe { bindings::rrxe_skb_reset_network_header(skb.as_raw()) };
        protocol = bindings::RRXE_ETH_P_IP;
    } else {
        let payload = udp_len16.to_be_bytes();
        let word = (6u32 << 28 | u32::from(path.tclass) << 20).to_be_bytes();
        let mut hdr = [0u8; IPV6_HEADER_LEN];
        hdr[..4].copy_from_slice(&word);
        hdr[4..6].copy_from_slice(&payload);
        hdr[6] = IPPROTO_UDP;
        hdr[7] = path.hop_limit;
        hdr[8..24].copy_from_slice(&path.src.octets());
        hdr[24..40].copy_from_slice(&path.dst.octets());
        skb.push(IPV6_HEADER_LEN).copy_from_slice(&hdr);
        // SAFETY: we own the skb; data is at the IP header just pushed.
        unsafe { bindings::rrxe_skb_reset_network_header(skb.as_raw()) };
        protocol = bindings::RRXE_ETH_P_IPV6;
    }
    // SAFETY: we own the skb; the netdev is live (the stack takes its own references when it
    // queues the skb on it).
    unsafe {
        bindings::rrxe_skb_set_protocol(skb.as_raw(), protocol);
        bindings::rrxe_skb_set_dev(skb.as_raw(), netdev.as_raw());
    }

    // The ICRC over the final headers (the IPv4 ID included).
    let whole = {
        let len = skb.len();
        // SAFETY: the skb is linear (built with put/push only) and we own it exclusively.
        unsafe { core::slice::from_raw_parts_mut(skb.data(), len) }
    };
    let (ip, rest) = whole.split_at_mut(ip_len);
    let (udp_hdr, payload) = rest.split_at_mut(UDP_HEADER_LEN);
    let udp_hdr: &[u8; UDP_HEADER_LEN] = (&*udp_hdr).try_into().map_err(|_| EINVAL)?;
    let ip_hdr = match ip_len {
        IPV4_HEADER_LEN => IpHeader::V4((&*ip).try_into().map_err(|_| EINVAL)?),
        _ => IpHeader::V6((&*ip).try_into().map_err(|_| EINVAL)?),
    };
    icrc::fill_with::<KernelCrc32>(ip_hdr, udp_hdr, payload).map_err(|_| EINVAL)?;
    Ok(skb)
}

/// Sends `bth_to_icrc` (BTH through pad, then a 4-byte ICRC slot, whose contents are
/// ignored) over `path` out of `netdev`, with IP and UDP headers and the ICRC, by the
/// route `routes` keeps for the path (looked up and kept there if it has none), in `batch`
/// (opened if it is not): on the train `batch` has for the path if it takes the packet,
/// else on a new one, the train before it handed to the IP stack.
///
/// Does not sleep: callable from process context and softirq. Failures to build or route the
/// packet (`ENETUNREACH`, `EHOSTUNREACH`, `ENOMEM`, `EINVAL` for a malformed request) are
/// returned and counted in `tx_errors`; so is a multicast packet the stack drops
/// (`ENOBUFS`). A train's packets are counted in `tx_packets` or `tx_errors` as it is handed
/// over, its drops also in the count [`TxBatch::close`] returns.
pub(crate) fn transmit(
    netdev: &NetDevice,
    path: &TxPath,
    bth_to_icrc: &[u8],
    routes: &mut RouteCache,
    batch: &mut TxBatch,
) -> Result {
    let ret = try_transmit(netdev, path, bth_to_icrc, routes, batch);
    if ret.is_err() {
        bump(&COUNTERS.tx_errors);
    }
    ret
}

fn try_transmit(
    netdev: &NetDevice,
    path: &TxPath,
    bth_to_icrc: &[u8],
    routes: &mut RouteCache,
    batch: &mut TxBatch,
) -> Result {
    let len = bth_to_icrc.len();
    if let Some(train) = batch.train.as_mut().filter(|t| t.takes(netdev, path, len)) {
        // `takes` keeps a train below TRAIN_MAX_SEGS packets: the place fits.
        let skb = build(netdev, path, bth_to_icrc, train.segs as u16)?;
        train.add(skb, len);
        return Ok(());
    }
    batch.open();
    batch.send_train();
    let dst = routes.get(netdev, path)?;
    // A multicast datagram is looped back to local listeners by a clone sharing its
    // frag_list; a train's packets are unicast.
    let on_train = !path.dst.is_multicast();
    let skb = build(netdev, path, bth_to_icrc, 0)?;
    let dst = core::mem::ManuallyDrop::new(dst);
    // SAFETY: we own the skb and hand it our route reference.
    unsafe { bindings::rrxe_skb_dst_set(skb.as_raw(), dst.0.as_ptr()) };
    if on_train {
        batch.train = Some(Train::new(skb, netdev, path, len));
        return Ok(());
    }
    let ret = local_out(netdev, skb, path.src.is_v4());
    if ret.is_ok() {
        bump(&COUNTERS.tx_packets);
    }
    ret
}

/// Hands `skb`, a complete IP packet (or a train of them) with its route set, to the IP
/// stack out of `netdev`.
fn local_out(netdev: &NetDevice, skb: Skb, v4: bool) -> Result {
    let skb = skb.into_raw();
    // SAFETY: the skb is a complete IP packet with its route set; the local-out functions
    // consume it whatever they return. The netdev is live.
    let ret = unsafe {
        let net = bindings::rrxe_dev_net(netdev.as_raw());
        bindings::rrxe_local_out(net, skb, v4)
    };
    // net_xmit_eval(): congestion notification is success, a drop is an error.
    match ret {
        0 => Ok(()),
        r if r == bindings::RRXE_NET_XMIT_CN => Ok(()),
        r if r == bindings::RRXE_NET_XMIT_DROP => Err(errno(bindings::RRXE_ENOBUFS)),
        r if r < 0 => to_result(r),
        _ => Err(errno(bindings::RRXE_ENOBUFS)),
    }
}

/// The most packets a train carries; their IPv4 IDs are their places in it ([`build`]).
const TRAIN_MAX_SEGS: u32 = 64;

/// The most bytes a train's IP datagram holds: within the 16-bit IP and UDP lengths its
/// headers carry until it is split, and below a netdev's default `gso_max_size` (64 KiB)
/// with its link header (a VLAN's included), over which the stack would split it before
/// the netdev. 62 packets of a 1024-byte path MTU.
const TRAIN_MAX_LEN: usize = 65_535 - 64;

/// Packets a run sends on one path, handed to the IP stack as one UDP GSO datagram.
///
/// A packet's fixed cost in the kernel's send and receive paths (the IP output, the
/// netdev's transmit, the receive softirq's IP input, route and socket lookup) is most of
/// what a packet costs a run sending over a veth pair. A train pays it once: its first
/// packet is the head of a UDP fraglist GSO skb, the ones after it on its frag_list, each
/// built whole as it would be sent alone, its ICRC over its own headers
/// (`rrxe_skb_train_add`, `rrxe_skb_train_close` in the shim). A netdev that takes fraglist
/// GSO (a veth, `lo`) passes the train on whole, and the receiving UDP tunnel socket,
/// rrxe's or rdma_rxe's, splits it into the packets before its `encap_rcv` sees them
/// (`udp_unexpected_gso()`: an encapsulation socket gets no GSO skb); any other netdev's
/// transmit splits it (`validate_xmit_skb()`). Either split hands back the skbs built,
/// unchained, with the lengths and IDs they were built with (`__udp_gso_segment_list()`,
/// `inet_gso_segment()`), so no byte is copied again and the wire carries the packets a
/// train-less send would.
///
/// A packet joins the train of its netdev and path if it is as long as the train's first
/// packet (the datagram's `gso_size`, which the path MTU is checked against), or shorter,
/// as its last: the geometry of a GSO skb, which the kernel relies on where it copies a
/// fraglist skb into one buffer and splits that by `gso_size` instead (an XDP program on a
/// veth, a header changed by BPF: `__udp_gso_segment()` then linearizes), a split that also
/// gives back the packets as built. A message's middle packets ride one train (a 64 KiB
/// Send's, and its next message's, all of them), successive 64-byte Writes, one packet
/// each, another; a Write's first packet, with its RETH the longer, rides alone.
struct Train {
    /// The first packet, the datagram's head; owns the rest (its frag_list).
    head: Skb,
    /// The last packet on the head's frag_list; null while there is none.
    tail: *mut bindings::sk_buff,
    netdev: ARef<NetDevice>,
    path: TxPath,
    /// Packets on the train, the head included.
    segs: u32,
    /// Whether the last packet was shorter than the first: no more may follow it.
    ended: bool,
    /// The head's UDP payload (BTH to ICRC): the datagram's `gso_size`.
    gso_size: usize,
    /// The datagram's IP length: one IP and UDP header and every packet's UDP payload.
    len: usize,
}

impl Train {
    fn new(head: Skb, netdev: &NetDevice, path: &TxPath, len: usize) -> Self {
        let ip_len = if path.src.is_v4() {
            IPV4_HEADER_LEN
        } else {
            IPV6_HEADER_LEN
        };
        Self {
            head,
            tail: ptr::null_mut(),
            netdev: netdev.into(),
            path: *path,
            segs: 1,
            ended: false,
            gso_size: len,
            len: ip_len + UDP_HEADER_LEN + len,
        }
    }

    /// Whether a `len`-byte packet (UDP payload) on `path` out of `netdev` joins the train.
    fn takes(&self, netdev: &NetDevice, path: &TxPath, len: usize) -> bool {
        !self.ended
            && len <= self.gso_size
            && ptr::eq(self.netdev.as_raw(), netdev.as_raw())
            && self.path == *path
            && self.segs < TRAIN_MAX_SEGS
            && self.len + len <= TRAIN_MAX_LEN
    }

    /// Puts `skb`, a `len`-byte packet [`takes`](Self::takes) admitted, built with its place
    /// in the train as its IPv4 ID, at the end of the train.
    fn add(&mut self, skb: Skb, len: usize) {
        let skb = skb.into_raw();
        // SAFETY: we own both skbs: the head, whose frag_list ends at `tail` (empty if null),
        // and `skb`, a whole packet built for the head's path, data at its IP header,
        // whose ownership the head's frag_list takes.
        unsafe { bindings::rrxe_skb_train_add(self.head.as_raw(), self.tail, skb) };
        self.tail = skb;
        self.segs += 1;
        self.len += len;
        self.ended = len < self.gso_size;
    }

    /// Hands the train to the IP stack: its packets' number, and the result.
    fn send(self) -> (u32, Result) {
        let Self {
            head,
            netdev,
            path,
            segs,
            gso_size,
            ..
        } = self;
        if segs > 1 {
            // SAFETY: we own the head, with `segs - 1` packets on its frag_list; `gso_size`
            // is its own payload's length.
            unsafe { bindings::rrxe_skb_train_close(head.as_raw(), segs, gso_size as u32) };
        }
        (segs, local_out(&netdev, head, path.src.is_v4()))
    }
}

/// A run's sends to the wire, received together where a netdev of this host loops them back.
///
/// A veth delivers a packet to its peer in the sender's softirq: sent one by one, each packet
/// took a softirq of its own, run by the send's `local_bh_enable` before it returned (the
/// kernel's receive path is most of what a packet over a veth pair costs the sending run).
/// Between the first [`transmit`] into a batch and its [`close`](Self::close), this CPU's
/// softirqs wait (`local_bh_disable`): the veth queues the packets on this CPU's backlog, and
/// the softirq the close runs takes them in one go. Their QPs' kicks, and those of any other
/// packet that softirq takes in, go to the kicks the close is given, instead of queueing
/// the QPs' work items here. The sending run then makes those runs with the ones it owes for
/// packets it looped back itself: at once after it, or on the next CPU for a batch worth a
/// wake-up (`TaskOwner::run` in qp/task.rs). Queued here, the receiver's run waited for a
/// worker behind the sender's, one wake-up more a round trip (a 2-byte Read over a veth pair
/// took 75.7 us, 35.2 so), and a stream's two ends shared one CPU.
///
/// The batch gathers the run's packets of one path in a [`Train`] as well, handed to the IP
/// stack when a packet does not fit it and at the close.
///
/// Nothing may sleep while a batch is open; a run's building and sending of packets does
/// not. Bound to its CPU (not `Send`): while it is open, preemption is off.
pub(crate) struct TxBatch {
    open: bool,
    train: Option<Train>,
    /// Packets of trains the stack dropped.
    dropped: u32,
    _cpu: PhantomData<*mut ()>,
}

impl TxBatch {
    /// A batch not yet open.
    pub(crate) const fn new() -> Self {
        Self {
            open: false,
            train: None,
            dropped: 0,
            _cpu: PhantomData,
        }
    }

    fn open(&mut self) {
        if !self.open {
            // SAFETY: closed by `close` or `drop` on this CPU (preemption is off meanwhile).
            unsafe { bindings::rrxe_tx_batch_begin() };
            self.open = true;
        }
    }

    /// Hands the train, if there is one, to the IP stack, and counts its packets.
    fn send_train(&mut self) {
        let Some(train) = self.train.take() else {
            return;
        };
        let (segs, ret) = train.send();
        let n = u64::from(segs);
        if ret.is_ok() {
            bump_by(&COUNTERS.tx_packets, n);
            if segs > 1 {
                bump(&COUNTERS.tx_trains);
                bump_by(&COUNTERS.tx_train_packets, n);
            }
        } else {
            bump_by(&COUNTERS.tx_errors, n);
            self.dropped += segs;
        }
    }

    /// Ends the batch, if a packet opened it: the train goes to the IP stack, and the
    /// packets a netdev of this host looped back are received now, on this CPU, their QPs'
    /// kicks added to `kicks`. Returns the packets of the batch's trains the stack dropped
    /// (already reported sent by [`transmit`]), for the device's `send_errors`.
    pub(crate) fn close(&mut self, kicks: &mut Kicks) -> u32 {
        self.send_train();
        if core::mem::take(&mut self.open) {
            // SAFETY: the batch is open, on this CPU. `kicks` stays borrowed, so in place
            // and untouched by its owner, until the call returns: the softirqs it runs on
            // this CPU are its only users meanwhile (`encap_rcv`).
            unsafe { bindings::rrxe_tx_batch_end(ptr::from_mut(kicks).cast()) };
        }
        core::mem::take(&mut self.dropped)
    }
}

impl Drop for TxBatch {
    fn drop(&mut self) {
        self.send_train();
        if self.open {
            // SAFETY: the batch is open, on this CPU. Without kicks to add to, the packets'
            // kicks queue their QPs' work items.
            unsafe { bindings::rrxe_tx_batch_end(ptr::null_mut()) };
        }
    }
}

/// A buffer of its own holding a copy of `bytes` (`GFP_ATOMIC`), made with one `memcpy`:
/// `KVec::extend_from_slice` clones byte by byte.
fn copy_of(bytes: &[u8]) -> Result<KVec<u8>> {
    let len = bytes.len();
    let mut buf = KVec::<u8>::with_capacity(len, GFP_ATOMIC)?;
    // SAFETY: the buffer has room for `len` bytes, which the copy initialises before the
    // length covers them; source and destination are distinct allocations.
    unsafe {
        ptr::copy_nonoverlapping(bytes.as_ptr(), buf.as_mut_ptr(), len);
        buf.set_len(len);
    }
    Ok(buf)
}

/// Refuses a `len`-byte packet on `path` where [`build`] would refuse it.
fn check_looped_back(path: &TxPath, len: usize) -> Result {
    if len < BTH_LEN + ICRC_LEN || path.src.is_v4() != path.dst.is_v4() {
        return Err(EINVAL);
    }
    // The UDP length must fit its 16 bits, and an IPv4 packet's total length its own.
    let ip_len = if path.src.is_v4() { IPV4_HEADER_LEN } else { 0 };
    if ip_len + UDP_HEADER_LEN + len > usize::from(u16::MAX) {
        return Err(errno(bindings::RRXE_EMSGSIZE));
    }
    Ok(())
}

/// The packet [`loopback_in_place`] hands over when its pool has no buffer: a copy of
/// `bth_to_icrc` in a buffer of its own, as received on `netdev` from `path.src` for
/// `path.dst`, refused (`EINVAL`, `EMSGSIZE`) where [`build`] would refuse it.
fn looped_back(netdev: &NetDevice, path: &TxPath, bth_to_icrc: &[u8]) -> Result<RxPacket> {
    let len = bth_to_icrc.len();
    check_looped_back(path, len)?;
    let buf = copy_of(bth_to_icrc)?;
    let payload = NonNull::from(&buf[..]).cast::<u8>();
    Ok(RxPacket {
        backing: Backing::Buf(buf),
        netdev: netdev.into(),
        payload,
        payload_len: len - ICRC_LEN,
        src: path.src,
        dst: path.dst,
        icrc: IcrcCheck::Done,
    })
}

/// Hands the `len`-byte transport packet at the start of `buf` (BTH through pad, then the
/// 4-byte ICRC slot, left as it is) to the receive path as if it had arrived on `netdev`
/// from `path.src` for `path.dst`, for destinations on this host; the caller decides when
/// that is. Does not sleep.
///
/// The packet never meets a netdev, the IP layer or a capture, so it travels without an
/// skb, without IP and UDP headers to build and parse again and without an ICRC: a CRC
/// that only this host would compute and check proves nothing about a wire it never
/// crossed. It travels in `buf` itself, a buffer of the same size from `pool` taking its
/// place, so that it is neither copied nor allocated for; in a copy of its own when the
/// pool has no buffer of that size and no memory for one. `buf` must have been written by
/// the transport (every byte of the packet, pad and ICRC slot included): the receiving QP
/// reads it, and it goes back to the pool afterwards. Its lengths and addresses are
/// checked as [`transmit`] and the receive path check them.
///
/// The packet joins `handover`, which hands its packets to the handler together when
/// flushed, or here, into `kicks`, when it is full or the packet is for another netdev.
pub(crate) fn loopback_in_place(
    netdev: &NetDevice,
    path: &TxPath,
    buf: &mut KVec<u8>,
    len: usize,
    (pool, spare): (&BufferPool, &mut SpareBuffer),
    handover: &mut Handover,
    kicks: &mut Kicks,
) -> Result {
    let pkt = match in_place(netdev, path, buf, len, pool, spare) {
        Ok(pkt) => pkt,
        Err(e) => {
            bump(&COUNTERS.tx_errors);
            return Err(e);
        }
    };
    bump(&COUNTERS.tx_packets);
    handover.push(netdev, pkt, kicks);
    Ok(())
}

/// The packet [`loopback_in_place`] hands over.
fn in_place(
    netdev: &NetDevice,
    path: &TxPath,
    buf: &mut KVec<u8>,
    len: usize,
    pool: &BufferPool,
    spare: &mut SpareBuffer,
) -> Result<RxPacket> {
    check_looped_back(path, len)?;
    let bytes = buf.get(..len).ok_or(EINVAL)?;
    let Some(mut packet) = pool.take(buf.len(), spare) else {
        let pkt = looped_back(netdev, path, bytes)?;
        pool.allocated.fetch_add(1, Ordering::Relaxed);
        return Ok(pkt);
    };
    core::mem::swap(buf, &mut packet);
    let payload = NonNull::from(&packet[..]).cast::<u8>();
    Ok(RxPacket {
        backing: Backing::Buf(packet),
        netdev: netdev.into(),
        payload,
        payload_len: len - ICRC_LEN,
        src: path.src,
        dst: path.dst,
        icrc: IcrcCheck::Done,
    })
}

/// Packets a task run looped back, held until they are handed to the receive path together
/// ([`Handover::flush`]): the netdev's handler is then found once for all of them, and
/// takes consecutive packets for one QP with one lookup of it. Holds up to
/// [`Handover::CAPACITY`] packets, all received on one netdev, whose reference the first
/// of them holds.
pub(crate) struct Handover {
    /// `CAPACITY` places, the first `len` of them taken.
    pkts: KVec<Option<RxPacket>>,
    len: usize,
}

impl Handover {
    /// Packets held before they are handed over anyway: a run's budget of them.
    pub(crate) const CAPACITY: usize = 64;

    /// An empty handover, with its places allocated; process context.
    pub(crate) fn new() -> Result<Self> {
        let mut pkts = KVec::with_capacity(Self::CAPACITY, GFP_KERNEL)?;
        for _ in 0..Self::CAPACITY {
            pkts.push(None, GFP_KERNEL)?;
        }
        Ok(Self { pkts, len: 0 })
    }

    /// Adds `pkt`, received on `netdev`, handing over what is held first if it is full or
    /// holds packets of another netdev.
    fn push(&mut self, netdev: &NetDevice, pkt: RxPacket, kicks: &mut Kicks) {
        let same = match self.pkts.first() {
            Some(Some(first)) => ptr::eq(first.netdev.as_raw(), netdev.as_raw()),
            _ => false,
        };
        if self.len > 0 && (!same || self.len >= self.pkts.len()) {
            self.flush(kicks);
        }
        match self.pkts.get_mut(self.len) {
            Some(place) => {
                *place = Some(pkt);
                self.len += 1;
            }
            // No places at all (never: `new` makes them).
            None => pkt.discard(),
        }
    }

    /// Hands the packets held to the handler bound to their netdev, adding the kicks their
    /// tasks are owed to `kicks`. Does not sleep. Every run asks, and a run that looped
    /// nothing back (one that only took a packet in) has nothing to hand over: that look
    /// is made here, without a call.
    #[inline(always)]
    pub(crate) fn flush(&mut self, kicks: &mut Kicks) {
        if self.len > 0 {
            self.hand_over(kicks);
        }
    }

    /// [`Handover::flush`] with packets held.
    #[inline(never)]
    fn hand_over(&mut self, kicks: &mut Kicks) {
        let len = core::mem::take(&mut self.len);
        let Some(pkts) = self.pkts.get_mut(..len) else {
            return;
        };
        // Every packet holds a reference to the netdev (none outlives the hand-over: a QP
        // must not hold up its unregistering); the index needs only its identity.
        let Some(netdev) = pkts
            .first()
            .and_then(Option::as_ref)
            .map(|p| p.netdev.as_raw())
        else {
            // Held packets fill the first places (never: a hole at the first).
            pkts.iter_mut().for_each(|place| drop(place.take()));
            return;
        };
        COUNTERS.rx_packets.fetch_add(len as u64, Ordering::Relaxed);
        // The handler may be unbound concurrently: the RCU read-side section keeps it alive
        // for the delivery, as the softirq receive path's own does.
        let rcu = RcuSection::enter();
        match RX_INDEX.find(netdev, &rcu) {
            // SAFETY: the entry's data is its binding's handler, alive for the RCU read-side
            // section we are in.
            Some(found) => unsafe { (found.receive_all)(found.data, pkts, kicks, &rcu) },
            None => {
                for pkt in pkts.iter_mut().filter_map(Option::take) {
                    bump(&COUNTERS.rx_no_device);
                    pkt.discard();
                }
            }
        }
        drop(rcu);
        // Whatever the handler left is dropped.
        for place in pkts.iter_mut() {
            drop(place.take());
        }
    }
}

impl Drop for Handover {
    /// Hands over what is still held; the kicks fire here.
    fn drop(&mut self) {
        let mut kicks = Kicks::new();
        self.flush(&mut kicks);
        kicks.fire(super::task::Place::Here);
    }
}

/// Most buffers a [`BufferPool`] keeps.
const POOL_BUFFERS: usize = 64;

/// Packet buffers of one size that the QPs of a device pass around in loopback: a sending
/// QP hands the buffer its packet was built in to the receiving QP and takes one from the
/// pool in its place ([`loopback_in_place`]); the receiving QP gives it back once it has
/// taken the packet in ([`BufferPool::recycle`]). Each QP keeps one of its own first
/// ([`SpareBuffer`]): the pool serves streams, whose sender takes more than it receives. A
/// buffer is allocated (zeroed) only when the pool is empty, and at most [`POOL_BUFFERS`]
/// are kept. Process context: QP task runs and doorbells' system calls send and take in
/// looped-back packets (the receive path in softirq only queues them), so the pool's lock
/// leaves interrupts on (under TCG taking it with interrupts saved cost 44 ns against 16).
#[pin_data]
pub(crate) struct BufferPool {
    #[pin]
    free: SpinLock<KVec<KVec<u8>>>,
    /// The size of every buffer.
    size: usize,
    /// Buffers allocated for looped-back packets: the pool's own, and the copies made when
    /// it had none.
    allocated: AtomicU64,
}

impl BufferPool {
    /// An empty pool of `size`-byte buffers.
    pub(crate) fn new(size: usize) -> impl PinInit<Self> {
        pin_init!(Self {
            free <- kernel::new_spinlock!(KVec::new(), "rrxe_buffer_pool"),
            size,
            allocated: AtomicU64::new(0),
        })
    }

    /// Buffers allocated for looped-back packets so far: while the pool recycles, a fraction
    /// of the packets (those sent while more than the pool's bound were in flight).
    pub(crate) fn allocated(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed)
    }

    /// A `size`-byte buffer: `spare`'s, a recycled one, or a new one, zeroed; `None` for
    /// another size or when no memory is left.
    fn take(&self, size: usize, spare: &mut SpareBuffer) -> Option<KVec<u8>> {
        if size != self.size {
            return None;
        }
        if let Some(buf) = spare.0.take() {
            return Some(buf);
        }
        {
            let mut free = self.free.lock();
            if let Some(last) = free.len().checked_sub(1) {
                // SAFETY: the element at `last` is initialised; the length no longer covers
                // it once it is read out, so it is owned once.
                return Some(unsafe {
                    free.set_len(last);
                    ptr::read(free.as_ptr().add(last))
                });
            }
        }
        let mut buf = KVec::<u8>::with_capacity(size, GFP_ATOMIC | __GFP_ZERO).ok()?;
        self.allocated.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the allocation has room for `size` bytes, which __GFP_ZERO zeroed.
        unsafe { buf.set_len(size) };
        Some(buf)
    }

    /// Frees a packet that was taken in, keeping its buffer if it is one of the pool's size:
    /// as `spare` if that has none, or in the pool if it is not full.
    pub(crate) fn recycle(&self, pkt: RxPacket, spare: &mut SpareBuffer) {
        let (backing, netdev) = pkt.into_parts();
        drop(netdev);
        let buf = match backing {
            Backing::Buf(buf) if buf.len() == self.size => buf,
            Backing::Buf(_) => return,
            // SAFETY: we own the skb.
            Backing::Skb(skb) => return unsafe { bindings::rrxe_consume_skb(skb.as_ptr()) },
        };
        if spare.0.is_none() {
            spare.0 = Some(buf);
            return;
        }
        let mut free = self.free.lock();
        if free.len() < POOL_BUFFERS {
            // The pool's vector grows to its bound once; failing to grow frees the buffer.
            let _ = free.push(buf, GFP_ATOMIC);
        }
    }
}

/// A QP's own loopback buffer of its device's [`BufferPool`]'s size, kept between taking a
/// looped-back packet in and sending one: the QP that takes a packet in keeps its buffer
/// here before giving it to the pool, and sends its next packet in it, so that the two
/// QPs of a ping-pong trade buffers without the pool's lock (four times a looped-back
/// 2-byte Read, each with five calls). Freed with the QP.
#[derive(Default)]
pub(crate) struct SpareBuffer(Option<KVec<u8>>);

// ---------------------------------------------------------------------------------------
// The soft-RoCE receive index: which handler a netdev's packets go to
// ---------------------------------------------------------------------------------------

/// Hands a packet to a handler given as the data of its index entry.
type ReceiveFn = unsafe fn(*const c_void, RxPacket, &RcuSection) -> Option<Kick>;
/// Hands packets to a handler given as the data of its index entry.
type ReceiveAllFn = unsafe fn(*const c_void, &mut [Option<RxPacket>], &mut Kicks, &RcuSection);

/// One bound handler.
struct IndexEntry {
    /// Identity of the netdev, compared but never dereferenced; 0 once unbound.
    netdev: AtomicUsize,
    handler: Handler,
}

/// A bound handler's reference and calls.
#[derive(Clone, Copy)]
struct Handler {
    /// `Arc::into_raw` of the handler; the binding owns the reference.
    data: *const c_void,
    receive: ReceiveFn,
    receive_all: ReceiveAllFn,
}

/// The bound handlers, read under RCU with no lock: every packet received, and every
/// loopback hand-over, looks its netdev's up (taking a lock with interrupts saved for it
/// cost 44 ns under TCG, twice a looped-back Read). Entries are immutable once published
/// but for their netdev, which unbinding clears in place; binding publishes a new array of
/// the live entries and frees the old one after a grace period, as unbinding frees the
/// last one. Changes, in process context, are serialised by the C spinlock
/// `rrxe_rx_index_lock`.
struct RxIndex {
    /// `KBox::into_raw` of the published entries; null while there are none.
    current: AtomicPtr<KVec<IndexEntry>>,
}

static RX_INDEX: RxIndex = RxIndex {
    current: AtomicPtr::new(ptr::null_mut()),
};

impl RxIndex {
    /// Runs `f` on the published entries (null: none), under the writers' lock.
    fn write<R>(&self, f: impl FnOnce(*mut KVec<IndexEntry>) -> R) -> R {
        // SAFETY: a statically initialised spinlock.
        let flags = unsafe { bindings::rrxe_rx_index_lock() };
        let r = f(self.current.load(Ordering::Relaxed));
        // SAFETY: locked above with these flags.
        unsafe { bindings::rrxe_rx_index_unlock(flags) };
        r
    }

    /// The handler bound to the netdev at `netdev` (an identity, not dereferenced). The
    /// read-side section the caller is in keeps the array read and the handler found alive
    /// (see [`RxBinding`]'s drop).
    fn find(&self, netdev: *const bindings::net_device, _section: &RcuSection) -> Option<Handler> {
        let key = netdev as usize;
        let entries = self.current.load(Ordering::Acquire);
        // SAFETY: a published array is freed only a grace period after it was replaced,
        // and we are in a read-side section.
        let entries = unsafe { entries.as_ref() }?;
        entries
            .iter()
            .find(|e| e.netdev.load(Ordering::Relaxed) == key)
            .map(|e| e.handler)
    }
}

/// Frees an array of index entries a grace period after it was replaced; process context
/// (sleeps).
fn free_entries(old: *mut KVec<IndexEntry>) {
    if !old.is_null() {
        // Lookups that read the old array are in RCU read-side sections.
        synchronize_rcu();
        // SAFETY: `KBox::into_raw` of an array no longer published, and no reader is left.
        drop(unsafe { KBox::from_raw(old) });
    }
}

/// Calls `H::receive` on the handler `data` points at.
///
/// # Safety
///
/// `data` must be `Arc::into_raw` of an `Arc<H>` that stays alive for the call.
unsafe fn receive_thunk<H: RxHandler>(
    data: *const c_void,
    pkt: RxPacket,
    rcu: &RcuSection,
) -> Option<Kick> {
    // SAFETY: per the function contract.
    let handler = unsafe { &*data.cast::<H>() };
    handler.receive(pkt, rcu)
}

/// Calls `H::receive_all` on the handler `data` points at.
///
/// # Safety
///
/// `data` must be `Arc::into_raw` of an `Arc<H>` that stays alive for the call.
unsafe fn receive_all_thunk<H: RxHandler>(
    data: *const c_void,
    pkts: &mut [Option<RxPacket>],
    kicks: &mut Kicks,
    rcu: &RcuSection,
) {
    // SAFETY: per the function contract.
    let handler = unsafe { &*data.cast::<H>() };
    handler.receive_all(pkts, kicks, rcu)
}

/// Drops the reference `data` is.
///
/// # Safety
///
/// `data` must be `Arc::into_raw` of an `Arc<H>`, not used again.
unsafe fn release_thunk<H: RxHandler>(data: *const c_void) {
    // SAFETY: per the function contract.
    drop(unsafe { Arc::from_raw(data.cast::<H>()) });
}

/// A handler bound to a netdev: while it exists, RoCEv2 packets arriving over the netdev
/// (or a VLAN of it) go to the handler, and the port's sockets stay open.
pub(crate) struct RxBinding {
    netdev: usize,
    data: *const c_void,
    release: unsafe fn(*const c_void),
    _tunnel: TunnelRef,
}

// SAFETY: the data pointer is a reference to a `Send + Sync` handler.
unsafe impl Send for RxBinding {}
// SAFETY: as above; nothing is reached through `&RxBinding`.
unsafe impl Sync for RxBinding {}

impl RxBinding {
    /// Binds `handler` to `netdev`, opening the port if no binding had; process context.
    ///
    /// Fails with `EADDRINUSE` if something else (e.g. rdma_rxe) has the port, and with
    /// `EEXIST` if the netdev has a handler already.
    pub(crate) fn bind<H: RxHandler>(netdev: &NetDevice, handler: Arc<H>) -> Result<Self> {
        // SAFETY: the netdev is live, so its namespace is: a namespace is dismantled only
        // after its netdevs are gone.
        let tunnel = unsafe { TunnelRef::acquire(bindings::rrxe_dev_net(netdev.as_raw())) }?;
        let key = netdev.as_raw() as usize;
        let data = Arc::into_raw(handler).cast::<c_void>();
        let handler = Handler {
            data,
            receive: receive_thunk::<H>,
            receive_all: receive_all_thunk::<H>,
        };
        // A new array of the live entries and this one, published in place of the old.
        let added = RX_INDEX.write(|current| -> Result<*mut KVec<IndexEntry>> {
            // SAFETY: the published array, which only writers (holding the lock) replace.
            let old = unsafe { current.as_ref() }.map_or(&[][..], |v| &v[..]);
            let mut entries = KVec::with_capacity(old.len() + 1, GFP_ATOMIC)?;
            for e in old {
                let netdev = e.netdev.load(Ordering::Relaxed);
                if netdev == key {
                    return Err(EEXIST);
                }
                if netdev != 0 {
                    let netdev = AtomicUsize::new(netdev);
                    entries.push(IndexEntry { netdev, ..*e }, GFP_ATOMIC)?;
                }
            }
            let netdev = AtomicUsize::new(key);
            entries.push(IndexEntry { netdev, handler }, GFP_ATOMIC)?;
            let new = KBox::into_raw(KBox::new(entries, GFP_ATOMIC)?);
            RX_INDEX.current.store(new, Ordering::Release);
            Ok(current)
        });
        match added {
            Ok(old) => free_entries(old),
            Err(e) => {
                // SAFETY: not in the index: the reference is still ours.
                unsafe { release_thunk::<H>(data) };
                return Err(e);
            }
        }
        Ok(Self {
            netdev: key,
            data,
            release: release_thunk::<H>,
            _tunnel: tunnel,
        })
    }
}

impl Drop for RxBinding {
    /// Unbinds; process context (sleeps). No call of the handler is running or can start
    /// once this returns.
    fn drop(&mut self) {
        // Unbound in place (no allocation that could fail); the last binding gives the
        // array back, so none is left at module exit.
        let emptied = RX_INDEX.write(|current| {
            // SAFETY: the published array, which only writers (holding the lock) replace.
            let Some(entries) = (unsafe { current.as_ref() }) else {
                return ptr::null_mut();
            };
            let mut live = 0;
            for e in entries.iter() {
                if e.netdev.load(Ordering::Relaxed) == self.netdev {
                    e.netdev.store(0, Ordering::Relaxed);
                }
                if e.netdev.load(Ordering::Relaxed) != 0 {
                    live += 1;
                }
            }
            if live > 0 {
                return ptr::null_mut();
            }
            RX_INDEX.current.store(ptr::null_mut(), Ordering::Release);
            current
        });
        // Deliveries that found the entry before it went are in RCU read-side sections.
        synchronize_rcu();
        if !emptied.is_null() {
            // SAFETY: no longer published, and the grace period above let every reader go.
            drop(unsafe { KBox::from_raw(emptied) });
        }
        // SAFETY: the binding's reference, out of the index and no longer reachable.
        unsafe { (self.release)(self.data) };
    }
}
