//! One forward step on the GPU, as in llama2.c's `forward`, but recorded: every buffer, pipeline
//! and bind group is made at load, so a step writes two small buffers (ids, step values),
//! records one compute pass, submits once and reads back the sampled id (or the logits).
//!
//! Per layer (5 dispatches): qkv_rope (RMSNorm on load + projection + bias + RoPE + KV write),
//! attention (plain or flash), o-projection added onto x, gate/up with RMSNorm on load + SwiGLU,
//! down-projection added onto x.
//! Then the final norm of the last row, the LM head and argmax.

use anyhow::{bail, Result};

use super::config::ModelConfig;
use super::loader::Weights;
use crate::gpu::profiler::{Part, Profiler, Span, Timing};
use crate::gpu::Gpu;
use crate::kv::KvCache;
use crate::ops::argmax::Argmax;
use crate::ops::attention::{Attention, AttnBuffers, AttnKind, DEFAULT_THRESHOLD};
use crate::ops::embedding::Embedding;
use crate::ops::linear::{InputNorm, LinearConfig};
use crate::ops::matmul::Matmul;
use crate::ops::qkv_rope::{HeadShape, QkvBuffers, QkvRope};
use crate::ops::rmsnorm::RmsNorm;
use crate::ops::sample::{Sample, SampleParams};
use crate::ops::swiglu::SwiGlu;
use crate::ops::Step;

#[derive(Clone, Debug)]
pub struct ForwardOptions {
    /// KV-cache positions (the context length).
    pub context: u32,
    /// Overwrite the oldest positions when the context is full instead of stopping.
    pub sliding_window: bool,
    /// Most tokens one step processes (prompts are split into chunks of this size).
    pub max_rows: u32,
    /// Contexts longer than this use the flash attention kernel.
    pub attn_threshold: u32,
    /// Matmul shapes and variants; `None` picks them for the adapter.
    pub linear: Option<LinearConfig>,
    /// Time every dispatch with timestamp queries (when the adapter can).
    pub profile: bool,
}

impl Default for ForwardOptions {
    fn default() -> Self {
        ForwardOptions {
            context: 4096,
            sliding_window: false,
            max_rows: 512,
            attn_threshold: DEFAULT_THRESHOLD,
            linear: None,
            profile: false,
        }
    }
}

/// How a step picks its token, and what it brings back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Readback {
    /// The argmax id only (4 bytes).
    Argmax,
    /// An id sampled on the GPU (4 bytes).
    Sample(SampleParams),
    /// The argmax id and the last row's logits (for sampling on the CPU).
    Logits,
}

/// Where a step's token ids come from.
#[derive(Clone, Copy, Debug)]
pub enum StepIds<'a> {
    /// From the host: a prompt, or a token chosen on the CPU.
    Host(&'a [u32]),
    /// The one id the previous step chose, copied on the GPU: a decode step that can be queued
    /// before that id has been read back, so the GPU never waits for the host between tokens.
    Chosen,
}

