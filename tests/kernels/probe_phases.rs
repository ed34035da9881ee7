use super::common::*;
use wginfer::ops::probe_phases::{PhaseFaults, PhaseShape, ProbePhases};

/// Every phase waits for the one before and reads its stores, dispatch after dispatch (the
/// counters reset and the generation moves on, or a later dispatch's reads would find the
/// earlier one's values or wait in vain). Small grids: CPU adapters run a few workgroups at once.
#[test]
fn each_phase_sees_the_stores_of_the_one_before() {
    let gpu = gpu();
    for (workgroups, threads) in [(1, 64), (3, 32)] {
        let op = ProbePhases::new(gpu, PhaseShape { workgroups, threads, phases: 6 }).unwrap();
        gpu.run_pass(|p| (0..5).for_each(|_| op.record(p))).unwrap();
        assert_eq!(op.faults(gpu).unwrap(), PhaseFaults { gave_up: 0, stale: 0 }, "{workgroups} workgroups a phase");
    }
}
