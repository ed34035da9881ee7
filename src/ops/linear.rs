//! The core shared by every kernel that multiplies activations by a weight (matmul, qkv_rope,
//! swiglu): GEMV variants for decode (one row; 2, 4 or 8 rows, each weight read once for all
//! of them, 9 to 16 rows on the 8-row variant twice over) and a prefill variant (the tensor-core core where the adapter has
//! cooperative matrices, else the tiled core), chosen per step by row count (`Core::for_rows`).
//! On CPU adapters with 8-lane subgroups and 64-bit integers every variant of a weight of whole
//! 32-value blocks is the rows core (lib/linear_gemv_rows) on 1 to 8 rows per workgroup.
//! The kernels differ only in what they do with each output pair.

use anyhow::Result;

use super::dequant_f16::DequantF16;
use super::input_f16::InputF16;
use super::tune::{self, GemvTable};
use super::weight::{WeightLayout, WeightPart};
use super::{grid, groups, Weight, WeightType};
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Caps, Gpu, Kernel};

/// Tile shape of the tiled (prefill) core. Threads per workgroup = wg_x * wg_y; each thread
/// computes a (tm / wg_y) x (tn / wg_x) micro-tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiles {
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub wg_x: u32,
    pub wg_y: u32,
}

impl Default for Tiles {
    fn default() -> Self {
        Tiles { tm: 64, tn: 64, tk: 16, wg_x: 16, wg_y: 16 }
    }
}

/// The tiled core's shape on CPU adapters: 64 threads, each an 8 x 16 micro-tile. A workgroup
/// runs as a loop over its invocations there, so fewer invocations with more work each (and
/// fewer to switch between at a barrier) win: lavapipe, SmolLM2 Q4_1, a 64-token prefill 26 ->
/// 45 tok/s (docs/PERF.md).
const CPU_TILES: Tiles = Tiles { tm: 64, tn: 128, tk: 16, wg_x: 8, wg_y: 8 };

impl Tiles {
    /// Kernel developers' knob: `WGINFER_TILES` = "tm,tn,tk,wg_x,wg_y" replaces the shape (to
    /// measure shapes on an adapter; `check` still applies).
    fn or_env(self) -> Tiles {
        let shape = shape_knob("WGINFER_TILES", "tm,tn,tk,wg_x,wg_y", |n| match *n {
            [tm, tn, tk, wg_x, wg_y] => Some(Tiles { tm, tn, tk, wg_x, wg_y }),
            _ => None,
        });
        shape.unwrap_or(self)
    }

    pub fn check(&self) -> Result<()> {
        let ok = self.tm.is_multiple_of(self.wg_y)
            && self.tn.is_multiple_of(self.wg_x)
            && (self.tn / self.wg_x).is_multiple_of(2)
            && self.tk.is_multiple_of(4)
            && self.wg_x * self.wg_y <= 256
            && self.wg_x * self.wg_y >= self.tm
            && (self.tm * self.tk / 4).is_multiple_of(self.wg_x * self.wg_y)
            && (self.tn * self.tk / 4).is_multiple_of(self.wg_x * self.wg_y);
        anyhow::ensure!(
            ok,
            "tile config {self:?} is invalid (tn/wg_x even, tk a multiple of 4, tm to 256 threads, tiles of x and W whole loads per thread)"
        );
        Ok(())
    }
}

/// Shape of the GEMV (decode) core: `lanes` threads share each weight row, every lane group
/// computes `rows` consecutive outputs, `threads` per workgroup. One lane per row is the core
/// for CPU adapters (lib/linear_gemv_rows): a workgroup of one 8-lane subgroup, each lane
/// `rows` whole rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GemvShape {
    pub lanes: u32,
    pub rows: u32,
    pub threads: u32,
}

impl GemvShape {
    /// The default for a `[n, k]` weight of type `ty`. On GPUs, from `wginfer tune` on an H100
    /// and `bench e2e` with its shapes (docs/PERF.md, twenty-fourth session): two outputs per
    /// lane group; lane groups of 128, and 256 for long rows (k >= 4096) and for f16 and f32
    /// gate/up weights (8192 <= n < 32768) of k >= 2048, where shorter rows and block types take
    /// 128 in workgroups of 128; an LM head's lane groups of 128 for f16 and f32, 16 for block
    /// types, or Q4_K's long runs (`long_runs`) at 32 lanes, four outputs, 64 threads. On a CPU
    /// adapter lane groups of 8 with two outputs each: the sums stay in one SIMD-wide subgroup
    /// (shuffles, no barrier) and each lane gets a long k loop (lavapipe, `wginfer tune --quick`:
    /// SmolLM2's 3072x576 Q4_1 6.5 -> 0.86 ms), or where the rows core fits (`rows_core`: 8-lane
    /// subgroups, whole 32-value blocks) a lane per row (3072x576 Q4_1 -> 0.29-0.54 ms,
    /// docs/PERF.md).
    pub fn heuristic(k: u32, n: u32, ty: WeightType, cpu: bool, rows_core: bool) -> GemvShape {
        if cpu {
            return if rows_core { ROWS_CORE } else { GemvShape { lanes: 8, rows: 2, threads: 256 } };
        }
        if long_runs(ty, n).is_some() {
            return GemvShape { lanes: 32, rows: 4, threads: 64 };
        }
        let (lanes, threads) = match () {
            _ if n >= LM_HEAD_ROWS && ty.is_quantized() => (16, 256),
            _ if n >= LM_HEAD_ROWS => (128, 256),
            // Gate/up weights: Qwen2.5-0.5B's 9728x896, Llama 3.2 1B's 16384x2048 (f16 with 256
            // lanes: decode 813 -> 827 tok/s; Q4_K with 128: 845 against 815).
            _ if n >= 8192 && (k < 2048 || ty.is_quantized()) => (128, 128),
            _ if n >= 8192 || k >= 4096 => (256, 256),
            _ => (128, 256),
        };
        GemvShape { lanes, rows: 2, threads }
    }

    /// The default for the batched core's variant built for `rows` rows, from the H200 sweep
    /// in docs/PERF.md (`bench kernels --sweep`, rows-per-step table): an LM head's many
    /// outputs want 16-lane groups, a layer's wide weights 32, each with four outputs per group
    /// (one load of x serves four weight rows) past two rows; a long k wants 256 lanes, the rest
    /// 128, two outputs each.
    pub fn heuristic_batch(k: u32, n: u32, rows: u32) -> GemvShape {
        let outputs = if rows >= 4 { 4 } else { 2 };
        // The 8-row variant's layer weights take smaller workgroups: 8 normalized rows of
        // 9728x896 18.9 -> 18.0 us with 64 threads, 1152x896 7.4 -> 6.7 with 128 (docs/PERF.md).
        let eight = rows >= GEMV_WIDE_ROWS;
        let (lanes, outputs, threads) = match () {
            _ if n >= 32768 => (16, outputs, 256),
            _ if n >= 8192 => (32, 4, if eight { 64 } else { 256 }),
            _ if k >= 4096 => (256, 2, 256),
            _ => (128, 2, if eight { 128 } else { 256 }),
        };
        GemvShape { lanes, rows: outputs, threads }
    }

    /// Outputs per workgroup.
    pub fn workgroup_rows(&self) -> u32 {
        self.threads / self.lanes * self.rows
    }

    pub fn check(&self) -> Result<()> {
        let ok = self.lanes.is_power_of_two()
            && self.threads.is_power_of_two()
            && self.lanes <= self.threads
            && (8..=256).contains(&self.threads)
            && matches!(self.rows, 1 | 2 | 4)
            && self.workgroup_rows().is_multiple_of(2)
            && self.workgroup_rows() <= 256;
        anyhow::ensure!(
            ok,
            "GEMV shape {self:?} is invalid (powers of two, lanes <= threads, 8 <= threads <= 256, rows 1, 2 or 4, an even number of outputs per workgroup, at most 256)"
        );
        Ok(())
    }
}

