// SPDX-License-Identifier: GPL-2.0

//! Whether spinning for a QP's run pays on the host the driver runs on, measured rather
//! than assumed.
//!
//! A ping-pong's answer is posted while the QP's run (which took in the peer's message)
//! is still going on another CPU. Its doorbell can spin until that run ends and make the
//! next run itself, or leave the work to the run's end, which queues it to a worker woken
//! on the poster's CPU: the price of the first is the spin, of the second the wake-up.
//! Which is lower is the host's doing, not the driver's. In one guest whose vCPUs each had
//! a host core, a spin took 5-8 us on average and a wake-up 26-55 us. Between two guests
//! sharing two host cores, the vCPU spun for was often descheduled: spins took 82-394 us
//! on average (40-88 % of them ran out) against 56-101 us wake-ups, and a spinning vCPU
//! held the core the other guest needed (2-byte Write latency 30 % worse).
//!
//! The gauge keeps a moving average of each, fed by the driver (nothing here reads a
//! clock), and says spin only while spins cost less; a spin that ran out costs its time
//! and the wake-up it did not save. While they do not, one chance in
//! [`PROBE_EVERY`] still spins, so that the average follows a host whose load changes.
//! Shared by every QP of a device and updated without locks: two CPUs folding samples in
//! at once may lose one, which an average over many does not miss.

use core::sync::atomic::{AtomicU32, Ordering};

/// Each sample moves an average by 1/2^`WEIGHT_SHIFT` of its distance from it: about the
/// last twenty samples count.
const WEIGHT_SHIFT: u32 = 3;

/// Longest sample taken, in ns: a guest paused for seconds says nothing about the next
/// spin, and would otherwise hold the average up for hundreds of samples.
pub const SAMPLE_MAX_NS: u64 = 1_000_000;

/// While spins cost more than wake-ups, one chance to spin in this many is taken anyway:
/// between two guests on two cores a probe cost 100-500 us, and a ping-pong has two
/// chances a message on each side (the doorbell's and the run's). With one in 64, a host
/// that frees up is noticed within some 800 chances (a few ms of ping-pong there).
pub const PROBE_EVERY: u32 = 64;

/// Moving averages of the spins and wake-ups seen, in ns.
pub struct WaitGauge {
    spin_ns: AtomicU32,
    wake_ns: AtomicU32,
    /// Chances to spin let go since the last one taken.
    skipped: AtomicU32,
}

impl Default for WaitGauge {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitGauge {
    /// A gauge with no samples, which says spin until a wake-up is seen.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            spin_ns: AtomicU32::new(0),
            wake_ns: AtomicU32::new(0),
            skipped: AtomicU32::new(0),
        }
    }

    /// Whether to spin at this chance: while spins cost no more than wake-ups, and as a
    /// probe once in [`PROBE_EVERY`] chances otherwise.
    pub fn spins(&self) -> bool {
        if self.spin_ns() <= self.wake_ns() {
            return true;
        }
        let skipped = self.skipped.load(Ordering::Relaxed) + 1;
        let probe = skipped >= PROBE_EVERY;
        self.skipped
            .store(if probe { 0 } else { skipped }, Ordering::Relaxed);
        probe
    }

    /// A spin that took `ns`; `met`: what it waited for came, and no worker need be
    /// woken.
    pub fn spun(&self, ns: u64, met: bool) {
        let woken = if met { 0 } else { u64::from(self.wake_ns()) };
        fold(&self.spin_ns, ns.saturating_add(woken));
    }

    /// A queued run that started `ns` after it was queued.
    pub fn woke(&self, ns: u64) {
        fold(&self.wake_ns, ns);
    }

    /// The spins' average, ns.
    pub fn spin_ns(&self) -> u32 {
        self.spin_ns.load(Ordering::Relaxed)
    }

    /// The wake-ups' average, ns.
    pub fn wake_ns(&self) -> u32 {
        self.wake_ns.load(Ordering::Relaxed)
    }
}

