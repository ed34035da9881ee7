//! Shader assembly. A kernel's WGSL is: generated constants (shapes, tile sizes, flags), the
//! shared pieces it names from `shaders/lib/`, then its own `shaders/NAME.wgsl`. Variants
//! (weight type, tile sizes, decode vs prefill core) are different constants or pieces of the
//! same files, never copied files.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::OnceLock;

/// Every WGSL file, embedded at build time.
const FILES: &[(&str, &str)] = &[
    ("lib/common", include_str!("../../shaders/lib/common.wgsl")),
    ("lib/plan", include_str!("../../shaders/lib/plan.wgsl")),
    ("lib/norm_rows_all", include_str!("../../shaders/lib/norm_rows_all.wgsl")),
    ("lib/norm_rows_gather", include_str!("../../shaders/lib/norm_rows_gather.wgsl")),
    ("lib/weight_f32", include_str!("../../shaders/lib/weight_f32.wgsl")),
    ("lib/weight_f16", include_str!("../../shaders/lib/weight_f16.wgsl")),
    ("lib/weight_q8_0", include_str!("../../shaders/lib/weight_q8_0.wgsl")),
    ("lib/weight_q4_0", include_str!("../../shaders/lib/weight_q4_0.wgsl")),
    ("lib/weight_q4_1", include_str!("../../shaders/lib/weight_q4_1.wgsl")),
    ("lib/weight_q5_0", include_str!("../../shaders/lib/weight_q5_0.wgsl")),
    ("lib/weight_q4_k", include_str!("../../shaders/lib/weight_q4_k.wgsl")),
    ("lib/weight_q6_k", include_str!("../../shaders/lib/weight_q6_k.wgsl")),
    ("lib/weight_q5_1", include_str!("../../shaders/lib/weight_q5_1.wgsl")),
    ("lib/weight_q5_k", include_str!("../../shaders/lib/weight_q5_k.wgsl")),
    ("lib/weight_q3_k", include_str!("../../shaders/lib/weight_q3_k.wgsl")),
    ("lib/weight_q2_k", include_str!("../../shaders/lib/weight_q2_k.wgsl")),
    ("lib/weight_iq4_nl", include_str!("../../shaders/lib/weight_iq4_nl.wgsl")),
    ("lib/weight_iq4_xs", include_str!("../../shaders/lib/weight_iq4_xs.wgsl")),
    ("lib/weight_k4_scales", include_str!("../../shaders/lib/weight_k4_scales.wgsl")),
    ("lib/weight_iq4_values", include_str!("../../shaders/lib/weight_iq4_values.wgsl")),
    ("lib/weight_affine", include_str!("../../shaders/lib/weight_affine.wgsl")),
    ("lib/weight_bytes", include_str!("../../shaders/lib/weight_bytes.wgsl")),
    ("lib/weight_q5_bits", include_str!("../../shaders/lib/weight_q5_bits.wgsl")),
    ("lib/weight_load8", include_str!("../../shaders/lib/weight_load8.wgsl")),
    ("lib/weight_run8", include_str!("../../shaders/lib/weight_run8.wgsl")),
    ("lib/weight_run8_ahead", include_str!("../../shaders/lib/weight_run8_ahead.wgsl")),
    ("lib/weight_q4_k_run", include_str!("../../shaders/lib/weight_q4_k_run.wgsl")),
    ("lib/weight_block32", include_str!("../../shaders/lib/weight_block32.wgsl")),
    ("lib/weight_affine_block32", include_str!("../../shaders/lib/weight_affine_block32.wgsl")),
    ("lib/u64_bits", include_str!("../../shaders/lib/u64_bits.wgsl")),
    ("lib/words64", include_str!("../../shaders/lib/words64.wgsl")),
    ("lib/weight_rows", include_str!("../../shaders/lib/weight_rows.wgsl")),
    ("lib/weight64_q4_0", include_str!("../../shaders/lib/weight64_q4_0.wgsl")),
    ("lib/weight64_q4_1", include_str!("../../shaders/lib/weight64_q4_1.wgsl")),
    ("lib/weight64_q8_0", include_str!("../../shaders/lib/weight64_q8_0.wgsl")),
    ("lib/reduce", include_str!("../../shaders/lib/reduce.wgsl")),
    ("lib/reduce_subgroup", include_str!("../../shaders/lib/reduce_subgroup.wgsl")),
    ("lib/kv_vec4", include_str!("../../shaders/lib/kv_vec4.wgsl")),
    ("lib/out_f16", include_str!("../../shaders/lib/out_f16.wgsl")),
    ("lib/out_f16_none", include_str!("../../shaders/lib/out_f16_none.wgsl")),
    ("lib/kv_u64", include_str!("../../shaders/lib/kv_u64.wgsl")),
    ("lib/kv_f16", include_str!("../../shaders/lib/kv_f16.wgsl")),
    ("lib/kv_pair_f32", include_str!("../../shaders/lib/kv_pair_f32.wgsl")),
    ("lib/kv_pair_f16", include_str!("../../shaders/lib/kv_pair_f16.wgsl")),
    ("lib/rope", include_str!("../../shaders/lib/rope.wgsl")),
    ("lib/input_plain", include_str!("../../shaders/lib/input_plain.wgsl")),
    ("lib/input_rmsnorm", include_str!("../../shaders/lib/input_rmsnorm.wgsl")),
    ("lib/gemv_input_plain", include_str!("../../shaders/lib/gemv_input_plain.wgsl")),
    ("lib/gemv_input_rmsnorm", include_str!("../../shaders/lib/gemv_input_rmsnorm.wgsl")),
    ("lib/rows_one", include_str!("../../shaders/lib/rows_one.wgsl")),
    ("lib/rows_of_step", include_str!("../../shaders/lib/rows_of_step.wgsl")),
    ("lib/argmax_reduce", include_str!("../../shaders/lib/argmax_reduce.wgsl")),
    ("lib/logit_value", include_str!("../../shaders/lib/logit_value.wgsl")),
    ("lib/attention_combine", include_str!("../../shaders/lib/attention_combine.wgsl")),
    ("lib/attention_window", include_str!("../../shaders/lib/attention_window.wgsl")),
    ("lib/plain_slots_lookup", include_str!("../../shaders/lib/plain_slots_lookup.wgsl")),
    ("lib/plain_slots_table", include_str!("../../shaders/lib/plain_slots_table.wgsl")),
    ("lib/score_sum_shuffle", include_str!("../../shaders/lib/score_sum_shuffle.wgsl")),
    ("lib/score_sum_one", include_str!("../../shaders/lib/score_sum_one.wgsl")),
    ("lib/linear_tiled", include_str!("../../shaders/lib/linear_tiled.wgsl")),
    ("lib/linear_gemv", include_str!("../../shaders/lib/linear_gemv.wgsl")),
    ("lib/linear_gemv_batch", include_str!("../../shaders/lib/linear_gemv_batch.wgsl")),
    ("lib/linear_gemv_rows", include_str!("../../shaders/lib/linear_gemv_rows.wgsl")),
    ("lib/linear_coop", include_str!("../../shaders/lib/linear_coop.wgsl")),
    ("lib/linear_coop_split", include_str!("../../shaders/lib/linear_coop_split.wgsl")),
    ("lib/split_k", include_str!("../../shaders/lib/split_k.wgsl")),
    ("lib/coop_b_direct", include_str!("../../shaders/lib/coop_b_direct.wgsl")),
    ("lib/coop_b_staged", include_str!("../../shaders/lib/coop_b_staged.wgsl")),
    ("lib/coop_w_f16", include_str!("../../shaders/lib/coop_w_f16.wgsl")),
    ("lib/coop_w_dequant", include_str!("../../shaders/lib/coop_w_dequant.wgsl")),
    ("lib/lanes_portable", include_str!("../../shaders/lib/lanes_portable.wgsl")),
    ("lib/lanes_subgroup", include_str!("../../shaders/lib/lanes_subgroup.wgsl")),
    ("embedding", include_str!("../../shaders/embedding.wgsl")),
    ("rmsnorm", include_str!("../../shaders/rmsnorm.wgsl")),
    ("input_f16", include_str!("../../shaders/input_f16.wgsl")),
    ("dequant_f16", include_str!("../../shaders/dequant_f16.wgsl")),
    ("matmul", include_str!("../../shaders/matmul.wgsl")),
    ("qkv_rope", include_str!("../../shaders/qkv_rope.wgsl")),
    ("qk_norm", include_str!("../../shaders/qk_norm.wgsl")),
    ("swiglu", include_str!("../../shaders/swiglu.wgsl")),
    ("attention_plain", include_str!("../../shaders/attention_plain.wgsl")),
    ("attention_flash", include_str!("../../shaders/attention_flash.wgsl")),
    ("attention_split", include_str!("../../shaders/attention_split.wgsl")),
    ("attention_coop", include_str!("../../shaders/attention_coop.wgsl")),
    ("attention_grouped", include_str!("../../shaders/attention_grouped.wgsl")),
    ("argmax", include_str!("../../shaders/argmax.wgsl")),
    ("sample", include_str!("../../shaders/sample.wgsl")),
    ("probe_read", include_str!("../../shaders/probe_read.wgsl")),
    ("probe_launch", include_str!("../../shaders/probe_launch.wgsl")),
    ("probe_phases", include_str!("../../shaders/probe_phases.wgsl")),
];