/// The rows core's shape (lib/linear_gemv_rows): one lane per row, two rows each, one 8-lane
/// subgroup per workgroup.
const ROWS_CORE: GemvShape = GemvShape { lanes: 1, rows: 2, threads: ROWS_CORE_LANES };
/// The subgroup size the rows core is written for: its lanes hand each other a 32-value block
/// of x, a vec4 each.
const ROWS_CORE_LANES: u32 = 8;
/// The rows core's shape on steps of several rows (batched decode, prefill): four rows per
/// lane, so each block of x a workgroup loads and shuffles serves 32 weight rows. SmolLM2's
/// 64-token prefill on lavapipe: 10% faster than two rows per lane (docs/PERF.md).
const ROWS_CORE_MULTI: GemvShape = GemvShape { lanes: 1, rows: 4, threads: ROWS_CORE_LANES };
/// The most rows of x a rows-core workgroup takes (prefill steps, and batched decode steps of
/// more): each weight block it takes apart serves that many rows, whose sums and x values then
/// share the CPU's 32 vector registers with it. SmolLM2's 64-row steps on lavapipe against 8
/// rows: 20% faster; against 2: 31% (docs/PERF.md).
const ROWS_CORE_XROWS: u32 = 4;

/// How a core's workgroups cover a step's outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Grid {
    /// `outputs` consecutive outputs of `rows` consecutive rows each: outputs over x and y (2-D
    /// past 65535 workgroups), rows over z (the GEMV cores and the rows core).
    Outputs { outputs: u32, rows: u32 },
    /// Tiles of `rows` x `cols` outputs: columns over x, rows over y (the tiled and tensor-core
    /// cores).
    Tiles { rows: u32, cols: u32 },
}

impl Grid {
    /// Workgroup counts for `rows` rows of `n` outputs.
    fn workgroups(self, n: u32, rows: u32) -> [u32; 3] {
        match self {
            Grid::Outputs { outputs, rows: per } => {
                let [x, y, _] = grid(groups(n, outputs));
                [x, y, groups(rows, per)]
            }
            Grid::Tiles { rows: tm, cols: tn } => [groups(n, tn), groups(rows, tm), 1],
        }
    }

    /// Rows of x one workgroup covers.
    fn rows(self) -> u32 {
        match self {
            Grid::Outputs { rows, .. } | Grid::Tiles { rows, .. } => rows,
        }
    }
}

/// Which core runs a weight's prefill steps (`Core::Prefill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PrefillCore {
    /// Tensor cores (lib/linear_coop), with this subgroup size.
    Coop(u32),
    /// The rows core, ROWS_CORE_XROWS rows per workgroup (CPU adapters).
    Rows,
    /// The tiled core (lib/linear_tiled).
    Tiled,
}

impl std::fmt::Display for GemvShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}l{}r{}t", self.lanes, self.rows, self.threads)
    }
}

/// The rows of x of the widest GEMV variant, which reads each weight once for all of them
/// (llama.cpp's vector kernels also stop at 8 rows).
pub const GEMV_WIDE_ROWS: u32 = 8;

/// Weights of at least this many rows are an LM head's (or a tied embedding's) for the GEMV
/// heuristics: far more rows than a layer's weights, read from memory once a token.
const LM_HEAD_ROWS: u32 = 32768;

/// The piece of a `[n, _]` weight of type `ty` whose long runs the one-row GEMV core reads
/// (`WeightType::long_run_lib`), if it takes them: on LM heads only. H100, Llama 3.2 1B's Q4_K
/// shapes, `wginfer tune` (docs/PERF.md): the 128256x2048 head 109 us against 150 for the best
/// 8-value shape; the layers' weights were faster in tune's loop (which keeps them in L2) and
/// slower end to end (decode 782 against 811 tok/s, each core with its tuned shapes).
fn long_runs(ty: WeightType, n: u32) -> Option<&'static str> {
    ty.long_run_lib().filter(|_| n >= LM_HEAD_ROWS)
}

/// Up to this many rows (tokens) per step use a GEMV core; more use the prefill core. Past
/// GEMV_WIDE_ROWS the widest variant runs one grid z per GEMV_WIDE_ROWS rows, each reading the
/// weight again: on the H200, 16 normalized rows of 896x4864 took 20.5 us against 44.0 on the
/// split core, 9728x896 26.0 against 32.3 (B=16 of the batch sweep 4,653 -> 6,760 tok/s); at 32
/// rows 9728x896 took 45.1 against 33.2 (docs/PERF.md).
pub const GEMV_MAX_ROWS: u32 = 2 * GEMV_WIDE_ROWS;

/// On tensor-core adapters, weights of at most GEMV_REACH_VALUES values keep the widest GEMV
/// core up to GEMV_REACH_ROWS rows: re-read once per GEMV_WIDE_ROWS rows, a weight this small
/// stays in L2, while the tensor-core cores' few tiles leave most of the GPU idle. H100, batch
/// sweep decode with Qwen2.5-0.5B's qkv (1.03M values) and o (0.80M) on GEMV up to 32 rows,
/// gate/up (8.7M) and down (4.4M) not: B=24 8,788-8,867 -> 9,129-9,206 tok/s, B=32
/// 11,815-11,848 -> 12,043-12,076 (docs/PERF.md). `WGINFER_GEMV_REACH=ROWS,VALUES` overrides both
/// (ROWS at least GEMV_MAX_ROWS).
pub const GEMV_REACH_ROWS: u32 = 4 * GEMV_WIDE_ROWS;
const GEMV_REACH_VALUES: u32 = 1 << 21;

fn gemv_reach() -> (u32, u32) {
    static S: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *S.get_or_init(|| {
        let knob = shape_knob("WGINFER_GEMV_REACH", "ROWS,VALUES with ROWS >= 16", |v| match *v {
            [rows, values] if rows >= GEMV_MAX_ROWS => Some((rows, values)),
            _ => None,
        });
        knob.unwrap_or((GEMV_REACH_ROWS, GEMV_REACH_VALUES))
    })
}

/// Kernel developers' knob: `WGINFER_GEMV_BATCH` = "NxK=LANES,ROWS,THREADS ..." (entries apart
/// by spaces), the 8-row variant's shape for `[N, K]` weights, for sweeps of whole steps:
/// `bench kernels --sweep` times a kernel in a chain of itself, and shapes it found faster there
/// ran the step slower (docs/PERF.md, thirty-sixth session).
fn gemv_batch_knob() -> &'static [((u32, u32), GemvShape)] {
    static S: std::sync::OnceLock<Vec<((u32, u32), GemvShape)>> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let entry = |e: &str| {
            let (w, g) = e.split_once('=')?;
            let (n, k) = w.split_once('x')?;
            let &[lanes, rows, threads] = &numbers(g)?[..] else { return None };
            Some(((n.parse().ok()?, k.parse().ok()?), GemvShape { lanes, rows, threads }))
        };
        let parse = |v: &str| v.split_whitespace().map(entry).collect();
        knob("WGINFER_GEMV_BATCH", "NxK=LANES,ROWS,THREADS ...", parse).unwrap_or_default()
    })
}

/// The rows each variant of the batched GEMV core is built for; a step runs the smallest that
/// holds its rows. A variant handles every one of its rows without a condition on the step's
/// count (rows past it repeat the last row, and are never stored), so the loads of all rows
/// issue together: on the H200 a 2-row step of the 2-row variant took 26 us per layer against 37
/// in the 8-row core with per-row conditions (docs/PERF.md).
pub const GEMV_BATCH_ROWS: [u32; 3] = [2, 4, GEMV_WIDE_ROWS];

/// Which core of a linear kernel runs a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Core {
    /// The GEMV core built for one row (a single sequence's decode): it never reads the row
    /// count, nor keeps sums for rows that do not exist.
    Gemv,
    /// The GEMV core built for this many rows (one of GEMV_BATCH_ROWS): steps of 2 to that many
    /// rows (batched decode), or to GEMV_MAX_ROWS on the widest.
    GemvBatch(u32),
    /// The tensor-core, tiled or (CPU adapters) rows core: more rows (prefill, large batches).
    Prefill,
    /// The tensor-core core with narrower tiles and k split over more subgroups: more
    /// workgroups, each with a shorter loop, for steps of 17 to 256 rows on weights of fewer than
    /// SPLIT_MAX_N outputs where the prefill tiles would leave most of the GPU idle
    /// (`LinearKernels::core_for` chooses it by `split_runs` where the adapter has tensor cores).
    Split,
    /// The prefill core over an f16 copy of a quantized weight, written by `dequant_f16` just
    /// before it (`LinearConfig::dequant_once`): for steps of more than one tile of rows, where
    /// the prefill core would dequantize each value once per tile.
    PrefillCopy,
}