impl StepIds<'_> {
    /// Tokens the step runs.
    pub fn len(&self) -> u32 {
        match self {
            StepIds::Host(ids) => ids.len() as u32,
            StepIds::Chosen => 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A submitted step whose result has not been read yet (see `Forward::submit`).
pub struct PendingStep {
    submission: wgpu::SubmissionIndex,
    slot: usize,
    readback: Readback,
}

pub struct StepOutput {
    /// The argmax id, or the GPU-sampled id with `Readback::Sample`.
    pub id: u32,
    pub logits: Option<Vec<f32>>,
}

struct LayerOps {
    qkv: QkvRope,
    attention: Attention,
    o: Matmul,
    gate_up: SwiGlu,
    down: Matmul,
}

pub struct Forward {
    pub cfg: ModelConfig,
    pub weights: Weights,
    pub kv: KvCache,
    step: wgpu::Buffer,
    ids: wgpu::Buffer,
    logits: wgpu::Buffer,
    next_id: wgpu::Buffer,
    /// One per step in flight (at most two: `submit` queues a step behind the running one).
    id_staging: [wgpu::Buffer; 2],
    next_slot: usize,
    in_flight: usize,
    logits_staging: wgpu::Buffer,
    embed: Embedding,
    layers: Vec<LayerOps>,
    final_norm: RmsNorm,
    lm_head: Matmul,
    argmax: Argmax,
    sample: Sample,
    max_rows: u32,
    profiler: Option<Profiler>,
    /// GPU time of each dispatch of the last profiled submit.
    pub timings: Vec<Timing>,
    /// The attention kernel the last step used.
    pub last_attention: AttnKind,
    /// Kernel launches recorded in the last submit, one per op: a weight split over several
    /// bindings adds one dispatch per extra part, and a tensor-core prefill projection one for
    /// its `input_f16`, neither counted here (a decode step on an unsplit model has neither).
    pub last_launches: usize,
    /// Submits of the last step (one per chunk of `max_rows` tokens).
    pub last_submits: usize,
}

impl Forward {
    pub fn new(gpu: &Gpu, cfg: ModelConfig, weights: Weights, opts: &ForwardOptions) -> Result<Forward> {
        if opts.max_rows == 0 || opts.context == 0 {
            bail!("--context and the chunk size must be positive");
        }
        let (d, qn) = (cfg.hidden as u64, (cfg.heads * cfg.head_dim) as u64);
        let rows = u64::from(opts.max_rows);
        let heads = HeadShape {
            n_heads: cfg.heads as u32,
            n_kv_heads: cfg.kv_heads as u32,
            head_dim: cfg.head_dim as u32,
            cache_slots: opts.context,
        };
        let kv = KvCache::new(gpu, cfg.layers, heads.kv_dim(), opts.context, opts.sliding_window)?;
        let f32s = |label: &str, n: u64| gpu.storage(label, n * 4);
        let step = Step::buffer(gpu)?;
        let ids = f32s("ids", rows)?;
        let x = f32s("x", rows * d)?;
        let xn = f32s("xn", rows * d)?;
        let q = f32s("q", rows * qn)?;
        let o = f32s("o", rows * qn)?;
        let h = f32s("h", rows * cfg.intermediate as u64)?;
        let logits = f32s("logits", cfg.vocab as u64)?;
        let next_id = f32s("next_id", 1)?;
        let staging = || gpu.buffer("id_staging", 4, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        let id_staging = [staging()?, staging()?];
        let logits_staging = gpu.buffer(
            "logits_staging",
            cfg.vocab as u64 * 4,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        )?;
        let lin = &opts.linear.unwrap_or_else(|| LinearConfig::for_gpu(gpu));
        let eps = cfg.rms_eps;
        let mut layers = Vec::with_capacity(cfg.layers);
        for (w, (kc, vc)) in weights.layers.iter().zip(&kv.layers) {
            // Both norms of the layer are fused into the projections that read them.
            let qkv_bufs = QkvBuffers {
                step: &step,
                x: &x,
                bias: w.qkv_bias.as_ref(),
                inv_freq: &weights.inv_freq,
                q: &q,
                k_cache: kc,
                v_cache: vc,
                norm: Some(InputNorm { weight: &w.attn_norm, eps }),
            };
            let attn_bufs = AttnBuffers { step: &step, q: &q, k_cache: kc, v_cache: vc, o: &o };
            let mlp_norm = Some(InputNorm { weight: &w.mlp_norm, eps });
            layers.push(LayerOps {
                qkv: QkvRope::new(gpu, lin, &w.qkv, &heads, &qkv_bufs)?,
                attention: Attention::new(gpu, &heads, opts.attn_threshold, &attn_bufs)?,
                o: Matmul::new(gpu, lin, &w.o, &step, &o, &x, true, true)?,
                gate_up: SwiGlu::new(gpu, lin, &w.gate_up, &step, &x, &h, mlp_norm)?,
                down: Matmul::new(gpu, lin, &w.down, &step, &h, &x, true, true)?,
            });
        }
        let profiler = if opts.profile { Profiler::new(gpu, 16 * (cfg.layers as u32 + 1))? } else { None };
        Ok(Forward {
            embed: Embedding::new(gpu, &weights.embed, &step, &ids, &x)?,
            final_norm: RmsNorm::new(gpu, d as u32, eps, true, &step, &x, &weights.final_norm, &xn)?,
            lm_head: Matmul::new(gpu, lin, weights.lm_head(), &step, &xn, &logits, false, false)?,
            argmax: Argmax::new(gpu, cfg.vocab as u32, &logits, &next_id)?,
            sample: Sample::new(gpu, cfg.vocab as u32, 1, &logits, &next_id)?,
            layers,
            cfg,
            weights,
            kv,
            step,
            ids,
            logits,
            next_id,
            id_staging,
            next_slot: 0,
            in_flight: 0,
            logits_staging,
            max_rows: opts.max_rows,
            profiler,
            timings: Vec::new(),
            last_attention: AttnKind::Plain,
            last_launches: 0,
            last_submits: 0,
        })
    }

    /// Whether per-dispatch GPU timings are collected.
    pub fn profiling(&self) -> bool {
        self.profiler.is_some()
    }

    /// Runs `ids` through the model at the next positions (in chunks of at most `max_rows`) and
    /// returns the next token by argmax, plus the last row's logits if asked.
    pub fn step(&mut self, gpu: &Gpu, ids: &[u32], readback: Readback) -> Result<StepOutput> {
        let pending = self.submit(gpu, StepIds::Host(ids), readback)?;
        self.finish(gpu, pending)
    }

    /// Queues a step on the GPU without waiting for it; `finish` reads its result. One step may
    /// be queued behind another (decode with `StepIds::Chosen`), except with logits read back or
    /// while profiling.
    pub fn submit(&mut self, gpu: &Gpu, ids: StepIds, readback: Readback) -> Result<PendingStep> {
        if self.in_flight >= 2 || (self.in_flight == 1 && (readback == Readback::Logits || self.profiling())) {
            bail!("a step is already queued (a bug in the caller)");
        }
        if ids.is_empty() {
            bail!("a step needs at least one token");
        }
        if let StepIds::Host(ids) = ids {
            if let Some(&bad) = ids.iter().find(|&&i| i as usize >= self.cfg.vocab) {
                bail!("token id {bad} is out of range for the vocabulary of {} tokens", self.cfg.vocab);
            }
        }
        let chunks: Vec<StepIds> = match ids {
            StepIds::Host(ids) => ids.chunks(self.max_rows as usize).map(StepIds::Host).collect(),
            StepIds::Chosen => vec![StepIds::Chosen],
        };
        self.kv.place(ids.len())?; // the whole step must fit before anything is written
        self.last_submits = chunks.len();
        let slot = self.next_slot;
        let mut submission = None;
        for (i, chunk) in chunks.iter().enumerate() {
            submission = Some(self.submit_chunk(gpu, *chunk, (i + 1 == chunks.len()).then_some(slot), readback)?);
        }
        self.next_slot ^= 1;
        self.in_flight += 1;
        let submission = submission.expect("a step has at least one chunk");
        Ok(PendingStep { submission, slot, readback })
    }

    /// Waits for a submitted step (and not for one queued behind it) and reads its result.
    pub fn finish(&mut self, gpu: &Gpu, p: PendingStep) -> Result<StepOutput> {
        self.in_flight = self.in_flight.saturating_sub(1);
        let id_bytes = gpu.map_read_after(&self.id_staging[p.slot], 4, Some(p.submission.clone()))?;
        let id = u32::from_le_bytes(id_bytes[..4].try_into().unwrap());
        let logits = match p.readback {
            Readback::Logits => {
                let bytes = gpu.map_read_after(&self.logits_staging, self.cfg.vocab as u64 * 4, Some(p.submission))?;
                Some(bytemuck::cast_slice(&bytes).to_vec())
            }
            Readback::Argmax | Readback::Sample(_) => None,
        };
        if let Some(prof) = &self.profiler {
            self.timings = prof.read(gpu)?;
        }
        Ok(StepOutput { id, logits })
    }

    /// Records and submits one chunk; the last chunk of a step (`last_slot`) also runs the LM
    /// head and copies the chosen id to that read-back slot.
    fn submit_chunk(
        &mut self,
        gpu: &Gpu,
        ids: StepIds,
        last_slot: Option<usize>,
        readback: Readback,
    ) -> Result<wgpu::SubmissionIndex> {
        let last = last_slot.is_some();
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        match ids {
            StepIds::Host(ids) => gpu.queue.write_buffer(&self.ids, 0, bytemuck::cast_slice(ids)),
            StepIds::Chosen => enc.copy_buffer_to_buffer(&self.next_id, 0, &self.ids, 0, 4),
        }
        let n = ids.len();
        let place = self.kv.place(n)?;
        Step { n_tokens: n, start_pos: place.start_pos, kv_lo: place.kv_lo, pad: 0 }.write(gpu, &self.step);
        let attn = self.layers[0].attention.route(place.context(n));
        self.last_attention = attn;
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
                l.qkv.record(&mut pass, n);
                mark(&mut pass, at, attn_part, attn.kernel_name());
                l.attention.record(&mut pass, attn, n, place.context(n));
                mark(&mut pass, at, attn_part, "matmul");
                l.o.record(&mut pass, n);
                mark(&mut pass, at, mlp, "swiglu");
                l.gate_up.record(&mut pass, n);
                mark(&mut pass, at, mlp, "matmul");
                l.down.record(&mut pass, n);
            }
            if last {
                mark(&mut pass, None, Part::Other, "rmsnorm");
                self.final_norm.record(&mut pass, n);
                mark(&mut pass, None, Part::Other, "matmul");
                self.lm_head.record(&mut pass, 1);
                if let Readback::Sample(p) = readback {
                    self.sample.set(gpu, &[p]);
                    mark(&mut pass, None, Part::Other, "sample");
                    self.sample.record(&mut pass, 1);
                } else {
                    mark(&mut pass, None, Part::Other, "argmax");
                    self.argmax.record(&mut pass);
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
        if let Some(slot) = last_slot {
            enc.copy_buffer_to_buffer(&self.next_id, 0, &self.id_staging[slot], 0, 4);
            if readback == Readback::Logits {
                enc.copy_buffer_to_buffer(&self.logits, 0, &self.logits_staging, 0, self.cfg.vocab as u64 * 4);
            }
        }
        let submission = gpu.queue.submit([enc.finish()]);
        self.kv.advance(n);
        Ok(submission)
    }
}
