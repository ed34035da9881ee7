//! KV memory: one K and one V buffer per layer, allocated once at load and divided into blocks
//! of `block` positions, which sequences hold through block tables (`SeqKv`). Two layouts of
//! the same memory, read by the same kernels through the step plan (`ops/plan.rs`):
//! - ring (edge devices, a single stream): one block of `context` positions per sequence slot
//!   (`--parallel` slots); a sequence's positions wrap around in its block, which is the
//!   sliding window when it is allowed.
//! - paged (servers): a pool of small blocks (`--kv-block`, 16 positions) handed to sequences
//!   as they grow and returned the moment they end; full blocks are shared by sequences whose
//!   tokens up to them are the same (`prefix.rs`), so a shared prefix runs once.

mod prefix;
mod sequence;

use std::collections::{HashMap, VecDeque};

use anyhow::{bail, ensure, Result};

pub use sequence::SeqKv;

use crate::gpu::Gpu;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KvLayout {
    #[default]
    Ring,
    Paged,
}

/// How K and V values are stored: f32, or f16 (half the memory and the bytes attention reads,
/// each value rounded to f16's 11 significant bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KvType {
    #[default]
    F32,
    F16,
}

impl KvType {
    /// Bytes of one value.
    pub fn bytes(self) -> u64 {
        match self {
            KvType::F32 => 4,
            KvType::F16 => 2,
        }
    }

    /// The piece the kernels that write K and V store their pairs through.
    pub fn pair_lib(self) -> &'static str {
        match self {
            KvType::F32 => "lib/kv_pair_f32",
            KvType::F16 => "lib/kv_pair_f16",
        }
    }
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
    /// Blocks in the pool (paged); `None`: from `memory`, else enough for `parallel` sequences
    /// of `context`.
    pub blocks: Option<u32>,
    /// Bytes of K and V memory over all layers (paged), when `blocks` is not given.
    pub memory: Option<u64>,
    /// Ring: overwrite a sequence's oldest positions when its context is full instead of stopping.
    pub sliding_window: bool,
    /// How values are stored.
    pub dtype: KvType,
}

impl Default for KvOptions {
    fn default() -> Self {
        KvOptions {
            layout: KvLayout::Ring,
            context: 4096,
            parallel: 1,
            block: 16,
            blocks: None,
            memory: None,
            sliding_window: false,
            dtype: KvType::F32,
        }
    }
}

impl KvOptions {
    /// (positions per block, blocks in the memory, most blocks one sequence holds), for a
    /// model whose K and V of one position take `position_bytes` over all layers.
    fn geometry(&self, position_bytes: u64) -> Result<(u32, u32, u32)> {
        Ok(match self.layout {
            KvLayout::Ring => (self.context, self.parallel, 1),
            KvLayout::Paged => {
                let per_seq = self.context.div_ceil(self.block);
                let blocks = match (self.blocks, self.memory) {
                    (Some(b), _) => u64::from(b),
                    (None, Some(m)) => m / position_bytes.saturating_mul(u64::from(self.block)).max(1),
                    (None, None) => u64::from(per_seq) * u64::from(self.parallel),
                };
                let blocks = u32::try_from(blocks).map_err(|_| {
                    anyhow::anyhow!(
                        "a KV pool of {blocks} blocks is too large (lower --kv-memory, --parallel or --context)"
                    )
                })?;
                (self.block, blocks, per_seq)
            }
        })
    }
}

