// Split-K across workgroups for the tensor-core cores (ops/linear.rs k_splits): the grid's z
// workgroups of a tile each take an even share of its k slices, publish their TM x TN sums
// through atomics, and the last of the tile to finish adds them in split order (so a tile's
// outputs do not depend on which split finished last) and stores them; it then resets the
// tile's counter, so the counters are 0 between dispatches. Relies on storageBarrier()
// ordering storage writes device-wide around the counter, as shaders/argmax.wgsl does.
// Constants: TM, TN, TK, K, N, WG_THREADS, SPLIT_COUNTERS (the tile counters before the sums);
// from the core: tile_pair(tile, splits, t), a finished pair of its tile; store_pair from the
// kernel.
// A counter per tile, then each (tile, split)'s TM x TN sums (f32 bits).
@group(0) @binding(14) var<storage, read_write> split_sums: array<atomic<u32>>;

// The k range [x, y) of split z of `splits`: whole TK slices, an even share of them.
fn split_k_range(z: u32, splits: u32) -> vec2<u32> {
    let slices = (K + TK - 1u) / TK;
    return vec2<u32>(z * slices / splits * TK, min((z + 1u) * slices / splits * TK, K));
}

// Where split s of `splits` of tile `tile` keeps its sums.
fn split_at(tile: u32, splits: u32, s: u32) -> u32 {
    return SPLIT_COUNTERS + (tile * splits + s) * TM * TN;
}

// Publishes the pair of sums at t (= m * TN + n) of a split.
fn split_publish(at: u32, t: u32, v: vec2<f32>) {
    atomicStore(&split_sums[at + t], bitcast<u32>(v.x));
    atomicStore(&split_sums[at + t + 1u], bitcast<u32>(v.y));
}

// Counts one more finished split of `tile` (call from one thread after every thread's
// split_publish and a storageBarrier); returns the count before it.
fn split_arrive(tile: u32) -> u32 {
    return atomicAdd(&split_sums[tile], 1u);
}

// The pair at t of `tile`: its splits' sums in split order.
fn split_total(tile: u32, splits: u32, t: u32) -> vec2<f32> {
    var v = vec2<f32>(0.0);
    for (var s = 0u; s < splits; s++) {
        let p = split_at(tile, splits, s) + t;
        v += vec2<f32>(bitcast<f32>(atomicLoad(&split_sums[p])), bitcast<f32>(atomicLoad(&split_sums[p + 1u])));
    }
    return v;
}

// Stores the tile at (m0, n0) (its pairs from the core's tile_pair) and, where its k was split,
// resets its counter (called by every invocation of the last workgroup of the tile).
fn store_tile(tid: u32, tile: u32, splits: u32, m0: u32, n0: u32, rows: u32) {
    for (var i = tid; i < TM * TN / 2u; i += WG_THREADS) {
        let m = i / (TN / 2u);
        let n = (i % (TN / 2u)) * 2u;
        if (m0 + m < rows && n0 + n < N) {
            let v = tile_pair(tile, splits, m * TN + n);
            store_pair(m0 + m, n0 + n, v.x, v.y);
        }
    }
    if (splits > 1u && tid == 0u) {
        atomicStore(&split_sums[tile], 0u);
    }
}
