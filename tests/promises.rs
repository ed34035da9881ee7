//! What the README promises beyond the goldens of tests/golden.rs, each against transformers or
//! the tokenizer's own decoding: the repetition penalty (the CPU sampling path), chat templates
//! that use `bos_token` and `raise_exception`, streaming detokenization of broken bytes, and a
//! whole model whose weights are split over many storage bindings.

mod support;

use support::{check_cases, fixture, golden, ids, logit_tolerance, messages, read_json};
use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::gpu::GpuOptions;
use wginfer::kv::KvOptions;
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;
use wginfer::tokenizer::{render_template, Message, StreamDecoder, TextTokenizer};

/// Greedy decoding with a repetition penalty against transformers' `generate`
/// (scripts/make_penalty_goldens.py): the penalty changes the ids, and applying it once per
/// occurrence instead of once per distinct id would change them too.
#[test]
fn repetition_penalty_matches_transformers() {
    let g = read_json(&fixture("penalty.json"));
    let penalty = g["penalty"].as_f64().unwrap() as f32;
    for case in g["cases"].as_array().unwrap() {
        let name = case["fixture"].as_str().unwrap();
        let mut engine = Engine::load(&fixture(name), &EngineOptions::default()).unwrap();
        let req = Request {
            prompt_ids: ids(&case["prompt_ids"]),
            max_tokens: g["new_tokens"].as_u64().unwrap() as usize,
            sampling: SamplingParams { temperature: 0.0, repetition_penalty: penalty, ..Default::default() },
            stop_at_eos: false,
        };
        assert_eq!(engine.generate(&req, |_| true).unwrap().ids, ids(&case["ids"]), "{name}");
    }
}

/// Real models' templates (Mistral, Llama 2 and 3, an indented Zephyr, Gemma 3) rendered as transformers'
/// `apply_chat_template` renders them (scripts/make_template_goldens.py); where transformers
/// raises, an error with the template's message.
#[test]
fn chat_templates_render_as_transformers() {
    let g = read_json(&fixture("chat_templates.json"));
    let (bos, eos) = (g["bos_token"].as_str().unwrap(), g["eos_token"].as_str().unwrap());
    for case in g["cases"].as_array().unwrap() {
        let (t, c) = (case["template"].as_str().unwrap(), case["conversation"].as_str().unwrap());
        let got = render_template(g["templates"][t].as_str().unwrap(), &messages(&g["conversations"][c]), bos, eos);
        match (got, case["text"].as_str(), case["error"].as_str()) {
            (Ok(got), Some(want), _) => assert_eq!(got, want, "{t} / {c}"),
            (Err(e), _, Some(want)) => {
                let msg = format!("{e:#}");
                assert!(msg.starts_with("chat template failed") && msg.contains(want), "{t} / {c}: {msg}");
            }
            (got, _, _) => panic!("{t} / {c}: {got:?}, expected {case}"),
        }
    }
}

/// A template that would run for ever (a macro calling itself twice, 2^60 calls) stops with an
/// error; the fixture's real templates still render a 2,000-message chat within the limit.
#[test]
fn a_runaway_chat_template_stops_and_long_chats_still_render() {
    let runaway = "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}";
    let e = render_template(runaway, &[], "", "").unwrap_err();
    assert!(format!("{e:#}").starts_with("chat template failed"), "{e:#}");
    let g = read_json(&fixture("chat_templates.json"));
    let long: Vec<Message> = (0..2000)
        .map(|i| Message { role: ["user", "assistant"][i % 2].into(), content: format!("message {i}") })
        .collect();
    for (name, t) in g["templates"].as_object().unwrap() {
        let r = render_template(t.as_str().unwrap(), &long, "<s>", "</s>");
        assert!(r.as_ref().is_ok_and(|text| text.contains("message 1999")), "{name}: {r:?}");
    }
}