/// Bump when the Rust side changes what the kernels do or how weights are laid out for them
/// (shapes, layouts, constants) without a WGSL file changing: `sources_digest` then changes too.
const KERNELS_EPOCH: u32 = 1;

/// A digest of this build's kernels: every embedded WGSL file (names and texts) and
/// KERNELS_EPOCH, in hex, computed once. The tune cache's entries name it, so timings of other
/// kernels are not used. `WGINFER_SHADERS` overrides are not in it: that knob is for timing a
/// shader change, and its tests store entries for the overridden kernels.
pub fn sources_digest() -> &'static str {
    static DIGEST: OnceLock<String> = OnceLock::new();
    DIGEST.get_or_init(|| {
        let texts = FILES.iter().flat_map(|(n, s)| n.bytes().chain(s.bytes()).chain([0]));
        format!("{:016x}", super::cache_files::fnv1a64(texts.chain(KERNELS_EPOCH.to_le_bytes())))
    })
}

/// Names of every WGSL file under shaders/ (tests check each one is listed here).
pub fn file_names() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|(n, _)| *n)
}

fn file(name: &str) -> &'static str {
    let embedded = FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("no shader file {name:?} (a bug: FILES lists every file)"));
    overrides().get(name).map(String::as_str).unwrap_or(embedded)
}