/// Moves `avg` towards the sample `ns` (capped at [`SAMPLE_MAX_NS`]).
fn fold(avg: &AtomicU32, ns: u64) {
    let sample = i64::try_from(ns.min(SAMPLE_MAX_NS)).unwrap_or(0);
    let old = i64::from(avg.load(Ordering::Relaxed));
    let new = old + ((sample - old) >> WEIGHT_SHIFT);
    // Between 0 and SAMPLE_MAX_NS, as both of its terms are.
    avg.store(u32::try_from(new).unwrap_or(0), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chances out of `n` that spin.
    fn spun_of(g: &WaitGauge, n: u32) -> u32 {
        (0..n).map(|_| u32::from(g.spins())).sum()
    }

    #[test]
    fn spins_until_a_wake_up_is_seen() {
        let g = WaitGauge::new();
        assert!(g.spins());
        g.spun(6_000, true);
        // No wake-up yet: only probes.
        assert_eq!(spun_of(&g, 2 * PROBE_EVERY), 2);
        g.woke(40_000);
        assert!(g.spins());
    }

    #[test]
    fn one_guest_per_core_keeps_spinning() {
        // Samples as measured in one guest: 4-8 us spins, 28-55 us wake-ups.
        let g = WaitGauge::new();
        for i in 0..200u64 {
            g.woke(28_000 + (i % 4) * 9_000);
            g.spun(4_000 + (i % 3) * 2_000, true);
        }
        assert_eq!(spun_of(&g, 100), 100);
        // A spin that ran out (50 us, and a wake-up after it) now and then does not turn
        // it off.
        g.spun(50_000, false);
        assert!(g.spins());
    }

    #[test]
    fn overcommitted_host_spins_only_to_probe() {
        // Two guests on two cores: spins of 120-388 us (past their bound when the vCPU
        // was descheduled), half in vain, and wake-ups of 55-100 us.
        let g = WaitGauge::new();
        for i in 0..200u64 {
            g.woke(55_000 + (i % 4) * 15_000);
            g.spun(120_000 + (i % 5) * 67_000, i % 2 == 0);
        }
        assert!(g.spin_ns() > g.wake_ns());
        assert_eq!(spun_of(&g, 10 * PROBE_EVERY), 10);
    }

    #[test]
    fn follows_the_host_back() {
        let g = WaitGauge::new();
        for _ in 0..100 {
            g.woke(60_000);
            g.spun(300_000, false);
        }
        assert!(!g.spins());
        // The host frees up: the probes' cheap spins bring the average down, and every
        // chance spins again within some 800.
        let mut chances = 0;
        while g.spin_ns() > g.wake_ns() {
            chances += 1;
            assert!(chances < 1_000, "spins did not resume soon");
            if g.spins() {
                g.spun(6_000, true);
            }
        }
        assert_eq!(spun_of(&g, 100), 100);
        assert!(g.spin_ns() <= g.wake_ns());
    }

    #[test]
    fn spins_that_run_out_pay_for_the_wake_up_too() {
        // Spins shorter than a wake-up, but most of them in vain: each then costs its own
        // time and the wake-up it was to save.
        let g = WaitGauge::new();
        for i in 0..200 {
            g.woke(40_000);
            g.spun(30_000, i % 4 == 0);
        }
        assert!(g.spin_ns() > g.wake_ns());
        assert!(!g.spins());
    }

    #[test]
    fn a_paused_guest_counts_as_the_cap() {
        let g = WaitGauge::new();
        g.woke(u64::MAX);
        assert_eq!(u64::from(g.wake_ns()), SAMPLE_MAX_NS >> WEIGHT_SHIFT);
        for _ in 0..1_000 {
            g.woke(u64::MAX);
        }
        assert!(u64::from(g.wake_ns()) <= SAMPLE_MAX_NS);
        assert!(u64::from(g.wake_ns()) > SAMPLE_MAX_NS * 9 / 10);
    }
}
