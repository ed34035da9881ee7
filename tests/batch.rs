//! Many sequences at once (the continuous batcher): greedy prompts run together, arriving at
//! different steps, give exactly the ids each gives alone (and transformers' where a golden
//! exists), with ring and paged KV memory (and f16 K and V); memory comes back; a dry pool preempts without
//! changing anyone's ids.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use support::{fixture, golden, ids, seq_request, watchdog};
use wginfer::engine::{Engine, EngineOptions, Finish, Request};
use wginfer::kv::{KvLayout, KvOptions, KvType};
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;
use wginfer::sched::{BatchOptions, Batcher, Priority, SeqEvent, SeqRequest, SeqStats};

fn engine(path: &std::path::Path, kv: KvOptions) -> Engine {
    let opts = EngineOptions { forward: ForwardOptions { kv, ..Default::default() }, ..Default::default() };
    Engine::load(path, &opts).unwrap()
}

fn ring(parallel: u32) -> KvOptions {
    KvOptions { layout: KvLayout::Ring, parallel, context: 512, ..Default::default() }
}

fn paged(parallel: u32, blocks: Option<u32>) -> KvOptions {
    KvOptions { layout: KvLayout::Paged, parallel, context: 512, block: 16, blocks, ..Default::default() }
}

/// Runs `prompts` through a batcher, the i-th submitted before step `arrivals[i]`; returns
/// each one's ids and stats, and the rows all steps ran.
fn run_batch(
    e: &mut Engine,
    opts: BatchOptions,
    prompts: &[Vec<u32>],
    max_tokens: usize,
    arrivals: &[usize],
) -> (Vec<Vec<u32>>, Vec<SeqStats>, u64) {
    let mut b = Batcher::new(e, opts);
    let mut out: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut stats = Vec::new();
    let mut step = 0;
    // Until every request has finished and no speculative step is left in flight.
    while stats.len() < prompts.len() || !b.is_idle() {
        for (i, p) in prompts.iter().enumerate().filter(|(i, _)| arrivals[*i] == step) {
            b.submit(seq_request(i as u64, p, max_tokens));
        }
        for ev in b.step(e).unwrap() {
            match ev {
                SeqEvent::Token { id, token, .. } => out.entry(id).or_default().push(token),
                SeqEvent::Finished(s) => stats.push(s),
                SeqEvent::Failed { id, error } => panic!("request {id}: {error}"),
            }
        }
        step += 1;
        assert!(step < 10_000, "the batch never finished");
    }
    assert!(b.is_idle());
    stats.sort_by_key(|s| s.id);
    ((0..prompts.len() as u64).map(|i| out.remove(&i).unwrap_or_default()).collect(), stats, b.metrics.rows)
}

/// The longest prompt of the qwen2-f32 goldens (hundreds of tokens), to cut prompts from.
fn longest_prompt() -> Vec<u32> {
    let g = golden("qwen2-f32");
    g["cases"].as_array().unwrap().iter().map(|c| ids(&c["prompt_ids"])).max_by_key(Vec::len).unwrap()
}

/// The ids of `prompt` run alone through the single-stream path.
fn alone(e: &mut Engine, prompt: &[u32], max_tokens: usize) -> Vec<u32> {
    e.reset();
    let req =
        Request { prompt_ids: prompt.to_vec(), max_tokens, sampling: SamplingParams::default(), stop_at_eos: false };
    e.generate(&req, |_| true).unwrap().ids
}

/// Eight prompts of 1 to 300 tokens: the golden's (with transformers' ids) and slices of its
/// longest.
fn prompts(g: &serde_json::Value) -> Vec<(Vec<u32>, Option<Vec<u32>>)> {
    let cases: Vec<_> = g["cases"].as_array().unwrap().iter().filter(|c| ids(&c["prompt_ids"]).len() <= 300).collect();
    let longest = cases.iter().map(|c| ids(&c["prompt_ids"])).max_by_key(Vec::len).unwrap();
    let mut p: Vec<_> = cases.iter().map(|c| (ids(&c["prompt_ids"]), Some(ids(&c["greedy_ids"])))).collect();
    for len in [2, 33, 120, 250] {
        p.push((longest[longest.len() - len..].to_vec(), None));
    }
    p.truncate(8);
    p
}

