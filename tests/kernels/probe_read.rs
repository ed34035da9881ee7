use super::common::*;
use wginfer::ops::probe_read::ProbeRead;

#[test]
fn counts_whole_workgroups_and_refuses_tiny_buffers() {
    let gpu = gpu();
    let sink = zeros(gpu, 4);
    // 256 threads x 8 vec4s = 32 KiB per workgroup: 100 KiB is three whole workgroups.
    let src = gpu.storage("src", 100 << 10).unwrap();
    let probe = ProbeRead::new(gpu, &src, &sink).unwrap();
    assert_eq!(probe.bytes, 3 * (32 << 10));
    gpu.run_pass(|p| probe.record(p)).unwrap();
    // Its branch never fires on data this small: the sink stays zero.
    assert_eq!(read(gpu, &sink, 1), vec![0.0]);
    let tiny = gpu.storage("tiny", 1 << 10).unwrap();
    let e = ProbeRead::new(gpu, &tiny, &sink).err().unwrap().to_string();
    assert!(e.contains("too small"), "{e}");
}
