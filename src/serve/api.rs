//! The OpenAI API's shapes, without HTTP: a completion request as it arrives (JSON, checked
//! field by field), what it asks of the engine, the answers and chunks, and errors in OpenAI's
//! `{"error": {"message", "type", "param", "code"}}` shape with their HTTP status.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::sampling::{check_repetition_penalty, check_top_p, SamplingParams};
use crate::sched::{Priority, TokenLogprobs};
use crate::tokenizer::{Message, TextTokenizer};

/// Most stop strings in one request.
const MAX_STOPS: usize = 16;
/// Bytes of one stop string at most: each token's text is matched against every stop's
/// prefixes, so long stops would cost every request's tokens.
const MAX_STOP_BYTES: usize = 1024;
/// `/v1/completions`' answer length when a request sets none, as OpenAI's (chat's is the rest of
/// the context).
const TEXT_DEFAULT_MAX_TOKENS: usize = 16;
/// Most `top_logprobs` (OpenAI's limit).
const MAX_TOP_LOGPROBS: u32 = 20;

/// An error answer: its HTTP status and OpenAI's fields.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ApiError {
    /// A 400 about request field `param`.
    pub fn invalid(param: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param: Some(param.into()),
            code: None,
        }
    }

    pub fn new(status: u16, kind: &'static str, code: Option<&'static str>, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), kind, param: None, code }
    }

    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

/// Which endpoint: `/v1/chat/completions` or `/v1/completions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Text,
}

/// A chat message's `content`: a string, or a list of parts of which only text is understood.
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    role: String,
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

/// Both endpoints' bodies (they share every field but the prompt). Fields OpenAI defines that
/// change nothing here (`user`, `metadata` ...) are ignored, as other servers do; those that
/// would change the answer and are not supported (`tools`, `response_format`, `logit_bias`)
/// are refused where set, rather than answered as if absent.
#[derive(Deserialize)]
struct Body {
    model: String,
    messages: Option<Vec<ChatMessage>>,
    prompt: Option<Value>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<i64>,
    /// Any 64-bit integer, as OpenAI takes it (some clients send -1); its bits seed the draws.
    seed: Option<i64>,
    stop: Option<Stop>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    n: Option<u32>,
    frequency_penalty: Option<f32>,
    presence_penalty: Option<f32>,
    repetition_penalty: Option<f32>,
    logprobs: Option<Value>,
    top_logprobs: Option<u32>,
    echo: Option<bool>,
    suffix: Option<Value>,
    best_of: Option<u32>,
    priority: Option<Priority>,
    tools: Option<Value>,
    functions: Option<Value>,
    tool_choice: Option<Value>,
    function_call: Option<Value>,
    response_format: Option<Value>,
    logit_bias: Option<Value>,
    /// vLLM's and llama.cpp's: generate past the end-of-sequence token.
    ignore_eos: Option<bool>,
    // Other servers' extensions that would change the answer, refused where set.
    min_tokens: Option<Value>,
    min_p: Option<Value>,
    guided_json: Option<Value>,
    guided_regex: Option<Value>,
    guided_choice: Option<Value>,
    guided_grammar: Option<Value>,
    grammar: Option<Value>,
    json_schema: Option<Value>,
    // OpenAI's audio output.
    modalities: Option<Value>,
    audio: Option<Value>,
}

/// What the prompt is, before tokenizing.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    Chat(Vec<Message>),
    Text(String),
}

/// A checked request: what to run and how to answer.
#[derive(Clone, Debug)]
pub struct Request {
    pub model: String,
    pub prompt: Prompt,
    pub max_tokens: Option<usize>,
    /// Sampling; `seed` is `None` when the request left it to the server.
    pub sampling: SamplingParams,
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    pub priority: Priority,
    /// Chat's `logprobs`: report each token's log-probability and this many alternatives'.
    pub logprobs: Option<u32>,
    /// Generate past the end-of-sequence token (`ignore_eos`, as vLLM and llama.cpp take it).
    pub ignore_eos: bool,
}