/// Ring and paged memory with f32 K and V; for `f16_kv`, paged with f16 K and V too (the
/// fixtures whose goldens hold with it, tests/golden.rs).
fn check_invariance(path: &std::path::Path, g: &serde_json::Value, label: &str, f16_kv: bool) {
    let cases = prompts(g);
    let all: Vec<Vec<u32>> = cases.iter().map(|(p, _)| p.clone()).collect();
    // Three at once, then one more every other step: prompt chunks share steps with decode.
    let arrivals = [0, 0, 0, 2, 4, 6, 8, 10];
    let opts = BatchOptions { max_batch_tokens: 96, ..Default::default() };
    let f16 = f16_kv.then_some(KvOptions { dtype: KvType::F16, ..paged(8, None) });
    for kv in [ring(8), paged(8, None)].into_iter().chain(f16) {
        let mut e = engine(path, kv);
        let want: Vec<Vec<u32>> = all.iter().map(|p| alone(&mut e, p, 16)).collect();
        for ((p, golden), w) in cases.iter().zip(&want) {
            if let Some(golden) = golden {
                assert_eq!(w, golden, "{label}: a {}-token prompt alone against transformers", p.len());
            }
        }
        let (got, stats, _) = run_batch(&mut e, opts, &all, 16, &arrivals);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let what = format!("{label} {:?} {:?}", kv.layout, kv.dtype);
            assert_eq!(g, w, "{what}: prompt {i} ({} tokens) in the batch", all[i].len());
        }
        assert!(stats.iter().all(|s| s.finish == Finish::Length && s.tokens == 16));
        assert_eq!(e.forward.kv.used_blocks(), 0, "{label} {:?}: blocks still held", kv.layout);
    }
}

#[test]
fn batched_greedy_ids_equal_each_prompt_alone() {
    // gemma3-bf16: local layers' windows (16 positions) crossed inside prompt chunks and decode.
    for name in ["llama-f32", "qwen2-f32", "qwen2-bf16", "mistral-f16", "qwen3-bf16", "gemma3-bf16"] {
        let f16_kv = ["mistral-f16", "qwen3-bf16", "gemma3-bf16"].contains(&name);
        check_invariance(&fixture(name), &golden(name), name, f16_kv);
    }
    // Quantized, and with types differing inside the fused projections (a dispatch per part).
    for stem in ["tiny-llama-q8_0", "tiny-llama-mixed-parts"] {
        let g = support::read_json(&fixture("gguf").join(format!("{stem}.golden.json")));
        check_invariance(&fixture("gguf").join(format!("{stem}.gguf")), &g, stem, false);
    }
}

#[test]
fn a_dry_pool_preempts_and_everyone_still_gets_their_ids() {
    // Four sequences of 40 + 40 tokens need 5 blocks of 16 each; the pool has 12.
    let longest = longest_prompt();
    let prompts: Vec<Vec<u32>> = (0..4).map(|i| longest[i * 50..i * 50 + 40].to_vec()).collect();
    let mut e = engine(&fixture("qwen2-f32"), paged(4, Some(12)));
    let want: Vec<Vec<u32>> = prompts.iter().map(|p| alone(&mut e, p, 40)).collect();
    let (got, stats, _) = run_batch(&mut e, BatchOptions::default(), &prompts, 40, &[0, 0, 0, 0]);
    assert_eq!(got, want);
    assert!(stats.iter().map(|s| s.preemptions).sum::<usize>() > 0, "the pool was large enough: no preemption");
    assert_eq!(e.forward.kv.used_blocks(), 0);
}

