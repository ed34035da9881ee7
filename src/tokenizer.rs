//! Text in and out: the `tokenizers` tokenizer, the chat template (rendered with minijinja as
//! transformers renders it) and streaming detokenization.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::Value;

use tokenizers::decoders::DecoderWrapper;

use crate::model::config::ids_field;
use crate::model::folder::ModelFolder;

mod charsmap;

/// One chat turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Message {
        Message { role: role.into(), content: content.into() }
    }
}

/// The most bytes of text one prompt may have (a chat's, as its template renders it): a million
/// tokens, past any context the engine runs, while the tokenizer's working memory (about 200
/// bytes a byte of text) stays under a gigabyte. A longer one is refused, not tokenized until
/// the allocator aborts the process.
pub const MAX_PROMPT_BYTES: usize = 4 << 20;

fn check_prompt_bytes(len: usize) -> Result<()> {
    if len > MAX_PROMPT_BYTES {
        bail!("the prompt's text is {len} bytes; at most {MAX_PROMPT_BYTES} (4 MiB) are tokenized");
    }
    Ok(())
}

pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    chat_template: Option<String>,
    bos_token: String,
    eos_token: String,
    /// Ids that end generation (tokenizer, generation_config.json).
    pub eos_ids: Vec<u32>,
    /// Prepended to plain (non-chat) prompts when the format asks for it (GGUF
    /// `tokenizer.ggml.add_bos_token`); HF folders do this in tokenizer.json itself.
    bos_prefix: Option<u32>,
    /// How a vocabulary entry spells its bytes (`token_bytes`).
    spelling: Spelling,
}

/// How the vocabulary's pieces spell bytes, read from the tokenizer's decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spelling {
    /// GPT-2's byte-level BPE: each byte one printable character (a space is "Ġ").
    ByteLevel,
    /// SentencePiece: a space is "▁", a byte outside the vocabulary a piece "<0xAB>".
    Metaspace,
    /// Anything else: a token's bytes are its decoding alone.
    Decoded,
}

impl Spelling {
    fn of(decoder: Option<&DecoderWrapper>) -> Spelling {
        match decoder {
            Some(DecoderWrapper::ByteLevel(_)) => Spelling::ByteLevel,
            Some(DecoderWrapper::Metaspace(_) | DecoderWrapper::ByteFallback(_) | DecoderWrapper::Replace(_)) => {
                Spelling::Metaspace
            }
            Some(DecoderWrapper::Sequence(seq)) => {
                let parts: Vec<Spelling> = seq.get_decoders().iter().map(|d| Spelling::of(Some(d))).collect();
                [Spelling::ByteLevel, Spelling::Metaspace]
                    .into_iter()
                    .find(|s| parts.contains(s))
                    .unwrap_or(Spelling::Decoded)
            }
            _ => Spelling::Decoded,
        }
    }
}

/// GPT-2's byte-to-character table reversed: printable bytes stand for themselves, the others
/// (controls, space, 0x7f-0xa0, 0xad) for U+0100 onwards in byte order.
fn byte_level_byte(c: char) -> Option<u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
    let code = u32::from(c);
    if let Ok(b) = u8::try_from(code) {
        return printable(b).then_some(b);
    }
    let shifted = usize::try_from(code.checked_sub(256)?).ok()?;
    (0..=255u8).filter(|&b| !printable(b)).nth(shifted)
}

/// A SentencePiece byte-fallback piece's byte: "<0xAB>".
fn fallback_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

/// A special-token entry of tokenizer_config.json: a string or {"content": ...}.
fn token_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