/// Weights with this many outputs or more keep the prefill core: it has workgroups enough.
pub const SPLIT_MAX_N: u32 = 16384;
/// Steps of up to this many rows take `Core::Split` where it exists: the prefill core's 64-row
/// tiles would be mostly empty (9728x896 at 32 rows on the H200: 32 us against 41).
const SPLIT_ALWAYS_ROWS: u32 = 32;
/// Past SPLIT_ALWAYS_ROWS, up to SPLIT_MAX_ROWS rows, `Core::Split` runs a step where the prefill
/// core would have fewer workgroups than this (the H200's 132 SMs), unless that core splits k
/// (PREFILL_SHARE_SLICES). Measured before the prefill core split k: 896x4864 at 128 rows (28
/// workgroups) 42 us against 145, 2048x2048 at 128 rows (64) 40 against 64; at 256 rows (128)
/// 73 against 63; 9728x896 at 64 rows (152) 50 against 41 (docs/PERF.md).
const SPLIT_BELOW_WORKGROUPS: u32 = 128;
const SPLIT_MAX_ROWS: u32 = 256;
/// Such a step still takes the prefill core where that core splits k (`prefill_split_k`) into
/// shares of this many slices or more: on an H100 (docs/PERF.md) 896x4864 at 128 / 256 rows
/// took 40.9 / 49.9 us there against 41.8 / 76.1 on `Core::Split` (q4_0 over its f16 copy 46.0 /
/// 52.7 against 75.9 / 131.9), 2048x8192 at 64 / 128 rows 56.3 / 80.0 against 66.8 / 123.0
/// (q4_0 65.6 / 101.9 against 127.2 / 221.1); shorter shares lose (896x4864 at 64 rows, 18
/// splits of 4 slices: 43.3 against 32.6; the 896-column weights, 3 splits of 4 or 5). Not
/// measured at the rule's edge: 2048x2048 at 128 rows, 4 splits of 8 slices, now the prefill
/// core's.
const PREFILL_SHARE_SLICES: u32 = 8;

/// `Core::Split` spreads a step's k slices over the grid's z until its tiles and splits make
/// about this many workgroups (2 per SM of the H200), on weights whose rows hold at least
/// SPLIT_K_MIN_SLICES slices per split: with few tiles each workgroup's loop is a chain of
/// dependent loads, while every split adds its tile's sums through atomics. On the H200 the
/// 896x4864 weight at 16 / 32 / 64 rows took 24.1 / 26.1 / 32.6 us against 42.3 / 42.6 / 42.2
/// (9, 9, 4 splits), 2048x8192 at 16 / 32 rows 46.7 / 47.7 against 66.3 / 67.2; two splits
/// (896x4864 at 128 rows) 47.7 against 42.3, aiming for 528 workgroups 896x4864 at 16 rows
/// 33.1, and splitting the 896-column weights made them slower (896x896 at 8 rows 13.7 -> 15.1
/// us; docs/PERF.md). `WGINFER_SPLIT_K` = n replaces the count (1: no split).
const SPLIT_K_WORKGROUPS: u32 = 264;
const SPLIT_K_MIN_SLICES: u32 = 4;
const SPLIT_K_MIN_SPLITS: u32 = 3;

/// The staged prefill core's split of k over the grid's z (lib/split_k), for steps of few
/// tiles: a 512-row step of the 896x4864 down projection has 112 tiles, one workgroup on most
/// SMs, each a chain of 76 k slices waiting on memory. The best of four targets on the H200
/// (docs/PERF.md): 264 workgroups (2 per SM; the down and o projections in 2 splits at 512
/// rows) gave Qwen2.5-0.5B prefill 512 60,555 tok/s against 51,500 unsplit, 56,454 at 528 and
/// 57,269 at 1056. `WGINFER_PREFILL_SPLIT_K` = "target[,min_slices]" replaces the rule (1: no
/// split).
const PREFILL_SPLIT: SplitRule = SplitRule { target: 264, min_slices: 4, min_splits: 2 };

fn split_k_workgroups() -> u32 {
    static S: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *S.get_or_init(|| {
        shape_knob("WGINFER_SPLIT_K", "a workgroup count", |n| n.first().copied().filter(|&w| w > 0))
            .unwrap_or(SPLIT_K_WORKGROUPS)
    })
}

fn prefill_split_rule() -> SplitRule {
    static S: std::sync::OnceLock<SplitRule> = std::sync::OnceLock::new();
    *S.get_or_init(|| {
        let rule = shape_knob("WGINFER_PREFILL_SPLIT_K", "target[,min_slices]", |n| match *n {
            [target] if target > 0 => Some(SplitRule { target, ..PREFILL_SPLIT }),
            [target, min_slices] if target > 0 && min_slices > 0 => {
                Some(SplitRule { target, min_slices, ..PREFILL_SPLIT })
            }
            _ => None,
        });
        rule.unwrap_or(PREFILL_SPLIT)
    })
}

/// The tile counters at the start of the split-K sums buffer (lib/split_k): one per output tile
/// of the largest `Core::Split` step, more than a split prefill step has (its tiles x splits
/// stay within its workgroup target, at least twice its tiles).
fn split_counters() -> u32 {
    let (tm, tn) = coop_split().tile();
    groups(SPLIT_MAX_N, tn) * groups(SPLIT_MAX_ROWS, tm)
}

/// The k splits of a tensor-core core's steps: for about `target` workgroups in all, each with
/// `min_slices` k slices or more, none below `min_splits`.
#[derive(Clone, Copy, Debug)]
struct SplitRule {
    target: u32,
    min_slices: u32,
    min_splits: u32,
}

/// How many workgroups share the k of each tile of `core`'s shape for a `[n, k]` weight at
/// `rows` rows, by `rule`. Past one split, tiles x splits never exceeds the rule's target, which
/// sizes the sums buffer, and the tiles never exceed its counters (a knob's large target).
fn k_splits(core: CoopShape, rule: SplitRule, n: u32, k: u32, rows: u32) -> u32 {
    let SplitRule { target, min_slices, min_splits } = rule;
    let (tm, tn) = core.tile();
    let tiles = groups(n, tn) * groups(rows, tm);
    let splits = (target / tiles).min(groups(k, core.tk) / min_slices);
    if splits < min_splits || tiles > split_counters() {
        1
    } else {
        splits
    }
}

/// `Core::Split`'s k splits.
fn split_k(n: u32, k: u32, rows: u32) -> u32 {
    let rule =
        SplitRule { target: split_k_workgroups(), min_slices: SPLIT_K_MIN_SLICES, min_splits: SPLIT_K_MIN_SPLITS };
    k_splits(coop_split(), rule, n, k, rows)
}

/// The staged prefill core's k splits.
fn prefill_split_k(n: u32, k: u32, rows: u32) -> u32 {
    k_splits(coop_prefill(), prefill_split_rule(), n, k, rows)
}

/// Bytes of the split-K counters and sums (binding 14), for either tensor-core core.
fn split_sums_bytes() -> u64 {
    let tile_values = |c: CoopShape| u64::from(c.tile().0 * c.tile().1);
    let split = u64::from(split_k_workgroups()) * tile_values(coop_split());
    let prefill = u64::from(prefill_split_rule().target) * tile_values(coop_prefill());
    4 * (u64::from(split_counters()) + split.max(prefill))
}

/// Whether a step of `rows` rows (past the GEMV cores) of a `[n, k]` weight runs on
/// `Core::Split` rather than the prefill core, where it has both.
fn split_runs(n: u32, k: u32, rows: u32) -> bool {
    let core = coop_prefill();
    let (tm, tn) = core.tile();
    let prefill_workgroups = groups(n, tn) * groups(rows, tm);
    let splits = prefill_split_k(n, k, rows);
    let long_shares = splits > 1 && groups(k, core.tk) / splits >= PREFILL_SHARE_SLICES;
    rows <= SPLIT_ALWAYS_ROWS || (rows <= SPLIT_MAX_ROWS && prefill_workgroups < SPLIT_BELOW_WORKGROUPS && !long_shares)
}

impl Core {
    /// A GEMV core: steps of up to GEMV_MAX_ROWS rows, on every linear kernel alike.
    pub fn is_gemv(self) -> bool {
        matches!(self, Core::Gemv | Core::GemvBatch(_))
    }

    /// The core for a step of `rows` rows.
    pub fn for_rows(rows: u32) -> Core {
        match rows {
            0 | 1 => Core::Gemv,
            r if r <= GEMV_MAX_ROWS => {
                Core::GemvBatch(GEMV_BATCH_ROWS.into_iter().find(|&b| r <= b).unwrap_or(GEMV_WIDE_ROWS))
            }
            _ => Core::Prefill,
        }
    }
}