#[test]
fn a_prompt_filling_the_pool_runs_and_one_past_it_is_refused() {
    // One sequence's pool (32 blocks of 16 for a context of 512): a 500-token prompt needs 32
    // blocks, all of them (it waited for a 33rd before: for ever, holding up the queue). A
    // pool of 8 blocks cannot hold a 200-token prompt at all: refused, naming the pool, and
    // the request behind it still runs.
    let _guard = watchdog(Duration::from_secs(600), "a_prompt_filling_the_pool_runs_and_one_past_it_is_refused");
    let long: Vec<u32> = (0..500).map(|i| 3 + (i * 11) % 300).collect();
    let mut e = engine(&fixture("qwen2-f32"), paged(1, None));
    let want = alone(&mut e, &long, 8);
    let (got, _, _) = run_batch(&mut e, BatchOptions::default(), std::slice::from_ref(&long), 8, &[0]);
    assert_eq!(got, [want]);

    let mut e = engine(&fixture("qwen2-f32"), paged(1, Some(8)));
    let short = &long[..20];
    let want = alone(&mut e, short, 4);
    let mut b = Batcher::new(&mut e, BatchOptions::default());
    b.submit(seq_request(0, &long[..200], 4));
    b.submit(seq_request(1, short, 4));
    let (mut failed, mut got) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        for ev in b.step(&mut e).unwrap() {
            match ev {
                SeqEvent::Failed { id, error } => failed.push((id, error)),
                SeqEvent::Token { id: 1, token, .. } => got.push(token),
                _ => {}
            }
        }
        if b.is_idle() {
            break;
        }
    }
    assert!(b.is_idle(), "the batch never finished");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, 0);
    assert!(failed[0].1.contains("more than the pool's 8"), "{}", failed[0].1);
    assert_eq!(got, want);
}

/// A background request submitted first, with aging 0 (it counts as interactive from its
/// arrival, before the interactive one's), and an interactive one submitted before step 2, run
/// to the end; each one's ids must be those it gets alone. Returns (id, preemptions) in the
/// order they finished (the background one is id 1).
fn aged_background_then_interactive(
    kv: KvOptions,
    background: (&[u32], usize),
    interactive: (&[u32], usize),
) -> Vec<(u64, usize)> {
    let mut e = engine(&fixture("qwen2-f32"), kv);
    let want = [alone(&mut e, interactive.0, interactive.1), alone(&mut e, background.0, background.1)];
    let mut b = Batcher::new(&mut e, BatchOptions { aging: Duration::ZERO, ..Default::default() });
    b.submit(SeqRequest { priority: Priority::Background, ..seq_request(1, background.0, background.1) });
    let mut got = [Vec::new(), Vec::new()];
    let mut stats = Vec::new();
    for step in 0..200 {
        if step == 2 {
            b.submit(seq_request(0, interactive.0, interactive.1));
        }
        for ev in b.step(&mut e).unwrap() {
            match ev {
                SeqEvent::Token { id, token, .. } => got[id as usize].push(token),
                SeqEvent::Finished(s) => stats.push((s.id, s.preemptions)),
                SeqEvent::Failed { id, error } => panic!("request {id}: {error}"),
            }
        }
        if b.is_idle() {
            break;
        }
    }
    assert!(b.is_idle(), "the batch never finished");
    assert_eq!(got, want);
    stats
}

#[test]
fn a_background_request_past_the_aging_limit_is_not_evicted_by_a_later_one() {
    // One ring slot: the interactive request waits for the background one rather than evicting
    // it. (Evicted, it was admitted again at once and evicted again: admission never returned.)
    let _guard =
        watchdog(Duration::from_secs(600), "a_background_request_past_the_aging_limit_is_not_evicted_by_a_later_one");
    let longest = longest_prompt();
    let finished = aged_background_then_interactive(ring(1), (&longest[..6], 10), (&longest[..20], 6));
    // The background request finished first, never evicted: the interactive one waited.
    assert_eq!(finished, [(1, 0), (0, 0)]);
}

#[test]
fn a_background_request_past_the_aging_limit_is_not_preempted_by_a_later_one() {
    // A paged pool of 3 blocks of 16 that cannot hold both answers: when the later request needs
    // a block and none is free, it waits for the earlier one to finish rather than preempt it.
    // (Preemption went by priority alone: under a stream of interactive requests a background
    // one could be preempted and recomputed for ever.)
    let _guard =
        watchdog(Duration::from_secs(600), "a_background_request_past_the_aging_limit_is_not_preempted_by_a_later_one");
    let longest = longest_prompt();
    let finished = aged_background_then_interactive(paged(2, Some(3)), (&longest[..6], 20), (&longest[..4], 30));
    assert_eq!(finished, [(1, 0), (0, 0)]);
}