impl Request {
    /// Parses and checks a request body for `endpoint`; every problem is a 400 naming its
    /// field.
    pub fn parse(endpoint: Endpoint, bytes: &[u8]) -> Result<Request, ApiError> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let body: Body = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                ApiError::new(400, "invalid_request_error", None, format!("the body is not valid JSON: {inner}"))
            } else if path == "." {
                // serde names the body's type by the struct it reads into.
                let message = inner.to_string().replace("struct Body", "a JSON object");
                ApiError::new(400, "invalid_request_error", None, format!("the body: {message}"))
            } else {
                ApiError::invalid(&path, format!("{path}: {inner}"))
            }
        })?;
        body.check(endpoint)
    }
}

impl Body {
    /// A 400 for fields set to something that would change the answer and is not supported:
    /// function calling, JSON output, logit biases. Their empty or default values pass.
    fn refuse_unsupported(&self) -> Result<(), ApiError> {
        let set = |v: &Option<Value>| match v {
            None | Some(Value::Null) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Object(o)) => !o.is_empty(),
            Some(_) => true,
        };
        // A number other than 0 (their default).
        let nonzero = |v: &Option<Value>| set(v) && v.as_ref().and_then(Value::as_f64) != Some(0.0);
        // A choice other than "none" or "auto": a call asked for.
        let calls = |v: &Option<Value>| set(v) && !matches!(v.as_ref().and_then(Value::as_str), Some("none" | "auto"));
        let refused = [
            ("tools", set(&self.tools), "tools (function calling) are not supported"),
            ("functions", set(&self.functions), "functions (function calling) are not supported"),
            ("tool_choice", calls(&self.tool_choice), "tool_choice is not supported (no tools)"),
            ("function_call", calls(&self.function_call), "function_call is not supported (no functions)"),
            (
                "response_format",
                set(&self.response_format)
                    && self.response_format.as_ref().and_then(|f| f.get("type")).and_then(Value::as_str)
                        != Some("text"),
                "response_format: only {\"type\": \"text\"} is supported (no JSON mode)",
            ),
            ("logit_bias", set(&self.logit_bias), "logit_bias is not supported"),
            ("min_tokens", nonzero(&self.min_tokens), "min_tokens is not supported"),
            ("min_p", nonzero(&self.min_p), "min_p is not supported (top_p and top_k are)"),
            ("guided_json", set(&self.guided_json), "guided_json (structured output) is not supported"),
            ("guided_regex", set(&self.guided_regex), "guided_regex (structured output) is not supported"),
            ("guided_choice", set(&self.guided_choice), "guided_choice (structured output) is not supported"),
            ("guided_grammar", set(&self.guided_grammar), "guided_grammar (structured output) is not supported"),
            ("grammar", set(&self.grammar), "grammar (structured output) is not supported"),
            ("json_schema", set(&self.json_schema), "json_schema (structured output) is not supported"),
            (
                "modalities",
                set(&self.modalities) && self.modalities != Some(serde_json::json!(["text"])),
                "modalities: only [\"text\"] is supported (no audio)",
            ),
            ("audio", set(&self.audio), "audio output is not supported"),
        ];
        match refused.into_iter().find(|r| r.1) {
            Some((name, _, why)) => Err(ApiError::invalid(name, why)),
            None => Ok(()),
        }
    }

    fn check(self, endpoint: Endpoint) -> Result<Request, ApiError> {
        self.refuse_unsupported()?;
        let prompt = match endpoint {
            Endpoint::Chat => Prompt::Chat(chat_messages(self.messages)?),
            Endpoint::Text => Prompt::Text(match self.prompt {
                Some(Value::String(s)) => s,
                // A list of one string is the same prompt.
                Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => a[0].as_str().unwrap_or_default().into(),
                Some(_) => {
                    return Err(ApiError::invalid(
                        "prompt",
                        "prompt must be a string (token ids and several prompts are not supported)",
                    ))
                }
                None => return Err(ApiError::invalid("prompt", "prompt is required")),
            }),
        };
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::invalid("n", "only n = 1 is supported"));
        }
        let logprobs = logprobs_wanted(endpoint, self.logprobs, self.top_logprobs)?;
        if self.echo == Some(true) {
            return Err(ApiError::invalid("echo", "echo is not supported"));
        }
        if self.suffix.as_ref().is_some_and(|v| !v.is_null() && v.as_str() != Some("")) {
            return Err(ApiError::invalid("suffix", "suffix (insertion) is not supported"));
        }
        if self.best_of.is_some_and(|b| b != 1) {
            return Err(ApiError::invalid("best_of", "only best_of = 1 is supported"));
        }
        for (name, v) in [("frequency_penalty", self.frequency_penalty), ("presence_penalty", self.presence_penalty)] {
            if v.is_some_and(|v| v != 0.0) {
                return Err(ApiError::invalid(
                    name,
                    format!("{name} is not supported; use repetition_penalty (> 1 makes seen tokens less likely)"),
                ));
            }
        }
        let mut temperature = self.temperature.unwrap_or(1.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::invalid("temperature", format!("temperature must be in [0, 2], got {temperature}")));
        }
        // OpenAI takes top_p in [0, 1]: a nucleus of no mass keeps only the most likely token.
        let top_p = match self.top_p {
            Some(0.0) => {
                temperature = 0.0;
                1.0
            }
            p => check_top_p(p.unwrap_or(1.0)).map_err(|e| ApiError::invalid("top_p", e))?,
        };
        // -1 (vLLM's spelling) and 0 both mean no limit.
        let top_k = match self.top_k.unwrap_or(0) {
            k if k < -1 => return Err(ApiError::invalid("top_k", format!("top_k must be -1, 0 or positive, got {k}"))),
            k => k.max(0) as usize,
        };
        let repetition_penalty = check_repetition_penalty(self.repetition_penalty.unwrap_or(1.0))
            .map_err(|e| ApiError::invalid("repetition_penalty", e))?;
        let max_tokens = match (self.max_tokens, self.max_completion_tokens) {
            (Some(a), Some(b)) if a != b => {
                return Err(ApiError::invalid("max_tokens", "max_tokens and max_completion_tokens differ"))
            }
            (Some(0), _) | (_, Some(0)) => {
                return Err(ApiError::invalid("max_tokens", "max_tokens must be at least 1"))
            }
            (a, b) => a.or(b).map(|m| m as usize).or(match endpoint {
                Endpoint::Text => Some(TEXT_DEFAULT_MAX_TOKENS),
                Endpoint::Chat => None,
            }),
        };
        let stop = match self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(v)) => v,
        };
        if stop.len() > MAX_STOPS || stop.iter().any(|s| s.is_empty() || s.len() > MAX_STOP_BYTES) {
            return Err(ApiError::invalid(
                "stop",
                format!("stop takes at most {MAX_STOPS} non-empty strings of at most {MAX_STOP_BYTES} bytes"),
            ));
        }
        // A negative seed's two's-complement bits: a seed of its own, the same every time.
        let seed = self.seed.map(|s| s as u64);
        let stream = self.stream.unwrap_or(false);
        if self.stream_options.is_some() && !stream {
            return Err(ApiError::invalid("stream_options", "stream_options needs stream: true"));
        }
        Ok(Request {
            model: self.model,
            prompt,
            max_tokens,
            sampling: SamplingParams { temperature, top_k, top_p, repetition_penalty, seed: seed.unwrap_or(0) },
            seed,
            stop,
            stream,
            include_usage: self.stream_options.and_then(|o| o.include_usage).unwrap_or(false),
            priority: self.priority.unwrap_or(Priority::Interactive),
            logprobs,
            ignore_eos: self.ignore_eos.unwrap_or(false),
        })
    }
}

