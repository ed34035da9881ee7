//! KV memory: one K and one V buffer per layer, allocated once at load and divided into blocks
//! of `block` positions, which sequences hold through block tables (`SeqKv`). Two layouts of
//! the same memory, read by the same kernels through the step plan (`ops/plan.rs`):
//! - ring (edge devices, a single stream): one block of `context` positions per sequence slot
//!   (`--parallel` slots); a sequence's positions wrap around in its block, which is the
//!   sliding window when it is allowed.
//! - paged (servers): a pool of small blocks (`--kv-block`, 16 positions) handed to sequences
//!   as they grow and returned the moment they end.

mod sequence;

use anyhow::{bail, ensure, Result};

pub use sequence::SeqKv;

use crate::gpu::Gpu;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KvLayout {
    #[default]
    Ring,
    Paged,
}

/// How the KV memory is laid out and how much of it there is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvOptions {
    pub layout: KvLayout,
    /// Most positions one sequence holds (the context length).
    pub context: u32,
    /// Most sequences at once (ring: the slots allocated).
    pub parallel: u32,
    /// Positions per block (paged).
    pub block: u32,
    /// Blocks in the pool (paged); `None`: enough for `parallel` sequences of `context`.
    pub blocks: Option<u32>,
    /// Ring: overwrite a sequence's oldest positions when its context is full instead of stopping.
    pub sliding_window: bool,
}

impl Default for KvOptions {
    fn default() -> Self {
        KvOptions { layout: KvLayout::Ring, context: 4096, parallel: 1, block: 16, blocks: None, sliding_window: false }
    }
}

impl KvOptions {
    /// (positions per block, blocks in the memory, most blocks one sequence holds).
    fn geometry(&self) -> (u32, u32, u32) {
        match self.layout {
            KvLayout::Ring => (self.context, self.parallel, 1),
            KvLayout::Paged => {
                let per_seq = self.context.div_ceil(self.block);
                (self.block, self.blocks.unwrap_or(per_seq * self.parallel), per_seq)
            }
        }
    }
}

pub struct KvCache {
    pub opts: KvOptions,
    pub layers: Vec<(wgpu::Buffer, wgpu::Buffer)>,
    /// Positions per block.
    pub block: u32,
    /// Blocks of the memory.
    pub n_blocks: u32,
    /// Most blocks one sequence holds.
    pub max_blocks: u32,
    free: Vec<u32>,
    refs: Vec<u32>,
}

impl KvCache {
    pub fn new(gpu: &Gpu, n_layers: usize, kv_dim: u32, opts: KvOptions) -> Result<KvCache> {
        ensure!(opts.context > 0 && opts.parallel > 0, "--context and --parallel must be positive");
        ensure!(opts.block > 0, "--kv-block must be positive");
        ensure!(
            !(opts.sliding_window && opts.layout == KvLayout::Paged),
            "a sliding window needs --kv ring (each sequence's positions wrap in its own slot)"
        );
        let (block, n_blocks, max_blocks) = opts.geometry();
        ensure!(n_blocks > 0, "the KV pool has no blocks (raise --kv-memory)");
        let bytes = u64::from(kv_dim) * u64::from(block) * u64::from(n_blocks) * 4;
        if bytes > gpu.caps.max_binding {
            bail!(
                "a KV-cache layer of {n_blocks} blocks of {block} positions needs {bytes} bytes, over this adapter's binding limit of {}; lower --context, --parallel or --kv-memory",
                gpu.caps.max_binding
            );
        }
        let layers = (0..n_layers)
            .map(|_| Ok((gpu.storage("k_cache", bytes)?, gpu.storage("v_cache", bytes)?)))
            .collect::<Result<_>>()?;
        // Handed out lowest first.
        let free = (0..n_blocks).rev().collect();
        Ok(KvCache { opts, layers, block, n_blocks, max_blocks, free, refs: vec![0; n_blocks as usize] })
    }

    /// Blocks not held by any sequence.
    pub fn free_blocks(&self) -> u32 {
        self.free.len() as u32
    }

    /// Blocks held by sequences.
    pub fn used_blocks(&self) -> u32 {
        self.n_blocks - self.free_blocks()
    }

    /// A new sequence: a whole slot in a ring (`None` when every slot is taken), an empty
    /// table in a pool.
    pub fn admit(&mut self) -> Option<SeqKv> {
        let mut seq = SeqKv::default();
        if self.opts.layout == KvLayout::Ring {
            seq.blocks.push(self.take()?);
        }
        Some(seq)
    }

    /// Returns every block `seq` holds (shared ones when their last holder lets go).
    pub fn release(&mut self, seq: &mut SeqKv) {
        for b in seq.blocks.drain(..) {
            self.refs[b as usize] -= 1;
            if self.refs[b as usize] == 0 {
                self.free.push(b);
            }
        }
        seq.reset();
    }

    /// Checks that `n` more positions fit `seq` and takes the blocks they need; on an error
    /// nothing changes. Returns the placement of the new positions.
    pub fn grow(&mut self, seq: &mut SeqKv, n: u32) -> Result<Placement> {
        let place = self.place(seq, n)?;
        if self.opts.layout == KvLayout::Paged {
            let need = (seq.len() + n).div_ceil(self.block) as usize;
            while seq.blocks.len() < need {
                let b = self.take().expect("place() counted the free blocks");
                seq.blocks.push(b);
            }
        }
        Ok(place)
    }

    /// Where `n` more positions of `seq` would go, if they fit.
    pub fn place(&self, seq: &SeqKv, n: u32) -> Result<Placement> {
        let context = self.opts.context;
        let end = seq.len() + n;
        if n > context || (end > context && !self.opts.sliding_window) {
            bail!(
                "{end} tokens do not fit the context of {context} tokens (raise --context, or allow --sliding-window)"
            );
        }
        if self.opts.layout == KvLayout::Paged {
            let need = end.div_ceil(self.block).saturating_sub(seq.blocks.len() as u32);
            ensure!(need <= self.free_blocks(), "the KV pool has {} free blocks, {need} needed", self.free_blocks());
        }
        Ok(Placement { start_pos: seq.len(), kv_lo: end.saturating_sub(context) })
    }

    fn take(&mut self) -> Option<u32> {
        let b = self.free.pop()?;
        self.refs[b as usize] = 1;
        Some(b)
    }
}

/// Where a step's positions of one sequence land.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub start_pos: u32,
    /// Oldest position the sequence holds once the step's tokens are written.
    pub kv_lo: u32,
}

impl Placement {
    /// Positions the sequence's last token of `n` attends to.
    pub fn context(&self, n: u32) -> u32 {
        self.start_pos + n - self.kv_lo
    }
}
