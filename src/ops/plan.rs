//! The step plan (`shaders/lib/plan.wgsl`), not a kernel but what every kernel that needs to
//! know whose token a row is reads: per row its sequence and position, per sequence of the step
//! its oldest held position and block table, and the rows that produce logits. Built on the
//! host as one array of u32 words and written with one copy before each submit, into a buffer
//! sized at load for the largest step.

use anyhow::{ensure, Result};

use crate::gpu::shader::Defs;
use crate::gpu::Gpu;

/// The largest step a plan buffer holds, and the KV cache's block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanLayout {
    pub max_rows: u32,
    pub max_seqs: u32,
    /// Rows producing logits in one step (at most one per sequence).
    pub max_outs: u32,
    /// Blocks one sequence may hold.
    pub max_blocks: u32,
    /// Positions per KV block.
    pub block: u32,
    /// Rows per query tile (`Plan::tiles`, what attention_coop's workgroups take); 0: the plan
    /// lists no tiles.
    pub tile_rows: u32,
}

impl PlanLayout {
    fn seqs_at(&self) -> u32 {
        2 * self.max_rows
    }

    fn outs_at(&self) -> u32 {
        self.seqs_at() + 4 * self.max_seqs
    }

    fn tiles_at(&self) -> u32 {
        self.outs_at() + self.max_outs
    }

    /// Each row is in one tile: at most max_rows tiles of two words.
    fn tables_at(&self) -> u32 {
        self.tiles_at() + if self.tile_rows > 0 { 2 * self.max_rows } else { 0 }
    }

    pub fn words(&self) -> u32 {
        self.tables_at() + self.max_seqs * self.max_blocks
    }

    /// `d` with `lib/plan` and its constants.
    pub fn defs(&self, d: Defs) -> Defs {
        d.u32("SEQS_AT", self.seqs_at())
            .u32("OUTS_AT", self.outs_at())
            .u32("TABLES_AT", self.tables_at())
            .u32("TILES_AT", self.tiles_at())
            .u32("BLOCK", self.block)
            .piece("lib/plan")
    }
}

/// Block-table entries a plan holds at most (64 MiB of them).
const MAX_TABLE_WORDS: u64 = 1 << 24;

/// One row (token) of a step: which of the step's sequences, at which absolute position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanRow {
    pub seq: u32,
    pub pos: u32,
}

/// One sequence of a step: the oldest position its rows attend to (the sliding window) and its
/// blocks, in position order (a ring slot is one block that positions wrap around in).
#[derive(Clone, Copy, Debug)]
pub struct PlanSeq<'a> {
    pub kv_lo: u32,
    pub blocks: &'a [u32],
}

/// The plan's GPU buffer and the host copy it is built in (no allocation per step).
#[derive(Debug)]
pub struct Plan {
    pub layout: PlanLayout,
    pub buffer: wgpu::Buffer,
    /// Query tiles in the last step written (0 where the layout lists none).
    pub tiles: u32,
    words: Vec<u32>,
}

impl Plan {
    pub fn new(gpu: &Gpu, layout: PlanLayout) -> Result<Plan> {
        // The block tables (every sequence's longest) dominate; in u64, as u32 offsets would wrap.
        let tables = u64::from(layout.max_seqs) * u64::from(layout.max_blocks);
        ensure!(
            tables <= MAX_TABLE_WORDS,
            "{} sequences of up to {} KV blocks: too many block-table entries for one step (lower --parallel or --context, or raise --kv-block)",
            layout.max_seqs,
            layout.max_blocks
        );
        let buffer = gpu.storage("plan", u64::from(layout.words()) * 4)?;
        Ok(Plan { layout, buffer, tiles: 0, words: vec![0; layout.words() as usize] })
    }

    /// The plan of one sequence whose keys and values are one block of `context` positions (a
    /// ring slot), `rows` rows at positions `start_pos..` attending back to `kv_lo`, the last
    /// row producing logits: what kernel tests and benchmarks run.
    pub fn one_sequence(
        gpu: &Gpu,
        context: u32,
        rows: u32,
        start_pos: u32,
        kv_lo: u32,
        tile_rows: u32,
    ) -> Result<Plan> {
        let layout = PlanLayout { max_rows: rows, max_seqs: 1, max_outs: 1, max_blocks: 1, block: context, tile_rows };
        let mut plan = Plan::new(gpu, layout)?;
        let rows: Vec<PlanRow> = (0..rows).map(|i| PlanRow { seq: 0, pos: start_pos + i }).collect();
        plan.write(gpu, &rows, &[PlanSeq { kv_lo, blocks: &[0] }], &[rows.len() as u32 - 1])?;
        Ok(plan)
    }