/// A sequence that outgrows a pool smaller than its context ends (its context is full) while
/// another waits for memory holding no block, which then runs. (With victims only among
/// sequences that free blocks, both waited for ever, the batcher stepping without end.)
#[test]
fn a_sequence_outgrowing_the_pool_ends_while_another_waits() {
    let _guard = watchdog(Duration::from_secs(600), "a_sequence_outgrowing_the_pool_ends_while_another_waits");
    let longest = longest_prompt();
    let prompts = [longest[..60].to_vec(), longest[..2].to_vec()];
    let mut e = engine(&fixture("qwen2-f32"), paged(2, Some(4)));
    let want = alone(&mut e, &prompts[1], 20);
    let (got, stats, _) = run_batch(&mut e, BatchOptions::default(), &prompts, 20, &[0, 0]);
    assert_eq!(stats[0].finish, Finish::ContextFull);
    assert_eq!((stats[1].finish, &got[1]), (Finish::Length, &want));
}

#[test]
fn many_requests_with_cancellations_give_all_memory_back() {
    // Short requests arriving over time, every fifth cancelled after a few steps.
    let n: u64 = if std::env::var("CI").is_ok() { 200 } else { 1000 };
    let mut e = engine(&fixture("qwen2-f32"), paged(16, Some(64)));
    let mut b = Batcher::new(&mut e, BatchOptions::default());
    let buffers = e.gpu.buffers_created();
    let (mut submitted, mut finished, mut step) = (0u64, 0u64, 0u64);
    while finished < n || !b.is_idle() {
        if submitted < n && step % 2 == 0 {
            for _ in 0..3.min(n - submitted) {
                let len = 1 + (submitted * 37 % 60) as usize;
                let prompt: Vec<u32> = (0..len as u32).map(|i| 3 + (i * 11 + submitted as u32) % 300).collect();
                b.submit(seq_request(submitted, &prompt, 1 + (submitted % 9) as usize));
                submitted += 1;
            }
        }
        if step % 5 == 0 && submitted > 0 {
            let victim = submitted - 1;
            if let Some(s) = b.cancel(&mut e, victim) {
                assert_eq!(s.finish, Finish::Stopped);
                finished += 1;
            }
        }
        for ev in b.step(&mut e).unwrap() {
            match ev {
                SeqEvent::Finished(_) => finished += 1,
                SeqEvent::Failed { error, .. } => panic!("{error}"),
                SeqEvent::Token { .. } => {}
            }
        }
        step += 1;
    }
    assert!(b.is_idle());
    assert_eq!(e.forward.kv.used_blocks(), 0, "KV blocks still held");
    assert_eq!(e.gpu.buffers_created(), buffers, "buffers created while serving");
}

#[test]
fn a_shared_prefix_runs_once() {
    // Two prompts whose first 64 tokens (4 blocks) are the same; the second arrives once the
    // first has run them, takes those blocks, and runs only its own 15 tokens.
    let longest = longest_prompt();
    let a: Vec<u32> = longest[..64].iter().chain(&longest[100..110]).copied().collect();
    let b: Vec<u32> = longest[..64].iter().chain(&longest[200..215]).copied().collect();
    let mut e = engine(&fixture("qwen2-f32"), paged(4, None));
    let want = [alone(&mut e, &a, 12), alone(&mut e, &b, 12)];
    let (got, stats, rows) = run_batch(&mut e, BatchOptions::default(), &[a.clone(), b.clone()], 12, &[0, 3]);
    assert_eq!(got, want);
    assert_eq!((stats[0].prefix_hit_tokens, stats[1].prefix_hit_tokens), (0, 64));
    // Each prompt's own tokens once, then 11 decode rows each.
    assert_eq!(rows, (a.len() + b.len() - 64 + 2 * 11) as u64);
}

