//! One request as the batcher runs it: its prompt and output ids, its share of the KV memory,
//! how much of it the cache holds, and its own sampler (seed and counter live with the
//! sequence, so a preempted and resumed sequence keeps drawing where it left off).

use std::time::Instant;

use crate::engine::Finish;
use crate::kv::SeqKv;
use crate::sampling::{Sampler, SamplingParams};

use super::Priority;

/// A request in token ids: what the batcher admits.
#[derive(Clone, Debug)]
pub struct SeqRequest {
    pub id: u64,
    pub prompt_ids: Vec<u32>,
    pub max_tokens: usize,
    pub sampling: SamplingParams,
    /// Stop at an end-of-sequence id (it is still returned).
    pub stop_at_eos: bool,
    pub priority: Priority,
}

/// What a finished sequence measured (times in milliseconds from its arrival).
#[derive(Clone, Debug, PartialEq)]
pub struct SeqStats {
    pub id: u64,
    pub priority: Priority,
    pub finish: Finish,
    pub prompt_tokens: usize,
    pub tokens: usize,
    /// Arrival to admission.
    pub queued_ms: f64,
    /// Arrival to the first token.
    pub ttft_ms: f64,
    /// Gaps between consecutive tokens.
    pub itl_ms: Vec<f64>,
    /// Arrival to the last token.
    pub total_ms: f64,
    /// Prompt tokens whose keys and values came from a shared prefix instead of running.
    pub prefix_hit_tokens: usize,
    /// Times the sequence lost its KV memory to a more urgent one and was recomputed.
    pub preemptions: usize,
}

pub(crate) struct Sequence {
    pub req: SeqRequest,
    pub output: Vec<u32>,
    /// Its blocks; `kv.len()` tokens (prompt, then output) have their keys and values there.
    pub kv: SeqKv,
    /// Its tokens being chosen by steps in flight (0 to 2: a step and the one queued behind).
    pub awaiting: u32,
    pub sampler: Sampler,
    pub arrived: Instant,
    pub admitted: Option<Instant>,
    /// Admission order (later admitted, larger): the most recent is preempted first.
    pub admission: u64,
    pub last_token: Option<Instant>,
    pub stats: SeqStats,
}

impl Sequence {
    pub fn new(req: SeqRequest) -> Sequence {
        let stats = SeqStats {
            id: req.id,
            priority: req.priority,
            finish: Finish::Length,
            prompt_tokens: req.prompt_ids.len(),
            tokens: 0,
            queued_ms: 0.0,
            ttft_ms: 0.0,
            itl_ms: Vec::new(),
            total_ms: 0.0,
            prefix_hit_tokens: 0,
            preemptions: 0,
        };
        Sequence {
            sampler: Sampler::new(req.sampling.clone()),
            req,
            output: Vec::new(),
            kv: SeqKv::default(),
            awaiting: 0,
            arrived: Instant::now(),
            admitted: None,
            admission: 0,
            last_token: None,
            stats,
        }
    }

    /// Prompt and output so far.
    pub fn len(&self) -> usize {
        self.req.prompt_ids.len() + self.output.len()
    }

    pub fn token(&self, i: usize) -> u32 {
        token_at(&self.req.prompt_ids, &self.output, i)
    }

    /// Prompt and output so far, as one list.
    pub fn tokens(&self) -> Vec<u32> {
        self.req.prompt_ids.iter().chain(&self.output).copied().collect()
    }

    /// Tokens whose keys and values still have to run (known tokens only).
    pub fn pending(&self) -> usize {
        self.len().saturating_sub(self.kv.len() as usize)
    }

    /// Records a new token and its time.
    pub fn push(&mut self, id: u32) {
        let now = Instant::now();
        match self.last_token {
            None => self.stats.ttft_ms = ms(self.arrived, now),
            Some(t) => self.stats.itl_ms.push(ms(t, now)),
        }
        self.last_token = Some(now);
        self.output.push(id);
    }

    /// The stats of the sequence ending now with `finish`.
    pub fn finish(&mut self, finish: Finish) -> SeqStats {
        let mut s = self.stats.clone();
        s.finish = finish;
        s.tokens = self.output.len();
        s.queued_ms = self.admitted.map_or(0.0, |a| ms(self.arrived, a));
        s.total_ms = ms(self.arrived, self.last_token.unwrap_or_else(Instant::now));
        s
    }
}

/// Token `i` of a sequence: of its prompt, then of its output (a function of the two lists, so
/// it can be used while the sequence's KV memory is borrowed apart).
pub(crate) fn token_at(prompt: &[u32], output: &[u32], i: usize) -> u32 {
    if i < prompt.len() {
        prompt[i]
    } else {
        output[i - prompt.len()]
    }
}

fn ms(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1e3
}
