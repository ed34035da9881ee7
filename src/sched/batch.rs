//! Continuous batching (vLLM's scheduler, in small): which sequences run, and how many of their
//! tokens, in each step. Every step takes the decode token of each running sequence and chunks
//! of the prompts being admitted, up to a token budget; sequences join and leave at every step.
//! Interactive sequences are admitted first and planned first; background ones fill what is
//! left (none of their rows in a step that runs an interactive prompt, and on CPU adapters at
//! most a few decode rows beside interactive work, unless the sequence has waited past the
//! aging limit for a token), and one waiting longer than the aging limit since
//! it arrived is admitted (and kept, when memory runs short) as if interactive. When the
//! KV pool runs dry, the least urgent, most recently admitted sequences are preempted, as many
//! as free what a more urgent one needs (none where they could not): their blocks are freed and
//! they are recomputed when admitted again. The forward pass runs whatever
//! plan this builds (`Forward::submit`); what decides and what runs stay apart.
//! Steps are pipelined: the next step is planned and submitted before the tokens of the one in
//! flight are read, its decode rows fed on the GPU with the ids that step chooses, so the GPU
//! runs steps back to back. A sequence that turns out to have ended (an end-of-sequence id)
//! wasted one row of the next step, whose output for it is dropped.

use std::time::Duration;

use crate::Instant;

use anyhow::Result;

use super::metrics::Recorder;
use super::sequence::{token_at, SeqRequest, SeqStats, Sequence, TokenLogprobs};
use super::Priority;
use crate::engine::{choice_for, Engine, Finish};
use crate::kv::{KvLayout, Placement};
use crate::model::forward::{Batch, Choice, Out, PendingStep, NO_TOKEN};
use crate::ops::plan::{PlanRow, PlanSeq};

#[derive(Clone, Copy, Debug)]
pub struct BatchOptions {
    /// Most tokens (rows) in one step, decode and prompt chunks together (0 counts as 1).
    pub max_batch_tokens: u32,
    /// A background request waiting this long is admitted as if interactive.
    pub aging: Duration,
    /// Most background prompt tokens in a step while an interactive request is running: every
    /// interactive stream waits for the whole step, and a chunk of max_batch_tokens prompt
    /// tokens made each of its tokens wait for a prefill (lavapipe, the default model, 4
    /// interactive clients: inter-token P99 127 ms alone, 5.0-5.7 s beside 16 background
    /// clients with whole chunks, 0.8-1.1 s with 32; docs/PERF.md). Background prompts still
    /// advance by this much per step.
    pub background_prompt_tokens: u32,
    /// Most background decode rows in a step while an interactive request is running (a
    /// background sequence past the aging limit is not counted). Unbounded on GPUs, where a
    /// decode row costs little; `for_adapter` bounds it on CPU adapters, where a step's time
    /// grows with every row and each interactive token waits for the whole step.
    pub background_decode_rows: u32,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            max_batch_tokens: 512,
            aging: Duration::from_secs(10),
            background_prompt_tokens: 32,
            background_decode_rows: u32::MAX,
        }
    }
}

impl BatchOptions {
    /// The defaults for this adapter: on a CPU adapter at most CPU_BACKGROUND_PROMPT_TOKENS
    /// background prompt tokens and CPU_BACKGROUND_DECODE_ROWS background decode rows in a step
    /// beside interactive work.
    pub fn for_adapter(caps: &crate::gpu::Caps) -> BatchOptions {
        match caps.cpu {
            true => BatchOptions {
                background_prompt_tokens: CPU_BACKGROUND_PROMPT_TOKENS,
                background_decode_rows: CPU_BACKGROUND_DECODE_ROWS,
                ..Default::default()
            },
            false => BatchOptions::default(),
        }
    }
}

/// `background_prompt_tokens` and `background_decode_rows` on CPU adapters. lavapipe, the
/// default model, 4 interactive clients beside 16 background ones: interactive inter-token P99
/// 372-441 ms with 32 prompt tokens and unbounded decode rows, 121-126 ms with 4 and 4 (64-72
/// ms alone); docs/PERF.md.
pub const CPU_BACKGROUND_PROMPT_TOKENS: u32 = 4;
pub const CPU_BACKGROUND_DECODE_ROWS: u32 = 4;

