//! The `gpukit` command as a user runs it (the README's main command), on the CPU with the
//! default model (fetched with pip into the cache on first use).

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

fn gpukit(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpukit"))
        .args(args)
        .output()
        .expect("the gpukit binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_main_command_answers() {
    let (ok, out, err) = gpukit(&[
        "generate",
        "--chat",
        "What is the capital of France? Answer in one word.",
        "--max-tokens",
        "16",
        "--stats",
    ]);
    assert!(ok, "gpukit generate failed: {err}");
    assert_eq!(
        out.trim(),
        "The capital of France is Paris.",
        "stderr: {err}"
    );
    // The auto device is the CPU on a machine without CUDA (CI).
    assert!(
        err.contains("[stats] llama on ") && err.contains(": prompt 42 tokens"),
        "{err}"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let (ok, _, err) = gpukit(&["generate", "hi", "--model", "/nonexistent/model.gguf"]);
    assert!(!ok && err.contains("/nonexistent/model.gguf"), "{err}");
    let (ok, _, err) = gpukit(&["generate", "hi", "--device", "tpu"]);
    assert!(
        !ok && err.contains("expected auto, cpu, cuda or cuda:N"),
        "{err}"
    );
    let (ok, _, err) = gpukit(&["generate", "hi", "--top-p", "0"]);
    assert!(!ok && err.contains("top_p"), "{err}");
    let (ok, out, _) = gpukit(&["--help"]);
    assert!(ok && out.contains("generate") && out.contains("doctor"));
}

#[test]
fn info_reports_devices_kernels_and_libraries() {
    let (ok, out, err) = gpukit(&["info"]);
    assert!(ok, "gpukit info failed: {err}");
    for line in ["CUDA driver:", "devices", "NVRTC:", "cuBLASLt", "cache:"] {
        assert!(out.contains(line), "no {line:?} line in:\n{out}");
    }
    // Every device listed also names the kernel images chosen for it.
    let devices = out.matches("\ndevice ").count() + usize::from(out.starts_with("device "));
    assert_eq!(out.matches("  kernels: ").count(), devices, "{out}");
    // ... and how the scheduler isolates tenants there.
    assert_eq!(
        out.matches("  scheduler isolation: ").count(),
        devices,
        "{out}"
    );
    let (ok, out, err) = gpukit(&["doctor"]);
    assert!(ok, "gpukit doctor failed: {err}\n{out}");
    assert!(
        out.contains("cuBLASLt") && out.contains("default model"),
        "{out}"
    );
}

/// Whether espeak-ng can run. `cargo xtask test` installs it and requires it
/// (GPUKIT_REQUIRE_ESPEAK); elsewhere (the GPU machine has no network) a missing one skips the
/// speech tests with a message.
fn espeak_available() -> bool {
    let ok = Command::new("espeak-ng")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok || std::env::var_os("GPUKIT_REQUIRE_ESPEAK").is_none(),
        "espeak-ng is missing"
    );
    if !ok {
        eprintln!("skipped: espeak-ng is not installed");
    }
    ok
}

#[test]
fn speak_writes_a_wav_and_streams_the_same_samples() {
    if !espeak_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("out.wav");
    let text = "Hello world. It costs $3, doesn't it?";
    let quiet = ["--device", "cpu", "--noise-scale", "0", "--noise-w", "0"];
    let mut args = vec!["speak", text, "-o", wav.to_str().unwrap(), "--stats"];
    args.extend(quiet);
    let (ok, _, err) = gpukit(&args);
    assert!(ok, "gpukit speak failed: {err}");
    assert!(
        err.contains("real-time factor") && err.contains("first audio"),
        "{err}"
    );
    let audio = gpukit_audio::wav::read_wav(&wav, &gpukit_ops::Device::Cpu).unwrap();
    assert_eq!(audio.sample_rate, 22050);
    let samples = audio.samples.to_vec::<f32>().unwrap();
    assert!(samples.len() > 22050, "{} samples", samples.len());
    let rms = (samples.iter().map(|v| v * v).sum::<f32>() / samples.len() as f32).sqrt();
    assert!(rms > 0.01, "silence (rms {rms})");

    // `-o -`: raw 16-bit PCM on standard output, the same samples.
    let mut args = vec!["speak", text, "-o", "-"];
    args.extend(quiet);
    let out = Command::new(env!("CARGO_BIN_EXE_gpukit"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let streamed: Vec<f32> = out
        .stdout
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect();
    assert_eq!(streamed, samples);
}

#[test]
fn speak_refuses_bad_input_clearly() {
    let (ok, _, err) = gpukit(&["speak", "hi", "--voice", "/nonexistent/voice.onnx"]);
    assert!(!ok && err.contains("/nonexistent/voice.onnx"), "{err}");
    let (ok, _, err) = gpukit(&["speak", "hi", "--device", "cpu", "--length-scale", "0"]);
    assert!(!ok && err.contains("scales"), "{err}");
    let (ok, _, err) = gpukit(&["speak", " ... ", "--device", "cpu"]);
    assert!(!ok && err.contains("nothing to say"), "{err}");
    let (ok, out, _) = gpukit(&["--help"]);
    assert!(ok && out.contains("speak"), "{out}");
}
