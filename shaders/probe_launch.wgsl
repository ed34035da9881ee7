// Launch-latency probe for `wginfer bench kernels`: each dispatch adds INC to a counter the
// previous one wrote, so back-to-back dispatches depend on each other through memory, as a
// decode step's kernels do; the rest of the grid does nothing. READ_STEP also reads the
// per-step uniform (every engine kernel reads one). Constants: INC, READ_STEP, WG_THREADS.
@group(0) @binding(0) var<storage, read_write> counter: array<u32>;
@group(0) @binding(1) var<uniform> step: Step;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (wg.x == 0u && lid == 0u) {
        var inc = INC;
        if (READ_STEP) {
            inc += step.pad0;
        }
        counter[0] += inc;
    }
}