/// What a step did to the requests.
#[derive(Clone, Debug, PartialEq)]
pub enum SeqEvent {
    /// A new token, with its log-probabilities when the request asked for them.
    Token {
        id: u64,
        token: u32,
        logprobs: Option<TokenLogprobs>,
    },
    Finished(SeqStats),
    Failed {
        id: u64,
        error: String,
    },
}

pub struct Batcher {
    opts: BatchOptions,
    waiting: Vec<Sequence>,
    running: Vec<Sequence>,
    admissions: u64,
    eos: Vec<u32>,
    vocab: usize,
    pub metrics: Recorder,
    /// Rows of the last step.
    pub last_rows: u32,
    /// Whether every sequence in the last step ran one row: a decode step (a prompt whose
    /// last chunk is one row looks the same).
    pub last_one_row_each: bool,
    in_flight: Option<InFlight>,
    /// Events a failed step had gathered before it failed (requests it finished or refused):
    /// `take_held` hands them over, so that a caller failing the rest still delivers these.
    held: Vec<SeqEvent>,
}

/// One sequence's part of a step: its index in `running`, rows, and where they land; a
/// `chosen` part is the one decode row whose id the step in flight chooses on the GPU.
struct Part {
    seq: usize,
    rows: u32,
    place: Placement,
    chosen: bool,
}

/// A submitted step whose tokens have not been read yet.
struct InFlight {
    pending: PendingStep,
    /// The request each output row is for, and its preemption count then (a token for a
    /// sequence preempted since is dropped), in output order.
    outs: Vec<(u64, usize)>,
    /// Its first `continuing` outputs are of sequences that go on after this token (unless it
    /// ends them): the next step's first rows, fed with these ids on the GPU.
    continuing: usize,
    /// Every output is chosen on the GPU (none waits for the host's sampler).
    on_gpu: bool,
}

impl Batcher {
    /// A batcher over `engine`, whose single-stream conversation it drops (its KV memory is
    /// the batcher's now).
    pub fn new(engine: &mut Engine, opts: BatchOptions) -> Batcher {
        engine.reset();
        Batcher {
            opts: BatchOptions { max_batch_tokens: opts.max_batch_tokens.max(1), ..opts },
            waiting: Vec::new(),
            running: Vec::new(),
            admissions: 0,
            eos: engine.eos_ids(),
            vocab: engine.forward.cfg.vocab,
            metrics: Recorder::default(),
            last_rows: 0,
            last_one_row_each: false,
            in_flight: None,
            held: Vec::new(),
        }
    }

    pub fn submit(&mut self, req: SeqRequest) {
        self.metrics.arrived();
        self.waiting.push(Sequence::new(req));
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Every request waiting or running.
    pub fn ids(&self) -> Vec<u64> {
        self.waiting.iter().chain(&self.running).map(|s| s.req.id).collect()
    }

    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty() && self.in_flight.is_none()
    }

    /// Stops a waiting or running request and frees its memory at once; its stats, if it was
    /// known.
    pub fn cancel(&mut self, engine: &mut Engine, id: u64) -> Option<SeqStats> {
        let mut seq = self.remove(engine, id)?;
        Some(self.record(seq.finish(Finish::Stopped)))
    }

    /// Drops a request that failed and frees its memory at once: unlike `cancel`, the metrics
    /// do not count it as a finished request. Whether it was known.
    pub fn abandon(&mut self, engine: &mut Engine, id: u64) -> bool {
        self.remove(engine, id).is_some()
    }

    fn remove(&mut self, engine: &mut Engine, id: u64) -> Option<Sequence> {
        let mut seq = match self.running.iter().position(|s| s.req.id == id) {
            Some(i) => self.running.remove(i),
            None => self.waiting.remove(self.waiting.iter().position(|s| s.req.id == id)?),
        };
        engine.forward.kv.release(&mut seq.kv);
        Some(seq)
    }

