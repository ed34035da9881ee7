//! The engine: a device, a loaded model, its tokenizer, and generation with timing. Front ends
//! (CLI, console, server) drive it; it never prints.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Result};

use crate::gpu::{Gpu, GpuOptions};
use crate::model::forward::{Forward, ForwardOptions, PendingStep, Readback, StepIds, StepOutput};
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
    /// The ids whose keys and values are in the KV cache, in order.
    cached: Vec<u32>,
}

impl Engine {
    pub fn load(path: &Path, opts: &EngineOptions) -> Result<Engine> {
        if !path.exists() {
            bail!("model path {} does not exist", path.display());
        }
        let gpu = Gpu::new(&opts.gpu)?;
        let (forward, tokenizer) = if path.is_file() {
            // A single file is a GGUF model; a folder is a Hugging Face model.
            let file = crate::model::gguf::Gguf::open(path)?;
            (crate::model::load_gguf(&gpu, &file, &opts.forward)?, Some(TextTokenizer::from_gguf(&file)?))
        } else {
            let tok = if path.join("tokenizer.json").exists() { Some(TextTokenizer::from_hf_dir(path)?) } else { None };
            (crate::model::load_hf_dir(&gpu, path, &opts.forward)?, tok)
        };
        Ok(Engine::new(gpu, forward, tokenizer, path))
    }

    /// An engine around an already built forward pass (benchmarks build synthetic ones).
    pub fn new(gpu: Gpu, forward: Forward, tokenizer: Option<TextTokenizer>, path: &Path) -> Engine {
        Engine { gpu, forward, tokenizer, model_path: path.to_path_buf(), cached: Vec::new() }
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

    /// Forgets the cached conversation.
    pub fn reset(&mut self) {
        self.cached.clear();
        self.forward.kv.reset();
    }

    /// Runs the prompt, reusing the longest cached prefix; at least one token always runs.
    /// Returns the step's output and how many prompt tokens ran.
    fn prefill(&mut self, prompt: &[u32], readback: Readback) -> Result<(StepOutput, usize)> {
        if prompt.is_empty() {
            bail!("the prompt is empty");
        }
        let reuse = self.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count().min(prompt.len() - 1);
        self.forward.kv.truncate(reuse as u32);
        let reuse = self.forward.kv.position() as usize;
        self.cached.truncate(reuse);
        let out = self.forward.step(&self.gpu, &prompt[reuse..], readback);
        if out.is_err() {
            self.reset();
        }
        self.cached.extend_from_slice(&prompt[reuse..]);
        Ok((out?, prompt.len() - reuse))
    }

    /// Final-position logits of `prompt` (for tests and tools).
    pub fn prompt_logits(&mut self, prompt: &[u32]) -> Result<Vec<f32>> {
        Ok(self.prefill(prompt, Readback::Logits)?.0.logits.unwrap_or_default())
    }

    /// Generates up to `req.max_tokens` ids; `on_token` sees each id as it is chosen and
    /// returns false to stop.
    pub fn generate(&mut self, req: &Request, mut on_token: impl FnMut(u32) -> bool) -> Result<Generation> {
        self.generate_observed(req, |id, _| on_token(id))
    }

    /// `generate`, with the forward pass (KV use, GPU timings of the step) shown to `on_token`.
    pub fn generate_observed(
        &mut self,
        req: &Request,
        mut on_token: impl FnMut(u32, &Forward) -> bool,
    ) -> Result<Generation> {
        let mut sampler = Sampler::new(req.sampling.clone());
        // Greedy and plain sampling run on the GPU; a repetition penalty needs the logits here.
        let readback = |step: u32| match &req.sampling {
            p if p.is_greedy() => Readback::Argmax,
            p if p.repetition_penalty == 1.0 => Readback::Sample(SampleParams::new(p, step)),
            _ => Readback::Logits,
        };
        let eos = self.eos_ids();
        // With the token chosen on the GPU, the next step is queued before this one's id is
        // read: the GPU runs decode steps back to back instead of waiting for the host between
        // tokens (docs/PERF.md). Profiling reads each step's timings, one step at a time.
        let pipelined = readback(1) != Readback::Logits && !self.forward.profiling();
        let mut queued: Option<PendingStep> = None;
        let t0 = Instant::now();
        let (mut out, prefill_tokens) = self.prefill(&req.prompt_ids, readback(0))?;
        let ttft = t0.elapsed().as_secs_f64();
        let mut seen = req.prompt_ids.clone();
        let mut ids = Vec::new();
        let t_decode = Instant::now();
        let finish = loop {
            if req.max_tokens == 0 {
                break Finish::Length;
            }
            let next = match out.logits.as_mut() {
                Some(l) => sampler.sample(l, &seen),
                None => out.id,
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
            if self.forward.kv.place(1).is_err() && queued.is_none() {
                break Finish::ContextFull;
            }
            // This token's step: queued already when the previous step chose it on the GPU.
            let current = match queued.take() {
                Some(p) => p,
                None => self.forward.submit(&self.gpu, StepIds::Host(&[next]), readback(ids.len() as u32))?,
            };
            self.cached.push(next);
            if pipelined && ids.len() + 1 < req.max_tokens && self.forward.kv.place(1).is_ok() {
                queued = Some(self.forward.submit(&self.gpu, StepIds::Chosen, readback(ids.len() as u32 + 1))?);
            }
            out = self.forward.finish(&self.gpu, current)?;
        };
        // A step queued for the token that ended the generation: its position is taken back,
        // as if it had never run.
        if let Some(p) = queued {
            self.forward.finish(&self.gpu, p)?;
            self.forward.kv.retreat(1);
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
