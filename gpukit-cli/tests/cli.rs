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