    /// Runs one step: admits what fits, plans and submits the next step, then reads the step
    /// that was in flight and reports its new tokens and finished requests. Nothing to do: no
    /// step, no events.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn step(&mut self, engine: &mut Engine) -> Result<Vec<SeqEvent>> {
        pollster::block_on(self.step_async(engine))
    }

    /// `step` as a future: the scheduler loop of a page awaits it (the browser hands read-backs
    /// over as its event loop turns; see `Gpu::map_read_after`).
    pub async fn step_async(&mut self, engine: &mut Engine) -> Result<Vec<SeqEvent>> {
        let mut events = std::mem::take(&mut self.held);
        match self.step_into(engine, &mut events).await {
            Ok(()) => Ok(events),
            Err(e) => {
                self.held = events;
                Err(e)
            }
        }
    }

    /// The events a failed step gathered before it failed; the next step starts with them
    /// where they are not taken.
    pub fn take_held(&mut self) -> Vec<SeqEvent> {
        std::mem::take(&mut self.held)
    }

    async fn step_into(&mut self, engine: &mut Engine, events: &mut Vec<SeqEvent>) -> Result<()> {
        // Tokens the host samples (or a profiled step) must be read before the next is planned;
        // so must any step while a sequence needs its logits back: `Forward` queues no such
        // step behind another (those steps run unpipelined).
        let host_logits = self.running.iter().chain(&self.waiting).any(Sequence::host_logits);
        if self.in_flight.as_ref().is_some_and(|t| !t.on_gpu || host_logits || engine.forward.profiling()) {
            let t = self.in_flight.take().expect("checked");
            self.read(engine, t, events).await?;
        }
        self.admit(engine, events);
        let next = self.submit_next(engine, events)?;
        if let Some(t) = self.in_flight.take() {
            self.read(engine, t, events).await?;
        }
        self.in_flight = next;
        self.metrics.step(self.last_rows, events);
        Ok(())
    }

    /// Plans the next step and submits it; `None` when no sequence has a row to run.
    fn submit_next(&mut self, engine: &mut Engine, events: &mut Vec<SeqEvent>) -> Result<Option<InFlight>> {
        let parts = self.plan(engine, events);
        self.last_rows = parts.iter().map(|p| p.rows).sum();
        self.last_one_row_each = parts.iter().all(|p| p.rows == 1);
        if parts.is_empty() {
            return Ok(None);
        }
        let kv = engine.forward.kv.opts;
        let now = Instant::now();
        let (mut ids, mut rows) = (Vec::new(), Vec::new());
        // (output, request and preemptions, continues after its token, priority), in part order.
        let mut outs: Vec<(Out, (u64, usize), bool, Priority)> = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            let seq = &self.running[p.seq];
            let from = seq.kv.len() as usize;
            if !p.chosen {
                ids.extend((from..from + p.rows as usize).map(|i| seq.token(i)));
            }
            rows.extend((0..p.rows).map(|r| PlanRow { seq: k as u32, pos: p.place.start_pos + r }));
            // A chosen row's token is the one in flight: this step makes the token after it.
            let known = seq.output.len() + usize::from(p.chosen);
            if p.chosen || from + p.rows as usize == seq.len() {
                let choice = match seq.req.logprobs {
                    Some(_) => Choice::Logits,
                    None => choice_for(&seq.req.sampling, known as u32),
                };
                let more = known + 1 < seq.req.max_tokens
                    && (kv.sliding_window || seq.req.prompt_ids.len() + known + 1 < kv.context as usize);
                let who = (seq.req.id, seq.stats.preemptions);
                outs.push((
                    Out { row: rows.len() as u32 - 1, choice },
                    who,
                    more,
                    token_urgency(seq, now, self.opts.aging),
                ));
            }
        }
        // Sequences that go on come first: their ids feed the next step's first rows; of those,
        // interactive (and long-waiting) ones first, so a step can take them and leave the others
        // out.
        outs.sort_by_key(|&(_, _, more, priority)| (!more, priority));
        let chosen = parts.iter().filter(|p| p.chosen).count() as u32;
        let seqs: Vec<PlanSeq> =
            parts.iter().map(|p| PlanSeq { kv_lo: p.place.kv_lo, blocks: &self.running[p.seq].kv.blocks }).collect();
        let out_rows: Vec<Out> = outs.iter().map(|o| o.0).collect();
        let batch = Batch { chosen, ids: &ids, rows: &rows, seqs: &seqs, outs: &out_rows };
        let pending = engine.forward.submit(&engine.gpu, &batch)?;
        drop(seqs);
        for p in &parts {
            let seq = &mut self.running[p.seq];
            seq.kv.advance(p.rows);
            if p.chosen || seq.pending() == 0 {
                seq.awaiting += 1;
            }
        }
        Ok(Some(InFlight {
            pending,
            on_gpu: out_rows.iter().all(|o| o.choice != Choice::Logits),
            continuing: outs.iter().filter(|o| o.2).count(),
            outs: outs.iter().map(|o| o.1).collect(),
        }))
    }

    /// Reads a step's tokens into its sequences; those that end are removed and give their
    /// memory back. Outputs of sequences no longer awaiting one (cancelled, preempted, or ended
    /// by the step before) are dropped.
    async fn read(&mut self, engine: &mut Engine, t: InFlight, events: &mut Vec<SeqEvent>) -> Result<()> {
        let out = engine.forward.finish_async(&engine.gpu, t.pending).await?;
        let mut done = Vec::new();
        for (&(request, epoch), (id, logits)) in t.outs.iter().zip(out.ids.into_iter().zip(out.logits)) {
            let Some(i) = self.running.iter().position(|s| s.req.id == request && s.stats.preemptions == epoch) else {
                continue;
            };
            let seq = &mut self.running[i];
            if seq.awaiting == 0 {
                continue;
            }
            seq.awaiting -= 1;
            let (token, logprobs) = match logits {
                Some(mut l) => {
                    // The raw logits, before the sampler's penalty changes them.
                    let raw = seq.req.logprobs.map(|top| (l.clone(), top as usize));
                    let seen = seq.tokens();
                    let token = seq.sampler.sample(&mut l, &seen);
                    (token, token.zip(raw).map(|(token, (raw, top))| TokenLogprobs::new(&raw, token, top)))
                }
                None => (engine.forward.chosen(id), None),
            };
            // Only this row's request fails: the step's other rows are sequences of their own.
            let Some(token) = token else {
                done.push((i, Err(format!("request {request}: {NO_TOKEN}"))));
                continue;
            };
            seq.push(token);
            events.push(SeqEvent::Token { id: request, token, logprobs });
            let (prompt, output) = (&seq.req.prompt_ids, &seq.output);
            engine
                .forward
                .kv
                .index_full_blocks(&mut seq.kv, prompt.len() + output.len(), |i| token_at(prompt, output, i));
            if let Some(finish) = self.finished(engine, i) {
                done.push((i, Ok(finish)));
            }
        }
        // Highest index first, so the others keep theirs.
        done.sort_by_key(|&(i, _)| std::cmp::Reverse(i));
        for (i, end) in done {
            let mut seq = self.running.remove(i);
            engine.forward.kv.release(&mut seq.kv);
            events.push(match end {
                Ok(finish) => SeqEvent::Finished(self.record(seq.finish(finish))),
                Err(error) => SeqEvent::Failed { id: seq.req.id, error },
            });
        }
        Ok(())
    }

    /// Why running sequence `i` ends after its newest token, if it does.
    fn finished(&self, engine: &Engine, i: usize) -> Option<Finish> {
        let seq = &self.running[i];
        let token = *seq.output.last()?;
        let kv = &engine.forward.kv.opts;
        if seq.req.stop_at_eos && self.eos.contains(&token) {
            Some(Finish::Eos)
        } else if seq.output.len() >= seq.req.max_tokens {
            Some(Finish::Length)
        } else if seq.len() > kv.context as usize && !kv.sliding_window {
            Some(Finish::ContextFull)
        } else {
            None
        }
    }

    fn record(&mut self, stats: SeqStats) -> SeqStats {
        self.metrics.finished(&stats);
        stats
    }

    /// Urgency for admission: interactive first, and background after waiting past the aging
    /// limit; then the oldest.
    fn admission_key(&self, s: &Sequence, now: Instant) -> (Priority, Instant) {
        (urgency(s.req.priority, s.arrived, now, self.opts.aging), s.arrived)
    }

    /// Why a request cannot run at all, if it cannot.
    fn refusal(&self, s: &Sequence, kv: &crate::kv::KvCache) -> Option<String> {
        let (len, context) = (s.len(), kv.opts.context as usize);
        let blocks = len.div_ceil(kv.block as usize);
        if s.req.prompt_ids.is_empty() {
            Some("the prompt is empty".into())
        } else if let Some(bad) = s.req.prompt_ids.iter().find(|&&t| t as usize >= self.vocab) {
            Some(format!("token id {bad} is out of range for the vocabulary of {} tokens", self.vocab))
        } else if len > context && !kv.opts.sliding_window {
            Some(format!("{len} tokens do not fit the context of {context} tokens"))
        } else if kv.opts.layout == KvLayout::Paged && blocks > kv.n_blocks as usize {
            Some(format!(
                "{len} tokens need {blocks} KV blocks of {} positions, more than the pool's {} (raise --kv-memory)",
                kv.block, kv.n_blocks
            ))
        } else {
            None
        }
    }

    /// Moves waiting sequences into the running set while a slot (ring) or the memory for
    /// their tokens so far (paged) is free. An interactive request that does not fit takes the
    /// place of the latest admitted background sequence, which waits again.
    fn admit(&mut self, engine: &mut Engine, events: &mut Vec<SeqEvent>) {
        let now = Instant::now();
        let kv = &mut engine.forward.kv;
        while !self.waiting.is_empty() {
            let best = (0..self.waiting.len()).min_by_key(|&i| self.admission_key(&self.waiting[i], now)).unwrap();
            if let Some(error) = self.refusal(&self.waiting[best], kv) {
                let mut seq = self.waiting.remove(best);
                // One preempted after it had grown past what the pool holds ends as it would
                // have running alone: its context is full (not a failure after its tokens went out).
                let end = match seq.output.is_empty() {
                    true => SeqEvent::Failed { id: seq.req.id, error: format!("request {}: {error}", seq.req.id) },
                    false => SeqEvent::Finished(self.record(seq.finish(Finish::ContextFull))),
                };
                events.push(end);
                continue;
            }
            // Nothing to generate: an empty answer at once, its prompt not run.
            if self.waiting[best].req.max_tokens == 0 {
                let mut seq = self.waiting.remove(best);
                events.push(SeqEvent::Finished(self.record(seq.finish(Finish::Length))));
                continue;
            }
            // Its tokens so far and room for the next (not past the whole pool, so that a
            // sequence near the end of its context still gets in once the pool is free).
            let need = match kv.opts.layout {
                KvLayout::Ring => 1,
                KvLayout::Paged => ((self.waiting[best].len() as u32).div_ceil(kv.block) + 1).min(kv.n_blocks),
            };
            if self.running.len() >= kv.opts.parallel as usize || need > kv.free_blocks() {
                // An interactive request (or a background one past the aging limit) takes the
                // place of the latest admitted background sequence less urgent than itself by
                // the same measure: one that has aged is not evicted by a request that arrived
                // after it (it would be admitted again at once, and evicted again, for ever).
                let key = self.admission_key(&self.waiting[best], now);
                let urgent = key.0 == Priority::Interactive;
                let background = (0..self.running.len())
                    .filter(|&i| self.running[i].req.priority == Priority::Background)
                    .filter(|&i| self.admission_key(&self.running[i], now) > key)
                    .max_by_key(|&i| self.running[i].admission);
                match background.filter(|_| urgent) {
                    Some(i) => {
                        let mut seq = self.running.remove(i);
                        kv.release(&mut seq.kv);
                        seq.awaiting = 0;
                        seq.stats.preemptions += 1;
                        self.waiting.push(seq);
                        continue;
                    }
                    None => break,
                }
            }
            let blocks = kv.admit().expect("a free block was counted");
            let mut seq = self.waiting.remove(best);
            seq.kv = blocks;
            // A prompt starting with indexed blocks takes them instead of running them.
            let tokens = seq.tokens();
            seq.stats.prefix_hit_tokens += kv.share_prefix(&mut seq.kv, &tokens) as usize;
            seq.admitted.get_or_insert(now);
            self.admissions += 1;
            seq.admission = self.admissions;
            self.running.push(seq);
        }
    }

    /// The rows of this step, most urgent sequences first, within the token budget; grows
    /// each one's KV memory, preempting less urgent sequences when the pool runs dry.
    fn plan(&mut self, engine: &mut Engine, events: &mut Vec<SeqEvent>) -> Vec<Part> {
        let mut budget = self.opts.max_batch_tokens.min(engine.forward.max_rows());
        let kv = &mut engine.forward.kv;
        let mut parts: Vec<Part> = Vec::new();
        // First the sequences going on from the step in flight, in its output order, as long
        // as each has its row: their ids come from that step on the GPU, outputs 0, 1, ...
        // A step that runs an interactive prompt runs no background rows: where a step's time
        // grows with its rows (lavapipe) they would lengthen the time to first token. They wait
        // a step, their next token fed from the host.
        // A background sequence that has waited past the aging limit for a token keeps its rows,
        // so a stream of interactive prompts cannot hold it back for good.
        let interactive_prompt =
            self.running.iter().any(|s| s.req.priority == Priority::Interactive && s.awaiting == 0 && s.pending() > 1);
        let (now, aging) = (Instant::now(), self.opts.aging);
        // While interactive work runs, background sequences (not past the aging limit) get at
        // most background_decode_rows decode rows and background_prompt_tokens prompt tokens a
        // step, and none in a step that runs an interactive prompt; the decode rows go to those
        // that have waited longest for a token, so the bound rotates over them.
        let interactive_running = self.running.iter().any(|s| s.req.priority == Priority::Interactive);
        let bounded = |s: &Sequence| interactive_running && token_urgency(s, now, aging) == Priority::Background;
        let sits_out = |s: &Sequence| interactive_prompt && bounded(s);
        let mut decoding: Vec<usize> = (0..self.running.len())
            .filter(|&i| bounded(&self.running[i]) && (self.running[i].awaiting == 1 || self.running[i].pending() == 1))
            .collect();
        decoding.sort_by_key(|&i| self.running[i].last_token.unwrap_or(self.running[i].arrived));
        decoding.truncate(self.opts.background_decode_rows as usize);
        let may_decode: Vec<bool> =
            (0..self.running.len()).map(|i| !bounded(&self.running[i]) || decoding.contains(&i)).collect();
        let continuing = self.in_flight.as_ref().map_or(&[][..], |t| &t.outs[..t.continuing]);
        for &(request, epoch) in continuing {
            let i = self
                .running
                .iter()
                .position(|s| s.req.id == request && s.stats.preemptions == epoch && s.awaiting == 1);
            // Interactive outputs come first (`submit_next`): the rest sit out together.
            let Some(i) = i.filter(|&i| !sits_out(&self.running[i]) && may_decode[i]) else { break };
            let Some(place) = kv.grow(&mut self.running[i].kv, 1).ok().filter(|_| budget > 0) else { break };
            parts.push(Part { seq: i, rows: 1, place, chosen: true });
            budget -= 1;
        }
        let mut background_prompt = self.opts.background_prompt_tokens;
        // Who grows first and who gives memory back: by priority (a background sequence that
        // has waited past the aging limit since it arrived counts as interactive, so later
        // arrivals cannot preempt it for ever), then by admission.
        let key = |s: &Sequence| (urgency(s.req.priority, s.arrived, now, aging), s.admission);
        let mut order: Vec<usize> = (0..self.running.len()).filter(|&i| self.running[i].awaiting == 0).collect();
        order.sort_by_key(|&i| key(&self.running[i]));
        let mut preempted = Vec::new();
        let mut stuck = Vec::new();
        for &i in &order {
            if preempted.contains(&i) {
                continue;
            }
            let seq = &self.running[i];
            if sits_out(seq) {
                continue;
            }
            let background_chunk = bounded(seq) && seq.pending() > 1;
            let mut rows = (seq.pending() as u32).min(budget).min(kv.opts.context);
            if background_chunk {
                rows = rows.min(background_prompt);
            }
            if rows == 0 || (seq.pending() == 1 && !may_decode[i]) {
                continue;
            }
            loop {
                if let Ok(place) = kv.grow(&mut self.running[i].kv, rows) {
                    parts.push(Part { seq: i, rows, place, chosen: false });
                    budget -= rows;
                    if background_chunk {
                        background_prompt -= rows;
                    }
                    break;
                }
                // The pool is dry: sequences less urgent than this one and not in this step give
                // their blocks back, the least urgent and latest admitted first, as many as it
                // takes; none does where all of them together would not free enough (each
                // would lose its work for nothing, and be admitted and preempted again).
                let missing = kv.blocks_missing(&self.running[i].kv, rows);
                let mut candidates: Vec<usize> = (0..self.running.len())
                    .filter(|&v| v != i && !preempted.contains(&v) && parts.iter().all(|p| p.seq != v))
                    .filter(|&v| key(&self.running[v]) > key(&self.running[i]))
                    .collect();
                candidates.sort_by_key(|&v| std::cmp::Reverse(key(&self.running[v])));
                let mut victims: Vec<usize> = Vec::new();
                let freed = |victims: &[usize]| kv.blocks_freed_by(victims.iter().map(|&v| &self.running[v].kv));
                for v in candidates {
                    if freed(&victims) >= missing {
                        break;
                    }
                    victims.push(v);
                }
                if missing > 0 && freed(&victims) >= missing {
                    for v in victims {
                        kv.release(&mut self.running[v].kv);
                        self.running[v].awaiting = 0;
                        preempted.push(v);
                    }
                    continue;
                }
                // Nothing to free: a sequence that could not grow even with the whole pool (one
                // smaller than its context), or that is alone, ends here rather than wait for
                // ever; the others wait for memory.
                let alone = parts.is_empty() && self.running.len() - preempted.len() == 1;
                if alone || kv.exceeds_pool(&self.running[i].kv, rows) {
                    stuck.push(i);
                }
                break;
            }
        }
        // Preempted sequences wait again, first in line; their memory is already free.
        let mut gone: Vec<usize> = preempted.iter().chain(&stuck).copied().collect();
        gone.sort_unstable_by(|a, b| b.cmp(a));
        for i in gone {
            let mut seq = self.running.remove(i);
            for p in parts.iter_mut().filter(|p| p.seq > i) {
                p.seq -= 1;
            }
            if stuck.contains(&i) {
                kv.release(&mut seq.kv);
                events.push(SeqEvent::Finished(self.record(seq.finish(Finish::ContextFull))));
            } else {
                seq.stats.preemptions += 1;
                self.waiting.insert(0, seq);
            }
        }
        parts
    }
}

/// A running sequence's priority for its rows: interactive once it has waited past `aging` for
/// a token (since its last one, or since it arrived).
fn token_urgency(s: &Sequence, now: Instant, aging: Duration) -> Priority {
    urgency(s.req.priority, s.last_token.unwrap_or(s.arrived), now, aging)
}

/// `priority`, or interactive once its sequence has waited past `aging` since `since`.
fn urgency(priority: Priority, since: Instant, now: Instant, aging: Duration) -> Priority {
    match now.saturating_duration_since(since) >= aging {
        true => Priority::Interactive,
        false => priority,
    }
}
