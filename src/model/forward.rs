//! One forward step on the GPU, as in llama2.c's `forward`, but recorded, and over a batch:
//! every buffer, pipeline and bind group is made at load, so a step writes three small buffers
//! (ids, step counts, the plan: each row's sequence and position, each sequence's KV blocks,
//! the rows that produce logits), records one compute pass, submits once and reads back one id
//! per output row (or logits where the host samples). A step's rows may belong to any number
//! of sequences, prompt chunks and decode tokens alike: a single stream is a batch of one.
//!
//! Per layer (5 dispatches, more with the options below): qkv_rope (RMSNorm on load + projection + bias + RoPE + KV write;
//! with q/k norms (Qwen3, Gemma 3) a second dispatch, qk_norm, normalizes and rotates q and k),
//! attention (plain or flash; a local layer within its window), o-projection added onto x,
//! gate/up with RMSNorm on load + SwiGLU (GeGLU for Gemma), down-projection added onto x. With
//! post-norms (Gemma 3) o and down write a scratch row whose norm an `rmsnorm` adds onto x (two
//! more dispatches). Gemma's embedding scale, (1 + w) norms, attention scale and local RoPE base
//! are constants and weights of these same kernels.
//! Then the final norm of the output rows, the LM head, and argmax (every output greedy) or
//! sample (each row with its own parameters).

use anyhow::{bail, ensure, Result};

use super::config::ModelConfig;
use super::loader::Weights;
use crate::gpu::profiler::{Part, Profiler, Span, Timing};
use crate::gpu::Gpu;
use crate::kv::{KvCache, KvOptions};
use crate::ops::argmax::Argmax;
use crate::ops::attention::{Attention, AttnBuffers, AttnKind, AttnOptions, AttnStep, Thresholds};
use crate::ops::attention_coop;
use crate::ops::embedding::Embedding;
use crate::ops::linear::{x_f16_bytes, InputNorm, LinearConfig, Rows};
use crate::ops::matmul::Matmul;
use crate::ops::plan::{Plan, PlanLayout, PlanRow, PlanSeq};
use crate::ops::qk_norm::QkNorm;
use crate::ops::qkv_rope::{HeadShape, QkvBuffers, QkvRope};
use crate::ops::rmsnorm::{NormBuffers, NormRows, RmsNorm};
use crate::ops::sample::{Sample, SampleParams};
use crate::ops::swiglu::SwiGlu;
use crate::ops::Step;

#[derive(Clone, Debug)]
pub struct ForwardOptions {
    /// KV memory: layout, context length, sequences at once.
    pub kv: KvOptions,
    /// Most tokens one step processes (prompts are split into chunks of this size).
    pub max_rows: u32,
    /// Contexts longer than this use the long-context attention kernels (flash, or split);
    /// `None`: the adapter's (`attention::Thresholds::for_adapter`).
    pub attn_threshold: Option<u32>,
    /// Matmul shapes and variants; `None` picks them for the adapter.
    pub linear: Option<LinearConfig>,
    /// Time every dispatch with timestamp queries (when the adapter can).
    pub profile: bool,
}

impl Default for ForwardOptions {
    fn default() -> Self {
        ForwardOptions { kv: KvOptions::default(), max_rows: 512, attn_threshold: None, linear: None, profile: false }
    }
}

/// How an output row picks its token, and what it brings back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Choice {
    /// The argmax id.
    Argmax,
    /// An id sampled on the GPU.
    Sample(SampleParams),
    /// The row's logits (for sampling on the host), and its argmax id.
    Logits,
}

/// A row whose logits the step computes, and what is done with them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Out {
    pub row: u32,
    pub choice: Choice,
}

/// What one step runs: rows of any sequences (their ids, positions and KV blocks) and the
/// rows that produce a token.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// The first `chosen` rows take the ids the previous step chose for its outputs 0..chosen,
    /// copied on the GPU: decode steps queued before that step's ids were read back.
    pub chosen: u32,
    /// Ids of the other rows (chosen..), from the host.
    pub ids: &'a [u32],
    pub rows: &'a [PlanRow],
    pub seqs: &'a [PlanSeq<'a>],
    pub outs: &'a [Out],
}

