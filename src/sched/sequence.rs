//! One request as the batcher runs it: its prompt and output ids, its share of the KV memory,
//! how much of it the cache holds, and its own sampler (seed and counter live with the
//! sequence, so a preempted and resumed sequence keeps drawing where it left off).

use crate::Instant;

use crate::engine::{choice_for, Finish};
use crate::kv::SeqKv;
use crate::model::forward::Choice;
use crate::sampling::{Sampler, SamplingParams, LOWEST_LOGIT};

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
    /// Report each chosen token's log-probability and this many most likely tokens' (OpenAI's
    /// `top_logprobs`): its steps bring the logits back to the host.
    pub logprobs: Option<u32>,
}

/// A chosen token's log-probability and the most likely tokens' (most likely first, lowest
/// id first on ties), in the model's own distribution: the log-softmax of the raw logits,
/// before any repetition penalty or temperature, as OpenAI reports them.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprobs {
    pub token: u32,
    pub logprob: f64,
    pub top: Vec<(u32, f64)>,
}

/// The log-probability reported for a token that cannot be chosen (OpenAI's stand-in for minus
/// infinity, which JSON cannot hold).
pub const LOGPROB_FLOOR: f64 = -9999.0;

impl TokenLogprobs {
    /// From a row's logits (in f64: a vocabulary's sum of exponentials loses digits in f32).
    /// Logits the sampler never chooses (NaN, at or below `sampling::LOWEST_LOGIT`) count as
    /// minus infinity; infinite ones share all the probability.
    pub fn new(logits: &[f32], token: u32, top: usize) -> TokenLogprobs {
        let value = |id: u32| match logits[id as usize] {
            l if l > LOWEST_LOGIT => l as f64,
            _ => f64::NEG_INFINITY,
        };
        let ids = 0..logits.len() as u32;
        let max = ids.clone().map(value).fold(f64::NEG_INFINITY, f64::max);
        // With infinite logits, the log of their share; else the log of the softmax's sum.
        let log_sum = match max == f64::INFINITY {
            true => (ids.clone().filter(|&i| value(i) == f64::INFINITY).count() as f64).ln(),
            false => max + ids.clone().map(|i| (value(i) - max).exp()).sum::<f64>().ln(),
        };
        let logprob = |id: u32| {
            let lp = match (max == f64::INFINITY, value(id) == f64::INFINITY) {
                (true, true) => -log_sum,
                (true, false) => f64::NEG_INFINITY,
                (false, _) => value(id) - log_sum,
            };
            lp.max(LOGPROB_FLOOR)
        };
        let mut ids: Vec<u32> = ids.collect();
        let by_rank = |a: &u32, b: &u32| value(*b).total_cmp(&value(*a)).then(a.cmp(b));
        let top = top.min(ids.len());
        if top > 0 && top < ids.len() {
            ids.select_nth_unstable_by(top - 1, by_rank);
        }
        ids.truncate(top);
        ids.sort_unstable_by(by_rank);
        TokenLogprobs { token, logprob: logprob(token), top: ids.into_iter().map(|id| (id, logprob(id))).collect() }
    }
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
    /// Positions whose keys and values came from indexed blocks instead of running, summed
    /// over its admissions: one preempted and admitted again takes back its blocks still
    /// indexed, generated tokens' included, so this can pass its prompt's length.
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

    /// Whether its steps bring the logits back for the host (a repetition penalty, logprobs).
    pub fn host_logits(&self) -> bool {
        self.req.logprobs.is_some() || choice_for(&self.req.sampling, 0) == Choice::Logits
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
        let now = Instant::now();
        // One that ends never admitted (cancelled while waiting, no tokens asked) waited all along.
        s.queued_ms = ms(self.arrived, self.admitted.unwrap_or(now));
        s.total_ms = ms(self.arrived, self.last_token.unwrap_or(now));
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

#[cfg(test)]
mod tests {
    use super::{TokenLogprobs, LOGPROB_FLOOR};

    #[test]
    fn logprobs_are_the_log_softmax_and_top_is_ranked() {
        let logits = [1.0f32, 3.0, 2.0, 3.0];
        let log_sum = (1f64.exp() + 2.0 * 3f64.exp() + 2f64.exp()).ln();
        let lp = TokenLogprobs::new(&logits, 2, 3);
        assert!((lp.logprob - (2.0 - log_sum)).abs() < 1e-12, "{lp:?}");
        // Most likely first, the lower id first on a tie.
        assert_eq!(lp.top.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 3, 2]);
        assert!((lp.top[0].1 - (3.0 - log_sum)).abs() < 1e-12, "{lp:?}");
        assert_eq!(TokenLogprobs::new(&logits, 0, 0).top, []);
        assert_eq!(TokenLogprobs::new(&logits, 0, 9).top.len(), 4);
    }

    /// NaN logits (never chosen) count as minus infinity, reported as LOGPROB_FLOOR (JSON has
    /// no infinity), ranked last; infinite logits share all the probability.
    #[test]
    fn logits_that_are_not_numbers_have_the_floor() {
        let lp = TokenLogprobs::new(&[f32::NAN, 0.0, 0.0], 1, 3);
        assert!((lp.logprob - 0.5f64.ln()).abs() < 1e-12, "{lp:?}");
        assert_eq!(lp.top.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(lp.top[2].1, LOGPROB_FLOOR);
        let lp = TokenLogprobs::new(&[f32::INFINITY, 7.0, f32::INFINITY, f32::NAN], 2, 4);
        assert!((lp.logprob - 0.5f64.ln()).abs() < 1e-12, "{lp:?}");
        let top: Vec<(u32, f64)> = lp.top.clone();
        assert_eq!(top, [(0, 0.5f64.ln()), (2, 0.5f64.ln()), (1, LOGPROB_FLOOR), (3, LOGPROB_FLOOR)]);
    }
}