/// Chat's `logprobs` (true or false) and `top_logprobs` (0 to 20, with logprobs only): how
/// many alternatives to report with each token, if logprobs are wanted. The legacy
/// completions' own logprobs shape is not served.
fn logprobs_wanted(endpoint: Endpoint, logprobs: Option<Value>, top: Option<u32>) -> Result<Option<u32>, ApiError> {
    let on = match (endpoint, logprobs) {
        (_, None | Some(Value::Null) | Some(Value::Bool(false))) => false,
        (Endpoint::Chat, Some(Value::Bool(true))) => true,
        (Endpoint::Chat, Some(v)) => {
            return Err(ApiError::invalid("logprobs", format!("logprobs must be true or false, got {v}")))
        }
        (Endpoint::Text, Some(_)) => {
            return Err(ApiError::invalid("logprobs", "logprobs is served on /v1/chat/completions only"))
        }
    };
    match top {
        None => Ok(on.then_some(0)),
        Some(_) if endpoint == Endpoint::Text => {
            Err(ApiError::invalid("top_logprobs", "top_logprobs is served on /v1/chat/completions only"))
        }
        Some(n) if n > MAX_TOP_LOGPROBS => {
            Err(ApiError::invalid("top_logprobs", format!("top_logprobs must be in 0..={MAX_TOP_LOGPROBS}, got {n}")))
        }
        Some(_) if !on => Err(ApiError::invalid("top_logprobs", "top_logprobs needs logprobs: true")),
        Some(n) => Ok(Some(n)),
    }
}

