// SPDX-License-Identifier: GPL-2.0

//! The device's counters, as `rdma statistic show link DEV/1` shows them: packets moved
//! and dropped by reason, the QPs' transport events, and memory-management operations. The
//! packets and octets sent, and the octets received, are port 1's; port 2 of a two-port
//! device shows its own (`DEV/2`).

use crate::glue::net;
use crate::glue::percpu::PerCpuU64;
use crate::glue::stats::{CounterDescs, CounterNames};
use crate::transport::pma::PortTraffic;
use crate::transport::qp::stats::{QpStats, TransportEvent};
use kernel::c_str;

/// Counters before the transport events in [`NAMES`].
const PORT_COUNTERS: usize = 12;

/// Counters after the transport events in [`NAMES`].
const MEM_COUNTERS: usize = 3;

/// Multicast counters, after the memory ones in [`NAMES`].
const MCAST_COUNTERS: usize = 4;
/// XRC counters, after the multicast ones in [`NAMES`].
const XRC_COUNTERS: usize = 1;
/// The QP tasks' work, after the XRC ones in [`NAMES`].
const WORK_COUNTERS: usize = 30;
/// The port's data counters, last in [`NAMES`].
const DATA_COUNTERS: usize = 2;

/// The counters' names, in the order [`Counters::read`] fills them. The `wire_*` ones count
/// packets dropped before they could be matched to a device (bad ICRC, truncated or
/// malformed IP/UDP, no device on the netdev): they are the same on every rrxe device.
/// All the counters.
const COUNT: usize = PORT_COUNTERS
    + TransportEvent::COUNT
    + MEM_COUNTERS
    + MCAST_COUNTERS
    + XRC_COUNTERS
    + WORK_COUNTERS
    + DATA_COUNTERS;

static NAMES: CounterNames<COUNT> = CounterNames::new([
    c_str!("sent_pkts"),
    c_str!("rcvd_pkts"),
    c_str!("retransmitted_pkts"),
    c_str!("rcvd_no_qp"),
    c_str!("rcvd_queue_full"),
    c_str!("rcvd_malformed"),
    c_str!("send_errors"),
    c_str!("send_no_path"),
    c_str!("wire_icrc_errors"),
    c_str!("wire_truncated"),
    c_str!("wire_malformed"),
    c_str!("wire_no_device"),
    // The QPs' transport events, in `TransportEvent::ALL` order.
    c_str!("ack_timeouts"),
    c_str!("seq_naks_rcvd"),
    c_str!("rnr_naks_rcvd"),
    c_str!("error_naks_rcvd"),
    c_str!("implied_naks"),
    c_str!("retry_exceeded"),
    c_str!("rnr_retry_exceeded"),
    c_str!("seq_naks_sent"),
    c_str!("rnr_naks_sent"),
    c_str!("error_naks_sent"),
    c_str!("duplicate_requests"),
    c_str!("out_of_seq_requests"),
    c_str!("duplicate_responses"),
    c_str!("rcvd_wrong_path"),
    c_str!("rcvd_pkey_violations"),
    c_str!("credit_holds"),
    c_str!("limited_probes"),
    c_str!("unsolicited_acks"),
    c_str!("path_migrations_auto"),
    c_str!("path_migrations_commanded"),
    c_str!("path_migrations_by_peer"),
    c_str!("path_mig_requests_refused"),
    c_str!("rcvd_wrong_transport"),
    c_str!("rcvd_qp_not_ready"),
    c_str!("rcvd_ignored_responses"),
    c_str!("rcvd_qkey_violations"),
    c_str!("rcvd_no_resources"),
    c_str!("rcvd_uc_dropped"),
    c_str!("rcvd_xrc_srq_refused"),
    // Memory management extensions, after the transport events.
    c_str!("fast_reg_mrs"),
    c_str!("local_invalidates"),
    c_str!("remote_invalidates"),
    // UD multicast.
    c_str!("mcast_pkts_sent"),
    c_str!("mcast_pkts_rcvd"),
    c_str!("rcvd_mcast_no_group"),
    c_str!("mcast_copy_failures"),
    // XRC.
    c_str!("xrc_completions_dropped"),
    // What the QPs' tasks did: the driver's own profile, per message in `make bench-local`.
    c_str!("qp_task_runs"),
    c_str!("qp_timer_arms"),
    c_str!("recv_doorbells"),
    c_str!("recv_doorbell_acks"),
    c_str!("send_doorbells"),
    c_str!("send_ring_rechecks"),
    c_str!("loopback_handovers"),
    c_str!("loopback_buffers_allocated"),
    c_str!("loopback_handed_in"),
    c_str!("rx_kicks_to_sender"),
    c_str!("tx_trains"),
    c_str!("tx_train_packets"),
    c_str!("qp_runs_moved"),
    c_str!("qp_runs_now"),
    c_str!("qp_answers_beside"),
    c_str!("qp_doorbell_runs"),
    c_str!("qp_answers_awaited"),
    c_str!("qp_doorbell_waits_expired"),
    c_str!("qp_answer_waits_expired"),
    c_str!("qp_waits_skipped"),
    c_str!("qp_waits"),
    c_str!("qp_wait_ns"),
    c_str!("qp_wakeups"),
    c_str!("qp_wakeup_ns"),
    // Where the runs' time went, in nanoseconds (see `Counters::qp_run_ns`).
    c_str!("qp_run_ns"),
    c_str!("qp_rx_ns"),
    c_str!("qp_tx_build_ns"),
    c_str!("qp_tx_send_ns"),
    c_str!("qp_deliver_ns"),
    c_str!("qp_timer_arm_ns"),
    // The port's data, last: octets of the packets sent and received, BTH through ICRC
    // (the PerfMgmt PortXmitData and PortRcvData times four; see `transport::pma`).
    c_str!("sent_bytes"),
    c_str!("rcvd_bytes"),
]);