#[test]
fn background_prompts_advance_in_small_chunks_beside_interactive_streams() {
    // An interactive stream decodes while a background request's 200-token prompt arrives: every
    // step holds the interactive row and at most background_prompt_tokens of that prompt, the
    // prompt still advances, and both get the ids they get alone.
    let longest = longest_prompt();
    let (chat, document) = (longest[..8].to_vec(), longest[..200].to_vec());
    let mut e = engine(&fixture("qwen2-f32"), paged(2, None));
    let want = [alone(&mut e, &chat, 30), alone(&mut e, &document, 4)];
    let opts = BatchOptions::default();
    let mut b = Batcher::new(&mut e, opts);
    b.submit(seq_request(0, &chat, 30));
    let mut got: [Vec<u32>; 2] = Default::default();
    let (mut interactive_done, mut step, mut steps_beside) = (false, 0, 0);
    while !(interactive_done && b.is_idle()) {
        if step == 3 {
            b.submit(SeqRequest { priority: Priority::Background, ..seq_request(1, &document, 4) });
        }
        let events = b.step(&mut e).unwrap();
        if !interactive_done && step >= 3 {
            assert!(b.last_rows <= 2 + opts.background_prompt_tokens, "step {step}: {} rows", b.last_rows);
            steps_beside += usize::from(b.last_rows > 2);
        }
        for ev in events {
            match ev {
                SeqEvent::Token { id, token, .. } => got[id as usize].push(token),
                SeqEvent::Finished(s) => interactive_done |= s.id == 0,
                SeqEvent::Failed { id, error } => panic!("request {id}: {error}"),
            }
        }
        step += 1;
        assert!(step < 1_000, "the batch never finished");
    }
    assert_eq!(got, want);
    // 200 tokens in chunks of 32: seven steps beside the interactive stream.
    assert_eq!(steps_beside, 7);
}

#[test]
fn background_decode_rows_are_bounded_beside_interactive_streams() {
    // Three background requests decode when an interactive one arrives: with at most one
    // background decode row a step (as CPU adapters bound them), every step of the interactive
    // stream's decode holds its row and one background row, the background requests still
    // finish, and all get the ids they get alone.
    let longest = longest_prompt();
    let prompts: Vec<&[u32]> = (0..4).map(|i| &longest[i..i + 5]).collect();
    let opts = BatchOptions { background_decode_rows: 1, ..Default::default() };
    let background: Vec<_> = prompts[1..].iter().map(|&p| (p, 12)).collect();
    let steps = interactive_beside_background(opts, (prompts[0], 12), &background, 3);
    // The interactive stream's decode steps: after its prompt's, before its last token.
    let beside: Vec<&Step> = steps.iter().filter(|s| (1..12).contains(&s.interactive_before)).collect();
    let rows: Vec<u32> = beside.iter().map(|s| s.rows).collect();
    // Its row and one background row until the background requests are done.
    assert!(rows.len() == 11 && rows.iter().all(|&r| r <= 2), "{rows:?}");
    assert_eq!(rows[..8], [2; 8], "{rows:?}");
    // The one background row goes round: each background request gets tokens beside it.
    for id in 1..4 {
        let n = beside.iter().filter(|s| s.tokens.contains(&id)).count();
        assert!(n >= 2, "request {id}: {n} tokens in {:?}", beside.iter().map(|s| &s.tokens).collect::<Vec<_>>());
    }
}

#[test]
fn a_step_running_an_interactive_prompt_runs_no_background_rows() {
    // A background request decodes when an interactive prompt arrives: the step that runs the
    // prompt holds its rows only (the background row waits a step, its next token then fed
    // from the host, not on the GPU), and both get the ids they get alone.
    let rows = background_beside_an_interactive_prompt(BatchOptions::default());
    // The background prompt, its decode rows, the interactive prompt alone, then both decode.
    assert_eq!(rows[..8], [6, 1, 1, 1, 1, 20, 2, 2], "rows per step");
}

#[test]
fn a_background_request_waiting_past_the_aging_limit_keeps_its_rows() {
    // A background request that has waited past the aging limit for a token keeps its rows: a
    // stream of interactive prompts cannot hold its decode back.
    let rows = background_beside_an_interactive_prompt(BatchOptions { aging: Duration::ZERO, ..Default::default() });
    assert_eq!(rows[..8], [6, 1, 1, 1, 1, 21, 2, 2], "rows per step");
}

/// Rows per step of a background request (a 6-token prompt, 30 tokens) with an interactive one
/// (20 tokens, 8) arriving at its fifth step.
fn background_beside_an_interactive_prompt(opts: BatchOptions) -> Vec<u32> {
    let longest = longest_prompt();
    let steps = interactive_beside_background(opts, (&longest[..20], 8), &[(&longest[..6], 30)], 5);
    steps.iter().map(|s| s.rows).collect()
}

