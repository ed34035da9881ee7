//! The engine: a device, a loaded model, its tokenizer, and the single stream's generation with
//! timing (a batch of one through the same step as the batcher's). Front ends (CLI, console,
//! server) drive it; it writes nothing to stdout (loading draws a progress bar on stderr).

use crate::Instant;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};

use crate::gpu::{Gpu, GpuOptions};
use crate::kv::SeqKv;
use crate::model::folder::ModelFolder;
use crate::model::forward::{Batch, Choice, Forward, ForwardOptions, Out, PendingStep, StepOutput, NO_TOKEN};
use crate::ops::plan::{PlanRow, PlanSeq};
use crate::ops::sample::SampleParams;
use crate::sampling::{Sampler, SamplingParams};
use crate::tokenizer::TextTokenizer;

#[derive(Clone, Debug, Default)]
pub struct EngineOptions {
    pub gpu: GpuOptions,
    pub forward: ForwardOptions,
}

#[derive(Clone, Debug)]
pub struct Request {
    pub prompt_ids: Vec<u32>,
    pub max_tokens: usize,
    pub sampling: SamplingParams,
    /// Stop at an end-of-sequence id (it is still returned).
    pub stop_at_eos: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    Eos,
    Length,
    ContextFull,
    Stopped,
}

#[derive(Clone, Debug)]
pub struct Generation {
    /// Generated ids only.
    pub ids: Vec<u32>,
    pub finish: Finish,
    pub ttft_ms: f64,
    /// Prompt tokens actually run (a cached prefix is skipped).
    pub prefill_tokens: usize,
    pub prefill_tok_s: f64,
    pub decode_tok_s: f64,
}

pub struct Engine {
    pub gpu: Gpu,
    pub forward: Forward,
    pub tokenizer: Option<TextTokenizer>,
    pub model_path: PathBuf,
    /// The single stream's share of the KV memory, taken at its first prompt.
    seq: Option<SeqKv>,
    /// The ids whose keys and values the single stream holds, in order.
    cached: Vec<u32>,
}

