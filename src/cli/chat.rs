//! `wginfer chat`: an interactive terminal loop. The history is re-rendered each turn; the
//! engine reuses the KV cache for the part of the prompt it has already seen.

use std::io::{BufRead, Write};

use anyhow::{Context, Result};
use clap::Args;

use super::{ModelArgs, SamplingArgs};
use crate::engine::{Engine, Request};
use crate::tokenizer::{Message, StreamDecoder, NO_TEMPLATE_NOTICE};

#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[arg(long)]
    system: Option<String>,
    /// Most tokens per answer.
    #[arg(long, default_value_t = 512)]
    max_tokens: usize,
}

pub fn run(a: &ChatArgs) -> Result<()> {
    let path = a.model.model_path()?;
    let mut engine = Engine::load(&path, &a.model.engine_options()?)?;
    // Pipelines compile inside the load, not in the first answer's time to first token.
    engine.warm_up()?;
    let tok = engine.tokenizer.take().with_context(|| format!("{} has no tokenizer.json", path.display()))?;
    let mut history: Vec<Message> = a.system.iter().map(|s| Message::new("system", s)).collect();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    eprintln!("chatting with {} (empty line or Ctrl-D to quit, /reset to start over)", path.display());
    if !tok.has_chat_template() {
        eprintln!("note: {NO_TEMPLATE_NOTICE}");
    }
    loop {
        eprint!("> ");
        let mut bytes = Vec::new();
        if stdin.lock().read_until(b'\n', &mut bytes)? == 0 {
            return Ok(());
        }
        // A line that is not UTF-8 (a terminal in another encoding) is refused; the chat goes on.
        let Ok(line) = String::from_utf8(bytes) else {
            eprintln!("error: that line is not UTF-8 text; the chat goes on");
            continue;
        };
        if line.trim().is_empty() {
            return Ok(());
        }
        if line.trim() == "/reset" {
            history.retain(|m| m.role == "system");
            engine.reset();
            continue;
        }
        history.push(Message::new("user", line.trim_end()));
        let mut stream = StreamDecoder::default();
        let mut turn = || -> Result<String> {
            let req = Request {
                prompt_ids: tok.encode_chat(&history)?,
                max_tokens: a.max_tokens,
                sampling: a.sampling.params(),
                stop_at_eos: true,
            };
            let g = engine.generate(&req, |id| {
                if let Ok(Some(piece)) = stream.push(&tok, id) {
                    let _ = out.write_all(piece.as_bytes());
                    let _ = out.flush();
                }
                true
            })?;
            // The tail the stream held back (a character its last ids left unfinished).
            let _ = out.write_all(std::mem::take(&mut stream).finish(&tok)?.as_bytes());
            tok.decode(&g.ids)
        };
        match turn() {
            Ok(answer) => {
                writeln!(out)?;
                history.push(Message::new("assistant", &answer));
            }
            Err(e) => {
                // Keep the session (the template, the model or decoding failed): drop the
                // turn that failed and say why.
                history.pop();
                eprintln!("error: {e:#}\n(that message was left out of the chat; /reset starts a new one)");
            }
        }
    }
}
