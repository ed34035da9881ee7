//! `wginfer serve` over loopback with a plain HTTP client: greedy answers equal transformers'
//! goldens and the library run alone (whole, streamed, and 64 clients at once), stop strings
//! are cut across tokens, bad requests get their 4xx in OpenAI's shape, keys and CORS are
//! checked, a full queue answers 503, a client that disconnects (streamed or not) frees its KV
//! memory, SIGTERM exits 0 (a second signal at once, with 130).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, Response};
use serde_json::{json, Value};
use support::{fixture, golden, ids, logit_tolerance, read_json};
use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::kv::{KvLayout, KvOptions};
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;
use wginfer::serve::{serve, LogFormat, ServeOptions};
use wginfer::tokenizer::Message;

const MODEL: &str = "qwen2-f32";
const CONTEXT: u32 = 256;
const ORIGIN: &str = "http://console.example";

fn engine_options(parallel: u32) -> EngineOptions {
    let kv = KvOptions { layout: KvLayout::Paged, parallel, context: CONTEXT, block: 16, ..Default::default() };
    EngineOptions { forward: ForwardOptions { kv, ..Default::default() }, ..Default::default() }
}

/// A server on an ephemeral loopback port, in this process; stopped (gracefully) on drop.
struct Server {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(parallel: u32, max_waiting: usize, api_key: Option<&str>, cors: Option<&str>) -> Server {
        Server::with_engine(engine_options(parallel), max_waiting, api_key, cors)
    }

    fn with_engine(engine: EngineOptions, max_waiting: usize, api_key: Option<&str>, cors: Option<&str>) -> Server {
        let opts = ServeOptions {
            model: fixture(MODEL),
            engine,
            api_key: api_key.map(str::to_string),
            cors: cors.map(str::to_string),
            max_waiting,
            body_limit: 1 << 16,
            log: LogFormat::Text,
        };
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            rt.block_on(async {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                serve(listener, opts, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
            });
        });
        let url = format!("http://{}", addr_rx.recv().unwrap());
        wait_until_healthy(&url);
        Server { url, stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.thread.take().unwrap().join().unwrap();
    }
}

fn wait_until_healthy(url: &str) {
    let t = Instant::now();
    loop {
        if let Ok(r) = client().get(format!("{url}/health")).send() {
            if r.status() == 200 {
                assert_eq!(r.json::<Value>().unwrap()["status"], "ok");
                return;
            }
            assert_eq!(r.status(), 503, "health while loading");
        }
        assert!(t.elapsed() < Duration::from_secs(120), "the server never became healthy");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(120)).build().unwrap()
}

/// The server most tests share: 16 sequences at once, no key, a waiting line as long as
/// `--max-waiting` allows (added to the 16 it wrapped to 0, and every request was refused).
fn shared() -> &'static str {
    static SERVER: OnceLock<Server> = OnceLock::new();
    &SERVER.get_or_init(|| Server::start(16, usize::MAX, None, None)).url
}

/// The library itself, alone (the oracle for what the server answers).
fn library() -> std::sync::MutexGuard<'static, Engine> {
    static ENGINE: OnceLock<Mutex<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| Mutex::new(Engine::load(&fixture(MODEL), &engine_options(1)).unwrap())).lock().unwrap()
}

/// Greedy text of `prompt_ids` run alone through the library (ending at an end-of-sequence id,
/// as the server does).
fn alone(prompt_ids: &[u32], max_tokens: usize) -> String {
    let mut e = library();
    e.reset();
    let req =
        Request { prompt_ids: prompt_ids.to_vec(), max_tokens, sampling: SamplingParams::default(), stop_at_eos: true };
    let got = e.generate(&req, |_| true).unwrap().ids;
    e.tokenizer.as_ref().unwrap().decode(&got).unwrap()
}

fn post(url: &str, path: &str, body: &Value) -> Response {
    client().post(format!("{url}{path}")).json(body).send().unwrap()
}