/// Checks a tokenizer.json's `decoder` (inside `Sequence`s too) for what the `tokenizers`
/// crate cannot decode: a `Strip` with a `stop` count indexes before the start of any token of
/// fewer characters (tokenizers 0.22, decoders/strip.rs). Real tokenizers strip at the start.
fn check_decoder(decoder: &Value) -> Result<()> {
    match decoder.get("type").and_then(Value::as_str) {
        Some("Sequence") => {
            let inner = decoder.get("decoders").and_then(Value::as_array);
            inner.into_iter().flatten().try_for_each(check_decoder)
        }
        Some("Strip") => match decoder.get("stop").and_then(Value::as_u64) {
            Some(stop) if stop > 0 => {
                bail!("decoder Strip: stop {stop} is not supported (only a Strip at the start of tokens, stop 0)")
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

impl TextTokenizer {
    /// tokenizer.json, tokenizer_config.json / chat_template.jinja and generation_config.json of
    /// a Hugging Face model folder.
    pub fn from_hf_dir(dir: &Path) -> Result<TextTokenizer> {
        Self::from_folder(&ModelFolder::dir(dir))
    }

    /// The same from a folder's files wherever they are (a directory, or in memory).
    pub fn from_folder(folder: &ModelFolder) -> Result<TextTokenizer> {
        let json = folder.require("tokenizer.json")?;
        let tc = folder.read_json("tokenizer_config.json")?.unwrap_or(Value::Null);
        let template_file =
            match folder.read("chat_template.jinja")? {
                Some(bytes) => Some(String::from_utf8(bytes.to_vec()).with_context(|| {
                    format!("{} is not UTF-8 text", folder.file_path("chat_template.jinja").display())
                })?),
                None => None,
            };
        let generation = folder.read_json("generation_config.json")?;
        Self::from_hf_files(&json, &tc, template_file, generation.as_ref())
            .with_context(|| format!("cannot load {}", folder.file_path("tokenizer.json").display()))
    }

    /// The tokenizer from the contents of a model folder's files: tokenizer.json's bytes,
    /// tokenizer_config.json (`Null` when absent), chat_template.jinja and
    /// generation_config.json where present. Reads no file (the fuzz targets call it).
    pub fn from_hf_files(
        tokenizer_json: &[u8],
        tc: &Value,
        template_file: Option<String>,
        generation: Option<&Value>,
    ) -> Result<TextTokenizer> {
        // Parsed as JSON before the `tokenizers` crate sees it: that crate panics on a syntax
        // error inside a "decoder" entry (tokenizers 0.22, decoders/mod.rs `expect("Helper")`).
        let json: Value = serde_json::from_slice(tokenizer_json).context("not valid JSON")?;
        // It panics on some normalizers and decoders too: those are checked first.
        if let Some(n) = json.get("normalizer") {
            charsmap::check_normalizer(n)?;
        }
        if let Some(d) = json.get("decoder") {
            check_decoder(d)?;
        }
        let mut inner: tokenizers::Tokenizer = serde_json::from_value(json).map_err(|e| anyhow!("{e}"))?;
        // A prompt is never padded or cut, whatever padding and truncation the file sets:
        // transformers' fast tokenizers override both on every call (off for a plain encode).
        // Left on, a fixed padding length allocates that many ids per call, and a truncation
        // stride past its length panics.
        inner.with_padding(None);
        inner.with_truncation(None).map_err(|e| anyhow!("{e}"))?;
        let chat_template = match template_file {
            Some(t) => Some(t),
            None => match tc.get("chat_template") {
                Some(Value::String(s)) => Some(s.clone()),
                // A list of named templates: take "default".
                Some(Value::Array(a)) => a
                    .iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                    .and_then(|t| t.get("template"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                _ => None,
            },
        };
        let bos_token = token_text(tc.get("bos_token")).unwrap_or_default();
        let eos_token = token_text(tc.get("eos_token")).unwrap_or_default();
        let mut eos_ids: Vec<u32> = inner.token_to_id(&eos_token).into_iter().collect();
        if let Some(g) = generation {
            eos_ids.extend(ids_field(g, "eos_token_id"));
        }
        let spelling = Spelling::of(inner.get_decoder());
        Ok(TextTokenizer { inner, chat_template, bos_token, eos_token, eos_ids, bos_prefix: None, spelling })
    }

    /// The tokenizer and chat template a GGUF file carries in its metadata.
    pub fn from_gguf(g: &crate::model::gguf::Gguf) -> Result<TextTokenizer> {
        Self::read_gguf(g).with_context(|| format!("in {}", g.path.display()))
    }

    fn read_gguf(g: &crate::model::gguf::Gguf) -> Result<TextTokenizer> {
        let (inner, bos_token, eos_token) = crate::model::gguf_tokenizer::build(g)?;
        let add_bos = g.bool("tokenizer.ggml.add_bos_token")? == Some(true);
        let bos = g.bos_id()?;
        if add_bos && bos.is_none() {
            bail!("metadata tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing");
        }
        Ok(TextTokenizer {
            spelling: Spelling::of(inner.get_decoder()),
            inner,
            chat_template: g.str("tokenizer.chat_template")?.map(str::to_string),
            bos_token,
            eos_token,
            eos_ids: g.eos_id()?.into_iter().collect(),
            bos_prefix: bos.filter(|_| add_bos),
        })
    }

    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        check_prompt_bytes(text.len())?;
        let enc = self.inner.encode(text, add_special_tokens).map_err(|e| anyhow!("tokenizing failed: {e}"))?;
        let bos = self.bos_prefix.filter(|_| add_special_tokens);
        Ok(bos.into_iter().chain(enc.get_ids().iter().copied()).collect())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, true).map_err(|e| anyhow!("detokenizing failed: {e}"))
    }

    /// The bytes token `id` stands for inside a text: its leading space kept, a piece of a
    /// character its bytes alone (OpenAI's logprobs `bytes`: the pieces of a character add up to
    /// it). Every other token is spelled as the decoder spells it, added ones too (Gemma's runs
    /// of "▁"), but a special token, which decoding leaves out, reads as itself. Empty for an id
    /// outside the vocabulary.
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let Some(piece) = self.inner.id_to_token(id) else { return Vec::new() };
        if self.inner.get_added_vocabulary().is_special_token(&piece) {
            return piece.into_bytes();
        }
        let spelled = match self.spelling {
            Spelling::ByteLevel => piece.chars().map(byte_level_byte).collect::<Option<Vec<u8>>>(),
            Spelling::Metaspace => {
                Some(fallback_byte(&piece).map_or_else(|| piece.replace('\u{2581}', " ").into_bytes(), |b| vec![b]))
            }
            Spelling::Decoded => None,
        };
        spelled.unwrap_or_else(|| self.decode(&[id]).unwrap_or_default().into_bytes())
    }

    pub fn has_chat_template(&self) -> bool {
        self.chat_template.is_some()
    }

    /// The chat template rendered for `messages`, ending with the assistant's turn opener; a
    /// model without a template gets `plain_transcript` (front ends say so: `NO_TEMPLATE_NOTICE`).
    pub fn render_chat(&self, messages: &[Message]) -> Result<String> {
        match self.chat_template.as_deref() {
            Some(template) => render_template(template, messages, &self.bos_token, &self.eos_token),
            None => Ok(plain_transcript(messages)),
        }
    }

    /// Token ids of the chat prompt: special tokens come from the template text itself; a plain
    /// transcript gets the model's own (its BOS), as any text prompt does.
    pub fn encode_chat(&self, messages: &[Message]) -> Result<Vec<u32>> {
        self.encode(&self.render_chat(messages)?, !self.has_chat_template())
    }
}

/// What front ends print once when they chat with a model that has no chat template.
pub const NO_TEMPLATE_NOTICE: &str =
    "this model has no chat template: chatting through a plain transcript (\"User: ...\" / \"Assistant:\")";

/// A chat as plain text, for models without a chat template: one "Role: text" paragraph per
/// message (the role capitalized), ending with the assistant's turn to speak.
pub fn plain_transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        let mut role = m.role.chars();
        let role: String = role.next().map(|c| c.to_uppercase().chain(role).collect()).unwrap_or_default();
        out.push_str(&format!("{role}: {}\n\n", m.content.trim()));
    }
    out.push_str("Assistant:");
    out
}

/// Instructions a chat template may run per render: real templates take a few hundred per
/// message; a template from a model file that recurses or loops without end (a macro calling
/// itself twice, 2^60 calls) stops with an error instead of hanging every chat request.
const TEMPLATE_FUEL: u64 = 20_000_000;

pub fn render_template(template: &str, messages: &[Message], bos: &str, eos: &str) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_fuel(Some(TEMPLATE_FUEL));
    // transformers renders chat templates with jinja2's trim_blocks and lstrip_blocks.
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
        Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
    });
    env.add_template("chat", template).map_err(|e| anyhow!("chat template does not parse: {e}"))?;
    let tmpl = env.get_template("chat").map_err(|e| anyhow!("{e}"))?;
    tmpl.render(minijinja::context! {
        messages => messages,
        add_generation_prompt => true,
        bos_token => bos,
        eos_token => eos,
    })
    .map_err(|e| anyhow!("chat template failed: {e}"))
}