/// `ids` through a stream decoder: the pieces as they come, then what `finish` gives.
fn stream(tok: &TextTokenizer, ids: &[u32]) -> (Vec<String>, String) {
    let mut s = StreamDecoder::default();
    let pieces = ids.iter().filter_map(|&id| s.push(tok, id).unwrap()).collect();
    (pieces, s.finish(tok).unwrap())
}

/// A stream cut inside a character, and one with bytes that are no UTF-8 at all: no piece ends
/// in a replacement character (it could be an unfinished one), the unfinished bytes come out of
/// `finish` as U+FFFD, and pieces plus `finish` are the tokenizer's decoding of every id.
#[test]
fn streaming_detokenization_of_cut_and_invalid_bytes() {
    let tok = TextTokenizer::from_hf_dir(&fixture("llama-f32")).unwrap();
    // U+1D11E is F0 9D 84 9E in UTF-8, one id per byte in this vocabulary.
    let clef = tok.encode("\u{1D11E}", false).unwrap();
    assert_eq!(clef.len(), 4, "one id per byte");
    let (head, ok) = (tok.encode("ok ", false).unwrap(), tok.encode(" ok", false).unwrap());
    let cut: Vec<u32> = head.iter().chain(&clef[..2]).copied().collect();
    let backwards: Vec<u32> = clef.iter().rev().chain(&ok).copied().collect();
    let lone_lead: Vec<u32> = head.iter().chain(&clef[..1]).chain(&ok).copied().collect();
    for (name, ids, want_pieces, want_finish) in [
        ("cut in a character", &cut, "ok ", "\u{FFFD}"),
        ("continuation bytes first", &backwards, "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD} ok", ""),
        ("a lead byte alone", &lone_lead, "ok \u{FFFD} ok", ""),
    ] {
        let (pieces, rest) = stream(&tok, ids);
        for p in &pieces {
            assert!(!p.is_empty() && !p.ends_with('\u{FFFD}'), "{name}: piece {p:?}");
        }
        assert_eq!((pieces.concat().as_str(), rest.as_str()), (want_pieces, want_finish), "{name}");
        assert_eq!(pieces.concat() + &rest, tok.decode(ids).unwrap(), "{name}");
    }
}

/// A whole model with its weights split by rows over several storage bindings, against the
/// goldens. The binding limit is half the largest fused weight: that one is split too (each
/// part a dispatch of `qkv_rope` or `swiglu` from its first row), and so is every larger
/// weight (here the embedding and the LM head, tied or not), as it would be in a real model.
/// The KV cache must fit one binding too: 80 positions do, for the prompts of up to 64 tokens
/// and their 16 greedy ids.
#[test]
fn split_weights_match_the_goldens() {
    for name in ["llama-f32", "qwen2-bf16", "gguf/tiny-llama-q8_0"] {
        let (path, golden) = match name.strip_prefix("gguf/") {
            Some(stem) => {
                (fixture("gguf").join(format!("{stem}.gguf")), read_json(&fixture(&format!("{name}.golden.json"))))
            }
            None => (fixture(name), golden(name)),
        };
        let whole = Engine::load(&path, &EngineOptions::default()).unwrap();
        let fused = whole.forward.weights.layers.iter().flat_map(|l| [l.qkv.gpu_bytes(), l.gate_up.gpu_bytes()]);
        let opts = EngineOptions {
            gpu: GpuOptions { max_binding_override: fused.max().map(|b| b / 2), ..Default::default() },
            forward: ForwardOptions { kv: KvOptions { context: 80, ..Default::default() }, ..Default::default() },
        };
        drop(whole);
        let mut engine = Engine::load(&path, &opts).unwrap();
        let w = &engine.forward.weights;
        assert!(w.embed.parts.len() > 1 && w.lm_head().parts.len() > 1, "{name}: the embedding and LM head are split");
        let fused_parts = w.layers.iter().flat_map(|l| [l.qkv.parts.len(), l.gate_up.parts.len()]);
        assert!(fused_parts.max() > Some(1), "{name}: a fused weight is split");
        let tol = logit_tolerance(&engine);
        check_cases(&mut engine, &golden, tol, 64, name);
    }
}