/// A non-streamed answer's text, finish reason and usage.
fn complete(url: &str, path: &str, body: Value) -> (String, String, Value) {
    let r = post(url, path, &body);
    assert_eq!(r.status(), 200, "{body}");
    let v: Value = r.json().unwrap();
    let choice = &v["choices"][0];
    let text = if path.contains("chat") { &choice["message"]["content"] } else { &choice["text"] };
    (text.as_str().unwrap().into(), choice["finish_reason"].as_str().unwrap().into(), v["usage"].clone())
}

/// A streamed answer's events (the JSON of each `data:` line before `[DONE]`, which must be
/// the last).
fn stream_events(url: &str, path: &str, mut body: Value) -> Vec<Value> {
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let r = post(url, path, &body);
    assert_eq!(r.status(), 200, "{body}");
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let data: Vec<String> = BufReader::new(r)
        .lines()
        .map(Result::unwrap)
        .filter_map(|l| l.strip_prefix("data: ").map(str::to_string))
        .collect();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect()
}

/// A streamed answer's text (its pieces joined), finish reason and usage.
fn stream(url: &str, path: &str, body: Value) -> (String, String, Value) {
    let events = stream_events(url, path, body);
    let (usage, chunks) = events.split_last().unwrap();
    assert_eq!(usage["choices"], json!([]), "the usage chunk has no choices");
    let mut text = String::new();
    for c in chunks {
        let choice = &c["choices"][0];
        let piece = if path.contains("chat") { &choice["delta"]["content"] } else { &choice["text"] };
        text.push_str(piece.as_str().unwrap_or_default());
    }
    let finish = chunks.last().unwrap()["choices"][0]["finish_reason"].as_str().unwrap().to_string();
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c["choices"][0]["finish_reason"].is_null()));
    // As OpenAI's: with include_usage, every chunk before the usage chunk has "usage": null.
    assert!(chunks.iter().all(|c| c.get("usage") == Some(&Value::Null)), "{chunks:?}");
    (text, finish, usage["usage"].clone())
}

