//! GPU faults are errors, never a panic (issue 13, point 4): out of memory at load names what did
//! not fit, an invalid buffer or an error outside any scope becomes an error, and a lost device
//! fails the steps running on it while a new load works.

mod support;

use support::{fixture, seq_request};
use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::sampling::SamplingParams;
use wginfer::sched::{BatchOptions, Batcher, Priority, SeqEvent};

fn capped(bytes: u64) -> EngineOptions {
    EngineOptions { gpu: GpuOptions { memory_cap: Some(bytes), ..Default::default() }, ..Default::default() }
}

/// A model larger than the memory allowed: the load fails naming the buffer that did not fit
/// and the cap; with room for it the same load works.
#[test]
fn out_of_memory_at_load_names_what_did_not_fit() {
    let err = match Engine::load(&fixture("llama-f32"), &capped(256 << 10)) {
        Ok(_) => panic!("the model loaded within 256 KiB"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("out of GPU memory") && err.contains("--gpu-memory") && err.contains("MiB"), "{err}");
    assert!(err.contains('"'), "the buffer is named: {err}");
    let e = Engine::load(&fixture("llama-f32"), &capped(256 << 20)).unwrap();
    assert!(e.gpu.bytes_allocated() <= 256 << 20);
}

/// wgpu's validation errors come back as errors: through `Gpu::buffer` naming the buffer, and
/// from a call outside any error scope at the next `check` (wgpu's default handler panics).
#[test]
fn validation_errors_are_errors() {
    let gpu = Gpu::new(&GpuOptions::default()).unwrap();
    let invalid = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::STORAGE;
    let err = format!("{:#}", gpu.buffer("bad usage", 64, invalid).unwrap_err());
    assert!(err.contains("bad usage"), "{err}");
    gpu.check().unwrap();
    let _ = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("unscoped"),
        size: 64,
        usage: invalid,
        mapped_at_creation: false,
    });
    let err = format!("{:#}", gpu.check().unwrap_err());
    assert!(err.starts_with("GPU error"), "{err}");
    // Reported once: the device goes on working.
    gpu.check().unwrap();
    gpu.storage("fine", 64).unwrap();
}

/// A step that fails (here a validation error raised outside any scope while a generation
/// runs, reported at the step's wait) fails its generation; the engine then generates again
/// as a fresh one does, pipelined steps and all. (Its queued step, dropped unfinished, was
/// counted as queued for good: every later step failed with "a step is already queued".)
#[test]
fn a_failed_step_leaves_the_engine_working() {
    let mut e = Engine::load(&fixture("llama-f32"), &EngineOptions::default()).unwrap();
    let req =
        Request { prompt_ids: vec![5, 6, 7], max_tokens: 12, sampling: SamplingParams::default(), stop_at_eos: false };
    let want = e.generate(&req, |_| true).unwrap().ids;
    e.reset();
    let device = e.gpu.device.clone();
    let mut n = 0;
    let failed = e.generate(&req, |_| {
        n += 1;
        if n == 4 {
            let _ = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("unscoped"),
                size: 64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
        }
        true
    });
    assert!(format!("{:#}", failed.unwrap_err()).starts_with("GPU error"));
    assert_eq!(e.forward.steps_in_flight(), 0);
    assert_eq!(e.generate(&req, |_| true).unwrap().ids, want);
    assert_eq!(
        e.prompt_logits(&[5, 6]).unwrap(),
        Engine::load(&fixture("llama-f32"), &EngineOptions::default()).unwrap().prompt_logits(&[5, 6]).unwrap()
    );
}

/// A device destroyed while requests run: the next step is an error saying the device was lost
/// (not a panic, not a hang), and a model loaded again on a new device generates.
#[test]
fn a_lost_device_fails_the_running_steps_and_a_new_load_works() {
    let mut e = Engine::load(&fixture("llama-f32"), &EngineOptions::default()).unwrap();
    let mut b = Batcher::new(&mut e, BatchOptions::default());
    b.submit(seq_request(1, &[5, 6, 7], 50));
    b.submit(seq_request(2, &[5, 6, 7], 50));
    let mut tokens = 0;
    while tokens < 4 {
        tokens += b.step(&mut e).unwrap().iter().filter(|ev| matches!(ev, SeqEvent::Token { .. })).count();
    }
    e.gpu.device.destroy();
    let err = (0..4).find_map(|_| b.step(&mut e).err()).expect("a step on a destroyed device fails");
    let err = format!("{err:#}");
    assert!(err.contains("the GPU device was lost (Destroyed)"), "{err}");
    assert!(e.gpu.lost().is_some());
    drop((b, e));
    let mut again = Engine::load(&fixture("llama-f32"), &EngineOptions::default()).unwrap();
    let req = wginfer::engine::Request {
        prompt_ids: vec![5, 6, 7],
        max_tokens: 3,
        sampling: SamplingParams::default(),
        stop_at_eos: false,
    };
    assert_eq!(again.generate(&req, |_| true).unwrap().ids.len(), 3);
}

/// The engine thread reports a load that runs out of GPU memory as a failed load naming it, and
/// a later load on a new device serves requests.
#[test]
fn the_worker_reports_out_of_memory_and_loads_again() {
    use std::time::Duration;
    use wginfer::sched::{Command, Event, GenRequest, ModelSource, Worker};
    let w = Worker::spawn();
    let next_load = |w: &Worker| loop {
        match w.events.recv_timeout(Duration::from_secs(120)).expect("a load event") {
            Event::Loaded { .. } => return Ok(()),
            Event::LoadFailed { error, .. } => return Err(error),
            _ => {}
        }
    };
    w.send(Command::Load(ModelSource::Path(fixture("llama-f32")), Box::new(capped(256 << 10))));
    let err = next_load(&w).expect_err("a load within 256 KiB");
    assert!(err.contains("out of GPU memory"), "{err}");
    w.send(Command::Load(ModelSource::Path(fixture("llama-f32")), Box::default()));
    next_load(&w).unwrap();
    let req = GenRequest {
        id: 1,
        messages: vec![wginfer::tokenizer::Message::new("user", "hi")],
        sampling: SamplingParams::default(),
        max_tokens: 3,
        priority: Priority::Interactive,
    };
    w.send(Command::Submit(req));
    loop {
        match w.events.recv_timeout(Duration::from_secs(120)).expect("an event") {
            Event::Finished(s) => break assert_eq!(s.id, 1),
            Event::Failed { error, .. } => panic!("{error}"),
            _ => {}
        }
    }
}
