//! The KV cache: allocated once at load, one K and one V buffer per layer, used as a ring of
//! `slots` positions. Position p lives in slot p % slots; positions keep counting (RoPE) when
//! the ring wraps. Without a sliding window, running past the ring is an error.

use anyhow::{bail, Result};

use crate::gpu::Gpu;

pub struct KvCache {
    pub slots: u32,
    pub sliding_window: bool,
    pub layers: Vec<(wgpu::Buffer, wgpu::Buffer)>,
    /// Positions written so far (the next token's position).
    next_pos: u32,
}

/// Where a step of `n` tokens lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub start_pos: u32,
    /// Oldest position still in the ring once the step's tokens are written.
    pub kv_lo: u32,
}

impl Placement {
    /// Positions the step's last token attends to.
    pub fn context(&self, n: u32) -> u32 {
        self.start_pos + n - self.kv_lo
    }
}

impl KvCache {
    pub fn new(gpu: &Gpu, n_layers: usize, kv_dim: u32, slots: u32, sliding_window: bool) -> Result<KvCache> {
        let bytes = u64::from(kv_dim) * u64::from(slots) * 4;
        if bytes > gpu.caps.max_binding {
            bail!("a KV-cache layer of {slots} positions needs {bytes} bytes, over this adapter's binding limit of {}; lower --context", gpu.caps.max_binding);
        }
        let layers = (0..n_layers)
            .map(|_| Ok((gpu.storage("k_cache", bytes)?, gpu.storage("v_cache", bytes)?)))
            .collect::<Result<_>>()?;
        Ok(KvCache { slots, sliding_window, layers, next_pos: 0 })
    }

    /// Checks that `n` more tokens fit and says where they go.
    pub fn place(&self, n: u32) -> Result<Placement> {
        let end = self.next_pos + n;
        if n > self.slots || (end > self.slots && !self.sliding_window) {
            bail!(
                "{end} tokens do not fit the context of {} tokens (raise --context, or allow --sliding-window)",
                self.slots
            );
        }
        Ok(Placement { start_pos: self.next_pos, kv_lo: end.saturating_sub(self.slots) })
    }

    pub fn advance(&mut self, n: u32) {
        self.next_pos += n;
    }

    /// Takes back the last `n` positions (a step queued for a token that ended the generation);
    /// their slots are rewritten by whatever runs there next.
    pub fn retreat(&mut self, n: u32) {
        self.next_pos = self.next_pos.saturating_sub(n);
    }

    pub fn position(&self) -> u32 {
        self.next_pos
    }

    /// Positions currently held.
    pub fn used(&self) -> u32 {
        self.next_pos.min(self.slots)
    }

    /// Forgets everything (a new conversation); no memory is touched.
    pub fn reset(&mut self) {
        self.next_pos = 0;
    }

    /// Rewinds to `pos` (keeps the first `pos` positions, e.g. a shared chat prefix).
    pub fn truncate(&mut self, pos: u32) {
        if pos < self.next_pos && self.next_pos <= self.slots {
            self.next_pos = pos;
        } else if pos < self.next_pos {
            self.next_pos = 0; // wrapped: the prefix was overwritten
        }
    }
}