/// The golden cases whose prompt is one token that its text tokenizes back to: those can be
/// sent as text, and transformers' greedy ids are the answer (prompt text, greedy text, ids).
fn golden_text_prompts() -> Vec<(String, String, Vec<u32>)> {
    let e = library();
    let tok = e.tokenizer.as_ref().unwrap();
    let cases: Vec<(String, String, Vec<u32>)> = golden(MODEL)["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (ids(&c["prompt_ids"]), ids(&c["greedy_ids"])))
        .filter(|(p, _)| p.len() == 1 && tok.encode(&tok.decode(p).unwrap(), true).unwrap() == *p)
        .map(|(p, g)| (tok.decode(&p).unwrap(), tok.decode(&g).unwrap(), g))
        .collect();
    assert!(!cases.is_empty(), "no golden prompt round-trips through the tokenizer");
    cases
}

#[test]
fn greedy_completions_are_transformers_text_whole_and_streamed() {
    let url = shared();
    for (prompt, want, _) in golden_text_prompts() {
        let body = json!({"model": MODEL, "prompt": prompt, "max_tokens": 16, "temperature": 0});
        let usage = json!({"prompt_tokens": 1, "completion_tokens": 16, "total_tokens": 17});
        assert_eq!(complete(url, "/v1/completions", body.clone()), (want.clone(), "length".into(), usage.clone()));
        assert_eq!(stream(url, "/v1/completions", body), (want, "length".into(), usage));
    }
}

#[test]
fn greedy_chat_is_the_library_alone_whole_and_streamed() {
    let url = shared();
    let g = golden(MODEL);
    let chat: Vec<Value> = g["chat"]["messages"].as_array().unwrap().clone();
    // transformers' template and tokenizer: the prompt's length.
    let prompt_ids = ids(&g["chat"]["ids"]);
    let want = alone(&prompt_ids, 24);
    let body = json!({"model": MODEL, "messages": chat, "max_completion_tokens": 24, "temperature": 0});
    let (text, finish, usage) = complete(url, "/v1/chat/completions", body.clone());
    assert_eq!(text, want);
    assert_eq!(usage["prompt_tokens"], prompt_ids.len());
    let streamed = stream(url, "/v1/chat/completions", body.clone());
    assert_eq!(streamed, (text, finish, usage));
    let first = &stream_events(url, "/v1/chat/completions", body)[0];
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
}

#[test]
fn stop_strings_are_cut_across_tokens_and_never_sent() {
    let url = shared();
    let (prompt, _, greedy_ids) = golden_text_prompts().remove(0);
    let greedy = json!({"model": MODEL, "prompt": prompt, "max_tokens": 16, "temperature": 0});
    let (full, _, _) = complete(url, "/v1/completions", greedy.clone());
    // Each token's text, from the streamed pieces of the same answer.
    let pieces: Vec<String> = stream_events(url, "/v1/completions", greedy.clone())
        .iter()
        .filter_map(|c| c["choices"].get(0)?["text"].as_str().map(str::to_string))
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(pieces.concat(), full);
    // A stop string made of the end of one piece and the start of the next.
    let k =
        (0..pieces.len() - 1).find(|&k| pieces[k].is_ascii() && pieces[k + 1].is_ascii()).expect("two ASCII pieces");
    let stop = format!("{}{}", &pieces[k][pieces[k].len() - 1..], &pieces[k + 1][..1]);
    let want = full[..full.find(&stop).unwrap()].to_string();
    let mut body = greedy;
    body["stop"] = json!(["never seen here", stop]);
    // Usage counts the tokens up to the one that completes the stop string (in transformers'
    // greedy ids of this prompt), not those the engine made before the cancel reached it.
    let tokens = {
        let e = library();
        let tok = e.tokenizer.as_ref().unwrap();
        (1..=greedy_ids.len())
            .find(|&n| tok.decode(&greedy_ids[..n]).unwrap().contains(&stop))
            .expect("the stop in the golden")
    };
    type Run = fn(&str, &str, Value) -> (String, String, Value);
    for run in [complete as Run, stream] {
        let (text, finish, usage) = run(url, "/v1/completions", body.clone());
        assert_eq!((text.as_str(), finish.as_str()), (want.as_str(), "stop"), "stop {stop:?} in {full:?}");
        assert_eq!(usage["completion_tokens"], tokens, "{usage}");
    }
}

#[test]
fn clients_at_once_each_get_what_they_get_alone() {
    let url = shared();
    let prompts: Vec<String> = (0..64).map(|i| format!("request {i}: {}", "abc ".repeat(i % 5))).collect();
    let want: Vec<String> = {
        let e = library();
        let ids: Vec<Vec<u32>> =
            prompts.iter().map(|p| e.tokenizer.as_ref().unwrap().encode(p, true).unwrap()).collect();
        drop(e);
        ids.iter().map(|p| alone(p, 8)).collect()
    };
    let got: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = prompts
            .iter()
            .map(|p| {
                s.spawn(move || {
                    let body = json!({"model": MODEL, "prompt": p, "max_tokens": 8, "temperature": 0});
                    stream(url, "/v1/completions", body).0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got, want);
}

#[test]
fn same_seed_same_text_other_seed_other_text() {
    let url = shared();
    let run = |seed: u64| {
        let body = json!({"model": MODEL, "prompt": "Hello world", "max_tokens": 16, "temperature": 1.0, "seed": seed});
        complete(url, "/v1/completions", body).0
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

/// A chat answer's `logprobs.content`, whole or from the stream's chunks joined.
fn logprobs_content(url: &str, body: &Value, streamed: bool) -> Vec<Value> {
    let path = "/v1/chat/completions";
    let choices: Vec<Value> = match streamed {
        false => vec![post(url, path, body).json::<Value>().unwrap()["choices"][0].clone()],
        true => stream_events(url, path, body.clone()).iter().filter_map(|c| c["choices"].get(0).cloned()).collect(),
    };
    let content = |c: &Value| c["logprobs"]["content"].as_array().cloned().unwrap_or_default();
    choices.iter().flat_map(content).collect()
}

/// Chat logprobs are transformers' log-softmax of the greedy tokens' logits
/// (tests/fixtures/logprobs.json), whole and streamed, also while a request without logprobs
/// runs beside (its steps pipelined, those of logprobs not), which answers as it does alone.
#[test]
fn chat_logprobs_are_transformers_log_softmax() {
    let url = shared();
    let g = read_json(&fixture("logprobs.json"));
    let steps = g["steps"].as_array().unwrap();
    let chat = golden(MODEL)["chat"].clone();
    assert_eq!(g["prompt_ids"], chat["ids"], "logprobs.json is of another chat prompt");
    let plain_ids = library().tokenizer.as_ref().unwrap().encode("Hello world", true).unwrap();
    let plain_want = alone(&plain_ids, 100);
    let e = library();
    let bytes = |id: &Value| e.tokenizer.as_ref().unwrap().token_bytes(id.as_u64().unwrap() as u32);
    let name = |id: &Value| String::from_utf8_lossy(&bytes(id)).into_owned();
    // A logit error of e moves a log-softmax by at most 2e (e itself, and e in the log-sum).
    let tol = 2.0 * logit_tolerance(&e) as f64;
    let body = json!({"model": MODEL, "messages": chat["messages"], "max_tokens": steps.len(), "temperature": 0,
        "logprobs": true, "top_logprobs": 5});
    let plain = json!({"model": MODEL, "prompt": "Hello world", "max_tokens": 100, "temperature": 0, "stream": true});
    let mut plain_lines = BufReader::new(post(url, "/v1/completions", &plain)).lines();
    let first = plain_lines.next().unwrap().unwrap();
    for streamed in [false, true] {
        let content = logprobs_content(url, &body, streamed);
        assert_eq!(content.len(), steps.len(), "streamed: {streamed}");
        // The tokens' bytes joined spell the answer transformers' ids decode to.
        let joined: Vec<u8> = content
            .iter()
            .flat_map(|c| c["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8))
            .collect();
        let step_ids: Vec<u32> = steps.iter().map(|s| s["id"].as_u64().unwrap() as u32).collect();
        assert_eq!(String::from_utf8_lossy(&joined), e.tokenizer.as_ref().unwrap().decode(&step_ids).unwrap());
        for (i, (c, s)) in content.iter().zip(steps).enumerate() {
            let at = format!("token {i} (streamed: {streamed}): {c}");
            assert_eq!(c["token"], name(&s["id"]), "{at}");
            assert_eq!(c["bytes"], json!(bytes(&s["id"])), "{at}");
            let logprob = c["logprob"].as_f64().unwrap();
            assert!((logprob - s["logprob"].as_f64().unwrap()).abs() <= tol, "{at}: vs {}", s["logprob"]);
            let top = c["top_logprobs"].as_array().unwrap();
            assert_eq!(top.len(), 5, "{at}");
            assert_eq!((&top[0]["token"], top[0]["logprob"].as_f64()), (&c["token"], Some(logprob)), "{at}");
            let values: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
            assert!(values.windows(2).all(|w| w[0] >= w[1]), "{at}: not sorted");
            for (k, (v, want)) in values.iter().zip(s["top_logprobs"].as_array().unwrap()).enumerate() {
                assert!((v - want.as_f64().unwrap()).abs() <= tol, "{at}: rank {k} vs {want}");
                // Ranks closer than the error could swap; these are far apart on lavapipe.
                if s["margin"].as_f64().unwrap() > 2.0 * tol {
                    assert_eq!(top[k]["token"], name(&s["top_ids"][k]), "{at}: rank {k}");
                }
            }
        }
    }
    let text: String = std::iter::once(first)
        .chain(plain_lines.map(Result::unwrap))
        .filter_map(|l| serde_json::from_str::<Value>(l.strip_prefix("data: ")?).ok())
        .filter_map(|v| v["choices"][0]["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(text, plain_want, "the request without logprobs beside");
}

/// Sends `body` (raw bytes) and checks the status and the OpenAI error shape; the error.
fn refused(url: &str, path: &str, body: Vec<u8>, status: u16) -> Value {
    let r = client().post(format!("{url}{path}")).header("content-type", "application/json").body(body).send().unwrap();
    assert_eq!(r.status(), status);
    let v: Value = r.json().unwrap();
    let e = &v["error"];
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert!(e["type"].is_string() && e.get("param").is_some() && e.get("code").is_some(), "{v}");
    e.clone()
}

#[test]
fn bad_requests_get_their_4xx_in_openai_shape() {
    let url = shared();
    let chat = |extra: Value| {
        let mut b = json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]});
        b.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        b.to_string().into_bytes()
    };
    let c = "/v1/chat/completions";
    refused(url, c, b"{\"model\": ".to_vec(), 400);
    assert_eq!(refused(url, c, chat(json!({"temperature": "hot"})), 400)["param"], "temperature");
    assert_eq!(refused(url, c, chat(json!({"max_tokens": -1})), 400)["param"], "max_tokens");
    assert_eq!(refused(url, c, chat(json!({"model": "gpt-9"})), 404)["code"], "model_not_found");
    assert_eq!(refused(url, c, chat(json!({"messages": []})), 400)["param"], "messages");
    assert_eq!(refused(url, c, chat(json!({"n": 2})), 400)["param"], "n");
    assert_eq!(refused(url, c, chat(json!({"logprobs": true, "top_logprobs": 21})), 400)["param"], "top_logprobs");
    let bogus = json!({"messages": [{"role": "bogus", "content": "hi"}]});
    assert_eq!(refused(url, c, chat(bogus), 400)["param"], "messages[0].role");
    assert_eq!(refused(url, c, chat(json!({"min_p": 0.5})), 400)["param"], "min_p");
    let e = refused(url, c, chat(json!({"max_tokens": CONTEXT})), 400);
    assert!(e["message"].as_str().unwrap().contains(&CONTEXT.to_string()), "{e}");
    // A prompt longer than the context: both numbers in the message.
    let long = "word ".repeat(CONTEXT as usize);
    let n = library().tokenizer.as_ref().unwrap().encode(&long, true).unwrap().len();
    let e = refused(url, "/v1/completions", json!({"model": MODEL, "prompt": long}).to_string().into_bytes(), 400);
    let m = e["message"].as_str().unwrap();
    assert!(m.contains(&n.to_string()) && m.contains(&CONTEXT.to_string()), "{m}");
    assert_eq!(e["code"], "context_length_exceeded");
    let wrong = client().get(format!("{url}{c}")).send().unwrap();
    assert_eq!(wrong.status(), 405);
    assert_eq!(wrong.json::<Value>().unwrap()["error"]["code"], "method_not_allowed");
    // Past the body limit (64 KiB here).
    let big = json!({"model": MODEL, "prompt": "x".repeat(1 << 17)}).to_string().into_bytes();
    assert_eq!(refused(url, "/v1/completions", big, 413)["code"], "request_too_large");
}

/// What clients of OpenAI's newer models and of other servers send: a "developer" message is
/// the system's (the template's own default system prompt is not added before it), and the
/// routes answer without /v1 too.
#[test]
fn developer_messages_and_bare_routes() {
    let url = shared();
    let chat = |role: &str| {
        json!({"model": MODEL, "temperature": 0, "max_tokens": 8,
            "messages": [{"role": role, "content": "Answer briefly."}, {"role": "user", "content": "hi"}]})
    };
    let c = "/v1/chat/completions";
    let system = complete(url, c, chat("system"));
    assert_eq!(complete(url, c, chat("developer")), system);
    assert_eq!(complete(url, "/chat/completions", chat("system")), system);
    let models: Value = client().get(format!("{url}/models")).send().unwrap().json().unwrap();
    assert_eq!(models["data"][0]["id"], MODEL);
}

/// A KV pool smaller than the context (4 blocks of 16: 64 positions) bounds a sequence as the
/// context would: a prompt or max_tokens past it is a 400 naming the pool, and a chat request
/// without max_tokens stops at the pool's end. (A prompt past the pool waited for ever.)
#[test]
fn a_kv_pool_smaller_than_the_context_bounds_requests_as_the_context_does() {
    let mut engine = engine_options(1);
    engine.forward.kv.blocks = Some(4);
    let server = Server::with_engine(engine, 4, None, None);
    let url = server.url.as_str();
    let long = "word ".repeat(80);
    let e = refused(url, "/v1/completions", json!({"model": MODEL, "prompt": long}).to_string().into_bytes(), 400);
    assert_eq!(e["param"], "prompt");
    assert!(e["message"].as_str().unwrap().contains("the KV pool holds 64 positions"), "{e}");
    let body = json!({"model": MODEL, "prompt": "Hello world", "max_tokens": 64});
    assert_eq!(refused(url, "/v1/completions", body.to_string().into_bytes(), 400)["param"], "max_tokens");
    // Chat: completions default to 16 tokens.
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": "Hello"}], "temperature": 0});
    let (_, finish, usage) = complete(url, "/v1/chat/completions", body);
    assert_eq!(finish, "length");
    assert_eq!(usage["total_tokens"], 64, "{usage}");
}

#[test]
fn models_health_and_metrics() {
    let url = shared();
    // No --cors: no CORS headers.
    let health = client().get(format!("{url}/health")).header("origin", ORIGIN).send().unwrap();
    assert!(!health.headers().contains_key("access-control-allow-origin"));
    let models: Value = client().get(format!("{url}/v1/models")).send().unwrap().json().unwrap();
    assert_eq!(models["data"][0]["id"], MODEL);
    // One model by its id (the SDKs' models.retrieve); another id is a 404.
    let one: Value = client().get(format!("{url}/v1/models/{MODEL}")).send().unwrap().json().unwrap();
    assert_eq!(one, models["data"][0]);
    let other = client().get(format!("{url}/v1/models/gpt-4")).send().unwrap();
    assert_eq!(other.status(), 404);
    assert_eq!(other.json::<Value>().unwrap()["error"]["code"], "model_not_found");
    let metrics = client().get(format!("{url}/metrics")).send().unwrap().text().unwrap();
    for name in [
        "# TYPE wginfer_time_to_first_token_seconds histogram",
        "# TYPE wginfer_inter_token_latency_seconds histogram",
        "# TYPE wginfer_e2e_request_latency_seconds histogram",
        "# TYPE wginfer_generation_tokens_total counter",
        "wginfer_requests_running ",
        "wginfer_requests_waiting ",
        "wginfer_kv_blocks_used ",
    ] {
        assert!(metrics.contains(name), "{name} in\n{metrics}");
    }
}

/// A value of `/metrics`.
fn metric(url: &str, name: &str) -> f64 {
    let text = client().get(format!("{url}/metrics")).send().unwrap().text().unwrap();
    let line = text.lines().find(|l| l.starts_with(name) && l[name.len()..].starts_with(' ')).expect(name);
    line[name.len() + 1..].parse().unwrap()
}

#[test]
fn keys_full_queues_and_disconnects() {
    // One running request, none waiting.
    let server = Server::start(1, 0, Some("sekrit"), Some(ORIGIN));
    let url = server.url.as_str();
    let models = |key: Option<&str>| {
        let r = client().get(format!("{url}/v1/models"));
        let r = if let Some(k) = key { r.bearer_auth(k) } else { r };
        r.send().unwrap()
    };
    assert_eq!(models(Some("sekrit")).status(), 200);
    // The scheme's name in any case (RFC 9110), not the key's.
    let lower = client().get(format!("{url}/v1/models")).header("authorization", "bearer sekrit").send().unwrap();
    assert_eq!(lower.status(), 200);
    for key in [None, Some("sekriT"), Some("sekrit2")] {
        let r = models(key);
        assert_eq!(r.status(), 401, "{key:?}");
        assert_eq!(r.json::<Value>().unwrap()["error"]["code"], "invalid_api_key");
    }
    assert_eq!(client().get(format!("{url}/health")).send().unwrap().status(), 200);
    // A browser's preflight from the allowed origin is answered (without a key), allowing the
    // headers OpenAI's JS SDK adds to each request.
    let asked = "authorization,content-type,x-stainless-os,x-stainless-retry-count";
    let preflight = client()
        .request(reqwest::Method::OPTIONS, format!("{url}/v1/chat/completions"))
        .header("origin", ORIGIN)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", asked)
        .send()
        .unwrap();
    assert_eq!(preflight.status(), 200);
    assert_eq!(preflight.headers()["access-control-allow-origin"], ORIGIN);
    assert_eq!(preflight.headers()["access-control-allow-headers"], asked);

    let long = json!({"model": MODEL, "prompt": "Hello world", "max_tokens": 200, "temperature": 0, "stream": true});
    let send =
        |body: &Value| client().post(format!("{url}/v1/completions")).bearer_auth("sekrit").json(body).send().unwrap();
    let r = send(&long);
    assert_eq!(r.status(), 200);
    let mut lines = BufReader::new(r).lines();
    assert!(lines.next().unwrap().unwrap().starts_with("data: "), "a first token");
    assert!(metric(url, "wginfer_kv_blocks_used") > 0.0);
    // The queue is full: 503, come back later.
    let busy = send(&json!({"model": MODEL, "prompt": "Hi", "max_tokens": 2}));
    assert_eq!(busy.status(), 503);
    assert!(busy.headers().contains_key("retry-after"));
    // The client goes away mid-stream: its sequence is cancelled and its KV memory freed.
    drop(lines);
    let kv_freed = || {
        let t = Instant::now();
        while metric(url, "wginfer_kv_blocks_used") > 0.0 {
            assert!(t.elapsed() < Duration::from_secs(10), "KV memory still held after the client left");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    kv_freed();
    let stopped = || metric(url, "wginfer_requests_finished_total{finish=\"stopped\"}");
    assert_eq!(stopped(), 1.0);
    let tokens = metric(url, "wginfer_generation_tokens_total");
    assert!(tokens < 200.0);
    // The same without streaming: the client sends its request and goes away before the
    // answer (a socket of its own, closed once the request runs).
    let body = json!({"model": MODEL, "prompt": "Hello world", "max_tokens": 200, "temperature": 0}).to_string();
    let mut socket = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer sekrit\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(format!("{head}{body}").as_bytes()).unwrap();
    let t = Instant::now();
    while metric(url, "wginfer_kv_blocks_used") == 0.0 {
        assert!(t.elapsed() < Duration::from_secs(10), "the request never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(socket);
    kv_freed();
    assert_eq!(stopped(), 2.0);
    assert!(metric(url, "wginfer_generation_tokens_total") - tokens < 200.0);
    assert_eq!(send(&json!({"model": MODEL, "prompt": "Hi", "max_tokens": 2})).status(), 200);
}

/// `wginfer serve` as a process on a free port with a context of `context` positions, its
/// stderr to `stderr`.
#[cfg(unix)]
fn serve_process(context: &str, stderr: impl Into<std::process::Stdio>) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_wginfer"))
        .args(["serve", "--port", "0", "--context", context, "--model"])
        .arg(fixture(MODEL))
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// The address the server's first line of stderr names, once it answers.
#[cfg(unix)]
fn serving_url(stderr: &mut impl Iterator<Item = std::io::Result<String>>) -> String {
    let first = stderr.next().unwrap().unwrap();
    let url = first.split(" on ").nth(1).unwrap_or_else(|| panic!("no address in {first:?}")).to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    wait_until_healthy(&url);
    url
}

/// `serve_process` with stderr piped: the process, its address and the rest of its stderr.
#[cfg(unix)]
fn serve_binary(context: &str) -> (std::process::Child, String, std::io::Lines<BufReader<std::process::ChildStderr>>) {
    let mut child = serve_process(context, std::process::Stdio::piped());
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = serving_url(&mut stderr);
    (child, url, stderr)
}

#[cfg(unix)]
fn signal(child: &std::process::Child, signal: &str) {
    let kill = std::process::Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
}

#[cfg(unix)]
#[test]
fn the_binary_serves_until_sigterm_and_exits_zero() {
    let (mut child, url, stderr) = serve_binary("128");
    let (text, _, _) = complete(
        &url,
        "/v1/chat/completions",
        json!({"model": MODEL, "max_tokens": 4,
        "messages": [Message::new("user", "hi")]}),
    );
    assert!(!text.is_empty());
    signal(&child, "-TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}: {:?}", stderr.map_while(Result::ok).collect::<Vec<_>>());
}

/// The first signal lets an open request finish; a second one ends the server at once, with
/// status 130 (for when the wrapping up waits on what never comes).
#[cfg(unix)]
#[test]
fn a_second_signal_stops_the_server_at_once() {
    let (child, url, _stderr) = serve_binary("4096");
    second_signal_stops(child, &url);
}

/// The same with a stderr nobody reads (a full pipe): the first signal's note and the second's
/// wait on it, and neither may hold the exit.
#[cfg(unix)]
#[test]
fn a_second_signal_stops_the_server_whose_stderr_is_full() {
    let (child, url, _stderr) = serve_binary_stderr_full("4096");
    second_signal_stops(child, &url);
}

/// A server whose stderr nobody reads still shuts down on one signal, with status 0.
#[cfg(unix)]
#[test]
fn the_binary_whose_stderr_is_full_exits_zero_on_sigterm() {
    let (mut child, url, _stderr) = serve_binary_stderr_full("128");
    let (text, _, _) = complete(&url, "/v1/completions", json!({"model": MODEL, "prompt": "Hi", "max_tokens": 4}));
    assert!(!text.is_empty());
    signal(&child, "-TERM");
    assert!(exit_within_10s(&mut child, "SIGTERM").success());
}

/// The child's exit status, once it ends within 10 s of `after` (else the test fails).
#[cfg(unix)]
fn exit_within_10s(child: &mut std::process::Child, after: &str) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{after} did not end the server");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `serve_binary` with a stderr that fills up once the server is up: this end writes into the
/// pipe until writes block (the server's then block too). The writing ends once the returned
/// reader is dropped.
#[cfg(unix)]
fn serve_binary_stderr_full(context: &str) -> (std::process::Child, String, impl Sized) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (reader, mut writer) = std::io::pipe().unwrap();
    let child = serve_process(context, writer.try_clone().unwrap());
    let mut stderr = BufReader::new(reader).lines();
    let url = serving_url(&mut stderr);
    let written = Arc::new(AtomicUsize::new(0));
    let count = written.clone();
    std::thread::spawn(move || {
        while writer.write_all(&[b'.'; 4096]).is_ok() {
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    // Full: nothing more went in for 300 ms.
    let mut before = 0;
    while before == 0 || written.load(Ordering::Relaxed) != before {
        before = written.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(300));
    }
    (child, url, stderr)
}

/// With a long request open: a first signal leaves the server running, a second ends it with
/// status 130, and the client's connection ends without an answer.
#[cfg(unix)]
fn second_signal_stops(mut child: std::process::Child, url: &str) {
    let long = json!({"model": MODEL, "prompt": "Hi", "max_tokens": 4000, "ignore_eos": true});
    let open = {
        let url = url.to_string();
        std::thread::spawn(move || client().post(format!("{url}/v1/completions")).json(&long).send())
    };
    let t = Instant::now();
    while metric(url, "wginfer_requests_running") == 0.0 {
        assert!(t.elapsed() < Duration::from_secs(60), "the request never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&child, "-TERM");
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "the first signal ended the server before its open request");
    signal(&child, "-INT");
    assert_eq!(exit_within_10s(&mut child, "the second signal").code(), Some(130));
    // The client sees its connection end without an answer.
    assert!(open.join().unwrap().is_err_and(|e| !e.is_status()));
}