/// Shapes and variants of the linear cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearConfig {
    pub tiles: Tiles,
    /// One GEMV shape for every weight; `None` takes the tuned shape, else the heuristic's.
    pub gemv: Option<GemvShape>,
    /// The adapter's subgroup sizes (smallest, largest) when GEMV rows may be reduced with
    /// subgroup operations; `None` reduces through workgroup memory.
    pub subgroups: Option<(u32, u32)>,
    /// The subgroup size when prefill matmuls run on tensor cores (lib/linear_coop) instead of
    /// the tiled core.
    pub coop: Option<u32>,
    /// `Core::Split` exists (tensor cores, and workgroup memory for its shape).
    pub coop_split: bool,
    /// Quantized weights' prefill-core steps of several tiles of rows first write the weight
    /// part as f16 rows into a scratch buffer of at most this many bytes (`dequant_f16`), which
    /// the core then reads as an f16 weight (`Core::PrefillCopy`): each value dequantized once a
    /// step instead of once per tile of rows (`dequant_once_for` says which weights).
    pub dequant_once: Option<u64>,
    /// A CPU adapter: its own GEMV heuristic (`GemvShape::heuristic`).
    pub cpu: bool,
    /// Shaders may use 64-bit integers (the rows core reads weights and x through them).
    pub int64: bool,
    /// GEMV shapes `wginfer tune` measured on this adapter (see ops/tune.rs); weights not in it
    /// get the heuristic.
    pub tuned: Option<&'static GemvTable>,
}

/// A workgroup shape of a tensor-core core: sgm x sgn blocks of 32 x 32 outputs, each shared by
/// sgk subgroups that split k between them, in k slices of tk. `staged`: lib/linear_coop (x and
/// W staged through workgroup memory), else lib/linear_coop_split (fragments straight from
/// storage; only quantized weights are staged, dequantized).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CoopShape {
    sgm: u32,
    sgn: u32,
    sgk: u32,
    tk: u32,
    staged: bool,
}

/// The prefill core's: the best of six shapes on the H200 for Qwen2.5-0.5B prefill at 512 and
/// 2048 tokens (docs/PERF.md).
const COOP_PREFILL: CoopShape = CoopShape { sgm: 2, sgn: 2, sgk: 1, tk: 64, staged: true };
/// `Core::Split`'s: 32 x 32 tiles whose k is shared by 8 subgroups. At 8 to 64 rows on the H200
/// it takes 43 us on the 896x4864 weight, against 136 in the direct core's prefill shape and 84
/// in the staged core's best split shape (docs/PERF.md).
const COOP_SPLIT: CoopShape = CoopShape { sgm: 1, sgn: 1, sgk: 8, tk: 128, staged: false };

impl CoopShape {
    /// (rows, columns) of a workgroup's output tile.
    fn tile(&self) -> (u32, u32) {
        (32 * self.sgm, 32 * self.sgn)
    }

    fn subgroups(&self) -> u32 {
        self.sgm * self.sgn * self.sgk
    }

    /// Workgroup memory. Staged: the x and W rows of a k slice (f16, rows tk + 8 apart) and one
    /// f32 fragment per subgroup. Direct: a W slice (quantized weights) and the f32 output tile
    /// of each k share.
    fn workgroup_bytes(&self) -> u32 {
        let (tm, tn) = self.tile();
        match self.staged {
            true => (tm + tn) * (self.tk + 8) * 2 + self.subgroups() * 256 * 4,
            false => tn * (self.tk + 8) * 2 + self.sgk * tm * tn * 4,
        }
    }

    /// Kernel developers' knob: `WGINFER_COOP_PREFILL` / `WGINFER_COOP_SPLIT` = "sgm,sgn,sgk,tk"
    /// replaces the built-in shape of that core (to measure shapes on a device).
    fn or_env(self, var: &str) -> CoopShape {
        let shape = shape_knob(var, "sgm,sgn,sgk,tk (tk a multiple of 16 sgk)", |n| match *n {
            [sgm, sgn, sgk, tk] if sgm * sgn * sgk > 0 && tk % (16 * sgk) == 0 => {
                Some(CoopShape { sgm, sgn, sgk, tk, ..self })
            }
            _ => None,
        });
        shape.unwrap_or(self)
    }
}

/// A shape from the kernel developers' knob `var` (comma-separated numbers that `shape` takes),
/// or `None` when it is unset or not such a shape (said on stderr, naming `form`).
pub(crate) fn shape_knob<T>(var: &str, form: &str, shape: impl Fn(&[u32]) -> Option<T>) -> Option<T> {
    knob(var, form, |v| numbers(v).and_then(|n| shape(&n)))
}

/// A kernel developers' knob `var` as `parse` reads it: None where it is unset, or (with a
/// warning naming `form`) where `parse` refuses it.
fn knob<T>(var: &str, form: &str, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
    let v = std::env::var(var).ok()?;
    let s = parse(&v);
    if s.is_none() {
        eprintln!("warning: {var}={v:?} is not {form}; ignored");
    }
    s
}

/// Comma-separated numbers.
fn numbers(v: &str) -> Option<Vec<u32>> {
    v.split(',').map(|x| x.trim().parse().ok()).collect()
}

/// A kernel developers' switch `var` = 1 or 0 (`shape_knob`'s warning for anything else).
pub(crate) fn switch_knob(var: &str) -> Option<bool> {
    shape_knob(var, "0 or 1", |n| match *n {
        [b @ (0 | 1)] => Some(b == 1),
        _ => None,
    })
}

fn coop_prefill() -> CoopShape {
    static S: std::sync::OnceLock<CoopShape> = std::sync::OnceLock::new();
    *S.get_or_init(|| COOP_PREFILL.or_env("WGINFER_COOP_PREFILL"))
}

/// The f16 copy of one weight part (`LinearConfig::dequant_once`) is at most this large: a
/// 1.5B model's largest part (its 2 x 8960 gate/up rows of 1536) takes 55 MB, Llama 3 8B's 235
/// MB, Qwen2.5 7B's 272 MB, 14B's 283 MB; larger parts keep dequantizing per tile.
const DEQUANT_SCRATCH_MAX: u64 = 320 << 20;

/// Kernel developers' knob: `WGINFER_DEQUANT_ONCE` = 1 or 0 turns `LinearConfig::dequant_once`
/// on or off on any adapter with f16 shaders (by default: those with tensor cores).
fn dequant_once_knob() -> Option<bool> {
    static K: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *K.get_or_init(|| switch_knob("WGINFER_DEQUANT_ONCE"))
}

fn coop_split() -> CoopShape {
    static S: std::sync::OnceLock<CoopShape> = std::sync::OnceLock::new();
    *S.get_or_init(|| COOP_SPLIT.or_env("WGINFER_COOP_SPLIT"))
}

impl LinearConfig {
    /// The heuristic choice for an adapter: subgroup reductions where subgroups exist.
    pub fn for_adapter(caps: &Caps) -> LinearConfig {
        let fits = |c: CoopShape| caps.coop_matrix && c.workgroup_bytes() <= caps.max_workgroup_storage;
        let coop = fits(coop_prefill()).then_some(caps.max_subgroup_size);
        let coop_split = coop.is_some() && fits(coop_split());
        let tiles = if caps.cpu { CPU_TILES } else { Tiles::default() }.or_env();
        let dequant_once = (caps.shader_f16 && dequant_once_knob().unwrap_or(coop.is_some()))
            .then_some(caps.max_binding.min(DEQUANT_SCRATCH_MAX));
        LinearConfig { tiles, coop, coop_split, dequant_once, ..Self::of_caps(caps) }
    }

    /// What the adapter alone decides (which cores exist), without reading any knob: enough
    /// for `has_rows_core`, hence for how weights are stored (`WeightLayout::linear`).
    pub(crate) fn of_caps(caps: &Caps) -> LinearConfig {
        let subgroups = caps.subgroup.then_some((caps.min_subgroup_size, caps.max_subgroup_size));
        LinearConfig { subgroups, cpu: caps.cpu, int64: caps.int64, ..Default::default() }
    }

    /// The subgroup size if a `[n, k]` weight of this type is multiplied on tensor cores: every
    /// type but f32, whose user asked for f32 arithmetic (the tensor-core path rounds x and W to
    /// f16), and shapes of whole 16 x 16 fragments.
    pub fn coop_for(&self, weight: WeightType, k: u32, n: u32) -> Option<u32> {
        self.coop.filter(|_| weight != WeightType::F32 && k.is_multiple_of(16) && n.is_multiple_of(16))
    }