/// The counter names for the RDMA core: port 1's, which has the device's counters too.
pub(crate) const DESCS: CounterDescs = NAMES.descs();

/// A further port's counters: its own traffic (the device's events are on port 1). The
/// names are port 1's for the same counts.
static PORT_NAMES: CounterNames<4> = CounterNames::new([
    c_str!("sent_pkts"),
    c_str!("mcast_pkts_sent"),
    c_str!("sent_bytes"),
    c_str!("rcvd_bytes"),
]);

/// The counter names of a further port for the RDMA core.
pub(crate) const PORT_DESCS: CounterDescs = PORT_NAMES.descs();

/// An event counter, kept per CPU: the data path counts several events a packet. Made in
/// process context.
#[derive(Default)]
pub(crate) struct Counter(PerCpuU64);

impl Counter {
    /// Counts one event.
    #[inline]
    pub(crate) fn inc(&self) {
        self.0.add(1);
    }

    /// Counts `n` events.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.add(n);
    }

    /// The count so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.get()
    }
}

/// What one device counts.
#[derive(Default)]
pub(crate) struct Counters {
    /// Retransmitted packets (IBA 9.7.6.1.3: after a timeout or a NAK).
    pub(crate) retransmitted_pkts: Counter,
    /// Packets received for a QP of this device.
    pub(crate) rcvd_pkts: Counter,
    /// Received for a QP number that does not exist.
    pub(crate) rx_no_qp: Counter,
    /// Dropped because the QP's receive queue of packets was full.
    pub(crate) rx_queue_full: Counter,
    /// Headers that did not parse (unknown opcode, truncated, bad length).
    pub(crate) rx_malformed: Counter,
    /// Packets the IP stack refused to send.
    pub(crate) tx_errors: Counter,
    /// Packets without a destination (a UD send naming no valid AH of its PD).
    pub(crate) tx_no_path: Counter,
    /// The QPs' transport events (retries, NAKs, duplicates, drops), by [`TransportEvent`].
    pub(crate) transport: [Counter; TransportEvent::COUNT],
    /// Fast Register WQEs executed (an MR became valid).
    pub(crate) fast_reg_mrs: Counter,
    /// Local Invalidate WQEs executed (an MR or window became free).
    pub(crate) local_invalidates: Counter,
    /// Send with Invalidate messages that invalidated an R_Key of ours.
    pub(crate) remote_invalidates: Counter,
    /// Packets received for a multicast group with at least one QP attached (each QP's
    /// copy is also in `rcvd_pkts`).
    pub(crate) mcast_rcvd_pkts: Counter,
    /// Packets received for a multicast group no QP of this device is attached to.
    pub(crate) mcast_no_group: Counter,
    /// Copies for a group's further QPs that could not be made (no memory).
    pub(crate) mcast_copy_failures: Counter,
    /// Receive completions of an XRC target whose XRC SRQ was destroyed before they were
    /// delivered (the WQE went with the SRQ).
    pub(crate) xrc_completions_dropped: Counter,
    /// Runs of QP tasks (each a work item's execution: the packets that arrived, the
    /// expired timer and the packets to send, under the QP's mutex).
    pub(crate) qp_task_runs: Counter,
    /// Times a run (re)started its QP's timer for the engine's next deadline (not the runs
    /// whose deadline the armed timer already met: `Task::arm`).
    pub(crate) qp_timer_arms: Counter,
    /// Receive doorbells rung by user QPs: a provider that posts receives through the
    /// shared ring rings one only when the driver asks for it, while the requester waits
    /// for credits (see `RecvRing::want_doorbell`).
    pub(crate) recv_doorbells: Counter,
    /// Of the unsolicited ACKs, those a user's receive doorbell sent from its own system
    /// call (`qp::object::recv_doorbell`), rather than a task run.
    pub(crate) recv_doorbell_acks: Counter,
    /// Send doorbells rung by user QPs (`ibv_post_send`'s system call).
    pub(crate) send_doorbells: Counter,
    /// Runs queued by a run's last look at a connected user QP's send ring, which found
    /// WQEs posted while it ran: a provider that reads the ring's `RUN_PENDING` word posts
    /// those without a doorbell (see `SendRing::settle`).
    pub(crate) send_ring_rechecks: Counter,
    /// Batches of looped-back packets handed to the device's QPs (`Handover::flush`): one a
    /// sending run or doorbell, where every packet was one before.
    pub(crate) loopback_handovers: Counter,
    /// Of the looped-back packets, those a hand-over gave straight to the receiving QP's
    /// next run, which it had claimed (`Inbox`), rather than to its backlog.
    pub(crate) loopback_handed_in: Counter,
    /// QP runs moved to the CPU beside the one kicking them, where they were pending
    /// (`Place::Beside`): a stream's two QPs kept from sharing one CPU.
    pub(crate) qp_runs_moved: Counter,
    /// QP runs made at once after the run that looped packets back to them, in its context
    /// (`Place::Now`), rather than queued to follow it on its CPU.
    pub(crate) qp_runs_now: Counter,
    /// Runs queued on the next CPU for sends a run found posted at its last look at the
    /// ring, after it took in messages: likely answers, whose poster is on another CPU.
    pub(crate) qp_answers_beside: Counter,
    /// Send doorbells that made their QP's run at once, in the system call: those after the
    /// response to the QP's last outstanding Read or atomic (`qp::object::doorbell`).
    pub(crate) qp_doorbell_runs: Counter,
    /// Runs that left work to a send's poster waiting to make the next run itself, in its
    /// system call (`Task::run_now_after`), rather than queue one.
    pub(crate) qp_answers_awaited: Counter,
    /// Answers' doorbells that waited for a run going on elsewhere in vain (it did not end
    /// in time) and queued the next run.
    pub(crate) qp_doorbell_waits_expired: Counter,
    /// Runs that found an answer posted and waited for its doorbell in vain (it did not
    /// announce itself in time), and queued the next run beside.
    pub(crate) qp_answer_waits_expired: Counter,
    /// Answers whose doorbell and run did not spin for each other: the device's spins
    /// cost more than its wake-ups (`transport::wait_gauge`), or `answer_waits` is 0.
    pub(crate) qp_waits_skipped: Counter,
    /// Spins of answers' doorbells for a run going on, and of runs for an answer's
    /// doorbell, that had to wait (a doorbell that found the QP idle did not).
    pub(crate) qp_waits: Counter,
    /// Nanoseconds those spins took (host time: a descheduled vCPU's counts): with
    /// `qp_waits`, the average the wait gauge weighs.
    pub(crate) qp_wait_ns: Counter,
    /// Runs of a QP's work item, queued to a worker.
    pub(crate) qp_wakeups: Counter,
    /// Nanoseconds between their queueing and their start: the wake-ups' cost.
    pub(crate) qp_wakeup_ns: Counter,
    /// Nanoseconds spent in runs, from taking the QP's mutex to arming the timer: the
    /// driver's per-packet cost without a profiler (the guest kernel has no ftrace, and
    /// perf hung the benchmark VM). The five below are parts of it (but for the sends of a
    /// user UD QP's doorbell, made outside runs, which the two `qp_tx_*` also count); the
    /// rest is the run's bookkeeping (the mutex, the send queue's snapshot, the receive
    /// queue's check, collecting completions, freeing received packets).
    pub(crate) qp_run_ns: Counter,
    /// Of which: received packets, parsed and executed by the engine (a responder's
    /// payload copy into the MR included) and their completions collected.
    pub(crate) qp_rx_ns: Counter,
    /// Of which: the engine building packets to send (headers, and the payload copied out
    /// of the MR).
    pub(crate) qp_tx_build_ns: Counter,
    /// Of which: sending them: the skb, the ICRC, and the IP stack or, over loopback, the
    /// hand-over to the receiving QP.
    pub(crate) qp_tx_send_ns: Counter,
    /// Of which: completions and events delivered to CQs and consumers.
    pub(crate) qp_deliver_ns: Counter,
    /// Of which: arming the timer (runs that found it armed for as long as they would
    /// have armed it, which only take its lock, not counted).
    pub(crate) qp_timer_arm_ns: Counter,
}

