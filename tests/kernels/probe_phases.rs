use super::common::*;
use wginfer::ops::probe_phases::{PhaseShape, ProbePhases};

/// Every phase waits for the one before and reads its stores, dispatch after dispatch: the last
/// workgroup resets the counters and starts the next generation (or a later dispatch's phases
/// would not wait, and its reads could find the earlier one's values). Small grids: CPU adapters
/// run a few workgroups at once. Stale reads are what the probe measures on a GPU (its memory
/// model does not promise a plain store's visibility to another workgroup of the dispatch), so
/// only a CPU adapter, whose memory is coherent, must have none.
#[test]
fn each_phase_sees_the_stores_of_the_one_before() {
    let gpu = gpu();
    for (workgroups, threads) in [(1, 64), (3, 32)] {
        let op = ProbePhases::new(gpu, PhaseShape { workgroups, threads, phases: 6 }).unwrap();
        gpu.run_pass(|p| (0..5).for_each(|_| op.record(p))).unwrap();
        let c = op.counters(gpu).unwrap();
        let at = format!("{workgroups} workgroups a phase: {c:?}");
        assert!(c.done.iter().all(|&d| d == 0) && c.generation == 5 && c.gave_up == 0, "{at}");
        assert!(!gpu.caps.cpu || c.stale == 0, "{at}");
    }
}
