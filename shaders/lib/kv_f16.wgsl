// lib/kv_vec4 for caches of f16 values (--kv-type f16): each vec4 of K or V is one 8-byte load
// of four f16s, unpacked to f32.
@group(0) @binding(1) var<storage, read> k_cache: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec2<u32>>;

fn f16x4(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn k_at(i: u32) -> vec4<f32> {
    return f16x4(k_cache[i]);
}

fn v_at(i: u32) -> vec4<f32> {
    return f16x4(v_cache[i]);
}