/// One token of a chat choice's `logprobs.content`: its text, log-probability and bytes
/// (`TextTokenizer::token_bytes`), and the same of the most likely tokens. The bytes of a
/// character cut over several tokens are each one's share (their text U+FFFD), as OpenAI's.
pub fn token_logprobs(tok: &TextTokenizer, lp: &TokenLogprobs) -> Value {
    let entry = |id: u32, logprob: f64| {
        let bytes = tok.token_bytes(id);
        json!({"token": String::from_utf8_lossy(&bytes), "logprob": logprob, "bytes": bytes})
    };
    let mut v = entry(lp.token, lp.logprob);
    v["top_logprobs"] = lp.top.iter().map(|&(id, l)| entry(id, l)).collect();
    v
}

/// A choice's `logprobs`: its tokens' entries when they were asked for, else null.
pub fn choice_logprobs(entries: Option<Vec<Value>>) -> Value {
    entries.map_or(Value::Null, |content| json!({"content": content}))
}

fn chat_messages(messages: Option<Vec<ChatMessage>>) -> Result<Vec<Message>, ApiError> {
    let messages = messages.ok_or_else(|| ApiError::invalid("messages", "messages is required"))?;
    if messages.is_empty() {
        return Err(ApiError::invalid("messages", "messages must not be empty"));
    }
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let content = match m.content {
                None => String::new(),
                Some(Content::Text(t)) => t,
                // Text parts joined by newlines, as vLLM joins them ("Hello" and "world" ran
                // together as "Helloworld").
                Some(Content::Parts(parts)) => {
                    let mut texts = Vec::new();
                    for p in parts {
                        match (p.kind.as_str(), p.text) {
                            ("text", Some(t)) => texts.push(t),
                            (kind, _) => {
                                return Err(ApiError::invalid(
                                    &format!("messages[{i}].content"),
                                    format!(
                                        "messages[{i}]: content parts of type {kind:?} are not supported (text only)"
                                    ),
                                ))
                            }
                        }
                    }
                    texts.join("\n")
                }
            };
            Ok(Message::new(chat_role(i, &m.role)?, &content))
        })
        .collect()
}