/// What one port moved: its own on a two-port device, where each port has a netdev.
#[derive(Default)]
pub(crate) struct PortCounters {
    /// Packets sent (requests and responses, first transmissions and retries).
    pub(crate) sent_pkts: Counter,
    /// Of those, UD packets to a multicast GID.
    pub(crate) mcast_sent_pkts: Counter,
    /// Octets of the packets in `sent_pkts`, BTH through ICRC.
    pub(crate) sent_octets: Counter,
    /// Valid packets that arrived for the port, whatever became of them after.
    pub(crate) rcvd_pkts: Counter,
    /// Of those, the ones for a multicast GID.
    pub(crate) rcvd_mcast_pkts: Counter,
    /// Octets of the packets in `rcvd_pkts`, BTH through ICRC.
    pub(crate) rcvd_octets: Counter,
}

impl PortCounters {
    /// What the port has moved, for its Performance Management Agent.
    pub(crate) fn traffic(&self) -> PortTraffic {
        PortTraffic {
            xmit_octets: self.sent_octets.get(),
            rcv_octets: self.rcvd_octets.get(),
            xmit_pkts: self.sent_pkts.get(),
            rcv_pkts: self.rcvd_pkts.get(),
            mcast_xmit_pkts: self.mcast_sent_pkts.get(),
            mcast_rcv_pkts: self.rcvd_mcast_pkts.get(),
        }
    }

