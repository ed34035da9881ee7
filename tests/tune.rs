//! The GEMV tune cache: what `wginfer tune` stores is what later loads on the same adapter,
//! driver and wgpu version use; anything else is ignored or reported, never a panic. `tune`
//! stores only variants whose output matches the CPU's.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{fixture, read_json};
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::model::config::read_config;
use wginfer::model::folder::ModelFolder;
use wginfer::ops::linear::{GemvShape, LinearConfig};
use wginfer::ops::tune::{check_store, gemv_key, load, store, GemvTable, WGPU_VERSION};
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
    // Entries measured with other kernels (or written before entries named them) are stale.
    let digest = wginfer::gpu::shader::sources_digest();
    assert_eq!(text.matches(digest).count(), 2, "{text}");
    std::fs::write(&path, text.replacen(&format!("\"kernels\": \"{digest}\","), "", 1)).unwrap();
    assert_eq!(load(&path, &a).unwrap(), None, "an entry without a kernel digest");
    assert_eq!(load(&path, &b).unwrap(), Some(table(128)));
    store(&path, &a, &table(16)).unwrap();
    assert_eq!(load(&path, &a).unwrap(), Some(table(16)), "the stale entry is replaced, not merged");
    std::fs::write(&path, std::fs::read_to_string(&path).unwrap().replace(digest, "0123456789abcdef")).unwrap();
    assert_eq!(load(&path, &a).unwrap(), None, "an entry of other kernels");
    assert_eq!(load(&path, &b).unwrap(), None, "an entry of other kernels");
}

#[test]
fn tuned_shapes_override_the_heuristic_for_their_weights_only() {
    let t = wginfer::ops::tune::intern(table(32));
    assert!(std::ptr::eq(t, wginfer::ops::tune::intern(table(32))), "one copy per distinct table");
    let cfg = LinearConfig { tuned: Some(t), ..Default::default() };
    assert_eq!(cfg.gemv_shape(4864, 896, WeightType::F16), GemvShape { lanes: 32, rows: 1, threads: 256 });
    assert_eq!(
        cfg.gemv_shape(4864, 896, WeightType::Q4_0),
        GemvShape::heuristic(4864, 896, WeightType::Q4_0, false, false)
    );
    assert_eq!(
        cfg.gemv_shape(896, 4864, WeightType::F16),
        GemvShape::heuristic(896, 4864, WeightType::F16, false, false)
    );
    // A one-lane (rows core) shape where the rows core does not fit is passed over: a
    // hand-edited cache made the model fail to load, naming the kernel, not the cache.
    let one_lane = wginfer::ops::tune::intern(
        [(gemv_key(896, 4864, WeightType::F16), GemvShape { lanes: 1, rows: 2, threads: 8 })].into(),
    );
    let cfg = LinearConfig { tuned: Some(one_lane), ..Default::default() };
    assert_eq!(
        cfg.gemv_shape(4864, 896, WeightType::F16),
        GemvShape::heuristic(4864, 896, WeightType::F16, false, false)
    );
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
    // `tune` checks the cache before timing anything: the corrupt file, and a folder that is a
    // file; a new file in a writable folder passes and leaves nothing behind.
    assert!(format!("{:#}", check_store(&path).unwrap_err()).contains("not a valid cache file"));
    assert!(check_store(&path.join("tune.json")).is_err());
    let fresh = dir.path().join("new").join("tune.json");
    check_store(&fresh).unwrap();
    assert!(!fresh.exists() && std::fs::read_dir(dir.path().join("new")).unwrap().next().is_none());
    // A folder is refused before the tune (it was found at its end), also one not made yet.
    for folder in [dir.path().join("new"), dir.path().join(format!("later{}", std::path::MAIN_SEPARATOR))] {
        assert!(format!("{:#}", check_store(&folder).unwrap_err()).contains("is a folder"), "{}", folder.display());
    }
    assert!(!dir.path().join("later").exists());
}