/// The role a chat template gets for message `i`'s `role`: OpenAI's "developer" (the system
/// role of its newer models) is the system's; tool results need tools, which are refused.
fn chat_role(i: usize, role: &str) -> Result<&str, ApiError> {
    match role {
        "system" | "user" | "assistant" => Ok(role),
        "developer" => Ok("system"),
        "tool" | "function" => Err(ApiError::invalid(
            &format!("messages[{i}].role"),
            format!("messages[{i}]: role {role:?} carries a tool's result; tools are not supported"),
        )),
        _ => Err(ApiError::invalid(
            &format!("messages[{i}].role"),
            format!("messages[{i}]: role {role:?} is not one of system, developer, user, assistant"),
        )),
    }
}

/// `usage` of an answer.
pub fn usage(prompt_tokens: usize, completion_tokens: usize) -> Value {
    json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens})
}

/// Where an answer's fields differ between the two endpoints.
impl Endpoint {
    /// The answer's `id` prefix.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Endpoint::Chat => "chatcmpl-",
            Endpoint::Text => "cmpl-",
        }
    }

    fn object(self, chunk: bool) -> &'static str {
        match (self, chunk) {
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
            // Legacy completions stream objects of the same type.
            (Endpoint::Text, _) => "text_completion",
        }
    }

    /// The whole answer (`logprobs`: `choice_logprobs`).
    pub fn answer(self, head: &Head, text: &str, finish: &str, usage: Value, logprobs: Value) -> Value {
        let choice = match self {
            Endpoint::Chat => json!({"index": 0, "message": {"role": "assistant", "content": text},
                "logprobs": logprobs, "finish_reason": finish}),
            Endpoint::Text => json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish}),
        };
        head.object(self.object(false), vec![choice], Some(usage))
    }

    /// A streamed chunk: new text (a chat's first chunk also names the role) with the
    /// `logprobs` of its tokens (`choice_logprobs`), or the end with its finish reason.
    pub fn chunk(self, head: &Head, text: &str, first: bool, finish: Option<&str>, logprobs: Value) -> Value {
        let choice = match self {
            Endpoint::Chat => {
                let delta = match (first, finish) {
                    (_, Some(_)) => json!({}),
                    (true, None) => json!({"role": "assistant", "content": text}),
                    (false, None) => json!({"content": text}),
                };
                json!({"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish})
            }
            Endpoint::Text => json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish}),
        };
        // With `include_usage`, OpenAI's chunks before the usage chunk carry `"usage": null`.
        head.object(self.object(true), vec![choice], head.stream_usage.then_some(Value::Null))
    }

    /// The chunk after the last one when `stream_options.include_usage` asks for it.
    pub fn usage_chunk(self, head: &Head, usage: Value) -> Value {
        head.object(self.object(true), Vec::new(), Some(usage))
    }
}

/// What every object of one answer shares.
pub struct Head {
    pub id: String,
    pub created: u64,
    pub model: String,
    /// A stream that ends with a usage chunk (`stream_options.include_usage`).
    pub stream_usage: bool,
}