/// A step of `interactive_beside_background`: its rows, the interactive tokens before it, and
/// the requests it gave a token.
struct Step {
    rows: u32,
    interactive_before: usize,
    tokens: Vec<u64>,
}

/// Background requests (prompt, tokens) submitted at once and an interactive one arriving at
/// step `arrival` (request 0; the background ones 1, 2, ...), through a batcher with `opts`;
/// each must get the ids it gets alone.
fn interactive_beside_background(
    opts: BatchOptions,
    interactive: (&[u32], usize),
    background: &[(&[u32], usize)],
    arrival: usize,
) -> Vec<Step> {
    let requests: Vec<(&[u32], usize)> = [interactive].iter().chain(background).copied().collect();
    let mut e = engine(&fixture("qwen2-f32"), paged(requests.len() as u32, None));
    let want: Vec<Vec<u32>> = requests.iter().map(|&(p, n)| alone(&mut e, p, n)).collect();
    let mut b = Batcher::new(&mut e, opts);
    for (i, &(p, n)) in background.iter().enumerate() {
        b.submit(SeqRequest { priority: Priority::Background, ..seq_request(i as u64 + 1, p, n) });
    }
    let mut got: Vec<Vec<u32>> = vec![Vec::new(); requests.len()];
    let mut steps = Vec::new();
    for step in 0..1_000 {
        if step == arrival {
            b.submit(seq_request(0, interactive.0, interactive.1));
        }
        let interactive_before = got[0].len();
        let mut tokens = Vec::new();
        for ev in b.step(&mut e).unwrap() {
            match ev {
                SeqEvent::Token { id, token, .. } => {
                    got[id as usize].push(token);
                    tokens.push(id);
                }
                SeqEvent::Finished(_) => {}
                SeqEvent::Failed { id, error } => panic!("request {id}: {error}"),
            }
        }
        steps.push(Step { rows: b.last_rows, interactive_before, tokens });
        if b.is_idle() {
            break;
        }
    }
    assert!(b.is_idle(), "the batch never finished");
    assert_eq!(got, want);
    steps
}

/// Stronger than equal ids: each token's log-probability is bitwise what the request gets
/// alone (through a batcher of its own), with staggered arrivals sharing steps. This holds
/// below the long-context threshold, one for every step here; past it a step's kernel and its
/// splits depend on the other rows, and values differ by ~1e-6 (docs/PERF.md, twentieth
/// session). By default GPUs give one-row steps a lower threshold (256) than steps of several
/// rows (1024), so there a request alone and in a batch share kernels below 256 positions only.
#[test]
fn batched_logprobs_are_bitwise_those_alone() {
    let all: Vec<Vec<u32>> = prompts(&golden("qwen2-f32")).into_iter().map(|(p, _)| p).collect();
    let forward = ForwardOptions { kv: ring(8), attn_threshold: Some(1024), ..Default::default() };
    let mut e = Engine::load(&fixture("qwen2-f32"), &EngineOptions { forward, ..Default::default() }).unwrap();
    let mut run = |which: &[usize], arrivals: &[usize]| {
        let mut b = Batcher::new(&mut e, BatchOptions { max_batch_tokens: 96, ..Default::default() });
        let mut got: HashMap<u64, Vec<f64>> = HashMap::new();
        for step in 0..1_000 {
            for (&i, _) in which.iter().zip(arrivals).filter(|(_, &a)| a == step) {
                b.submit(SeqRequest { logprobs: Some(0), ..seq_request(i as u64, &all[i], 16) });
            }
            for ev in b.step(&mut e).unwrap() {
                if let SeqEvent::Token { id, logprobs: Some(l), .. } = ev {
                    got.entry(id).or_default().push(l.logprob);
                }
            }
            if step > *arrivals.iter().max().unwrap() && b.is_idle() {
                break;
            }
        }
        got
    };
    let batched = run(&(0..all.len()).collect::<Vec<_>>(), &[0, 0, 0, 2, 4, 6, 8, 10]);
    for i in 0..all.len() {
        let alone = run(&[i], &[0]);
        let (a, b) = (&alone[&(i as u64)], &batched[&(i as u64)]);
        assert_eq!((a.len(), b.len()), (16, 16));
        assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()), "prompt {i} ({} tokens)", all[i].len());
    }
}
