// lib/kv_pair_f32 for caches of f16 values (--kv-type f16): a pair is one u32 (pack2x16float, so
// no shader-f16 support is needed), rounded to nearest.
alias KvPair = u32;

fn kv_pair(v: vec2<f32>) -> KvPair {
    return pack2x16float(v);
}

fn kv_unpair(p: KvPair) -> vec2<f32> {
    return unpack2x16float(p);
}
