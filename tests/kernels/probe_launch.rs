use super::common::*;
use wginfer::ops::probe_launch::{LaunchShape, ProbeLaunch};
use wginfer::ops::Step;

#[test]
fn every_launch_adds_once_in_order() {
    let gpu = gpu();
    let (counter, sb) = (upload_u32(gpu, &[0]), Step::buffer(gpu).unwrap());
    Step { pad: [5, 0], ..Default::default() }.write(gpu, &sb);
    let grid = LaunchShape { workgroups: 40, threads: 64, read_step: false };
    let (a, b) = (
        ProbeLaunch::new(gpu, &grid, 1, &counter, &sb).unwrap(),
        ProbeLaunch::new(gpu, &grid, 2, &counter, &sb).unwrap(),
    );
    let uniform =
        ProbeLaunch::new(gpu, &LaunchShape { workgroups: 1, threads: 8, read_step: true }, 1, &counter, &sb).unwrap();
    gpu.run_pass(|p| {
        for _ in 0..10 {
            a.record(p);
            b.record(p);
            uniform.record(p);
        }
    })
    .unwrap();
    // 10 x (1 + 2 + (1 + 5)): a lost or doubled update changes the sum.
    assert_eq!(read_u32(gpu, &counter, 1), [90]);
}