    /// Steps of up to this many rows of a `[n, k]` weight of this type run a GEMV core:
    /// GEMV_MAX_ROWS, or GEMV_REACH_ROWS on a small weight whose other cores are tensor cores.
    pub fn gemv_rows_for(&self, weight: WeightType, k: u32, n: u32) -> u32 {
        let (rows, values) = gemv_reach();
        let small = u64::from(n) * u64::from(k) <= u64::from(values);
        if small && self.coop_for(weight, k, n).is_some() {
            rows
        } else {
            GEMV_MAX_ROWS
        }
    }

    /// A `[n, k]` part of this type has `Core::PrefillCopy` (`dequant_once`):
    /// quantized types (f32 and f16 are read as they are), steps over the step's tokens (the LM
    /// head's few output rows are not worth its hundreds of MB of f16), rows stored row after row,
    /// the tensor-core or tiled prefill core (the rows core of CPU adapters reads each block once
    /// for 8 rows already), and an f16 copy within the scratch limit.
    pub fn dequant_once_for(&self, weight: WeightType, s: &LinearShape) -> bool {
        let quantized = !matches!(weight, WeightType::F32 | WeightType::F16);
        let fits = self.dequant_once.is_some_and(|max| u64::from(s.n) * u64::from(s.k) * 2 <= max);
        let core = matches!(self.prefill_core(weight, s), PrefillCore::Coop(_) | PrefillCore::Tiled);
        quantized && fits && core && s.rows == Rows::Tokens && s.layout == WeightLayout::Rows
    }

    /// The subgroup size if a weight gets `Core::Split`.
    fn split_for(&self, weight: WeightType, s: &LinearShape) -> Option<u32> {
        self.coop_for(weight, s.k, s.n).filter(|_| self.coop_split && s.n < SPLIT_MAX_N)
    }

    /// The core a weight's prefill steps run: tensor cores where they exist, else the rows core
    /// where it fits (on lavapipe it reads each weight block once for 8 rows, where the tiled
    /// core's workgroup-memory tiles cost a load per lane and value), else the tiled core.
    fn prefill_core(&self, weight: WeightType, s: &LinearShape) -> PrefillCore {
        match self.coop_for(weight, s.k, s.n) {
            Some(sg) => PrefillCore::Coop(sg),
            None if self.rows_core_fits(s.k) => PrefillCore::Rows,
            None => PrefillCore::Tiled,
        }
    }

    /// How the prefill core's workgroups cover a step.
    fn prefill_grid(&self, weight: WeightType, s: &LinearShape) -> Grid {
        match self.prefill_core(weight, s) {
            PrefillCore::Coop(_) => {
                let (rows, cols) = coop_prefill().tile();
                Grid::Tiles { rows, cols }
            }
            PrefillCore::Rows => Grid::Outputs { outputs: ROWS_CORE_MULTI.workgroup_rows(), rows: ROWS_CORE_XROWS },
            PrefillCore::Tiled => Grid::Tiles { rows: self.tiles.tm, cols: self.tiles.tn },
        }
    }

    /// How the batched GEMV variant built for `rows` rows covers a step: the rows core's shape
    /// and at most ROWS_CORE_XROWS rows per workgroup where it fits (it runs every step of a
    /// weight), else `gemv_batch_shape`'s.
    fn batch_grid(&self, k: u32, n: u32, rows: u32) -> Grid {
        match self.rows_core_fits(k) {
            true => Grid::Outputs { outputs: ROWS_CORE_MULTI.workgroup_rows(), rows: rows.min(ROWS_CORE_XROWS) },
            false => Grid::Outputs { outputs: self.gemv_batch_shape(k, n, rows).workgroup_rows(), rows },
        }
    }

    /// `for_adapter` plus the shapes the tune cache holds for this adapter, if any (a cache
    /// that cannot be read is reported and ignored: it only ever makes things faster).
    pub fn for_gpu(gpu: &Gpu) -> LinearConfig {
        let tuned = tune::default_path().and_then(|path| match tune::load(&path, &gpu.info) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("warning: {e:#}; using the default GEMV shapes");
                None
            }
        });
        LinearConfig { tuned: tuned.map(tune::intern), ..Self::for_adapter(&gpu.caps) }
    }

    /// The batched GEMV core's shape for a `[n, k]` weight where the rows core does not run it:
    /// the forced one, else the 8-row variant's knobbed one (`gemv_batch_knob`), else the
    /// heuristic's (`wginfer tune` measures the one-row core only).
    pub fn gemv_batch_shape(&self, k: u32, n: u32, rows: u32) -> GemvShape {
        // A forced one-lane shape is the rows core's: lib/linear_gemv_batch has no such form.
        let knobbed = || gemv_batch_knob().iter().find(|(w, _)| *w == (n, k)).map(|&(_, g)| g);
        self.gemv
            .filter(|g| g.lanes > 1)
            .or_else(|| knobbed().filter(|_| rows >= GEMV_WIDE_ROWS))
            .unwrap_or_else(|| GemvShape::heuristic_batch(k, n, rows))
    }

    /// The GEMV shape for a `[n, k]` weight of type `ty`: the forced one, else the tuned one,
    /// else the heuristic's.
    /// A tuned shape this adapter cannot build for the weight (a hand-edited cache) is passed
    /// over: the cache only ever makes things faster.
    pub fn gemv_shape(&self, k: u32, n: u32, ty: WeightType) -> GemvShape {
        let tuned = self.tuned.and_then(|t| t.get(&tune::gemv_key(n, k, ty)).copied());
        self.gemv
            .or_else(|| tuned.filter(|&g| self.gemv_shape_fits(g, k)))
            .unwrap_or_else(|| GemvShape::heuristic(k, n, ty, self.cpu, self.rows_core_fits(k)))
    }

    /// `g` can run a weight of `k` columns here: a shape of several lanes a row, or the rows
    /// core's (one lane a row) where the rows core fits.
    fn gemv_shape_fits(&self, g: GemvShape, k: u32) -> bool {
        g.check().is_ok() && (g.lanes > 1 || (g.threads == ROWS_CORE_LANES && g.rows >= 2 && self.rows_core_fits(k)))
    }

    /// What runs `core` on `rows` rows of a `[n, k]` weight of type `ty`, for benchmark tables:
    /// the core's name and shape (the rows core's with its rows of x per workgroup; a
    /// tensor-core core's k splits over workgroups as "k/N").
    pub fn core_label(&self, ty: WeightType, k: u32, n: u32, core: Core, rows: u32) -> (&'static str, String) {
        let shape = LinearShape { k, n, rows: Rows::Tokens, norm_eps: None, layout: WeightLayout::Rows };
        let rows_core = |xrows: u32| ("rows", format!("{ROWS_CORE_MULTI}x{xrows}"));
        let with_splits = |label: &str, splits: u32| match (label, splits) {
            ("", 1) => "-".to_string(),
            (label, 1) => label.to_string(),
            ("", splits) => format!("k/{splits}"),
            (label, splits) => format!("{label} k/{splits}"),
        };
        let prefill_splits = prefill_split_k(n, k, rows);
        match core {
            Core::Gemv => ("gemv", self.gemv_shape(k, n, ty).to_string()),
            Core::GemvBatch(built) if self.rows_core_fits(k) => rows_core(built.min(ROWS_CORE_XROWS)),
            Core::GemvBatch(built) => ("gemv_batch", self.gemv_batch_shape(k, n, built).to_string()),
            Core::Prefill => match self.prefill_core(ty, &shape) {
                PrefillCore::Coop(_) => ("coop", with_splits("", prefill_splits)),
                PrefillCore::Rows => rows_core(ROWS_CORE_XROWS),
                PrefillCore::Tiled => ("tiled", "-".into()),
            },
            Core::Split => ("coop_split", with_splits("", split_k(n, k, rows))),
            Core::PrefillCopy => match self.prefill_core(ty, &shape) {
                PrefillCore::Coop(_) => ("coop", with_splits("f16 copy", prefill_splits)),
                _ => ("tiled", "f16 copy".into()),
            },
        }
    }

    /// The rows core (`GemvShape` with one lane per row) can run a weight of `k` columns here:
    /// subgroups of exactly its 8 lanes, 64-bit integers, and whole 32-value blocks.
    pub fn rows_core_fits(&self, k: u32) -> bool {
        self.has_rows_core() && k.is_multiple_of(32)
    }

    /// This configuration can build its one-row GEMV for a weight of `k` columns: any shape but
    /// a forced one-lane (rows core) shape where the rows core does not fit.
    pub fn gemv_runs(&self, k: u32) -> bool {
        self.gemv.is_none_or(|g| g.lanes > 1) || self.rows_core_fits(k)
    }

    /// The adapter can run the rows core: subgroups of its 8 lanes, and 64-bit loads.
    pub fn has_rows_core(&self) -> bool {
        self.subgroups == Some((ROWS_CORE_LANES, ROWS_CORE_LANES)) && self.int64
    }
}

