// The attention kernels' K and V caches (bindings 1 and 2), read a vec4 of one row at a time.
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<f32>>;

fn k_at(i: u32) -> vec4<f32> {
    return k_cache[i];
}

fn v_at(i: u32) -> vec4<f32> {
    return v_cache[i];
}