    /// Fills `values` in the order of [`PORT_DESCS`].
    pub(crate) fn read(&self, values: &mut [u64]) {
        let all = [
            self.sent_pkts.get(),
            self.mcast_sent_pkts.get(),
            self.sent_octets.get(),
            self.rcvd_octets.get(),
        ];
        for (v, a) in values.iter_mut().zip(all) {
            *v = a;
        }
    }
}

impl Counters {
    /// Adds the events a QP engine counted since it was last asked.
    pub(crate) fn add_transport(&self, stats: &QpStats) {
        for (c, e) in self.transport.iter().zip(TransportEvent::ALL) {
            let n = stats.get(e);
            if n != 0 {
                c.add(u64::from(n));
            }
        }
    }

    /// Fills `values` in the order of [`DESCS`], with `port`'s traffic and the number of
    /// buffers the device allocated for looped-back packets (`BufferPool::allocated`).
    pub(crate) fn read(&self, port: &PortCounters, loopback_buffers: u64, values: &mut [u64]) {
        let wire = net::counters().snapshot();
        let traffic = port;
        let port = [
            traffic.sent_pkts.get(),
            self.rcvd_pkts.get(),
            self.retransmitted_pkts.get(),
            self.rx_no_qp.get(),
            self.rx_queue_full.get(),
            self.rx_malformed.get(),
            self.tx_errors.get(),
            self.tx_no_path.get(),
            wire.rx_bad_icrc,
            wire.rx_truncated,
            wire.rx_malformed,
            wire.rx_no_device,
        ];
        let transport = self.transport.iter().map(Counter::get);
        let mem = [
            self.fast_reg_mrs.get(),
            self.local_invalidates.get(),
            self.remote_invalidates.get(),
        ];
        let mcast = [
            traffic.mcast_sent_pkts.get(),
            self.mcast_rcvd_pkts.get(),
            self.mcast_no_group.get(),
            self.mcast_copy_failures.get(),
        ];
        let xrc = [self.xrc_completions_dropped.get()];
        let work = [
            self.qp_task_runs.get(),
            self.qp_timer_arms.get(),
            self.recv_doorbells.get(),
            self.recv_doorbell_acks.get(),
            self.send_doorbells.get(),
            self.send_ring_rechecks.get(),
            self.loopback_handovers.get(),
            loopback_buffers,
            self.loopback_handed_in.get(),
            wire.rx_kicks_to_sender,
            wire.tx_trains,
            wire.tx_train_packets,
            self.qp_runs_moved.get(),
            self.qp_runs_now.get(),
            self.qp_answers_beside.get(),
            self.qp_doorbell_runs.get(),
            self.qp_answers_awaited.get(),
            self.qp_doorbell_waits_expired.get(),
            self.qp_answer_waits_expired.get(),
            self.qp_waits_skipped.get(),
            self.qp_waits.get(),
            self.qp_wait_ns.get(),
            self.qp_wakeups.get(),
            self.qp_wakeup_ns.get(),
            self.qp_run_ns.get(),
            self.qp_rx_ns.get(),
            self.qp_tx_build_ns.get(),
            self.qp_tx_send_ns.get(),
            self.qp_deliver_ns.get(),
            self.qp_timer_arm_ns.get(),
        ];
        let data = [traffic.sent_octets.get(), traffic.rcvd_octets.get()];
        for (v, a) in values.iter_mut().zip(
            port.into_iter()
                .chain(transport)
                .chain(mem)
                .chain(mcast)
                .chain(xrc)
                .chain(work)
                .chain(data),
        ) {
            *v = a;
        }
    }
}
