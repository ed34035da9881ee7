//! The HTTP layer (axum): routes, the bearer-key check, the body limit, CORS, and answers as
//! JSON or as server-sent events ending with `data: [DONE]`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request as HttpRequest, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use serde_json::{json, Value};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::api::{choice_logprobs, usage, ApiError, Endpoint, Head, Request};
use super::hub::{Generation, Hub, Out, State as ModelState};

/// The HTTP side's options, checked (an origin that is no header value is an error before the
/// model starts loading).
pub struct HttpOptions {
    api_key: Option<Arc<str>>,
    cors: Option<CorsLayer>,
    body_limit: usize,
}

impl HttpOptions {
    /// `api_key`: none or empty, the routes are open; `cors`: an origin browsers may call from
    /// (`*` for any), none for no CORS headers.
    pub fn new(api_key: Option<&str>, cors: Option<&str>, body_limit: usize) -> Result<HttpOptions> {
        Ok(HttpOptions {
            api_key: api_key.filter(|k| !k.is_empty()).map(Arc::from),
            cors: cors.map(cors_layer).transpose()?,
            body_limit,
        })
    }
}

#[derive(Clone)]
struct AppState {
    hub: Arc<Hub>,
    api_key: Option<Arc<str>>,
    body_limit: usize,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut r = (status, Json(self.body())).into_response();
        let headers = r.headers_mut();
        match self.status {
            401 => headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")),
            503 => headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1")),
            _ => None,
        };
        r
    }
}

pub fn router(hub: Arc<Hub>, opts: &HttpOptions) -> Router {
    let state = AppState { hub, api_key: opts.api_key.clone(), body_limit: opts.body_limit };
    // The OpenAI routes under /v1, and without it as llama.cpp's server takes them too (for
    // clients given a base URL without /v1).
    let api = Router::new()
        .route("/chat/completions", post(chat))
        .route("/completions", post(completions))
        .route("/models", get(models))
        .route("/models/{id}", get(model))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    let app = Router::new()
        .nest("/v1", api.clone())
        .merge(api)
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(opts.body_limit))
        .with_state(state);
    match &opts.cors {
        None => app,
        Some(cors) => app.layer(cors.clone()),
    }
}

fn cors_layer(origin: &str) -> Result<CorsLayer> {
    let allow = match origin {
        "*" => AllowOrigin::any(),
        o => {
            AllowOrigin::exact(HeaderValue::from_str(o).with_context(|| format!("--cors {o:?} is not a valid origin"))?)
        }
    };
    Ok(CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST])
        // Whatever headers the preflight names: OpenAI's SDKs send their own (`x-stainless-*`)
        // with every request, and a fixed list would have the browser block those calls.
        .allow_headers(AllowHeaders::mirror_request()))
}

/// With a key set, every /v1 route needs `Authorization: Bearer KEY`.
async fn auth(State(s): State<AppState>, req: HttpRequest, next: Next) -> Response {
    if let Some(key) = &s.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            // The scheme's name is case-insensitive (RFC 9110).
            .and_then(|(scheme, key)| scheme.eq_ignore_ascii_case("bearer").then_some(key));
        if !given.is_some_and(|g| same(g.as_bytes(), key.as_bytes())) {
            let message = "a valid API key is needed (Authorization: Bearer KEY)";
            return ApiError::new(401, "invalid_request_error", Some("invalid_api_key"), message).into_response();
        }
    }
    next.run(req).await
}

/// A random number drawn once a process: answers' ids carry it before their counter, so no id
/// repeats after a restart (clients store and deduplicate answers by id).
fn process_key() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| std::collections::hash_map::RandomState::new().build_hasher().finish())
}

/// Equality whose time depends on the lengths only, not on where the bytes differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && std::hint::black_box(a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y))) == 0
}

async fn chat(State(s): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    complete(s, Endpoint::Chat, body).await.unwrap_or_else(IntoResponse::into_response)
}

async fn completions(State(s): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    complete(s, Endpoint::Text, body).await.unwrap_or_else(IntoResponse::into_response)
}

async fn complete(s: AppState, endpoint: Endpoint, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let body = body.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            413,
            "invalid_request_error",
            Some("request_too_large"),
            format!("the body is larger than the limit of {} bytes", s.body_limit),
        ),
        _ => ApiError::new(400, "invalid_request_error", None, format!("cannot read the body: {}", r.body_text())),
    })?;
    let req = Request::parse(endpoint, &body)?;
    s.hub.check_model(&req.model)?;
    // A full queue answers before the prompt is tokenized, and tokenizing (a chat template,
    // up to the body limit of text) runs off the async workers that serve every connection.
    s.hub.check_capacity()?;
    let (hub, prompt, max) = (s.hub.clone(), req.prompt.clone(), req.max_tokens);
    let (prompt_ids, max_tokens) = tokio::task::spawn_blocking(move || hub.prepare(&prompt, max))
        .await
        .map_err(|e| ApiError::new(500, "server_error", None, format!("tokenizing failed: {e}")))??;
    let mut sampling = req.sampling.clone();
    // No seed: a different draw for every request.
    sampling.seed = req.seed.unwrap_or_else(|| now_nanos() ^ prompt_ids.len() as u64);
    let gen = s.hub.submit(&req, prompt_ids, max_tokens, sampling)?;
    let head = Head {
        id: format!("{}{:016x}{}", endpoint.id_prefix(), process_key(), gen.id),
        created: now_nanos() / 1_000_000_000,
        model: req.model,
        stream_usage: req.stream && req.include_usage,
    };
    let logprobs = req.logprobs.is_some();
    if req.stream {
        let mut events = stream(endpoint, head, gen, req.include_usage, logprobs).into_response();
        // Proxies such as nginx would otherwise hold the events back until their buffer fills.
        events.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
        Ok(events)
    } else {
        answer(endpoint, head, gen, logprobs).await
    }
}

fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn engine_error(e: String) -> ApiError {
    ApiError::new(500, "server_error", None, e)
}

/// The whole answer at once (with the logprobs of its tokens, if asked for).
async fn answer(endpoint: Endpoint, head: Head, mut gen: Generation, logprobs: bool) -> Result<Response, ApiError> {
    let mut text = String::new();
    let mut entries = Vec::new();
    while let Some(out) = gen.next().await {
        match out {
            Out::Text(t, lp) => {
                text.push_str(&t);
                entries.extend(lp);
            }
            Out::End { finish, tokens } => {
                let lp = choice_logprobs(logprobs.then_some(std::mem::take(&mut entries)));
                let body = endpoint.answer(&head, &text, finish, usage(gen.prompt_tokens, tokens), lp);
                return Ok(Json(body).into_response());
            }
            Out::Error(e) => return Err(engine_error(e)),
        }
    }
    Err(engine_error("the generation ended without an answer".into()))
}

/// A streamed answer: the events of one generation as it runs. Dropping it (the client went
/// away) drops the generation, which cancels it.
struct Streaming {
    endpoint: Endpoint,
    head: Head,
    gen: Generation,
    include_usage: bool,
    /// Chunks carry their tokens' logprobs.
    logprobs: bool,
    /// Event data ready to go, and whether nothing more will be added.
    queue: VecDeque<String>,
    over: bool,
}

impl Streaming {
    /// Turns the generation's next output into event data.
    async fn advance(&mut self) {
        let (endpoint, head) = (self.endpoint, &self.head);
        match self.gen.next().await {
            Some(Out::Text(t, lp)) => {
                let lp = choice_logprobs(self.logprobs.then_some(lp));
                self.queue.push_back(endpoint.chunk(head, &t, false, None, lp).to_string());
            }
            Some(Out::End { finish, tokens }) => {
                self.queue.push_back(endpoint.chunk(head, "", false, Some(finish), Value::Null).to_string());
                if self.include_usage {
                    let u = usage(self.gen.prompt_tokens, tokens);
                    self.queue.push_back(endpoint.usage_chunk(head, u).to_string());
                }
                self.finish();
            }
            Some(Out::Error(e)) => {
                self.queue.push_back(engine_error(e).body().to_string());
                self.finish();
            }
            None => self.over = true,
        }
    }

    fn finish(&mut self) {
        self.queue.push_back("[DONE]".into());
        self.over = true;
    }
}

fn stream(
    endpoint: Endpoint,
    head: Head,
    gen: Generation,
    include_usage: bool,
    logprobs: bool,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let mut queue = VecDeque::new();
    if endpoint == Endpoint::Chat {
        // OpenAI's first chat chunk names the role.
        queue.push_back(endpoint.chunk(&head, "", true, None, Value::Null).to_string());
    }
    let s = Streaming { endpoint, head, gen, include_usage, logprobs, queue, over: false };
    let events = stream::unfold(s, |mut s| async move {
        loop {
            if let Some(data) = s.queue.pop_front() {
                return Some((Ok(SseEvent::default().data(data)), s));
            }
            if s.over {
                return None;
            }
            s.advance().await;
        }
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

fn model_object(s: &AppState) -> Value {
    json!({"id": s.hub.model_name, "object": "model", "created": 0, "owned_by": "wginfer",
        "max_model_len": s.hub.context})
}

async fn models(State(s): State<AppState>) -> Response {
    Json(json!({"object": "list", "data": [model_object(&s)]})).into_response()
}

/// One model by its id (the SDKs' `models.retrieve`).
async fn model(State(s): State<AppState>, Path(id): Path<String>) -> Response {
    match s.hub.check_model(&id) {
        Ok(()) => Json(model_object(&s)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// 200 once the model serves, 503 while it loads (or after it failed to).
async fn health(State(s): State<AppState>) -> Response {
    let state = s.hub.state().borrow().clone();
    match state {
        ModelState::Ready => (StatusCode::OK, Json(json!({"status": "ok"}))),
        ModelState::Loading => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "loading"}))),
        ModelState::Failed(e) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "error", "error": e}))),
    }
    .into_response()
}

async fn metrics(State(s): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], s.hub.metrics()).into_response()
}

async fn not_found(method: Method, uri: axum::http::Uri) -> Response {
    ApiError::new(404, "invalid_request_error", Some("not_found"), format!("no route {method} {}", uri.path()))
        .into_response()
}

async fn wrong_method(method: Method, uri: axum::http::Uri) -> Response {
    let message = format!("{} does not take {method}", uri.path());
    ApiError::new(405, "invalid_request_error", Some("method_not_allowed"), message).into_response()
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn keys_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT") && !same(b"secret", b"secret2") && !same(b"", b"x"));
    }
}
