//! The GEMV tune cache: what `wginfer tune` stores is what later loads on the same adapter,
//! driver and wgpu version use; anything else is ignored or reported, never a panic.

use wginfer::ops::linear::{GemvShape, LinearConfig};
use wginfer::ops::tune::{gemv_key, load, store, GemvTable, WGPU_VERSION};
use wginfer::ops::WeightType;

fn adapter(name: &str) -> wgpu::AdapterInfo {
    wgpu::AdapterInfo {
        name: name.into(),
        vendor: 0,
        device: 0,
        device_type: wgpu::DeviceType::Cpu,
        device_pci_bus_id: String::new(),
        driver: "driver".into(),
        driver_info: "1.0".into(),
        backend: wgpu::Backend::Vulkan,
        subgroup_min_size: 8,
        subgroup_max_size: 8,
        transient_saves_memory: Some(false),
        limit_bucket: None,
    }
}

fn table(lanes: u32) -> GemvTable {
    [(gemv_key(896, 4864, WeightType::F16), GemvShape { lanes, rows: 1, threads: 256 })].into()
}

#[test]
fn entries_are_kept_per_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/tune.json");
    let (a, b) = (adapter("gpu a"), adapter("gpu b"));
    assert_eq!(load(&path, &a).unwrap(), None, "no file yet");
    store(&path, &a, &table(64)).unwrap();
    store(&path, &b, &table(128)).unwrap();
    assert_eq!(load(&path, &a).unwrap(), Some(table(64)));
    assert_eq!(load(&path, &b).unwrap(), Some(table(128)));
    // Another driver version is another stack: its entry does not apply.
    let newer = wgpu::AdapterInfo { driver_info: "2.0".into(), ..a.clone() };
    assert_eq!(load(&path, &newer).unwrap(), None);
    // The same GPU through another backend is another stack too.
    let gl = wgpu::AdapterInfo { backend: wgpu::Backend::Gl, ..a.clone() };
    assert_eq!(load(&path, &gl).unwrap(), None);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(WGPU_VERSION));
}

#[test]
fn tuned_shapes_override_the_heuristic_for_their_weights_only() {
    let t = wginfer::ops::tune::intern(table(32));
    assert!(std::ptr::eq(t, wginfer::ops::tune::intern(table(32))), "one copy per distinct table");
    let cfg = LinearConfig { tuned: Some(t), ..Default::default() };
    assert_eq!(cfg.gemv_shape(4864, 896, WeightType::F16), GemvShape { lanes: 32, rows: 1, threads: 256 });
    assert_eq!(cfg.gemv_shape(4864, 896, WeightType::Q4_0), GemvShape::heuristic(4864, 896));
    assert_eq!(cfg.gemv_shape(896, 4864, WeightType::F16), GemvShape::heuristic(896, 4864));
}

#[test]
fn bad_cache_files_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    let a = adapter("gpu a");
    std::fs::write(&path, "{ not json").unwrap();
    let e = format!("{:#}", load(&path, &a).unwrap_err());
    assert!(e.contains("tune.json") && e.contains("not a valid cache file") && e.contains("delete"), "{e}");
    store(&dir.path().join("ok.json"), &a, &table(3)).unwrap();
    let e = format!("{:#}", load(&dir.path().join("ok.json"), &a).unwrap_err());
    assert!(e.contains("ok.json") && e.contains("896x4864 f16") && e.contains("invalid"), "{e}");
}

#[test]
fn wgpu_version_matches_the_lock_file() {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock")).unwrap();
    let want = format!("name = \"wgpu\"\nversion = \"{WGPU_VERSION}\"");
    assert!(lock.contains(&want), "Cargo.lock has another wgpu than ops::tune::WGPU_VERSION");
}
