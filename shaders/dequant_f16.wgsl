enable f16;
// A quantized weight part as f16 rows, written once per prompt step so the tensor-core prefill
// core reads it as it reads an f16 model's weights (lib/coop_w_f16) instead of dequantizing
// every block once per tile of rows (lib/coop_w_dequant): y[e] = f16(w[e]) over the part's
// N x K values row after row, rounded as lib/coop_w_dequant rounds them, so the products are
// the same. Each thread converts 8 values (lib/weight_*'s w_load8) per turn of a grid-strided
// loop. Constants: GROUPS (N * K / 8), WG_THREADS.
@group(0) @binding(0) var<storage, read> w: array<WElem>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f16>>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    for (var g = id.x; g < GROUPS; g += groups.x * WG_THREADS) {
        let v = w_load8(g * 8u);
        y[2u * g] = vec4<f16>(v.lo);
        y[2u * g + 1u] = vec4<f16>(v.hi);
    }
}
