//! `wginfer generate`: one prompt, streamed answer, optional JSON summary.

use std::io::Write;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::{ModelArgs, SamplingArgs, Truncate};
use crate::engine::{Engine, Request};
use crate::tokenizer::{Message, StreamDecoder, NO_TEMPLATE_NOTICE};

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// The prompt text.
    #[arg(long, conflicts_with = "prompt_ids")]
    prompt: Option<String>,
    /// The prompt as token ids, comma-separated (bypasses the tokenizer).
    #[arg(long, value_delimiter = ',')]
    prompt_ids: Option<Vec<u32>>,
    /// Wrap the prompt in the model's chat template (a text prompt: ids bypass it).
    #[arg(long, conflicts_with = "prompt_ids")]
    chat: bool,
    /// System prompt (with --chat).
    #[arg(long, requires = "chat")]
    system: Option<String>,
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// A prompt longer than the context: `left` keeps its end (see `Truncate`).
    #[arg(long, value_enum)]
    truncate: Option<Truncate>,
    /// Print one JSON object at the end instead of streaming text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &GenerateArgs) -> Result<()> {
    let path = a.model.model_path()?;
    let mut engine = Engine::load(&path, &a.model.engine_options()?)?;
    // Pipelines compile inside the load, not in the first answer's time to first token.
    engine.warm_up()?;
    let mut prompt_ids = match (&a.prompt_ids, &a.prompt) {
        (Some(ids), _) => ids.clone(),
        (None, Some(text)) => {
            let tok = engine
                .tokenizer
                .as_ref()
                .with_context(|| format!("{} has no tokenizer.json; pass --prompt-ids", path.display()))?;
            if a.chat {
                if !tok.has_chat_template() {
                    eprintln!("note: {NO_TEMPLATE_NOTICE}");
                }
                let mut msgs = Vec::new();
                if let Some(s) = &a.system {
                    msgs.push(Message::new("system", s));
                }
                msgs.push(Message::new("user", text));
                tok.encode_chat(&msgs)?
            } else {
                tok.encode(text, true)?
            }
        }
        (None, None) => bail!("give --prompt TEXT or --prompt-ids 1,2,3"),
    };
    // What one sequence may hold: the context, or a smaller paged pool.
    let context = engine.forward.kv.sequence_positions() as usize;
    Truncate::apply(a.truncate, &mut prompt_ids, context, a.max_tokens, "the prompt");
    let req = Request {
        prompt_ids: prompt_ids.clone(),
        max_tokens: a.max_tokens,
        sampling: a.sampling.params(),
        stop_at_eos: true,
    };
    let mut stream = StreamDecoder::default();
    let mut out = std::io::stdout().lock();
    let tok = engine.tokenizer.take();
    let streaming = !a.json && tok.is_some();
    let result = engine.generate(&req, |id| {
        if let (true, Some(t)) = (streaming, &tok) {
            if let Ok(Some(piece)) = stream.push(t, id) {
                let _ = out.write_all(piece.as_bytes());
                let _ = out.flush();
            }
        }
        true
    });
    let g = result?;
    let text = match &tok {
        Some(t) => t.decode(&g.ids)?,
        None => String::new(),
    };
    if a.model.profile {
        super::print_profile(&engine.forward);
    }
    if a.json {
        let v = serde_json::json!({
            "prompt_ids": prompt_ids,
            "ids": g.ids,
            "text": text,
            "ttft_ms": g.ttft_ms,
            "prefill_tok_s": g.prefill_tok_s,
            "decode_tok_s": g.decode_tok_s,
        });
        writeln!(out, "{v}")?;
    } else if tok.is_none() {
        writeln!(out, "{:?}", g.ids)?;
    } else {
        // The tail the stream held back (a character its last ids left unfinished).
        if let Some(t) = &tok {
            write!(out, "{}", stream.finish(t)?)?;
        }
        writeln!(out)?;
        eprintln!(
            "[{} prompt tokens, TTFT {:.1} ms, prefill {:.0} tok/s, decode {:.1} tok/s, finish {:?}]",
            prompt_ids.len(),
            g.ttft_ms,
            g.prefill_tok_s,
            g.decode_tok_s,
            g.finish
        );
    }
    Ok(())
}
