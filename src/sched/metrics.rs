//! Engine-wide request metrics: time to first token, inter-token latency and request latency
//! (P50/P99 over the most recent requests, so memory stays flat however long the engine
//! runs), requests and tokens per second since the first arrival.

use crate::Instant;
use std::collections::VecDeque;

use super::batch::SeqEvent;
use super::sequence::SeqStats;

/// Latency samples kept per kind.
const WINDOW: usize = 10_000;

#[derive(Clone, Debug, Default)]
pub struct Recorder {
    since: Option<Instant>,
    pub arrived: u64,
    pub finished: u64,
    pub tokens: u64,
    /// Steps submitted.
    pub steps: u64,
    pub rows: u64,
    ttft_ms: VecDeque<f64>,
    itl_ms: VecDeque<f64>,
    total_ms: VecDeque<f64>,
}

/// P50 and P99 of one latency, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

/// What the recorder has seen, summed up.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub requests: u64,
    pub tokens: u64,
    pub requests_per_s: f64,
    pub tokens_per_s: f64,
    pub ttft_ms: Percentiles,
    pub itl_ms: Percentiles,
    pub latency_ms: Percentiles,
    /// Mean rows per step.
    pub rows_per_step: f64,
}

impl Recorder {
    pub fn arrived(&mut self) {
        self.since.get_or_insert_with(Instant::now);
        self.arrived += 1;
    }

    /// A call of `Batcher::step`: it submitted a step of `rows` rows (0: none, the last one
    /// only read back, which the mean rows per step leaves out).
    pub fn step(&mut self, rows: u32, events: &[SeqEvent]) {
        self.steps += u64::from(rows > 0);
        self.rows += u64::from(rows);
        self.tokens += events.iter().filter(|e| matches!(e, SeqEvent::Token { .. })).count() as u64;
    }

    pub fn finished(&mut self, s: &SeqStats) {
        self.finished += 1;
        if s.tokens > 0 {
            push(&mut self.ttft_ms, [s.ttft_ms]);
            push(&mut self.total_ms, [s.total_ms]);
        }
        push(&mut self.itl_ms, s.itl_ms.iter().copied());
    }

    pub fn summary(&self) -> Summary {
        let secs = self.since.map_or(0.0, |t| t.elapsed().as_secs_f64()).max(1e-9);
        Summary {
            requests: self.finished,
            tokens: self.tokens,
            requests_per_s: self.finished as f64 / secs,
            tokens_per_s: self.tokens as f64 / secs,
            ttft_ms: percentiles(&self.ttft_ms),
            itl_ms: percentiles(&self.itl_ms),
            latency_ms: percentiles(&self.total_ms),
            rows_per_step: self.rows as f64 / self.steps.max(1) as f64,
        }
    }
}

fn push(window: &mut VecDeque<f64>, values: impl IntoIterator<Item = f64>) {
    for v in values {
        if window.len() == WINDOW {
            window.pop_front();
        }
        window.push_back(v);
    }
}

/// P50 and P99 (nearest rank) of `v`; zeros when empty.
pub fn percentiles<'a>(v: impl IntoIterator<Item = &'a f64>) -> Percentiles {
    let mut s: Vec<f64> = v.into_iter().copied().collect();
    if s.is_empty() {
        return Percentiles::default();
    }
    s.sort_by(f64::total_cmp);
    let at = |p: f64| s[((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
    Percentiles { p50: at(0.50), p99: at(0.99) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentiles(&v), Percentiles { p50: 50.0, p99: 99.0 });
        assert_eq!(percentiles(&[7.0]), Percentiles { p50: 7.0, p99: 7.0 });
        assert_eq!(percentiles(&[]), Percentiles::default());
    }
}