impl Batch<'_> {
    pub fn n_rows(&self) -> u32 {
        self.rows.len() as u32
    }
}

/// A submitted step whose result has not been read yet (see `Forward::submit`).
pub struct PendingStep {
    submission: wgpu::SubmissionIndex,
    slot: usize,
    /// Per output row: whether its logits come back.
    logits: Vec<bool>,
    /// Counts the step in flight while it lives (`Forward::steps_in_flight`): a step dropped
    /// unfinished (a caller returning on an error) stops counting.
    _in_flight: std::sync::Arc<()>,
}

/// Why no token could be chosen for an output row: its logits held no number the argmax or
/// the sampler could take (`sampling::LOWEST_LOGIT`).
pub const NO_TOKEN: &str = "no token could be chosen: the logits are not finite numbers (the model's weights or settings, such as its RoPE base, give values past f32's range)";

pub struct StepOutput {
    /// Per output row: the argmax id, or the GPU-sampled id; past the vocabulary where no token
    /// could be chosen (NO_TOKEN). The row fails, not the step: the other rows are sequences of
    /// their own.
    pub ids: Vec<u32>,
    /// Per output row: its logits where they were asked for.
    pub logits: Vec<Option<Vec<f32>>>,
}

struct LayerOps {
    qkv: QkvRope,
    attention: Attention,
    o: Matmul,
    gate_up: SwiGlu,
    down: Matmul,
    /// Gemma's norms of the attention and MLP outputs, each added onto x (o and down then
    /// write to a scratch row instead of onto x).
    post_norms: Option<[RmsNorm; 2]>,
}

pub struct Forward {
    pub cfg: ModelConfig,
    pub weights: Weights,
    pub kv: KvCache,
    step: wgpu::Buffer,
    plan: Plan,
    ids: wgpu::Buffer,
    logits: wgpu::Buffer,
    /// The ids the last step chose, one per output row.
    chosen: wgpu::Buffer,
    /// One per step in flight (at most two: `submit` queues a step behind the running one).
    id_staging: [wgpu::Buffer; 2],
    next_slot: usize,
    /// Shared with each `PendingStep` alive.
    in_flight: std::sync::Arc<()>,
    logits_staging: wgpu::Buffer,
    embed: Embedding,
    layers: Vec<LayerOps>,
    final_norm: RmsNorm,
    lm_head: Matmul,
    argmax: Argmax,
    sample: Sample,
    sample_params: Vec<SampleParams>,
    max_rows: u32,
    max_outs: u32,
    profiler: Option<Profiler>,
    /// GPU time of each dispatch of the last profiled submit.
    pub timings: Vec<Timing>,
    /// The attention kernel the last step used.
    pub last_attention: AttnKind,
    /// Kernel launches recorded in the last submit, one per op: a weight of several parts (split
    /// over bindings, or fused tensors of different types) adds one dispatch per extra part,
    /// and a tensor-core prefill projection one for its `input_f16` (and a quantized one for its
    /// `dequant_f16`), neither counted here (a
    /// decode step on a model whose fused weights are one type has neither).
    pub last_launches: usize,
}

/// The most rows a step may have: a grid dimension's workgroups.
pub const MAX_GRID_ROWS: u32 = 65535;

