// Phase-chaining probe for `wginfer bench kernels`: what a decode step would pay per kernel if its
// kernels were phases of one dispatch instead of dependent launches. The grid is PHASES phases
// of G workgroups each, in workgroup order; a workgroup of phase p > 0 first waits (spinning on
// an atomic counter) until every workgroup of phase p - 1 has counted itself done, then reads a
// value another workgroup of that phase wrote (plain storage, as a kernel's outputs are) and
// checks it, writes its own, and counts itself done. A workgroup waits only on lower-numbered
// ones, so it relies on the GPU starting workgroups in order (not on all of them being resident
// at once); a wait gives up after SPIN_LIMIT loads and is counted instead of hanging. The last
// workgroup of the last phase resets the counters and starts the next dispatch's generation, so
// a value left by an earlier dispatch reads as stale.
// Constants: G, PHASES, WG_THREADS, SPIN_LIMIT.
// counters[p]: phase p's workgroups done; then the generation, the waits that gave up, the
// reads that found another value than the one written before them.
@group(0) @binding(0) var<storage, read_write> counters: array<atomic<u32>>;
// One value per (phase, workgroup, thread).
@group(0) @binding(1) var<storage, read_write> data: array<u32>;

const GENERATION: u32 = PHASES;
const GAVE_UP: u32 = PHASES + 1u;
const STALE: u32 = PHASES + 2u;

var<workgroup> ready: u32;

// The value phase p writes in generation g.
fn mark(g: u32, p: u32) -> u32 {
    return g * PHASES + p + 1u;
}

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = wg.x / G;
    let w = wg.x % G;
    if (lid == 0u) {
        var ok = 1u;
        if (p > 0u) {
            var spins = 0u;
            while (atomicLoad(&counters[p - 1u]) < G) {
                spins += 1u;
                if (spins == SPIN_LIMIT) {
                    atomicAdd(&counters[GAVE_UP], 1u);
                    ok = 0u;
                    break;
                }
            }
        }
        ready = ok;
    }
    // The wait's outcome reaches every thread, and orders the reads below after it.
    let ok = workgroupUniformLoad(&ready);
    storageBarrier();
    let g = atomicLoad(&counters[GENERATION]);
    if (p > 0u && ok == 1u) {
        // A neighbour's value of the phase before: another workgroup's plain store.
        let seen = data[((p - 1u) * G + (w + 1u) % G) * WG_THREADS + lid];
        if (seen != mark(g, p - 1u)) {
            atomicAdd(&counters[STALE], 1u);
        }
    }
    data[(p * G + w) * WG_THREADS + lid] = mark(g, p);
    storageBarrier();
    workgroupBarrier();
    if (lid == 0u) {
        let before = atomicAdd(&counters[p], 1u);
        if (p == PHASES - 1u && before == G - 1u) {
            for (var i = 0u; i < PHASES; i++) {
                atomicStore(&counters[i], 0u);
            }
            atomicAdd(&counters[GENERATION], 1u);
        }
    }
}