impl Head {
    fn object(&self, object: &str, choices: Vec<Value>, usage: Option<Value>) -> Value {
        let mut v = json!({"id": self.id, "object": object, "created": self.created, "model": self.model,
            "choices": choices});
        if let Some(u) = usage {
            v["usage"] = u;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(endpoint: Endpoint, body: &str) -> Result<Request, ApiError> {
        Request::parse(endpoint, body.as_bytes())
    }

    #[test]
    fn wrong_types_name_their_field() {
        let e = parse(Endpoint::Chat, r#"{"model": "m", "messages": [], "temperature": "hot"}"#).unwrap_err();
        assert_eq!((e.status, e.param.as_deref()), (400, Some("temperature")));
        assert!(e.message.starts_with("temperature: invalid type"), "{}", e.message);
        let e = parse(Endpoint::Chat, r#"{"model": "m", "messages": [{"role": "user", "content": 3}]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].content"));
    }

    #[test]
    fn fields_that_would_change_the_answer_are_refused_unless_empty() {
        let chat = |extra: &str| {
            parse(
                Endpoint::Chat,
                &format!(r#"{{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]{extra}}}"#),
            )
        };
        let tool = r#"[{"type": "function", "function": {"name": "f", "parameters": {}}}]"#;
        for (extra, field) in [
            (format!(r#", "tools": {tool}"#), "tools"),
            (format!(r#", "functions": {tool}"#), "functions"),
            (r#", "tool_choice": "required""#.into(), "tool_choice"),
            (r#", "response_format": {"type": "json_object"}"#.into(), "response_format"),
            (r#", "logit_bias": {"50256": -100}"#.into(), "logit_bias"),
            (r#", "min_p": 0.05"#.into(), "min_p"),
            (r#", "min_tokens": 8"#.into(), "min_tokens"),
            (r#", "guided_json": {"type": "object"}"#.into(), "guided_json"),
            (r#", "grammar": "root ::= \"a\"""#.into(), "grammar"),
            (r#", "modalities": ["text", "audio"]"#.into(), "modalities"),
        ] {
            let e = chat(&extra).unwrap_err();
            assert_eq!((e.status, e.param.as_deref()), (400, Some(field)), "{extra}");
        }
        for extra in [
            r#", "tools": [], "tool_choice": "none", "function_call": "auto""#,
            r#", "response_format": {"type": "text"}, "logit_bias": {}, "tools": null"#,
            r#", "min_p": 0, "min_tokens": 0, "modalities": ["text"], "guided_json": null"#,
        ] {
            assert!(chat(extra).is_ok(), "{extra}");
        }
    }

    /// "developer" (OpenAI's newer system role) reaches the template as "system"; a tool's
    /// result (no tools here) or an unknown role is a 400 naming the message; `ignore_eos`
    /// is taken.
    #[test]
    fn roles_and_ignore_eos() {
        let chat = |role: &str, extra: &str| {
            let body = format!(r#"{{"model": "m", "messages": [{{"role": "{role}", "content": "hi"}}]{extra}}}"#);
            parse(Endpoint::Chat, &body)
        };
        let req = chat("developer", r#", "ignore_eos": true"#).unwrap();
        assert_eq!((req.prompt, req.ignore_eos), (Prompt::Chat(vec![Message::new("system", "hi")]), true));
        assert!(!chat("user", "").unwrap().ignore_eos);
        for role in ["tool", "function", "bogus"] {
            let e = chat(role, "").unwrap_err();
            assert_eq!((e.status, e.param.as_deref()), (400, Some("messages[0].role")), "{role}");
        }
    }

    #[test]
    fn malformed_json_and_missing_fields() {
        let e = parse(Endpoint::Chat, r#"{"model": "m", "#).unwrap_err();
        assert!(e.message.contains("not valid JSON"), "{}", e.message);
        let e = parse(Endpoint::Chat, r#"{"messages": [{"role": "user", "content": "hi"}]}"#).unwrap_err();
        assert!(e.message.contains("missing field `model`"), "{}", e.message);
        let e = parse(Endpoint::Text, r#"{"model": "m"}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("prompt"));
        for body in ["[]", "\"hi\"", "3"] {
            let e = parse(Endpoint::Chat, body).unwrap_err();
            assert!(e.message.contains("expected a JSON object") && !e.message.contains("Body"), "{}", e.message);
        }
    }

    #[test]
    fn unsupported_choices_are_refused() {
        for (body, param) in [
            (r#"{"model": "m", "prompt": "a", "n": 2}"#, "n"),
            (r#"{"model": "m", "prompt": "a", "logprobs": 1}"#, "logprobs"),
            (r#"{"model": "m", "prompt": "a", "top_logprobs": 1}"#, "top_logprobs"),
            (r#"{"model": "m", "prompt": "a", "presence_penalty": 0.5}"#, "presence_penalty"),
            (r#"{"model": "m", "prompt": "a", "max_tokens": 0}"#, "max_tokens"),
            (r#"{"model": "m", "prompt": "a", "stop": [""]}"#, "stop"),
            (r#"{"model": "m", "prompt": "a", "top_p": -0.5}"#, "top_p"),
            (r#"{"model": "m", "prompt": "a", "suffix": "b"}"#, "suffix"),
            (r#"{"model": "m", "prompt": "a", "best_of": 3}"#, "best_of"),
        ] {
            let e = parse(Endpoint::Text, body).unwrap_err();
            assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{body}");
        }
    }

    #[test]
    fn chat_logprobs_are_checked() {
        let chat = |extra: &str| {
            let body = format!(r#"{{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]{extra}}}"#);
            parse(Endpoint::Chat, &body).map(|r| r.logprobs).map_err(|e| e.param.unwrap_or_default())
        };
        assert_eq!(chat(""), Ok(None));
        assert_eq!(chat(r#", "logprobs": false"#), Ok(None));
        assert_eq!(chat(r#", "logprobs": true"#), Ok(Some(0)));
        assert_eq!(chat(r#", "logprobs": true, "top_logprobs": 20"#), Ok(Some(20)));
        assert_eq!(chat(r#", "logprobs": true, "top_logprobs": 21"#), Err("top_logprobs".into()));
        assert_eq!(chat(r#", "top_logprobs": 2"#), Err("top_logprobs".into()));
        assert_eq!(chat(r#", "logprobs": 2"#), Err("logprobs".into()));
    }

    #[test]
    fn fields_reach_the_request() {
        let r = parse(
            Endpoint::Chat,
            r#"{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                "max_completion_tokens": 7, "temperature": 0, "top_k": -1, "seed": 5, "stop": "x",
                "stream": true, "stream_options": {"include_usage": true}, "priority": "background"}"#,
        )
        .unwrap();
        assert_eq!(r.prompt, Prompt::Chat(vec![Message::new("user", "hi")]));
        assert_eq!((r.max_tokens, r.seed, r.stop.clone()), (Some(7), Some(5), vec!["x".to_string()]));
        let parts = r#"[{"type": "text", "text": "Hello"}, {"type": "text", "text": "world"}]"#;
        let body = format!(r#"{{"model": "m", "messages": [{{"role": "user", "content": {parts}}}]}}"#);
        assert_eq!(
            parse(Endpoint::Chat, &body).unwrap().prompt,
            Prompt::Chat(vec![Message::new("user", "Hello\nworld")])
        );
        assert_eq!((r.sampling.temperature, r.sampling.top_k), (0.0, 0));
        assert!(r.stream && r.include_usage && r.priority == Priority::Background);
        // What clients send for "no suffix", "one answer" and "any seed" runs as usual.
        let r = parse(Endpoint::Text, r#"{"model": "m", "prompt": "a", "suffix": "", "best_of": 1, "seed": -1}"#);
        let r = r.unwrap();
        // Completions answer 16 tokens unless told (OpenAI's default).
        assert_eq!((r.seed, r.max_tokens), (Some(u64::MAX), Some(16)));
        // top_p 0 keeps the most likely token: greedy.
        let r = parse(Endpoint::Chat, r#"{"model": "m", "messages": [{"role": "user", "content": "a"}], "top_p": 0}"#);
        let s = r.unwrap().sampling;
        assert!(s.is_greedy() && s.top_p == 1.0, "{s:?}");
        let long = format!(r#"{{"model": "m", "prompt": "a", "stop": ["{}"]}}"#, "x".repeat(MAX_STOP_BYTES + 1));
        assert_eq!(parse(Endpoint::Text, &long).unwrap_err().param.as_deref(), Some("stop"));
    }
}
