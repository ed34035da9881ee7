//! The engine thread: streaming, priorities, cancelling, and a failed load keeping the old model.

mod support;

use std::time::Duration;

use support::fixture;
use wginfer::engine::Finish;
use wginfer::sampling::SamplingParams;
use wginfer::sched::{Command, Event, GenRequest, LoadStage, ModelSource, Priority, RequestStats, Worker};
use wginfer::tokenizer::Message;

fn request(id: u64, priority: Priority, max_tokens: usize) -> GenRequest {
    GenRequest {
        id,
        messages: vec![Message::new("user", &format!("request {id}"))],
        sampling: SamplingParams { temperature: 0.0, ..Default::default() },
        max_tokens,
        priority,
    }
}

fn loaded_worker() -> Worker {
    let w = Worker::spawn();
    w.send(Command::Load(ModelSource::Path(fixture("qwen2-f32")), Box::default()));
    let mut stages = Vec::new();
    loop {
        match w.events.recv_timeout(Duration::from_secs(120)).expect("load event") {
            Event::Loading { stage, .. } => stages.push(stage),
            Event::Loaded { .. } => {
                // The status line hears what the load is doing as it goes.
                assert_eq!(stages, [LoadStage::Weights, LoadStage::Kernels]);
                return w;
            }
            Event::LoadFailed { error, .. } => panic!("{error}"),
            _ => {}
        }
    }
}

/// Events until `n` requests have finished; returns their stats in order of finishing.
fn finished(w: &Worker, n: usize, mut on_event: impl FnMut(&Event)) -> Vec<RequestStats> {
    let mut done = Vec::new();
    while done.len() < n {
        let e = w.events.recv_timeout(Duration::from_secs(300)).expect("an event");
        on_event(&e);
        match e {
            Event::Finished(s) => done.push(s),
            Event::Failed { error, .. } => panic!("{error}"),
            _ => {}
        }
    }
    done
}

#[test]
fn streams_tokens_and_reports_metrics() {
    let w = loaded_worker();
    w.send(Command::Submit(request(1, Priority::Interactive, 8)));
    let (mut tokens, mut metrics) = (0, 0);
    let done = finished(&w, 1, |e| match e {
        Event::Token { .. } => tokens += 1,
        Event::Metrics(m) => metrics += usize::from(m.kv_blocks_used > 0),
        _ => {}
    });
    assert!(tokens > 0 && metrics > 0);
    assert!(done[0].tokens <= 8 && done[0].ttft_ms > 0.0);
}

#[test]
fn interactive_work_overtakes_background_work() {
    let w = loaded_worker();
    for id in 1..=3 {
        w.send(Command::Submit(request(id, Priority::Background, 300)));
    }
    // The interactive request arrives once a background one is running.
    while !matches!(w.events.recv_timeout(Duration::from_secs(120)).expect("an event"), Event::Started { .. }) {}
    w.send(Command::Submit(request(9, Priority::Interactive, 5)));
    let mut max_waiting = 0;
    let done = finished(&w, 4, |e| {
        if let Event::Metrics(m) = e {
            max_waiting = max_waiting.max(m.waiting);
        }
    });
    assert_eq!(
        done[0].id,
        9,
        "the interactive request finishes first: {:?}",
        done.iter().map(|d| d.id).collect::<Vec<_>>()
    );
    assert!(max_waiting >= 3, "the queue was visible");
    assert!(done[1..].iter().all(|d| d.priority == Priority::Background && d.finish != Finish::Stopped));
}

#[test]
fn cancel_stops_a_running_request() {
    let w = loaded_worker();
    w.send(Command::Submit(request(5, Priority::Interactive, 2000)));
    let mut sent = false;
    let done = finished(&w, 1, |e| {
        if matches!(e, Event::Token { .. }) && !sent {
            w.send(Command::Cancel(5));
            sent = true;
        }
    });
    assert_eq!(done[0].finish, Finish::Stopped);
}

#[test]
fn a_failed_load_keeps_the_old_model() {
    let w = loaded_worker();
    w.send(Command::Load(ModelSource::Path("/nonexistent/model".into()), Box::default()));
    loop {
        if let Event::LoadFailed { error, .. } = w.events.recv_timeout(Duration::from_secs(60)).unwrap() {
            assert!(error.contains("/nonexistent/model"));
            break;
        }
    }
    w.send(Command::Submit(request(7, Priority::Interactive, 4)));
    assert_eq!(finished(&w, 1, |_| {})[0].id, 7);
}

/// The page's way in: a GGUF handed over as bytes, loaded by the engine loop; its greedy text
/// for the 7-token golden case is transformers' ids, decoded.
#[test]
fn a_model_handed_over_as_bytes_streams_transformers_ids() {
    let stem = "tiny-qwen2-q8_0";
    let path = fixture("gguf").join(format!("{stem}.gguf"));
    let bytes = std::fs::read(&path).unwrap();
    let w = Worker::spawn();
    w.send(Command::Load(ModelSource::Gguf { name: format!("{stem}.gguf"), bytes }, Box::default()));
    loop {
        match w.events.recv_timeout(Duration::from_secs(120)).expect("load event") {
            Event::Loaded { path, .. } => break assert_eq!(path.display().to_string(), format!("{stem}.gguf")),
            Event::LoadFailed { error, .. } => panic!("{error}"),
            _ => {}
        }
    }
    let golden = support::read_json(&fixture("gguf").join(format!("{stem}.golden.json")));
    let case = &golden["cases"][1];
    w.send(Command::SubmitIds(support::seq_request(1, &support::ids(&case["prompt_ids"]), 16)));
    let mut text = String::new();
    finished(&w, 1, |e| {
        if let Event::Token { text: t, .. } = e {
            text.push_str(t);
        }
    });
    let tok = wginfer::tokenizer::TextTokenizer::from_gguf(&wginfer::model::gguf::Gguf::open(&path).unwrap()).unwrap();
    assert_eq!(text, tok.decode(&support::ids(&case["greedy_ids"])).unwrap());
}