/// Turns generated ids into text pieces as they arrive, never cutting a UTF-8 sequence: text is
/// emitted only once the ids decode to complete characters.
#[derive(Default)]
pub struct StreamDecoder {
    ids: Vec<u32>,
    prefix_offset: usize,
    read_offset: usize,
}

impl StreamDecoder {
    pub fn push(&mut self, tok: &TextTokenizer, id: u32) -> Result<Option<String>> {
        self.ids.push(id);
        let prefix = tok.decode(&self.ids[self.prefix_offset..self.read_offset])?;
        let text = tok.decode(&self.ids[self.prefix_offset..])?;
        if text.len() > prefix.len() && !text.ends_with('\u{FFFD}') {
            if let Some(new) = text.get(prefix.len()..) {
                self.prefix_offset = self.read_offset;
                self.read_offset = self.ids.len();
                return Ok(Some(new.to_string()));
            }
        }
        Ok(None)
    }

    /// Ids pushed so far.
    pub fn tokens(&self) -> usize {
        self.ids.len()
    }

    /// The text still held back when the stream ends: bytes of an unfinished character come out
    /// as U+FFFD, so the pieces and this add up to `decode` of every id.
    pub fn finish(self, tok: &TextTokenizer) -> Result<String> {
        let prefix = tok.decode(&self.ids[self.prefix_offset..self.read_offset])?;
        let text = tok.decode(&self.ids[self.prefix_offset..])?;
        Ok(text.get(prefix.len()..).unwrap_or_default().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SentencePiece vocabulary as Gemma's tokenizer.json has it: runs of "▁" are added
    /// (not special) tokens, and the decoder turns "▁" into spaces for them too; a special
    /// token reads as itself; a byte piece is its byte.
    #[test]
    fn added_pieces_are_spelled_as_the_decoder_spells_them() {
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "normalizer": null,
            "pre_tokenizer": null, "post_processor": null,
            "added_tokens": [
                {"id": 3, "content": "\u{2581}\u{2581}", "single_word": false, "lstrip": false, "rstrip": false,
                 "normalized": false, "special": false},
                {"id": 4, "content": "<eos>", "single_word": false, "lstrip": false, "rstrip": false,
                 "normalized": false, "special": true}],
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}]},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": true, "ignore_merges": false,
                      "vocab": {"\u{2581}a": 0, "<0xE2>": 1, "b": 2, "\u{2581}\u{2581}": 3, "<eos>": 4}, "merges": []},
        });
        let tok = TextTokenizer::from_hf_files(json.to_string().as_bytes(), &Value::Null, None, None).unwrap();
        let spelled: Vec<Vec<u8>> = (0..6).map(|id| tok.token_bytes(id)).collect();
        let want: [&[u8]; 6] = [b" a", &[0xe2], b"b", b"  ", b"<eos>", b""];
        assert_eq!(spelled, want.map(<[u8]>::to_vec));
        assert_eq!(tok.decode(&[3, 0]).unwrap().as_bytes(), [spelled[3].as_slice(), &spelled[0]].concat());
    }

    /// A word-level tokenizer.json with `fields` set over its defaults.
    fn word_level(fields: Value) -> Result<TextTokenizer> {
        let mut json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "unk_token": "[UNK]",
                      "vocab": {"[UNK]": 0, "a": 1, "aa": 2, "hi": 3, "there": 4, "you": 5}},
        });
        json.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        TextTokenizer::from_hf_files(json.to_string().as_bytes(), &Value::Null, None, None)
    }

    /// A file's padding and truncation never change a prompt (transformers turns both off for
    /// a plain encode): a fixed padding of 10^12 ids made the process abort on allocation, a
    /// stride past the truncation length panicked, and a valid truncation cut every prompt.
    #[test]
    fn padding_and_truncation_of_the_file_leave_prompts_whole() {
        let plain = word_level(serde_json::json!({})).unwrap().encode("hi there you", false).unwrap();
        assert_eq!(plain, [3, 4, 5]);
        let settings = [
            serde_json::json!({"padding": {"strategy": {"Fixed": 1_000_000_000_000u64}, "direction": "Right",
                "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "[UNK]"}}),
            serde_json::json!({"truncation": {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 5}}),
            serde_json::json!({"truncation": {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0}}),
        ];
        for fields in settings {
            let tok = word_level(fields.clone()).unwrap();
            assert_eq!(tok.encode("hi there you", false).unwrap(), plain, "{fields}");
        }
    }

    /// A prompt past `MAX_PROMPT_BYTES` is refused before the tokenizer sees it (its working
    /// memory, ~200 bytes a byte, aborted the process on a 16 MB batch line); one at the limit
    /// passes.
    #[test]
    fn prompts_past_the_byte_limit_are_refused() {
        assert!(check_prompt_bytes(MAX_PROMPT_BYTES).is_ok());
        let tok = word_level(serde_json::json!({})).unwrap();
        let e = tok.encode(&"a".repeat(MAX_PROMPT_BYTES + 1), false).unwrap_err().to_string();
        assert!(e.contains(&format!("is {} bytes; at most {MAX_PROMPT_BYTES}", MAX_PROMPT_BYTES + 1)), "{e}");
    }

    /// A Strip decoder with a stop count (which the `tokenizers` crate panics on for a token of
    /// fewer characters) is refused at load, naming it; one at the start of tokens decodes.
    #[test]
    fn strip_decoders_that_would_panic_are_refused_at_load() {
        let strip = |start: u32, stop: u32| {
            serde_json::json!({"decoder": {"type": "Sequence", "decoders": [
                {"type": "Strip", "content": "a", "start": start, "stop": stop}]}})
        };
        let err = word_level(strip(0, 100)).err().expect("refused");
        assert!(format!("{err:#}").contains("decoder Strip: stop 100"), "{err:#}");
        assert_eq!(word_level(strip(1, 0)).unwrap().decode(&[2, 3]).unwrap(), "ahi");
    }
}