/// Kernel developers' knob: with WGINFER_SHADERS=DIR, any `DIR/NAME.wgsl` replaces the
/// embedded file of that name, so a shader change can be timed without rebuilding. Read once.
fn overrides() -> &'static HashMap<&'static str, String> {
    static OVERRIDES: OnceLock<HashMap<&'static str, String>> = OnceLock::new();
    OVERRIDES.get_or_init(|| {
        let Some(dir) = std::env::var_os("WGINFER_SHADERS") else { return Default::default() };
        let dir = std::path::PathBuf::from(dir);
        let found: HashMap<_, _> = FILES
            .iter()
            .filter_map(|(n, _)| Some((*n, std::fs::read_to_string(dir.join(format!("{n}.wgsl"))).ok()?)))
            .collect();
        let names: Vec<&str> = found.keys().copied().collect();
        eprintln!("WGINFER_SHADERS={}: replacing {names:?}", dir.display());
        found
    })
}

/// Compile-time constants of one kernel variant, and the shared pieces that come with them
/// (e.g. `lib/plan` with the plan's offsets).
#[derive(Clone, Debug, Default)]
pub struct Defs {
    consts: Vec<String>,
    pieces: Vec<&'static str>,
}

impl Defs {
    pub fn new() -> Defs {
        Defs::default()
    }
    pub fn u32(mut self, name: &str, v: u32) -> Defs {
        self.consts.push(format!("const {name}: u32 = {v}u;"));
        self
    }
    pub fn f32(mut self, name: &str, v: f32) -> Defs {
        self.consts.push(format!("const {name}: f32 = {v:e};"));
        self
    }
    pub fn bool(mut self, name: &str, v: bool) -> Defs {
        self.consts.push(format!("const {name}: bool = {v};"));
        self
    }
    /// A shared piece (a file of `shaders/lib/`) that uses these constants.
    pub fn piece(mut self, name: &'static str) -> Defs {
        self.pieces.push(name);
        self
    }
}

/// The full WGSL text of kernel `name` with `defs` and the shared pieces `libs`.
pub fn assemble(name: &str, defs: &Defs, libs: &[&str]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "// kernel: {name}");
    for line in &defs.consts {
        s.push_str(line);
        s.push('\n');
    }
    let mut body = String::from(file("lib/common"));
    for lib in defs.pieces.iter().chain(libs) {
        body.push_str(file(lib));
    }
    body.push_str(file(name));
    // `enable` directives must precede every declaration.
    let (mut enables, rest): (Vec<&str>, Vec<&str>) = body.lines().partition(|l| l.starts_with("enable "));
    enables.sort();
    enables.dedup();
    let mut out = enables.join("\n");
    out.push('\n');
    out.push_str(&s);
    out.push_str(&rest.join("\n"));
    out.push('\n');
    out
}