/// Bytes of one layer's K (or V) memory of `n_blocks` blocks of `block` positions, each
/// `position_bytes`, within the adapter's binding limit `max_binding`. In u128: --context,
/// --parallel and --kv-block reach 2^32 each.
fn layer_bytes(position_bytes: u64, block: u32, n_blocks: u32, max_binding: u64) -> Result<u64> {
    let bytes = u128::from(position_bytes) * u128::from(block) * u128::from(n_blocks);
    match u64::try_from(bytes) {
        Ok(b) if b <= max_binding => Ok(b),
        _ => bail!(
            "a KV-cache layer of {n_blocks} blocks of {block} positions needs {bytes} bytes, over this adapter's binding limit of {max_binding}; lower --context, --parallel or --kv-memory"
        ),
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
    /// Blocks no sequence holds, least recently released first (the first to be reused, so
    /// indexed prefixes live as long as the pool allows).
    free: VecDeque<u32>,
    refs: Vec<u32>,
    prefixes: prefix::PrefixIndex,
}

impl KvCache {
    pub fn new(gpu: &Gpu, n_layers: usize, kv_dim: u32, opts: KvOptions) -> Result<KvCache> {
        ensure!(opts.context > 0 && opts.parallel > 0, "--context and --parallel must be positive");
        ensure!(opts.block > 0, "--kv-block must be positive");
        ensure!(
            !(opts.sliding_window && opts.layout == KvLayout::Paged),
            "a sliding window needs --kv ring (each sequence's positions wrap in its own slot)"
        );
        ensure!(
            opts.layout == KvLayout::Paged || (opts.memory.is_none() && opts.blocks.is_none()),
            "--kv-memory sizes the paged pool: it needs --kv paged (a ring allocates --parallel slots of --context)"
        );
        let value = opts.dtype.bytes();
        let (block, n_blocks, max_blocks) = opts.geometry(2 * u64::from(kv_dim) * value * n_layers as u64)?;
        ensure!(n_blocks > 0, "the KV pool has no blocks (raise --kv-memory)");
        let bytes = layer_bytes(u64::from(kv_dim) * value, block, n_blocks, gpu.caps.max_binding)?;
        let layers = (0..n_layers)
            .map(|_| Ok((gpu.storage("k_cache", bytes)?, gpu.storage("v_cache", bytes)?)))
            .collect::<Result<_>>()?;
        let free = (0..n_blocks).collect();
        let refs = vec![0; n_blocks as usize];
        Ok(KvCache { opts, layers, block, n_blocks, max_blocks, free, refs, prefixes: Default::default() })
    }

    /// Blocks not held by any sequence.
    pub fn free_blocks(&self) -> u32 {
        self.free.len() as u32
    }

    /// The most positions one sequence may hold: the context, or a paged pool's positions
    /// where it has fewer.
    pub fn sequence_positions(&self) -> u32 {
        match self.opts.layout {
            KvLayout::Ring => self.opts.context,
            KvLayout::Paged => self.opts.context.min(self.n_blocks.saturating_mul(self.block)),
        }
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

    /// Blocks `n` more positions of `seq` need beyond the free ones: what other sequences would
    /// have to give back (0 where the pool is not what stops it, or nothing does).
    pub fn blocks_missing(&self, seq: &SeqKv, n: u32) -> u32 {
        match self.opts.layout {
            KvLayout::Ring => 0,
            KvLayout::Paged => self.blocks_to_take(seq, n).saturating_sub(self.free_blocks()),
        }
    }

    /// Blocks that releasing all of `seqs` would free: those no other sequence shares.
    pub fn blocks_freed_by<'a>(&self, seqs: impl Iterator<Item = &'a SeqKv>) -> u32 {
        let mut holders: HashMap<u32, u32> = HashMap::new();
        for b in seqs.flat_map(|s| &s.blocks) {
            *holders.entry(*b).or_default() += 1;
        }
        holders.iter().filter(|&(&b, &n)| self.refs[b as usize] == n).count() as u32
    }

    /// `n` more positions of `seq` would need more blocks than the whole pool has.
    pub fn exceeds_pool(&self, seq: &SeqKv, n: u32) -> bool {
        self.opts.layout == KvLayout::Paged && (seq.len() + n).div_ceil(self.block) > self.n_blocks
    }

    /// New blocks `n` more positions of `seq` take (paged).
    fn blocks_to_take(&self, seq: &SeqKv, n: u32) -> u32 {
        (seq.len() + n).div_ceil(self.block).saturating_sub(seq.blocks.len() as u32)
    }

    /// Returns every block `seq` holds (shared ones when their last holder lets go).
    pub fn release(&mut self, seq: &mut SeqKv) {
        for b in seq.blocks.drain(..) {
            self.refs[b as usize] -= 1;
            if self.refs[b as usize] == 0 {
                self.free.push_back(b);
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
            // A sliding window takes any length, but not more new positions at once than it holds.
            let hint =
                if self.opts.sliding_window { "raise --context" } else { "raise --context, or allow --sliding-window" };
            let what = if end > context && self.opts.sliding_window { n } else { end };
            bail!("{what} tokens do not fit the context of {context} tokens ({hint})");
        }
        if self.opts.layout == KvLayout::Paged {
            let need = self.blocks_to_take(seq, n);
            ensure!(need <= self.free_blocks(), "the KV pool has {} free blocks, {need} needed", self.free_blocks());
        }
        Ok(Placement { start_pos: seq.len(), kv_lo: end.saturating_sub(context) })
    }

    fn take(&mut self) -> Option<u32> {
        let b = self.free.pop_front()?;
        self.prefixes.forget(b);
        self.refs[b as usize] = 1;
        Some(b)
    }

    /// Gives an empty paged sequence the indexed blocks that hold the longest whole-block
    /// prefix of `tokens` (leaving at least one token to run); returns the positions shared.
    pub fn share_prefix(&mut self, seq: &mut SeqKv, tokens: &[u32]) -> u32 {
        if self.opts.layout != KvLayout::Paged || !seq.is_empty() {
            return 0;
        }
        let block = self.block as usize;
        let whole = tokens.len().saturating_sub(1) / block;
        for chunk in tokens.chunks(block).take(whole) {
            let key = prefix::key(seq.prefix_key, chunk);
            let Some(b) = self.prefixes.get(key) else { break };
            if self.refs[b as usize] == 0 {
                self.free.retain(|&f| f != b);
            }
            self.refs[b as usize] += 1;
            seq.blocks.push(b);
            seq.prefix_key = key;
            seq.indexed += 1;
            seq.advance(self.block);
        }
        seq.len()
    }

    /// Indexes the blocks of a paged `seq` that are full since the last call and whose tokens
    /// are all known (the first `known`); `token(i)` is its i-th token.
    pub fn index_full_blocks(&mut self, seq: &mut SeqKv, known: usize, token: impl Fn(usize) -> u32) {
        if self.opts.layout != KvLayout::Paged {
            return;
        }
        let block = self.block as usize;
        while (seq.indexed as usize + 1) * block <= (seq.len() as usize).min(known) {
            let i = seq.indexed as usize;
            let tokens: Vec<u32> = (i * block..(i + 1) * block).map(&token).collect();
            seq.prefix_key = prefix::key(seq.prefix_key, &tokens);
            self.prefixes.insert(seq.prefix_key, seq.blocks[i]);
            seq.indexed += 1;
        }
    }
}

/// Where a step's positions of one sequence land.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub start_pos: u32,
    /// Oldest position the sequence holds once the step's tokens are written.
    pub kv_lo: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_past_u32_blocks_is_an_error_not_a_wrap() {
        let paged = KvOptions { layout: KvLayout::Paged, context: 1 << 20, parallel: 1 << 20, ..Default::default() };
        let e = paged.geometry(1024).unwrap_err();
        assert!(format!("{e}").contains("too large"), "{e}");
        let from_memory = KvOptions { memory: Some(u64::MAX), ..paged };
        assert!(from_memory.geometry(1).is_err());
        let fits = KvOptions { parallel: 4, ..paged };
        assert_eq!(fits.geometry(1024).unwrap(), (16, 4 << 16, 1 << 16));
    }

    /// A layer's bytes past u64 (`--context 2147483648 --parallel 33554432` wrapped to 0 and
    /// passed the limit, leaving an empty cache) are over the binding limit like any other.
    #[test]
    fn a_layer_past_u64_bytes_is_over_the_binding_limit() {
        let e = layer_bytes(896 * 4, 1 << 31, 1 << 25, 1 << 31).unwrap_err();
        assert!(format!("{e}").contains("binding limit"), "{e}");
        assert!(layer_bytes(896 * 4, 1 << 10, 1 << 10, 1 << 31).is_err());
        assert_eq!(layer_bytes(896 * 4, 4096, 1, 1 << 31).unwrap(), 896 * 4 * 4096);
    }
}
