//! Distributions and timers for the metrics (`GET /admin/metrics`): a leaf
//! module, so the store can time its syncs without depending on the
//! service's modules.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// COMMIT and fsync latency buckets, in microseconds (50 µs to 5 s).
pub(crate) const SYNC_US: &[u64] =
    &[50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 5_000_000];

/// A latency, or any distribution of non-negative integers: one counter
/// per bucket (not cumulative: one add per observation), and the sum.
pub(crate) struct Histogram {
    bounds: &'static [u64],
    /// `bounds.len() + 1` counters, the last one for values past every bound.
    pub(crate) counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Histogram {
    pub(crate) fn new(bounds: &'static [u64]) -> Histogram {
        Histogram { bounds, counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(), sum: AtomicU64::new(0) }
    }

    #[inline]
    pub(crate) fn observe(&self, v: u64) {
        // Linear: the first bound (0.5 ms for requests) takes nearly every
        // observation in one compare.
        let i = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum.fetch_add(v, Relaxed);
    }

    /// Writes the `_bucket`, `_sum` and `_count` lines; `scale` divides
    /// the stored integers into the metric's unit (1e6: µs to seconds).
    /// The count is the buckets' total, so `+Inf` and `_count` agree.
    pub(crate) fn render(&self, out: &mut String, name: &str, labels: &str, scale: f64) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut total = 0u64;
        for (i, b) in self.bounds.iter().enumerate() {
            total += self.counts[i].load(Relaxed);
            let le = *b as f64 / scale;
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {total}");
        }
        total += self.counts[self.bounds.len()].load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {total}");
        let sum = self.sum.load(Relaxed) as f64 / scale;
        let braces = |s: &str| if s.is_empty() { String::new() } else { format!("{{{s}}}") };
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(labels));
        let _ = writeln!(out, "{name}_count{} {total}", braces(labels));
    }

    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// The wall clock in microseconds since 1970 (0 where there is none):
/// what two nodes can compare, for the notification lag.
pub(crate) fn wall_micros() -> u64 {
    #[cfg(not(target_family = "wasm"))]
    return std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
    #[cfg(target_family = "wasm")]
    0
}

/// Requests are timed one in `SAMPLE_EVERY` on each thread (the first,
/// the 17th, …): a monotonic clock read costs 50-120 ns on a virtual
/// machine, two of them a tenth of the cheapest call; one timed call in 16
/// costs it under 1 %. Request counts stay exact
/// (`botspace_requests_total`); the latency histogram is the sample's.
pub(crate) const SAMPLE_EVERY: u32 = 16;

thread_local! {
    /// Requests this thread lets pass before it times the next one.
    static UNTIL_SAMPLE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread's current request is one of the timed ones.
#[inline]
pub(crate) fn sample() -> bool {
    UNTIL_SAMPLE.with(|c| {
        let n = c.get();
        c.set(if n == 0 { SAMPLE_EVERY - 1 } else { n - 1 });
        n == 0
    })
}

/// When a request started, where the platform has a monotonic clock
/// (not in WebAssembly without WASI: there no latency is observed).
#[derive(Clone, Copy)]
pub(crate) struct Timer(#[cfg(not(target_family = "wasm"))] std::time::Instant);

impl Timer {
    pub(crate) fn start() -> Timer {
        Timer(
            #[cfg(not(target_family = "wasm"))]
            std::time::Instant::now(),
        )
    }

    /// A timer for a request if it is one of the sampled ones
    /// ([`sample`]), else `None`: no clock is read.
    #[inline]
    pub(crate) fn sampled() -> Option<Timer> {
        sample().then(Timer::start)
    }

    /// Microseconds since `start`, `None` without a clock.
    pub(crate) fn micros(self) -> Option<u64> {
        #[cfg(not(target_family = "wasm"))]
        return {
            // Whole microseconds without 128-bit arithmetic.
            let d = self.0.elapsed();
            Some(d.as_secs().saturating_mul(1_000_000).saturating_add(u64::from(d.subsec_micros())))
        };
        #[cfg(target_family = "wasm")]
        None
    }
}
