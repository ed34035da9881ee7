//! Every kernel variant the engine can build parses and validates with naga, and every WGSL
//! file under shaders/ is one the engine embeds.

use wginfer::gpu::shader::{file_names, Defs};
use wginfer::kv::KvType;
use wginfer::model::config::Activation;
use wginfer::ops::attention::{AttnOptions, ROWS_THRESHOLD};
use wginfer::ops::linear::{sources, GemvShape, LinearConfig, LinearShape, Rows};
use wginfer::ops::plan::PlanLayout;
use wginfer::ops::qkv_rope::HeadShape;
use wginfer::ops::swiglu::GateUpRows;
use wginfer::ops::weight::WeightLayout;
use wginfer::ops::{
    argmax, attention_coop, attention_flash, attention_plain, attention_split, dequant_f16, embedding, input_f16,
    matmul, probe_launch, probe_phases, probe_read, qk_norm, qkv_rope, rmsnorm, sample, swiglu, WeightType,
};

fn validate(label: &str, src: &str) {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{label}: {}", e.emit_to_string(src)));
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{label}: {}", e.emit_to_string(src)));
}

#[test]
fn every_kernel_variant_validates() {
    // Portable, subgroup shuffles (lanes within one subgroup), subgroup sums (lanes spanning
    // subgroups), each at a GEMV shape per weight and at a fixed wide one; each linear kernel's
    // three cores (one-row GEMV, the GEMV of several rows, prefill).
    let portable = LinearConfig::default();
    let shuffle = LinearConfig { subgroups: Some((32, 32)), ..portable };
    let spanning = LinearConfig { subgroups: Some((8, 8)), ..portable };
    // A CPU adapter's: the rows core on every row count (lib/linear_gemv_rows, lib/words64).
    let rows_core = LinearConfig { cpu: true, int64: true, ..spanning };
    let wide = GemvShape { lanes: 256, rows: 2, threads: 256 };
    let coop = LinearConfig { coop: Some(32), coop_split: true, ..shuffle };
    // Quantized weights' prefill core over their f16 copy (dequant_f16), tensor cores or tiled.
    let once = |c: LinearConfig| LinearConfig { dequant_once: Some(u64::MAX), ..c };
    let configs: Vec<LinearConfig> = [portable, shuffle, spanning, rows_core, coop, once(coop), once(shuffle)]
        .into_iter()
        .flat_map(|c| [c, LinearConfig { gemv: Some(wide), ..c }])
        .collect();
    let heads = HeadShape { n_heads: 14, n_kv_heads: 2, head_dim: 64 };
    let plan = PlanLayout { max_rows: 512, max_seqs: 64, max_outs: 64, max_blocks: 256, block: 16, tile_rows: 32 };
    for ty in WeightType::ALL {
        let linear: [(&str, Defs); 7] = [
            ("matmul", matmul::defs(true, 896, 0)),
            ("qkv_rope", qkv_rope::defs(&heads, &plan, KvType::F32, true, false, 0)),
            ("qkv_rope", qkv_rope::defs(&heads, &plan, KvType::F16, false, true, 1152)),
            ("swiglu", swiglu::defs(576, GateUpRows::Interleaved, 0, Activation::Silu, false)),
            ("swiglu", swiglu::defs(576, GateUpRows::Interleaved, 0, Activation::GeluTanh, true)),
            ("swiglu", swiglu::defs(1152, GateUpRows::Gate, 0, Activation::Silu, true)),
            ("swiglu", swiglu::defs(1152, GateUpRows::Up, 1152, Activation::GeluTanh, true)),
        ];
        for (name, defs) in linear {
            for cfg in &configs {
                // Weights grouped by rows where the adapter runs the rows core (ops/weight.rs).
                let layout = WeightLayout::for_config(cfg);
                for norm_eps in [None, Some(1e-6)] {
                    let shape = LinearShape { k: 1024, n: 1152, rows: Rows::Tokens, norm_eps, layout };
                    for (core, src) in sources(name, &defs, ty, &shape, cfg) {
                        validate(&format!("{name} {ty:?} {cfg:?} {layout:?} norm {norm_eps:?} {core:?}"), &src);
                    }
                }
            }
        }
        validate(&format!("dequant_f16 {ty:?}"), &dequant_f16::source(ty, 1152, 1024));
        for layout in [WeightLayout::Rows, WeightLayout::Grouped] {
            validate("embedding", &embedding::source(ty.libs(), layout, 896, 0, 151936, 1.0));
        }
    }
    validate("rmsnorm", &rmsnorm::source(896, 1e-6, None, false));
    validate("rmsnorm added", &rmsnorm::source(896, 1e-6, None, true));
    for head_dim in [16, 128, 256] {
        for kv in [KvType::F32, KvType::F16] {
            validate("qk_norm", &qk_norm::source(&HeadShape { head_dim, ..heads }, 1e-6, &plan, kv));
        }
    }
    validate("input_f16", &input_f16::source(896, None));
    validate("input_f16 normalized", &input_f16::source(896, Some(1e-6)));
    validate("rmsnorm output rows", &rmsnorm::source(896, 1e-6, Some(&plan), false));
    validate("argmax", &argmax::source(151936));
    for candidates in [sample::candidates_for(16 << 10), sample::candidates_for(48 << 10)] {
        validate("sample", &sample::source(151936, candidates));
    }
    validate("probe_read", &probe_read::source());
    for read_step in [false, true] {
        validate(
            "probe_launch",
            &probe_launch::source(&probe_launch::LaunchShape { workgroups: 1, threads: 64, read_step }, 1),
        );
    }
    validate(
        "probe_phases",
        &probe_phases::source(&probe_phases::PhaseShape { workgroups: 576, threads: 256, phases: 64 }, false),
    );
    // The second with o written as f16 rows too (lib/out_f16).
    let windowed = AttnOptions { scale: 0.2, window: Some(512), o_f16: true };
    let caches = [(AttnOptions::full(&heads), KvType::F32), (windowed, KvType::F16)];
    for (opts, kv) in caches {
        let shapes = [(256, 1, false, false), (256, 2, true, false), (256, 4, true, false), (16, 4, true, true)];
        for (threads, score_lanes, subgroups, kv_u64) in shapes {
            let shape = attention_plain::PlainShape { threads, score_lanes, subgroups, kv_u64, few_rows: false };
            let few_rows = attention_plain::PlainShape { few_rows: true, ..shape };
            for (kernel, shape) in
                [("attention_plain", shape), ("attention_plain", few_rows), ("attention_grouped", shape)]
            {
                validate(kernel, &attention_plain::source(kernel, &heads, opts, &plan, kv, ROWS_THRESHOLD, shape));
            }
        }
        for (score_lanes, subgroups, kv_u64) in [(1u32, false, false), (4, true, false), (4, true, true)] {
            // Heads of up to 64 dimensions take 128 threads and half the lanes.
            for (threads, lanes) in [(256, score_lanes), (128, score_lanes.div_ceil(2))] {
                let max_splits = attention_flash::MAX_SPLITS;
                let shape = attention_flash::FlashShape { threads, score_lanes: lanes, subgroups, kv_u64, max_splits };
                validate("attention_flash", &attention_flash::source(&heads, opts, &plan, kv, shape));
            }
            let shape = attention_split::SplitShape { score_lanes, kv_u64, max_rounds: 4 };
            validate("attention_split", &attention_split::source(&heads, opts, &plan, kv, shape));
        }
        // Tensor cores: the default shapes' sizes, subgroups of 32 and 64, a wide head.
        for (subgroups, bc, sg, head_dim) in [(2, 64, 32, 64), (4, 32, 32, 64), (1, 32, 64, 128), (2, 32, 32, 128)] {
            let shape = attention_coop::CoopAttnShape { subgroups, bc, sg };
            let h = HeadShape { head_dim, ..heads };
            validate("attention_coop", &attention_coop::source(&h, opts, &plan, kv, shape));
        }
    }
}

#[test]
fn every_shader_file_is_embedded() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut on_disk = Vec::new();
    for sub in ["", "lib/"] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "wgsl") {
                on_disk.push(format!("{sub}{}", p.file_stem().unwrap().to_string_lossy()));
            }
        }
    }
    on_disk.sort();
    let mut embedded: Vec<String> = file_names().map(str::to_string).collect();
    embedded.sort();
    assert_eq!(on_disk, embedded);
}

#[test]
fn every_kernel_has_a_launcher_and_a_test() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in file_names().filter(|n| !n.starts_with("lib/")) {
        assert!(root.join(format!("src/ops/{name}.rs")).exists(), "src/ops/{name}.rs");
        let test = if name.starts_with("attention") { "attention".to_string() } else { name.to_string() };
        assert!(root.join(format!("tests/kernels/{test}.rs")).exists(), "tests/kernels/{test}.rs");
    }
}
