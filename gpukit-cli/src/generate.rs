//! `gpukit generate` and `gpukit chat`.

use std::io::{BufRead, IsTerminal, Read, Write};

use gpukit_llm::chat::Message;
use gpukit_llm::engine::{Engine, GenerateOptions, GenerateStats};
use gpukit_llm::store::DEFAULT_MODEL;
use gpukit_ops::Device;
use gpukit_ops::sampling::SamplingParams;

use crate::ModelArgs;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn device(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(Device::Cpu),
        d if d.starts_with("cuda") => Err(format!(
            "--device {d}: models run on the CPU so far (the CUDA engine — quantized weights on \
             the GPU, the decode step as one CUDA graph — is being written); use --device cpu"
        )
        .into()),
        d => Err(format!("--device {d}: expected cpu or cuda:N").into()),
    }
}

fn load(args: &ModelArgs) -> Result<Engine> {
    // Refuse bad options before the (slow) model load.
    options(args).sampling.validate()?;
    let dev = device(&args.device)?;
    let path = match &args.model {
        Some(p) => p.clone(),
        None => DEFAULT_MODEL.fetch(&mut |line| eprintln!("{line}"))?,
    };
    Ok(Engine::load(&path, &dev)?)
}

fn options(args: &ModelArgs) -> GenerateOptions {
    GenerateOptions {
        max_new_tokens: args.max_tokens,
        sampling: SamplingParams {
            temperature: args.temperature,
            top_k: args.top_k,
            top_p: args.top_p,
            min_p: args.min_p,
            repetition_penalty: args.repeat_penalty,
            seed: args.seed,
        },
        stop: args.stop.clone(),
        ..Default::default()
    }
}

/// Peak resident memory of this process (Linux), for --stats on the CPU.
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.trim_start_matches("VmHWM:").trim().to_string())
}

fn print_stats(s: &GenerateStats) {
    eprintln!(
        "\n[stats] prompt {} tokens, prefill {:.1} ms; {} new tokens at {:.1} tokens/s; stop: {:?}; \
         peak memory {} (CPU process)",
        s.prompt_tokens,
        s.prefill.as_secs_f64() * 1e3,
        s.new_tokens,
        s.decode_tokens_per_s(),
        s.stop,
        peak_rss().unwrap_or_else(|| "unknown".into())
    );
}

fn stream(engine: &Engine, prompt: &str, args: &ModelArgs) -> Result<String> {
    let mut out = std::io::stdout().lock();
    let mut text = String::new();
    let stats = engine.generate(prompt, &options(args), &mut |piece| {
        text.push_str(piece);
        let _ = out.write_all(piece.as_bytes());
        let _ = out.flush();
    })?;
    let _ = writeln!(out);
    if args.stats {
        print_stats(&stats);
    }
    Ok(text)
}

/// `gpukit generate`.
pub fn generate(prompt: Option<String>, chat: bool, args: &ModelArgs) -> Result<()> {
    let prompt = match prompt {
        Some(p) => p,
        None => {
            if std::io::stdin().is_terminal() {
                eprintln!("gpukit: reading the prompt from standard input (end with Ctrl-D)");
            }
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            s
        }
    };
    let engine = load(args)?;
    let text = if chat {
        let mut messages = Vec::new();
        if let Some(system) = &args.system {
            messages.push(Message::new("system", system.clone()));
        }
        messages.push(Message::new("user", prompt));
        engine.chat_prompt(&messages)?
    } else {
        prompt
    };
    stream(&engine, &text, args)?;
    Ok(())
}

/// `gpukit chat`.
pub fn chat(args: &ModelArgs) -> Result<()> {
    let engine = load(args)?;
    let start = || -> Vec<Message> {
        args.system
            .iter()
            .map(|s| Message::new("system", s.clone()))
            .collect()
    };
    let mut messages = start();
    eprintln!(
        "gpukit chat: {} — /reset to start over, /exit to quit",
        engine.path().display()
    );
    let stdin = std::io::stdin();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" | "/quit" => break,
            "/reset" => {
                messages = start();
                eprintln!("(conversation cleared)");
                continue;
            }
            _ => {}
        }
        messages.push(Message::new("user", line));
        let prompt = engine.chat_prompt(&messages)?;
        let answer = stream(&engine, &prompt, args)?;
        messages.push(Message::new("assistant", answer.trim().to_string()));
    }
    Ok(())
}
