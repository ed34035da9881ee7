// lib/kv_vec4 for CPU adapters with SHADER_INT64: each vec4 of K or V is two u64 loads, not four
// f32 loads, since llvmpipe loads storage per lane and per component (lib/words64).
// Needs f32x4_of from lib/u64_bits.
@group(0) @binding(1) var<storage, read> k_cache: array<vec2<u64>>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec2<u64>>;

fn k_at(i: u32) -> vec4<f32> {
    return f32x4_of(k_cache[i]);
}

fn v_at(i: u32) -> vec4<f32> {
    return f32x4_of(v_cache[i]);
}