/// The cache is written through a link (the link was replaced by a file, its target left
/// stale), and a write that fails leaves no temporary file behind.
#[cfg(unix)]
#[test]
fn cache_writes_follow_links_and_clean_up() {
    let dir = tempfile::tempdir().unwrap();
    let (target, link) = (dir.path().join("real.json"), dir.path().join("link.json"));
    let a = adapter("gpu a");
    store(&target, &a, &table(64)).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    store(&link, &a, &table(128)).unwrap();
    assert!(link.is_symlink());
    assert_eq!(load(&target, &a).unwrap(), Some(table(128)));
    // A folder where the file goes: the rename fails.
    let blocked = dir.path().join("blocked.json");
    std::fs::create_dir(&blocked).unwrap();
    assert!(wginfer::gpu::cache_files::write_replacing(&blocked, b"{}").is_err());
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
}

#[test]
fn wgpu_version_matches_the_lock_file() {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock")).unwrap();
    let want = format!("name = \"wgpu\"\nversion = \"{WGPU_VERSION}\"");
    assert!(lock.contains(&want), "Cargo.lock has another wgpu than ops::tune::WGPU_VERSION");
}

/// `wginfer` with `line` added to the GEMV core (through WGINFER_SHADERS, into `dir`) right before
/// a lane group's sums (`acc`) are reduced, where the WGSL constants say which shape it was built
/// with.
fn wginfer_with_gemv_line(dir: &Path, line: &str) -> Command {
    let core = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/linear_gemv.wgsl")).unwrap();
    let anchor = "let part = LANES / MAX_PARTS;";
    assert!(core.contains(anchor), "shaders/lib/linear_gemv.wgsl changed: update this test");
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::write(dir.join("lib/linear_gemv.wgsl"), core.replace(anchor, &format!("{anchor}\n{line}"))).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_wginfer"));
    c.env("WGINFER_SHADERS", dir);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_later_load_builds_the_stored_shape() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("qwen2-f32");
    // A shape the heuristic never picks (8 lanes), stored for the fixture's down projection
    // under this adapter's own name, driver and wgpu version.
    let cfg = read_config(&ModelFolder::dir(&model)).unwrap();
    let key = gemv_key(cfg.hidden as u32, cfg.intermediate as u32, WeightType::F32);
    let cache = dir.path().join("tune.json");
    let info = Gpu::new(&GpuOptions::default()).unwrap().info;
    store(&cache, &info, &[(key, GemvShape { lanes: 8, rows: 4, threads: 64 })].into()).unwrap();
    // A GEMV core that does not compile with that shape: loading fails if and only if the load
    // builds a kernel with it.
    let load = |cache: &Path| -> Output {
        wginfer_with_gemv_line(
            &dir.path().join("shaders"),
            "const_assert !(LANES == 8u && RPG == 4u && WG_THREADS == 64u);",
        )
        .env("WGINFER_TUNE_CACHE", cache)
        .args(["info", "--model", model.to_str().unwrap()])
        .output()
        .unwrap()
    };
    let without = load(&dir.path().join("absent.json"));
    assert!(without.status.success(), "{}", text(&without.stderr));
    let with = load(&cache);
    let err = text(&with.stderr);
    assert!(!with.status.success(), "{err}");
    assert!(err.contains("kernel matmul failed to compile") && err.contains("const_assert"), "{err}");
}

#[test]
fn tune_stores_only_variants_that_match_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    let model = fixture("llama-f32");
    // Every GEMV of 8 lanes adds 1 to its outputs; the 8-lane variant is also the faster of the
    // two on lavapipe, so only the check keeps it out of the cache.
    let out = wginfer_with_gemv_line(&dir.path().join("shaders"), "if (LANES == 8u) { acc += vec4<f32>(1.0); }")
        .args(["tune", "--model", model.to_str().unwrap(), "--quick", "--reps", "1"])
        .args(["--variants", "8l1r256t,32l2r128t", "--cache", cache.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("5 GEMV variants gave wrong outputs"), "{stderr}");
    let reported = stdout.lines().filter(|l| l.contains("8l1r256t") && l.contains("WRONG")).count();
    assert_eq!(reported, 5, "the wrong variant is reported for each of the 5 weight shapes: {stdout}");
    let stored = read_json(&cache)["entries"][0]["gemv"].clone();
    let stored: GemvTable = serde_json::from_value(stored).unwrap();
    assert_eq!(stored.len(), 5, "{stored:?}");
    assert!(stored.values().all(|&s| s == GemvShape { lanes: 32, rows: 2, threads: 128 }), "{stored:?}");
}