/// The compiled variants of one linear kernel for one weight shape, one per `Core`.
pub struct LinearKernels {
    pub gemv: Kernel,
    /// One per GEMV_BATCH_ROWS entry, in its order.
    pub gemv_batch: Vec<Kernel>,
    pub prefill: Kernel,
    pub split: Option<Kernel>,
    /// `Core::PrefillCopy`, and the weight type its copy is dequantized from.
    pub prefill_copy: Option<(Kernel, WeightType)>,
    /// The prefill variants run on tensor cores (and read their input as f16 rows).
    coop: bool,
    /// Steps of up to this many rows run a GEMV core (`LinearConfig::gemv_rows_for`).
    gemv_rows: u32,
    k: u32,
    n: u32,
    /// How the one-row GEMV core, each batched variant and the prefill core cover a step.
    grids: (Grid, Vec<Grid>, Grid),
}

/// An RMSNorm fused into a linear kernel's input: its weight (f32, one per input column).
#[derive(Clone, Copy)]
pub struct InputNorm<'a> {
    pub weight: &'a wgpu::Buffer,
    pub eps: f32,
}

/// The rows a linear kernel multiplies: every token of the step (the layers), or the rows the
/// step computes logits for, gathered first (the LM head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    Tokens,
    Outputs,
}

/// The shape a linear kernel is built for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearShape {
    /// Input width (the weight's columns).
    pub k: u32,
    /// Output width (the weight's rows, or this part's rows).
    pub n: u32,
    /// Which of the step's row counts the kernel runs over.
    pub rows: Rows,
    /// RMS-normalize the input rows with this epsilon: on load in the GEMV and tiled cores (the
    /// weight is bound at 15), in `input_f16` before the tensor-core core.
    pub norm_eps: Option<f32>,
    /// How the weight's rows lie in its buffer (`lib/weight_rows`).
    pub layout: WeightLayout,
}

/// How a GEMV lane group is reduced: subgroup shuffles within parts of the smallest subgroup
/// size (whose sums meet in workgroup memory where a group spans several), when a group fits in
/// the smallest subgroup or spans whole subgroups; else workgroup memory alone.
fn lanes_piece(lanes: u32, subgroups: Option<(u32, u32)>, defs: Defs) -> (&'static str, Defs) {
    match subgroups {
        Some((smallest, largest)) if lanes <= smallest || lanes >= largest => {
            ("lib/lanes_subgroup", defs.u32("SG_MIN", smallest))
        }
        _ => ("lib/lanes_portable", defs),
    }
}

/// WGSL of `name` in each of its variants (`Core::Gemv`, `Core::GemvBatch`, `Core::Prefill`,
/// `Core::Split` where `cfg.split_for` gives it, `Core::PrefillCopy` where `cfg.dequant_once_for`
/// does); `defs` carries the kernel's own constants.
pub fn sources(
    name: &str,
    defs: &Defs,
    weight: WeightType,
    s: &LinearShape,
    cfg: &LinearConfig,
) -> Vec<(Core, String)> {
    let t = cfg.tiles;
    let g = cfg.gemv_shape(s.k, s.n, weight);
    let (input, gemv_input) = match s.norm_eps {
        Some(_) => ("lib/input_rmsnorm", "lib/gemv_input_rmsnorm"),
        None => ("lib/input_plain", "lib/gemv_input_plain"),
    };
    let base = {
        let d = defs.clone().u32("K", s.k).u32("N", s.n).bool("ROWS_FROM_OUTPUTS", s.rows == Rows::Outputs);
        match s.norm_eps {
            Some(eps) => d.f32("EPS", eps),
            None => d,
        }
    };
    // The cores that read the weight through lib/weight_rows (all but the tensor-core ones,
    // which take it row after row: `LinearKernels::new` checks).
    let rows_base = base.clone().u32("W_GROUP_ROWS", s.layout.group_rows()).piece("lib/weight_rows");
    // The tiled core's norm prologue: rows per workgroup and threads.
    let prefill_defs = |rows: u32, threads: u32| match s.norm_eps {
        Some(_) => rows_base.clone().u32("NORM_ROWS", rows).u32("NORM_THREADS", threads),
        None => rows_base.clone(),
    };
    let gemv_defs = |g: GemvShape| {
        let d = rows_base.clone().u32("LANES", g.lanes).u32("RPG", g.rows).u32("WG_THREADS", g.threads);
        lanes_piece(g.lanes, cfg.subgroups, d)
    };
    let w = weight.libs();
    // The rows core on `xrows` rows per workgroup; `rows_piece` says how many the step has.
    let rows_core = |xrows: u32, rpg: u32, rows_piece: &'static str| {
        let d = rows_base.clone().u32("RPG", rpg).u32("WG_THREADS", ROWS_CORE_LANES).u32("XROWS", xrows);
        let core = [gemv_input, rows_piece, "lib/linear_gemv_rows"];
        assemble(name, &d, &[&["lib/u64_bits"], &weight.block32_libs()[..], &core].concat())
    };
    let coop = |sg: u32, c: CoopShape, weight: WeightType| {
        let (tm, tn) = c.tile();
        let d = base
            .clone()
            .u32("TM", tm)
            .u32("TN", tn)
            .u32("TK", c.tk)
            .u32("SG", sg)
            .u32("SGM", c.sgm)
            .u32("SGN", c.sgn)
            .u32("SGK", c.sgk)
            .u32("WG_THREADS", c.subgroups() * sg);
        let d = d.u32("SPLIT_COUNTERS", split_counters());
        // f16 weights are read as they lie; other types are dequantized on the way.
        let (w_f16, w_other, core) = match c.staged {
            true => ("lib/coop_w_f16", "lib/coop_w_dequant", "lib/linear_coop"),
            false => ("lib/coop_b_direct", "lib/coop_b_staged", "lib/linear_coop_split"),
        };
        let pieces = match weight {
            WeightType::F16 => vec![w_f16, "lib/rows_of_step", "lib/split_k", core],
            _ => [weight.libs(), &[w_other, "lib/rows_of_step", "lib/split_k", core]].concat(),
        };
        assemble(name, &d, &pieces)
    };
    // The prefill core over weights of type `ty`: the weight's, or f16 (its copy).
    let prefill = |ty: WeightType| match cfg.prefill_core(weight, s) {
        PrefillCore::Coop(sg) => coop(sg, coop_prefill(), ty),
        PrefillCore::Rows => rows_core(ROWS_CORE_XROWS, ROWS_CORE_MULTI.rows, "lib/rows_of_step"),
        PrefillCore::Tiled => {
            let d = prefill_defs(t.tm, t.wg_x * t.wg_y)
                .u32("TM", t.tm)
                .u32("TN", t.tn)
                .u32("TK", t.tk)
                .u32("WG_X", t.wg_x)
                .u32("WG_Y", t.wg_y)
                .u32("RM", t.tm / t.wg_y)
                .u32("RN", t.tn / t.wg_x);
            assemble(name, &d, &[ty.libs(), &[input, "lib/rows_of_step", "lib/linear_tiled"]].concat())
        }
    };
    let one = match g.lanes {
        1 => rows_core(1, g.rows, "lib/rows_one"),
        _ => {
            let (lanes, d) = gemv_defs(g);
            let run = match (s.layout, long_runs(weight, s.n)) {
                (WeightLayout::Rows, Some(long)) => long,
                // A run longer than 8 values would span the grouped layout's 32-value groups.
                _ => weight.run8_lib(),
            };
            assemble(name, &d, &[w, &[run, lanes, gemv_input, "lib/linear_gemv"]].concat())
        }
    };
    let batch = GEMV_BATCH_ROWS.map(|rows| {
        let source = match cfg.rows_core_fits(s.k) {
            true => rows_core(rows.min(ROWS_CORE_XROWS), ROWS_CORE_MULTI.rows, "lib/rows_of_step"),
            false => {
                let (lanes, d) = gemv_defs(cfg.gemv_batch_shape(s.k, s.n, rows));
                let d = d.u32("GEMV_ROWS", rows);
                let core = [lanes, gemv_input, "lib/rows_of_step", "lib/linear_gemv_batch"];
                assemble(name, &d, &[w, &core].concat())
            }
        };
        (Core::GemvBatch(rows), source)
    });
    let split = cfg.split_for(weight, s).map(|sg| (Core::Split, coop(sg, coop_split(), weight)));
    let copy = cfg.dequant_once_for(weight, s).then(|| (Core::PrefillCopy, prefill(WeightType::F16)));
    let prefill = (Core::Prefill, prefill(weight));
    let variants = [(Core::Gemv, one), prefill].into_iter().chain(batch).chain(split).chain(copy);
    // Only the cores past the GEMV ones write the f16 copy of a kernel's output where it has one
    // (lib/out_f16): the next projection of a step of GEMV rows runs a GEMV core too, which
    // reads f32. On an H100 writing it in 16-row steps cost 2.2% of the batch sweep's decode.
    variants.map(|(core, wgsl)| (core, format!("{wgsl}const F16_COPY: bool = {};\n", !core.is_gemv()))).collect()
}