impl Forward {
    pub fn new(gpu: &Gpu, cfg: ModelConfig, weights: Weights, opts: &ForwardOptions) -> Result<Forward> {
        // Kernels take a step's rows as one dimension of their grid (at most 65535).
        if !(1..=MAX_GRID_ROWS).contains(&opts.max_rows) {
            bail!("steps of {} rows: the step size (--max-batch-tokens) must be 1 to {MAX_GRID_ROWS}", opts.max_rows);
        }
        let (d, qn) = (cfg.hidden as u64, (cfg.heads * cfg.head_dim) as u64);
        let rows = u64::from(opts.max_rows);
        let heads =
            HeadShape { n_heads: cfg.heads as u32, n_kv_heads: cfg.kv_heads as u32, head_dim: cfg.head_dim as u32 };
        let kv = KvCache::new(gpu, cfg.layers, heads.kv_dim(), opts.kv)?;
        // One output per sequence at most, and per row.
        let max_outs = opts.kv.parallel.min(opts.max_rows);
        let plan = Plan::new(
            gpu,
            PlanLayout {
                max_rows: opts.max_rows,
                max_seqs: opts.kv.parallel.min(opts.max_rows),
                max_outs,
                max_blocks: kv.max_blocks,
                block: kv.block,
                tile_rows: attention_coop::tile_rows(&gpu.caps, heads.head_dim),
            },
        )?;
        let f32s = |label: &str, n: u64| gpu.storage(label, n * 4);
        let step = Step::buffer(gpu)?;
        let ids = f32s("ids", rows)?;
        let x = f32s("x", rows * d)?;
        let xn = f32s("xn", u64::from(max_outs) * d)?;
        let q = f32s("q", rows * qn)?;
        let o = f32s("o", rows * qn)?;
        let h = f32s("h", rows * cfg.intermediate as u64)?;
        // The attention and MLP outputs before their post-norms (models with post-norms).
        let y = if cfg.block.post_norms { Some(f32s("y", rows * d)?) } else { None };
        let vocab_bytes = cfg.vocab as u64 * 4;
        let logits = f32s("logits", u64::from(max_outs) * cfg.vocab as u64)?;
        let chosen = f32s("chosen", u64::from(max_outs))?;
        let read = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
        let staging = || gpu.buffer("id_staging", u64::from(max_outs) * 4, read);
        let id_staging = [staging()?, staging()?];
        let logits_staging = gpu.buffer("logits_staging", u64::from(max_outs) * vocab_bytes, read)?;
        let lin = &opts.linear.unwrap_or_else(|| LinearConfig::for_gpu(gpu));
        // On tensor cores attention and SwiGLU write their outputs as f16 rows too, which the o
        // and down projections read there instead of converting them first (`F16Rows`).
        let act_f16 = match lin.coop {
            Some(_) => {
                let bytes = x_f16_bytes(&o, qn as u32).max(x_f16_bytes(&h, cfg.intermediate as u32));
                Some(gpu.storage("o_h_f16", bytes)?)
            }
            None => None,
        };
        let act_f16 = act_f16.as_ref();
        let eps = cfg.rms_eps;
        let threshold = opts.attn_threshold.map_or_else(|| Thresholds::for_adapter(&gpu.caps), Thresholds::all);
        let mut layers = Vec::with_capacity(cfg.layers);
        for (i, (w, (kc, vc))) in weights.layers.iter().zip(&kv.layers).enumerate() {
            // Local layers (Gemma 3): their own RoPE frequencies and window.
            let local = cfg.is_local(i);
            let inv_freq = weights.local_inv_freq.as_ref().filter(|_| local).unwrap_or(&weights.inv_freq);
            let attn_opts = AttnOptions {
                scale: cfg.block.attn_scale.unwrap_or(AttnOptions::full(&heads).scale),
                window: cfg.layer_window(i).map(|w| w.min(u32::MAX as usize) as u32),
                o_f16: act_f16.is_some(),
            };
            // Both norms of the layer are fused into the projections that read them.
            let qkv_bufs = QkvBuffers {
                step: &step,
                x: &x,
                bias: w.qkv_bias.as_ref(),
                inv_freq,
                q: &q,
                k_cache: kc,
                v_cache: vc,
                kv: opts.kv.dtype,
                plan: &plan,
                norm: Some(InputNorm { weight: &w.attn_norm, eps }),
                qk_norm: w.qk_norm.as_ref().map(|weight| QkNorm { weight, eps }),
            };
            let attn_bufs =
                AttnBuffers { q: &q, k_cache: kc, v_cache: vc, kv: opts.kv.dtype, o: &o, plan: &plan, o_f16: act_f16 };
            let mlp_norm = Some(InputNorm { weight: &w.mlp_norm, eps });
            // Without post-norms o and down add onto x; with them they write y, whose norm is
            // added onto x.
            let (out, add) = match &y {
                Some(y) => (y, false),
                None => (&x, true),
            };
            let post_norms = match (&w.post_norms, &y) {
                (Some([attn, mlp]), Some(y)) => {
                    let norm =
                        |gamma| RmsNorm::new(gpu, d as u32, eps, NormRows::AddAll, &NormBuffers { x: y, gamma, y: &x });
                    Some([norm(attn)?, norm(mlp)?])
                }
                _ => None,
            };
            layers.push(LayerOps {
                qkv: QkvRope::new(gpu, lin, &w.qkv, &heads, &qkv_bufs)?,
                attention: Attention::new(gpu, &heads, attn_opts, threshold, &attn_bufs)?,
                o: Matmul::with_f16_input(gpu, lin, &w.o, (&step, &o, act_f16), out, add, Rows::Tokens)?,
                gate_up: SwiGlu::new(gpu, lin, &w.gate_up, &step, &x, (&h, act_f16), mlp_norm, cfg.block.activation)?,
                down: Matmul::with_f16_input(gpu, lin, &w.down, (&step, &h, act_f16), out, add, Rows::Tokens)?,
                post_norms,
            });
        }
        let profiler = if opts.profile { Profiler::new(gpu, 16 * (cfg.layers as u32 + 1))? } else { None };
        let norm_bufs = NormBuffers { x: &x, gamma: &weights.final_norm, y: &xn };
        let vocab = cfg.vocab as u32;
        Ok(Forward {
            embed: Embedding::new(gpu, &weights.embed, &step, &ids, &x, cfg.block.embed_scale.unwrap_or(1.0))?,
            final_norm: RmsNorm::new(gpu, d as u32, eps, NormRows::Outputs(&plan), &norm_bufs)?,
            lm_head: Matmul::new(gpu, lin, weights.lm_head(), &step, &xn, &logits, false, Rows::Outputs)?,
            argmax: Argmax::new(gpu, vocab, max_outs, &logits, &chosen)?,
            sample: Sample::new(gpu, vocab, max_outs, &logits, &chosen)?,
            sample_params: Vec::with_capacity(max_outs as usize),
            layers,
            cfg,
            weights,
            kv,
            step,
            plan,
            ids,
            logits,
            chosen,
            id_staging,
            next_slot: 0,
            in_flight: std::sync::Arc::new(()),
            logits_staging,
            max_rows: opts.max_rows,
            max_outs,
            profiler,
            timings: Vec::new(),
            last_attention: AttnKind::Plain,
            last_launches: 0,
        })
    }