impl Engine {
    /// The model at `path` (a GGUF file, or a Hugging Face folder) on the adapter `opts` picks.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(path: &Path, opts: &EngineOptions) -> Result<Engine> {
        if !path.exists() {
            bail!("model path {} does not exist", path.display());
        }
        let gpu = Gpu::new(&opts.gpu)?;
        if path.is_file() {
            // A single file is a GGUF model; a folder is a Hugging Face model.
            return Self::from_gguf(gpu, &crate::model::gguf::Gguf::open(path)?, path, &opts.forward);
        }
        Self::from_folder(gpu, &ModelFolder::dir(path), &opts.forward)
    }

    /// A Hugging Face model folder (a directory, or files handed over in memory) on `gpu`.
    pub fn from_folder(gpu: Gpu, folder: &ModelFolder, opts: &ForwardOptions) -> Result<Engine> {
        let tok = if folder.has("tokenizer.json") { Some(TextTokenizer::from_folder(folder)?) } else { None };
        let forward = crate::model::load_hf(&gpu, folder, opts)?;
        Ok(Engine::new(gpu, forward, tok, folder.path()))
    }

    /// A GGUF model handed over as bytes (the browser's File API or `fetch`), on `gpu`; `name`
    /// stands for its path in messages.
    pub fn from_gguf_bytes(gpu: Gpu, name: &str, bytes: &[u8], opts: &ForwardOptions) -> Result<Engine> {
        let path = Path::new(name);
        Self::from_gguf(gpu, &crate::model::gguf::Gguf::from_bytes(path, bytes)?, path, opts)
    }

    fn from_gguf(gpu: Gpu, file: &crate::model::gguf::Gguf, path: &Path, opts: &ForwardOptions) -> Result<Engine> {
        // The tokenizer first: one it cannot build fails in a moment, not after every weight
        // has gone to the GPU.
        let tokenizer = TextTokenizer::from_gguf(file)?;
        let forward = crate::model::load_gguf(&gpu, file, opts)?;
        Ok(Engine::new(gpu, forward, Some(tokenizer), path))
    }

    /// An engine around an already built forward pass (benchmarks build synthetic ones).
    pub fn new(gpu: Gpu, forward: Forward, tokenizer: Option<TextTokenizer>, path: &Path) -> Engine {
        Engine { gpu, forward, tokenizer, model_path: path.to_path_buf(), seq: None, cached: Vec::new() }
    }

    /// Ids that end generation: the tokenizer's and generation config's, else config.json's.
    pub fn eos_ids(&self) -> Vec<u32> {
        let mut ids = self.forward.cfg.eos_ids.clone();
        if let Some(t) = &self.tokenizer {
            ids.extend(&t.eos_ids);
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Runs once every kernel a first greedy request needs (a prompt one row past the GEMV
    /// cores, so the prefill core runs, then two decode steps) and forgets it. A driver that
    /// compiles a pipeline at its first dispatch (lavapipe: seconds for a model's kernels) then
    /// does so inside the load instead of in the first answer's time to first token, and the
    /// compiled pipelines are saved for the next run (`Gpu::save_pipeline_cache`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn warm_up(&mut self) -> Result<()> {
        // On stderr beside the loader's bar: on lavapipe this is the long part of a first load.
        let spinner = indicatif::ProgressBar::new_spinner().with_message("compiling kernels (each runs once)");
        spinner.enable_steady_tick(std::time::Duration::from_millis(100));
        // A paged pool may hold fewer positions than the context.
        let positions = self.forward.kv.sequence_positions() as usize;
        let prompt = (crate::ops::linear::GEMV_MAX_ROWS as usize + 1).min(positions.saturating_sub(2));
        let req = Request {
            prompt_ids: vec![0; prompt],
            max_tokens: 2,
            sampling: SamplingParams::default(),
            stop_at_eos: false,
        };
        let ran = if prompt > 0 { self.generate(&req, |_| true).map(drop) } else { Ok(()) };
        // Cleared before an error is reported, so none is left spinning above it.
        spinner.finish_and_clear();
        ran?;
        self.reset();
        if let Err(e) = self.gpu.save_pipeline_cache() {
            eprintln!("warning: {e:#}; the driver's pipelines are not cached for the next run");
        }
        Ok(())
    }

    /// Forgets the cached conversation and gives its KV memory back.
    pub fn reset(&mut self) {
        self.cached.clear();
        if let Some(mut seq) = self.seq.take() {
            self.forward.kv.release(&mut seq);
        }
    }

    /// Positions the single stream holds (the next token's position).
    pub fn position(&self) -> u32 {
        self.seq.as_ref().map_or(0, SeqKv::len)
    }

    fn stream(&mut self) -> Result<&mut SeqKv> {
        if self.seq.is_none() {
            let seq = self.forward.kv.admit().ok_or_else(|| anyhow!("no KV slot is free for the stream"))?;
            self.seq = Some(seq);
        }
        Ok(self.seq.as_mut().expect("admitted above"))
    }

    /// Queues the stream's next `ids` (prompt rows from the host, or the one id the previous
    /// step chose when `ids` is empty), with an output for the last row if `choice` says how.
    /// Where that fails, the stream starts over.
    fn submit(&mut self, ids: &[u32], choice: Option<Choice>) -> Result<PendingStep> {
        let n = ids.len().max(1) as u32;
        self.stream()?;
        let (kv, seq) = (&mut self.forward.kv, self.seq.as_mut().expect("admitted"));
        let place = kv.grow(seq, n)?;
        let rows: Vec<PlanRow> = (0..n).map(|i| PlanRow { seq: 0, pos: place.start_pos + i }).collect();
        let seqs = [PlanSeq { kv_lo: place.kv_lo, blocks: &seq.blocks }];
        let out = choice.map(|choice| Out { row: n - 1, choice });
        let batch = Batch { chosen: u32::from(ids.is_empty()), ids, rows: &rows, seqs: &seqs, outs: out.as_slice() };
        match self.forward.submit(&self.gpu, &batch) {
            Ok(p) => {
                seq.advance(n);
                Ok(p)
            }
            Err(e) => {
                self.reset();
                Err(e)
            }
        }
    }

    /// Waits for a step of the stream. Where it failed, what the cache's positions hold is
    /// unknown: the stream starts over (a step queued behind it, dropped by the caller, stops
    /// counting as in flight).
    async fn finish(&mut self, step: PendingStep) -> Result<StepOutput> {
        let out = self.forward.finish_async(&self.gpu, step).await;
        if out.is_err() {
            self.reset();
        }
        out
    }

    /// Runs the prompt, reusing the longest cached prefix; at least one token always runs.
    /// Returns the pending last chunk (its output: the last row's token) and how many prompt
    /// tokens ran.
    async fn prefill(&mut self, prompt: &[u32], choice: Choice) -> Result<(PendingStep, usize)> {
        if prompt.is_empty() {
            bail!("the prompt is empty");
        }
        let reuse = self.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count().min(prompt.len() - 1);
        let context = self.forward.kv.opts.context;
        let seq = self.stream()?;
        seq.truncate(reuse as u32, context);
        let reuse = seq.len() as usize;
        self.cached.truncate(reuse);
        let rest = &prompt[reuse..];
        // The whole prompt must fit before anything is written.
        self.forward.kv.place(self.seq.as_ref().expect("admitted"), rest.len() as u32)?;
        let chunks: Vec<&[u32]> = rest.chunks(self.forward.max_rows() as usize).collect();
        let mut pending = None;
        for (i, chunk) in chunks.iter().enumerate() {
            // Only the last chunk's last row produces a token.
            let step = self.submit(chunk, (i + 1 == chunks.len()).then_some(choice))?;
            self.cached.extend_from_slice(chunk);
            match i + 1 == chunks.len() {
                true => pending = Some(step),
                false => drop(self.finish(step).await?),
            }
        }
        Ok((pending.expect("a prompt has a chunk"), rest.len()))
    }

    /// Final-position logits of `prompt` (for tests and tools).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn prompt_logits(&mut self, prompt: &[u32]) -> Result<Vec<f32>> {
        pollster::block_on(self.prompt_logits_async(prompt))
    }

    /// `prompt_logits` as a future (a page awaits its read-backs; see `Gpu::map_read_after`).
    pub async fn prompt_logits_async(&mut self, prompt: &[u32]) -> Result<Vec<f32>> {
        let (pending, _) = self.prefill(prompt, Choice::Logits).await?;
        let out = self.finish(pending).await?;
        Ok(out.logits.into_iter().next().flatten().unwrap_or_default())
    }

    /// Generates up to `req.max_tokens` ids; `on_token` sees each id as it is chosen and
    /// returns false to stop.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn generate(&mut self, req: &Request, mut on_token: impl FnMut(u32) -> bool) -> Result<Generation> {
        self.generate_observed(req, |id, _| on_token(id))
    }

    /// `generate`, with the forward pass (KV use, GPU timings of the step) shown to `on_token`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn generate_observed(
        &mut self,
        req: &Request,
        on_token: impl FnMut(u32, &Forward) -> bool,
    ) -> Result<Generation> {
        pollster::block_on(self.generate_observed_async(req, on_token))
    }

    /// `generate_observed` as a future (a page awaits its read-backs; see
    /// `Gpu::map_read_after`).
    pub async fn generate_observed_async(
        &mut self,
        req: &Request,
        mut on_token: impl FnMut(u32, &Forward) -> bool,
    ) -> Result<Generation> {
        let mut sampler = Sampler::new(req.sampling.clone());
        let choice = |step: u32| choice_for(&req.sampling, step);
        let eos = self.eos_ids();
        // With the token chosen on the GPU, the next step is queued before this one's id is
        // read: the GPU runs decode steps back to back instead of waiting for the host between
        // tokens (docs/PERF.md). Profiling reads each step's timings, one step at a time.
        let pipelined = choice(1) != Choice::Logits && !self.forward.profiling();
        let mut queued: Option<PendingStep> = None;
        let t0 = Instant::now();
        let (pending, prefill_tokens) = self.prefill(&req.prompt_ids, choice(0)).await?;
        let mut out = self.finish(pending).await?;
        let ttft = t0.elapsed().as_secs_f64();
        let mut seen = req.prompt_ids.clone();
        let mut ids = Vec::new();
        let t_decode = Instant::now();
        let fits = |e: &Engine| e.seq.as_ref().is_some_and(|s| e.forward.kv.place(s, 1).is_ok());
        let finish = loop {
            if req.max_tokens == 0 {
                break Finish::Length;
            }
            let next = match out.logits[0].as_mut() {
                Some(l) => sampler.sample(l, &seen),
                None => self.forward.chosen(out.ids[0]),
            };
            let Some(next) = next else {
                self.reset();
                bail!(NO_TOKEN);
            };
            ids.push(next);
            seen.push(next);
            if !on_token(next, &self.forward) {
                break Finish::Stopped;
            }
            if req.stop_at_eos && eos.contains(&next) {
                break Finish::Eos;
            }
            if ids.len() >= req.max_tokens {
                break Finish::Length;
            }
            if !fits(self) && queued.is_none() {
                break Finish::ContextFull;
            }
            // This token's step: queued already when the previous step chose it on the GPU.
            let current = match queued.take() {
                Some(p) => p,
                None => self.submit(&[next], Some(choice(ids.len() as u32)))?,
            };
            self.cached.push(next);
            if pipelined && ids.len() + 1 < req.max_tokens && fits(self) {
                queued = Some(self.submit(&[], Some(choice(ids.len() as u32 + 1)))?);
            }
            out = self.finish(current).await?;
        };
        // A step queued for the token that ended the generation: its position is taken back,
        // as if it had never run.
        if let Some(p) = queued {
            self.finish(p).await?;
            if let Some(seq) = self.seq.as_mut() {
                seq.retreat(1);
            }
        }
        let decode_s = t_decode.elapsed().as_secs_f64();
        Ok(Generation {
            finish,
            ttft_ms: ttft * 1e3,
            prefill_tokens,
            prefill_tok_s: prefill_tokens as f64 / ttft,
            decode_tok_s: if ids.len() > 1 { (ids.len() - 1) as f64 / decode_s } else { 0.0 },
            ids,
        })
    }
}

/// How a step of a generation with `p` picks the token of its `step`-th draw: greedy and plain
/// sampling on the GPU; a repetition penalty needs the logits on the host.
pub fn choice_for(p: &SamplingParams, step: u32) -> Choice {
    match p {
        p if p.is_greedy() => Choice::Argmax,
        p if p.repetition_penalty == 1.0 => Choice::Sample(SampleParams::new(p, step)),
        _ => Choice::Logits,
    }
}