impl LinearKernels {
    pub fn new(
        gpu: &Gpu,
        name: &'static str,
        defs: &Defs,
        weight: WeightType,
        shape: &LinearShape,
        cfg: &LinearConfig,
    ) -> Result<Self> {
        cfg.tiles.check()?;
        anyhow::ensure!(shape.k.is_multiple_of(8), "{name}: input width {} is not a multiple of 8", shape.k);
        let gemv_shape = cfg.gemv_shape(shape.k, shape.n, weight);
        gemv_shape.check()?;
        anyhow::ensure!(
            cfg.gemv_shape_fits(gemv_shape, shape.k),
            "{name}: GEMV shape {gemv_shape} (one lane per row) needs {ROWS_CORE_LANES}-lane subgroups, as many threads, an even number of rows per lane, and a multiple of 32 columns (this weight has {})",
            shape.k
        );
        let coop = cfg.coop_for(weight, shape.k, shape.n).is_some();
        anyhow::ensure!(
            shape.layout == WeightLayout::Rows || !coop,
            "{name}: the tensor-core cores read weights row after row, not {:?}",
            shape.layout
        );
        let mut kernels = Vec::new();
        for (core, source) in sources(name, defs, weight, shape, cfg) {
            kernels.push((core, Kernel::get(gpu, name, source)?));
        }
        let mut take = |core: Core| kernels.iter().position(|(c, _)| *c == core).map(|i| kernels.remove(i).1);
        let (gemv, prefill, split) = (take(Core::Gemv), take(Core::Prefill), take(Core::Split));
        let prefill_copy = take(Core::PrefillCopy).map(|k| (k, weight));
        let gemv_batch = GEMV_BATCH_ROWS.iter().map(|&r| take(Core::GemvBatch(r)).expect("always built")).collect();
        let (gemv, prefill) = (gemv.expect("always built"), prefill.expect("always built"));
        if !cfg.rows_core_fits(shape.k) {
            for rows in GEMV_BATCH_ROWS {
                cfg.gemv_batch_shape(shape.k, shape.n, rows).check()?;
            }
        }
        let one = Grid::Outputs { outputs: gemv_shape.workgroup_rows(), rows: 1 };
        let batch = GEMV_BATCH_ROWS.iter().map(|&rows| cfg.batch_grid(shape.k, shape.n, rows)).collect();
        let grids = (one, batch, cfg.prefill_grid(weight, shape));
        let gemv_rows = cfg.gemv_rows_for(weight, shape.k, shape.n);
        Ok(LinearKernels {
            gemv,
            gemv_batch,
            prefill,
            split,
            prefill_copy,
            coop,
            gemv_rows,
            k: shape.k,
            n: shape.n,
            grids,
        })
    }

    /// The core that runs a step of `rows` rows: `Core::for_rows`, with the widest GEMV core
    /// taking the prefill core's steps up to `gemv_rows`, `Core::Split` its small steps where
    /// this kernel has it, and `Core::PrefillCopy` its steps of more than one tile of rows.
    pub fn core_for(&self, rows: u32) -> Core {
        match Core::for_rows(rows) {
            Core::Prefill if rows <= self.gemv_rows => Core::GemvBatch(GEMV_WIDE_ROWS),
            Core::Prefill if self.split.is_some() && split_runs(self.n, self.k, rows) => Core::Split,
            Core::Prefill if self.prefill_copy.is_some() && rows > self.grids.2.rows() => Core::PrefillCopy,
            core => core,
        }
    }

    /// Workgroup counts of `core` on `rows` rows.
    fn workgroups(&self, core: Core, rows: u32) -> [u32; 3] {
        let grid = match core {
            Core::Gemv => self.grids.0,
            Core::GemvBatch(built) => self.grids.1[batch_variant(built, rows)],
            Core::Prefill | Core::PrefillCopy if self.coop => {
                let [x, y, _] = self.grids.2.workgroups(self.n, rows);
                return [x, y, prefill_split_k(self.n, self.k, rows)];
            }
            Core::Prefill | Core::PrefillCopy => self.grids.2,
            Core::Split => {
                let (tile_rows, cols) = coop_split().tile();
                let [x, y, _] = Grid::Tiles { rows: tile_rows, cols }.workgroups(self.n, rows);
                return [x, y, split_k(self.n, self.k, rows)];
            }
        };
        grid.workgroups(self.n, rows)
    }
}

/// Which of the GEMV_BATCH_ROWS variants runs a `Core::GemvBatch(built)` on `rows` rows: the
/// one it names, or a larger one where the rows do not fit (the largest at most).
fn batch_variant(built: u32, rows: u32) -> usize {
    GEMV_BATCH_ROWS.iter().position(|&b| b >= built.max(rows)).unwrap_or(GEMV_BATCH_ROWS.len() - 1)
}

/// A linear kernel with its buffers bound in every variant.
pub struct BoundLinear {
    kernels: LinearKernels,
    gemv: Bound,
    /// One per GEMV_BATCH_ROWS entry, in its order.
    gemv_batch: Vec<Bound>,
    prefill: Bound,
    split: Option<Bound>,
    /// `Core::PrefillCopy`, and what writes its f16 copy of the weight.
    prefill_copy: Option<(Bound, DequantF16)>,
    /// Writes the f16 input rows the tensor-core prefill variants read.
    input_f16: Option<InputF16>,
}

impl BoundLinear {
    /// `buffers` go to bindings 0 (the step), 1 (x), 2, ...; `norm` (with a normalizing shape)
    /// to 15. The one-row GEMV core reads nothing of the step, so its binding 0 is left out.
    /// The tensor-core variants read x as f16 rows from a scratch buffer shared by every linear
    /// kernel, written just before them; `Core::PrefillCopy` reads the weight's f16 copy from
    /// another such scratch, likewise.
    pub fn new(
        gpu: &Gpu,
        mut kernels: LinearKernels,
        buffers: &[&wgpu::Buffer],
        norm: Option<InputNorm>,
        f16: F16Rows,
    ) -> Result<BoundLinear> {
        // A kernel that writes the f16 copy of its output keeps GEMV to GEMV_MAX_ROWS rows: its
        // GEMV cores store no copy (F16_COPY), and the next projection's tensor cores read the
        // copy in steps past GEMV_MAX_ROWS rows.
        if f16.out.is_some() {
            kernels.gemv_rows = GEMV_MAX_ROWS;
        }
        let entries: Vec<(u32, &wgpu::Buffer)> =
            buffers.iter().copied().enumerate().map(|(i, b)| (i as u32, b)).chain(f16.out.map(|b| (7, b))).collect();
        let with_norm: Vec<_> = entries.iter().copied().chain(norm.map(|n| (15, n.weight))).collect();
        let gemv = kernels.gemv.bind_at(gpu, &with_norm[1..]);
        let gemv_batch = kernels.gemv_batch.iter().map(|k| k.bind_at(gpu, &with_norm)).collect();
        anyhow::ensure!(f16.x.is_none() || norm.is_none(), "f16 rows of x written before its norm");
        let (n, k) = (u64::from(kernels.n), u64::from(kernels.k));
        // On tensor cores: x as f16 rows (the kernel before wrote them, or input_f16 does,
        // normalized there) and the split-K sums.
        let coop = match kernels.coop {
            true => {
                let bytes = x_f16_bytes(buffers[1], kernels.k);
                let x16 = match f16.x {
                    Some(x16) => {
                        anyhow::ensure!(x16.size() >= bytes, "f16 rows of x: {} bytes, not {bytes}", x16.size());
                        x16.clone()
                    }
                    None => gpu.scratch("x_f16", bytes)?,
                };
                Some((x16, gpu.scratch("split_sums", split_sums_bytes())?))
            }
            false => None,
        };
        // The prefill variants' bindings.
        let prefill_entries = match &coop {
            Some((x16, sums)) => {
                let mut e = entries.clone();
                e[1].1 = x16;
                e.push((14, sums));
                e
            }
            None => with_norm,
        };
        let prefill = kernels.prefill.bind_at(gpu, &prefill_entries);
        let split = kernels.split.as_ref().map(|kernel| kernel.bind_at(gpu, &prefill_entries));
        let prefill_copy = match &kernels.prefill_copy {
            Some((kernel, ty)) => {
                let copy = gpu.scratch("w_f16", n * k * 2)?;
                let dequant = DequantF16::new(gpu, *ty, kernels.n, kernels.k, buffers[2], &copy)?;
                let mut e = prefill_entries.clone();
                e[2].1 = &copy;
                Some((kernel.bind_at(gpu, &e), dequant))
            }
            None => None,
        };
        let input_f16 = match &coop {
            Some((x16, _)) if f16.x.is_none() => Some(InputF16::new(gpu, kernels.k, buffers[1], x16, norm)?),
            _ => None,
        };
        Ok(BoundLinear { kernels, gemv, gemv_batch, prefill, split, prefill_copy, input_f16 })
    }