    /// The token an output row's id names: None where it is past the vocabulary, the argmax's and
    /// GPU sampler's answer when no logit could be chosen (NO_TOKEN).
    pub fn chosen(&self, id: u32) -> Option<u32> {
        Some(id).filter(|&id| (id as usize) < self.cfg.vocab)
    }

    /// Whether per-dispatch GPU timings are collected.
    pub fn profiling(&self) -> bool {
        self.profiler.is_some()
    }

    /// Steps submitted and not yet finished or dropped.
    pub fn steps_in_flight(&self) -> usize {
        std::sync::Arc::strong_count(&self.in_flight) - 1
    }

    /// Most rows one step runs.
    pub fn max_rows(&self) -> u32 {
        self.max_rows
    }

    /// Runs a batch and waits for its result.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn step(&mut self, gpu: &Gpu, batch: &Batch) -> Result<StepOutput> {
        let pending = self.submit(gpu, batch)?;
        self.finish(gpu, pending)
    }

    /// Queues a step on the GPU without waiting for it; `finish` reads its result. One step may
    /// be queued behind another (decode fed by `Batch::chosen`), except while profiling or when
    /// it brings logits back. The caller has made room for the rows' positions
    /// (`KvCache::grow`).
    pub fn submit(&mut self, gpu: &Gpu, batch: &Batch) -> Result<PendingStep> {
        // One logits read-back buffer: a step bringing logits back queues behind nothing.
        let logits_back = batch.outs.iter().any(|o| o.choice == Choice::Logits);
        let in_flight = self.steps_in_flight();
        if in_flight >= 2 || (in_flight == 1 && (self.profiling() || logits_back)) {
            bail!("a step is already queued (a bug in the caller)");
        }
        let n = batch.n_rows();
        ensure!(n > 0, "a step needs at least one token");
        ensure!(n <= self.max_rows, "{n} rows in a step of at most {}", self.max_rows);
        ensure!(
            batch.chosen as usize + batch.ids.len() == n as usize,
            "{} chosen and {} host ids for {n} rows",
            batch.chosen,
            batch.ids.len()
        );
        ensure!(batch.chosen <= self.max_outs, "{} chosen ids of at most {}", batch.chosen, self.max_outs);
        if let Some(&bad) = batch.ids.iter().find(|&&i| i as usize >= self.cfg.vocab) {
            bail!("token id {bad} is out of range for the vocabulary of {} tokens", self.cfg.vocab);
        }
        let outs: Vec<u32> = batch.outs.iter().map(|o| o.row).collect();
        self.plan.write(gpu, batch.rows, batch.seqs, &outs)?;
        let n_out = outs.len() as u32;
        Step { n_tokens: n, n_out, pad: [0; 2] }.write(gpu, &self.step);
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        let chosen_bytes = u64::from(batch.chosen) * 4;
        if batch.chosen > 0 {
            enc.copy_buffer_to_buffer(&self.chosen, 0, &self.ids, 0, chosen_bytes);
        }
        if !batch.ids.is_empty() {
            gpu.queue.write_buffer(&self.ids, chosen_bytes, bytemuck::cast_slice(batch.ids));
        }
        // The longest context any row sees picks the attention kernel.
        let context =
            batch.rows.iter().map(|r| r.pos + 1 - batch.seqs[r.seq as usize].kv_lo).max().expect("a step has rows");
        let attn_step = AttnStep { rows: n, context, tiles: self.plan.tiles };
        let attn = self.layers[0].attention.route(attn_step);
        self.last_attention = attn;
        let sampled = batch.outs.iter().any(|o| matches!(o.choice, Choice::Sample(_)));
        if sampled {
            self.sample_params.clear();
            self.sample_params.extend(batch.outs.iter().map(|o| match o.choice {
                Choice::Sample(p) => p,
                // Temperature 0: the row's argmax.
                Choice::Argmax | Choice::Logits => SampleParams::default(),
            }));
            self.sample.set(gpu, &self.sample_params);
        }
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            let mut prof = self.profiler.as_mut();
            if let Some(p) = prof.as_deref_mut() {
                p.begin();
            }
            let mut launches = 0;
            let mut mark =
                |pass: &mut wgpu::ComputePass<'_>, layer: Option<usize>, part: Part, kernel: &'static str| {
                    launches += 1;
                    if let Some(p) = prof.as_deref_mut() {
                        p.mark(pass, Span { layer, part, kernel });
                    }
                };
            mark(&mut pass, None, Part::Other, "embedding");
            self.embed.record(&mut pass, n);
            for (i, l) in self.layers.iter().enumerate() {
                let (at, attn_part, mlp) = (Some(i), Part::Attention, Part::Mlp);
                mark(&mut pass, at, attn_part, "qkv_rope");
                l.qkv.record_projection(&mut pass, n);
                if let Some(qk_norm) = l.qkv.qk_norm() {
                    mark(&mut pass, at, attn_part, "qk_norm");
                    qk_norm.record(&mut pass, n);
                }
                mark(&mut pass, at, attn_part, attn.kernel_name());
                l.attention.record(&mut pass, attn, attn_step);
                mark(&mut pass, at, attn_part, "matmul");
                l.o.record(&mut pass, n);
                if let Some([post_attn, _]) = &l.post_norms {
                    mark(&mut pass, at, attn_part, "rmsnorm");
                    post_attn.record(&mut pass, n);
                }
                mark(&mut pass, at, mlp, "swiglu");
                l.gate_up.record(&mut pass, n);
                mark(&mut pass, at, mlp, "matmul");
                l.down.record(&mut pass, n);
                if let Some([_, post_mlp]) = &l.post_norms {
                    mark(&mut pass, at, mlp, "rmsnorm");
                    post_mlp.record(&mut pass, n);
                }
            }
            if n_out > 0 {
                mark(&mut pass, None, Part::Other, "rmsnorm");
                self.final_norm.record(&mut pass, n_out);
                mark(&mut pass, None, Part::Other, "matmul");
                self.lm_head.record(&mut pass, n_out);
                if sampled {
                    mark(&mut pass, None, Part::Other, "sample");
                    self.sample.record(&mut pass, n_out);
                } else {
                    mark(&mut pass, None, Part::Other, "argmax");
                    self.argmax.record(&mut pass, n_out);
                }
            }
            self.last_launches = launches;
            if let Some(p) = prof {
                p.finish(&mut pass);
            }
        }
        if let Some(p) = &self.profiler {
            p.resolve(&mut enc);
        }
        let slot = self.next_slot;
        let vocab_bytes = self.cfg.vocab as u64 * 4;
        if n_out > 0 {
            enc.copy_buffer_to_buffer(&self.chosen, 0, &self.id_staging[slot], 0, u64::from(n_out) * 4);
        }
        let logits: Vec<bool> = batch.outs.iter().map(|o| o.choice == Choice::Logits).collect();
        for (i, _) in logits.iter().enumerate().filter(|(_, &l)| l) {
            let at = i as u64 * vocab_bytes;
            enc.copy_buffer_to_buffer(&self.logits, at, &self.logits_staging, at, vocab_bytes);
        }
        let submission = gpu.queue.submit([enc.finish()]);
        self.next_slot ^= 1;
        Ok(PendingStep { submission, slot, logits, _in_flight: self.in_flight.clone() })
    }

    /// Waits for a submitted step (and not for one queued behind it) and reads its result.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn finish(&mut self, gpu: &Gpu, p: PendingStep) -> Result<StepOutput> {
        pollster::block_on(self.finish_async(gpu, p))
    }

    /// `finish` as a future: what a page awaits (see `Gpu::map_read_after`).
    pub async fn finish_async(&mut self, gpu: &Gpu, p: PendingStep) -> Result<StepOutput> {
        let n_out = p.logits.len();
        let ids = match n_out {
            0 => {
                gpu.wait_for(Some(p.submission.clone())).await?;
                Vec::new()
            }
            _ => {
                let (staging, size) = (&self.id_staging[p.slot], n_out as u64 * 4);
                let bytes = gpu.map_read_after(staging, size, Some(p.submission.clone())).await?;
                bytemuck::cast_slice(&bytes).to_vec()
            }
        };
        let mut logits = vec![None; n_out];
        if let Some(last) = p.logits.iter().rposition(|&l| l) {
            let vocab = self.cfg.vocab;
            let size = ((last + 1) * vocab * 4) as u64;
            let bytes = gpu.map_read_after(&self.logits_staging, size, Some(p.submission)).await?;
            let all: &[f32] = bytemuck::cast_slice(&bytes);
            for (i, _) in p.logits.iter().enumerate().filter(|(_, &l)| l) {
                logits[i] = Some(all[i * vocab..(i + 1) * vocab].to_vec());
            }
        }
        if let Some(prof) = &self.profiler {
            self.timings = prof.read_async(gpu).await?;
        }
        Ok(StepOutput { ids, logits })
    }
}
