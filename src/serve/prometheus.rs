//! `/metrics` in the Prometheus text format: histograms of time to first token, inter-token
//! latency, queue time and request latency (seconds), requests and tokens counters, and the
//! engine's gauges (waiting, running, KV blocks in use).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::engine::Finish;
use crate::sched::{Metrics, RequestStats};

const TTFT_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
const ITL_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];
const LATENCY_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

struct Histogram {
    name: &'static str,
    help: &'static str,
    bounds: &'static [f64],
    /// Per bucket (not cumulative); the last is +Inf.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    fn new(name: &'static str, help: &'static str, bounds: &'static [f64]) -> Histogram {
        Histogram { name, help, bounds, counts: vec![0; bounds.len() + 1], sum: 0.0 }
    }

    fn observe(&mut self, seconds: f64) {
        let i = self.bounds.iter().position(|&b| seconds <= b).unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += seconds;
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}\n# TYPE {} histogram", self.name, self.help, self.name);
        let mut total = 0;
        for (i, c) in self.counts.iter().enumerate() {
            total += c;
            let le = self.bounds.get(i).map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{}_bucket{{le=\"{le}\"}} {total}", self.name);
        }
        let _ = writeln!(out, "{}_sum {}\n{}_count {total}", self.name, self.sum, self.name);
    }
}

pub struct Registry {
    ttft: Histogram,
    itl: Histogram,
    queue: Histogram,
    latency: Histogram,
    /// Finished requests by why they ended.
    finished: BTreeMap<&'static str, u64>,
    failed: u64,
    prompt_tokens: u64,
    generation_tokens: u64,
    engine: Metrics,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            ttft: Histogram::new(
                "wginfer_time_to_first_token_seconds",
                "Arrival to the first generated token.",
                TTFT_BUCKETS,
            ),
            itl: Histogram::new("wginfer_inter_token_latency_seconds", "Time between consecutive tokens.", ITL_BUCKETS),
            queue: Histogram::new(
                "wginfer_request_queue_time_seconds",
                "Arrival to admission into the batch.",
                LATENCY_BUCKETS,
            ),
            latency: Histogram::new(
                "wginfer_e2e_request_latency_seconds",
                "Arrival to the last token.",
                LATENCY_BUCKETS,
            ),
            finished: BTreeMap::new(),
            failed: 0,
            prompt_tokens: 0,
            generation_tokens: 0,
            engine: Metrics::default(),
        }
    }
}

/// A finish as a label value.
fn label(f: Finish) -> &'static str {
    match f {
        Finish::Eos => "eos",
        Finish::Length => "length",
        Finish::ContextFull => "context_full",
        Finish::Stopped => "stopped",
    }
}

impl Registry {
    pub fn finished(&mut self, s: &RequestStats) {
        *self.finished.entry(label(s.finish)).or_default() += 1;
        self.prompt_tokens += s.prompt_tokens as u64;
        self.generation_tokens += s.tokens as u64;
        self.queue.observe(s.queued_ms / 1e3);
        if s.tokens > 0 {
            self.ttft.observe(s.ttft_ms / 1e3);
            self.latency.observe(s.total_ms / 1e3);
        }
        for &gap in &s.itl_ms {
            self.itl.observe(gap / 1e3);
        }
    }

    pub fn failed(&mut self) {
        self.failed += 1;
    }

    /// The engine's latest snapshot (its gauges).
    pub fn engine(&mut self, m: Metrics) {
        self.engine = m;
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for h in [&self.ttft, &self.itl, &self.queue, &self.latency] {
            h.render(&mut out);
        }
        out.push_str("# HELP wginfer_requests_finished_total Requests that ended, by why.\n");
        out.push_str("# TYPE wginfer_requests_finished_total counter\n");
        for f in [Finish::Eos, Finish::Length, Finish::ContextFull, Finish::Stopped] {
            let n = self.finished.get(label(f)).copied().unwrap_or(0);
            let _ = writeln!(out, "wginfer_requests_finished_total{{finish=\"{}\"}} {n}", label(f));
        }
        let m = &self.engine;
        let scalars: [(&str, &str, &str, f64); 8] = [
            ("wginfer_requests_failed_total", "counter", "Requests the engine failed.", self.failed as f64),
            (
                "wginfer_prompt_tokens_total",
                "counter",
                "Prompt tokens of finished requests.",
                self.prompt_tokens as f64,
            ),
            (
                "wginfer_generation_tokens_total",
                "counter",
                "Tokens generated by finished requests.",
                self.generation_tokens as f64,
            ),
            ("wginfer_requests_waiting", "gauge", "Requests waiting for admission.", m.waiting as f64),
            ("wginfer_requests_running", "gauge", "Requests in the running batch.", m.running as f64),
            ("wginfer_kv_blocks_used", "gauge", "KV cache blocks held by sequences.", m.kv_blocks_used as f64),
            ("wginfer_kv_blocks", "gauge", "KV cache blocks in all.", m.kv_blocks as f64),
            ("wginfer_kv_block_size_tokens", "gauge", "Positions per KV cache block.", m.kv_block as f64),
        ];
        for (name, kind, help, v) in scalars {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_with_sum_and_count() {
        let mut h = Histogram::new("x_seconds", "x", &[0.1, 1.0]);
        for v in [0.05, 0.1, 0.5, 7.0] {
            h.observe(v);
        }
        let mut out = String::new();
        h.render(&mut out);
        for line in [
            "x_seconds_bucket{le=\"0.1\"} 2",
            "x_seconds_bucket{le=\"1\"} 3",
            "x_seconds_bucket{le=\"+Inf\"} 4",
            "x_seconds_sum 7.65",
            "x_seconds_count 4",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} not in\n{out}");
        }
    }
}
