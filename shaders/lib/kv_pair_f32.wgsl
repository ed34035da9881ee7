// The K/V caches as written by qkv_rope and qk_norm: pairs of adjacent values (a rotation pair,
// or two of v) as f32s. Element i / 2 of an array<KvPair> holds values i and i + 1 (i even).
alias KvPair = vec2<f32>;

fn kv_pair(v: vec2<f32>) -> KvPair {
    return v;
}

fn kv_unpair(p: KvPair) -> vec2<f32> {
    return p;
}