    /// Records the variant that suits `rows` rows.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.record_core(pass, self.kernels.core_for(rows), rows);
    }

    /// The core a step of `rows` rows runs.
    pub fn core_for(&self, rows: u32) -> Core {
        self.kernels.core_for(rows)
    }

    /// This kernel has `core` (`Core::Split`: tensor cores, and a weight of whole fragments
    /// under SPLIT_MAX_N outputs; `Core::PrefillCopy`: `LinearConfig::dequant_once_for`).
    pub fn has(&self, core: Core) -> bool {
        match core {
            Core::Split => self.split.is_some(),
            Core::PrefillCopy => self.prefill_copy.is_some(),
            _ => true,
        }
    }

    /// Records `core` on `rows` rows (benchmarks compare the cores at the same rows; a GEMV
    /// core takes at most as many rows as it is built for; a core it lacks runs the prefill core).
    pub fn record_core(&self, pass: &mut wgpu::ComputePass<'_>, core: Core, rows: u32) {
        let core = if self.has(core) { core } else { Core::Prefill };
        let wg = self.kernels.workgroups(core, rows);
        match core {
            Core::Gemv => self.gemv.record(pass, wg),
            Core::GemvBatch(built) => self.gemv_batch[batch_variant(built, rows)].record(pass, wg),
            Core::Prefill | Core::Split | Core::PrefillCopy => {
                if let Some(input) = &self.input_f16 {
                    input.record(pass, rows);
                }
                let bound = match (core, &self.split, &self.prefill_copy) {
                    (Core::Split, Some(split), _) => split,
                    (Core::PrefillCopy, _, Some((copy, dequant))) => {
                        dequant.record(pass);
                        copy
                    }
                    _ => &self.prefill,
                };
                bound.record(pass, wg);
            }
        }
    }
}

/// The buffers of a linear kernel over a weight: `step` at binding 0, `x` at 1, the weight part
/// at 2, `rest` at 3, 4, ...; `f16.out` at 7; `norm` (the input's RMSNorm) at 15.
pub struct LinearIo<'a> {
    pub step: &'a wgpu::Buffer,
    pub x: &'a wgpu::Buffer,
    pub rest: Vec<&'a wgpu::Buffer>,
    pub norm: Option<InputNorm<'a>>,
    pub f16: F16Rows<'a>,
}

/// Rows as f16 that a kernel and its neighbour share on tensor cores, where the tensor-core
/// variants would otherwise convert their input in an `input_f16` dispatch of their own (one
/// dispatch less a projection; on an H100 the batch sweep's 64-row decode steps 4.7% faster
/// without the o and down projections' conversions, docs/PERF.md).
#[derive(Clone, Copy, Default)]
pub struct F16Rows<'a> {
    /// x's rows as f16, written by the kernel before this one (lib/out_f16, saturated as
    /// input_f16 would): the tensor-core variants read them, and no `input_f16` runs. Only for
    /// an input without a norm. At least `x_f16_bytes`.
    pub x: Option<&'a wgpu::Buffer>,
    /// This kernel's output rows as f16 too (binding 7: the kernel's WGSL takes lib/out_f16).
    pub out: Option<&'a wgpu::Buffer>,
}

/// Bytes of the f16 rows of an input `x` of `k`-value f32 rows that the tensor-core cores read:
/// whole tiles of rows past its last (the cores read them; their outputs are never stored).
pub fn x_f16_bytes(x: &wgpu::Buffer, k: u32) -> u64 {
    let tile_rows = coop_prefill().tile().0.max(coop_split().tile().0);
    (x.size() / (4 * u64::from(k)) + u64::from(tile_rows)) * u64::from(k) * 2
}

/// A linear kernel over every part of a weight: one `BoundLinear` per part, each compiled for
/// its part's type and rows, recorded in row order. A weight of one part is one dispatch per op;
/// each further part (a row range of another type, or past the binding limit) adds one. The f16
/// input rows the tensor-core core reads (one scratch every linear kernel shares) are written
/// once, before the first part that reads them.
pub struct LinearParts(Vec<BoundLinear>);

impl LinearParts {
    /// `name` over the parts of `w`; `defs(part)` gives each part's kernel constants (or why the
    /// kernel cannot take that part).
    pub fn new(
        gpu: &Gpu,
        cfg: &LinearConfig,
        name: &'static str,
        w: &Weight,
        rows: Rows,
        io: &LinearIo,
        defs: impl Fn(&WeightPart) -> Result<Defs>,
    ) -> Result<LinearParts> {
        anyhow::ensure!(io.f16.out.is_none() || io.rest.len() <= 4, "{name}: binding 7 holds f16 rows of its output");
        let mut input_written = false;
        let mut parts = Vec::with_capacity(w.parts.len());
        for p in &w.parts {
            let shape = LinearShape { k: w.cols, n: p.rows, rows, norm_eps: io.norm.map(|n| n.eps), layout: p.layout };
            let kernels = LinearKernels::new(gpu, name, &defs(p)?, p.ty, &shape, cfg)?;
            let buffers: Vec<&wgpu::Buffer> =
                [io.step, io.x, &p.buffer].into_iter().chain(io.rest.iter().copied()).collect();
            let mut bound = BoundLinear::new(gpu, kernels, &buffers, io.norm, io.f16)?;
            if bound.input_f16.is_some() && std::mem::replace(&mut input_written, true) {
                bound.input_f16 = None;
            }
            parts.push(bound);
        }
        // The parts share one input_f16 conversion, run by the first part on tensor cores: all
        // of them leave their GEMV cores at the same step rows.
        let gemv_rows = parts.iter().map(|p| p.kernels.gemv_rows).min().unwrap_or(GEMV_MAX_ROWS);
        parts.iter_mut().for_each(|p| p.kernels.gemv_rows = gemv_rows);
        Ok(LinearParts(parts))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        for p in &self.0 {
            p.record(pass, rows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_runs;

    /// Which steps of 33 to 256 rows leave the prefill core for `Core::Split` (H100 crossover
    /// figures in docs/PERF.md): long rows the prefill core splits into shares of 8 slices or more
    /// stay with it; short rows and steps of few rows with thin shares take `Core::Split`. The
    /// default shapes and rule: fails under `WGINFER_COOP_PREFILL` or `WGINFER_PREFILL_SPLIT_K`.
    #[test]
    fn split_core_takes_steps_the_prefill_core_serves_worse() {
        let cases = [
            // (n, k, rows, Core::Split)
            (896, 4864, 64, true),
            (896, 4864, 128, false),
            (896, 4864, 256, false),
            (2048, 8192, 64, false),
            (2048, 8192, 128, false),
            (896, 896, 128, true),
            (1152, 896, 256, true),
            (896, 4864, 32, true),
            (9728, 896, 64, false),
        ];
        for (n, k, rows, split) in cases {
            assert_eq!(split_runs(n, k, rows), split, "{n}x{k} at {rows} rows");
        }
    }
}
