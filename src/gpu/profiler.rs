//! GPU time per layer and per kernel from timestamp queries written between dispatches inside
//! the compute pass (TIMESTAMP_QUERY_INSIDE_PASSES). Off, it records nothing and costs nothing.

use anyhow::Result;

use super::Gpu;

/// Which part of a decoder layer a dispatch belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Attention,
    Mlp,
    /// Outside the layers: embedding, final norm, LM head, sampling.
    Other,
}

/// What one timed dispatch was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Decoder layer, or `None` for work outside the layers.
    pub layer: Option<usize>,
    pub part: Part,
    pub kernel: &'static str,
}

/// One timed dispatch and its GPU time.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub span: Span,
    pub ns: f64,
}

pub struct Profiler {
    query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    staging: wgpu::Buffer,
    capacity: u32,
    period_ns: f64,
    spans: Vec<Span>,
}

impl Profiler {
    /// `None` when the adapter cannot write timestamps inside a compute pass.
    pub fn new(gpu: &Gpu, capacity: u32) -> Result<Option<Profiler>> {
        if !gpu.caps.timestamp_in_pass {
            return Ok(None);
        }
        let query_set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profiler"),
            ty: wgpu::QueryType::Timestamp,
            count: capacity,
        });
        let bytes = u64::from(capacity) * 8;
        let resolve =
            gpu.buffer("profiler.resolve", bytes, wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC)?;
        let staging =
            gpu.buffer("profiler.staging", bytes, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST)?;
        Ok(Some(Profiler {
            query_set,
            resolve,
            staging,
            capacity,
            period_ns: f64::from(gpu.queue.get_timestamp_period()),
            spans: Vec::new(),
        }))
    }

    /// Starts a new recording (one compute pass).
    pub fn begin(&mut self) {
        self.spans.clear();
    }

    /// Marks the start of the next dispatch (and the end of the previous one).
    pub fn mark(&mut self, pass: &mut wgpu::ComputePass<'_>, span: Span) {
        let i = self.spans.len() as u32;
        if i + 1 < self.capacity {
            pass.write_timestamp(&self.query_set, i);
            self.spans.push(span);
        }
    }

    /// Closes the last span; call before the pass ends.
    pub fn finish(&mut self, pass: &mut wgpu::ComputePass<'_>) {
        pass.write_timestamp(&self.query_set, self.spans.len() as u32);
    }

    /// Copies the timestamps out; call after the pass, in the same encoder.
    pub fn resolve(&self, enc: &mut wgpu::CommandEncoder) {
        let n = self.spans.len() as u32 + 1;
        enc.resolve_query_set(&self.query_set, 0..n, &self.resolve, 0);
        enc.copy_buffer_to_buffer(&self.resolve, 0, &self.staging, 0, u64::from(n) * 8);
    }

    /// After the submit: the GPU time of each marked dispatch.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read(&self, gpu: &Gpu) -> Result<Vec<Timing>> {
        pollster::block_on(self.read_async(gpu))
    }

    /// `read` as a future (see `Gpu::map_read_after`).
    pub async fn read_async(&self, gpu: &Gpu) -> Result<Vec<Timing>> {
        let n = self.spans.len() + 1;
        let bytes = gpu.map_read_after(&self.staging, n as u64 * 8, None).await?;
        let ts: &[u64] = bytemuck::cast_slice(&bytes);
        Ok(self
            .spans
            .iter()
            .enumerate()
            .map(|(i, s)| Timing { span: *s, ns: ts[i + 1].saturating_sub(ts[i]) as f64 * self.period_ns })
            .collect())
    }
}

/// GPU time of one kernel over a recording.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTotal {
    pub kernel: &'static str,
    pub calls: usize,
    pub total_ns: f64,
}

/// GPU time of one layer, split by part.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LayerTime {
    pub attention_ns: f64,
    pub mlp_ns: f64,
}

/// Per-kernel totals, in order of first appearance.
pub fn by_kernel(timings: &[Timing]) -> Vec<KernelTotal> {
    let mut out: Vec<KernelTotal> = Vec::new();
    for t in timings {
        match out.iter_mut().find(|k| k.kernel == t.span.kernel) {
            Some(k) => {
                k.calls += 1;
                k.total_ns += t.ns;
            }
            None => out.push(KernelTotal { kernel: t.span.kernel, calls: 1, total_ns: t.ns }),
        }
    }
    out
}

/// Per-layer times (index = layer) and the time outside the layers.
pub fn by_layer(timings: &[Timing]) -> (Vec<LayerTime>, f64) {
    let mut layers: Vec<LayerTime> = Vec::new();
    let mut other = 0.0;
    for t in timings {
        match (t.span.layer, t.span.part) {
            (Some(l), part) => {
                if layers.len() <= l {
                    layers.resize(l + 1, LayerTime::default());
                }
                match part {
                    Part::Attention => layers[l].attention_ns += t.ns,
                    _ => layers[l].mlp_ns += t.ns,
                }
            }
            (None, _) => other += t.ns,
        }
    }
    (layers, other)
}