    /// Writes a step's plan; `outs` are the rows whose logits the step computes, in output order.
    pub fn write(&mut self, gpu: &Gpu, rows: &[PlanRow], seqs: &[PlanSeq], outs: &[u32]) -> Result<()> {
        let l = self.layout;
        ensure!(rows.len() <= l.max_rows as usize, "{} rows in a step of at most {}", rows.len(), l.max_rows);
        ensure!(seqs.len() <= l.max_seqs as usize, "{} sequences in a step of at most {}", seqs.len(), l.max_seqs);
        ensure!(outs.len() <= l.max_outs as usize, "{} outputs in a step of at most {}", outs.len(), l.max_outs);
        for (i, r) in rows.iter().enumerate() {
            ensure!((r.seq as usize) < seqs.len(), "row {i} names sequence {} of {}", r.seq, seqs.len());
            self.words[2 * i] = r.seq;
            self.words[2 * i + 1] = r.pos;
        }
        let mut table = 0;
        for (i, s) in seqs.iter().enumerate() {
            ensure!(
                !s.blocks.is_empty() && s.blocks.len() <= l.max_blocks as usize,
                "a sequence holds {} blocks (1 to {})",
                s.blocks.len(),
                l.max_blocks
            );
            let at = (l.seqs_at() as usize) + 4 * i;
            self.words[at..at + 3].copy_from_slice(&[s.kv_lo, table, s.blocks.len() as u32]);
            let t = (l.tables_at() + table) as usize;
            self.words[t..t + s.blocks.len()].copy_from_slice(s.blocks);
            table += s.blocks.len() as u32;
        }
        for (i, &r) in outs.iter().enumerate() {
            ensure!((r as usize) < rows.len(), "output {i} names row {r} of {}", rows.len());
            self.words[l.outs_at() as usize + i] = r;
        }
        self.tiles = 0;
        if l.tile_rows > 0 {
            for (first, n) in query_tiles(rows, l.tile_rows) {
                let at = (l.tiles_at() + 2 * self.tiles) as usize;
                self.words[at..at + 2].copy_from_slice(&[first, n]);
                self.tiles += 1;
            }
        }
        // Only the parts in use: rows, then sequences to the end of the step's tables.
        let used = (l.tables_at() + table) as usize;
        gpu.queue.write_buffer(&self.buffer, 0, bytemuck::cast_slice(&self.words[..used]));
        Ok(())
    }
}

/// The step's rows cut into query tiles (first row, row count): runs of consecutive rows of one
/// sequence at consecutive positions, at most `tile_rows` each.
pub fn query_tiles(rows: &[PlanRow], tile_rows: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    let mut first = 0;
    (1..=rows.len()).filter_map(move |i| {
        let run = i - first;
        let next_continues = i < rows.len()
            && rows[i].seq == rows[first].seq
            && rows[i].pos == rows[first].pos + run as u32
            && run < tile_rows as usize;
        if next_continues {
            return None;
        }
        let tile = (first as u32, run as u32);
        first = i;
        Some(tile)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_tiles_break_at_sequences_gaps_and_size() {
        let row = |seq, pos| PlanRow { seq, pos };
        // Two decode rows, a 5-row prompt chunk, a row of the same sequence out of order.
        let mut rows = vec![row(0, 40), row(1, 7)];
        rows.extend((10..15).map(|p| row(2, p)));
        rows.push(row(2, 3));
        let tiles: Vec<_> = query_tiles(&rows, 4).collect();
        assert_eq!(tiles, [(0, 1), (1, 1), (2, 4), (6, 1), (7, 1)]);
        assert_eq!(query_tiles(&rows[2..7], 16).collect::<Vec<_>>(), [(0, 5)]);
        assert_eq!(query_tiles(&[], 16).count(), 0);
    }
}
