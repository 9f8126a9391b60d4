//! gpukit's development tool. Run `cargo xtask --help`.

mod bundle;
mod cuda;
mod layering;
mod python;
mod testrun;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

/// gpukit development tasks.
#[derive(Parser)]
#[command(about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// What CI runs: `cargo fmt --check`, `cargo clippy -D warnings`, the layering check, every
    /// Rust test, then the Python package's wheel (maturin, into `target/py-venv`) under its
    /// pytest suite. GPU tests run when a CUDA device is present and are reported as skipped
    /// otherwise. Installs NVRTC from PyPI into the gpukit cache first if it is missing.
    Test,
    /// Runs every test including the GPU tests; fails if no CUDA device is present.
    TestGpu,
    /// Builds target/gpu-bundle: the GPU test binaries and a run script, to carry to a machine
    /// with the NVIDIA driver but no Rust toolchain (see README, "Developing").
    GpuBundle,
    /// Runs the benchmarks on this machine's GPU, each followed by its peer in the same run
    /// (`bench/peer_<name>.py`: torch, HF transformers), which prints the table; JSON and PNG
    /// results go to target/bench. `decode` first builds its random-weight models with
    /// `bench/decode_models.py` (in $GPUKIT_DECODE_MODELS, default /tmp/gpukit-decode-models).
    /// Fails without a CUDA device: on a GPU-less machine, build the bundle and run
    /// `run.sh bench` on the GPU machine.
    Bench {
        /// Only this benchmark: mem, ops, decode, sched, python, audio, tts or serve (default:
        /// all).
        name: Option<String>,
    },
    /// Runs every test, GPU tests included, under compute-sanitizer memcheck and then racecheck
    /// (needs a CUDA device and compute-sanitizer on PATH; on the GPU machine without Rust use
    /// `run.sh sanitize` from the bundle).
    Sanitize,
    /// Installs NVRTC 13.0.88 and the CUDA 13.0.96 headers from PyPI into the gpukit cache
    /// (`<cache>/cuda`), once; later runs find them there.
    SetupCuda,
    /// Checks that no crate depends on a crate of its own or a higher layer.
    Layering,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let root = workspace_root()?;
    match cli.task {
        Task::Test => test(&root),
        Task::TestGpu => test_gpu(&root),
        Task::GpuBundle => bundle::build(&root),
        Task::Bench { name } => bench(&root, name.as_deref()),
        Task::Sanitize => sanitize(&root),
        Task::SetupCuda => cuda::setup().map(|_| ()),
        Task::Layering => layering(),
    }
}

fn workspace_root() -> Result<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .context("xtask has no parent folder")
}

/// Runs a command in the workspace root, failing with its command line if it fails.
pub(crate) fn run(root: &Path, program: &str, args: &[&str]) -> Result<()> {
    run_env(root, program, args, &[])
}

/// [`run`] with extra environment variables.
fn run_env(root: &Path, program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .status()
        .with_context(|| format!("starting {program}"))?;
    if !status.success() {
        bail!("`{program} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn layering() -> Result<()> {
    let v = layering::check_workspace()?;
    if !v.is_empty() {
        bail!("layering violations:\n{}", v.join("\n"));
    }
    eprintln!("layering: every crate depends only on lower layers");
    Ok(())
}

fn gpu_present() -> bool {
    matches!(gpukit_driver::device_count(), Ok(n) if n > 0)
}

fn test(root: &Path) -> Result<()> {
    let cargo = cargo();
    // First: the kernel build script compiles every kernel with this NVRTC (the kernel check),
    // and clippy already runs it.
    cuda::setup()?;
    run(root, &cargo, &["fmt", "--all", "--", "--check"])?;
    run(
        root,
        &cargo,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // Every doc link resolves (rustdoc's warnings: broken or private intra-doc links).
    run_env(
        root,
        &cargo,
        &["doc", "--workspace", "--no-deps"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    layering()?;
    // The speech tests phonemize with espeak-ng, a program: install it before any test runs.
    python::espeak()?;
    let gpu = gpu_present();
    let mut args = vec!["test", "--workspace", "--"];
    if gpu {
        args.push("--include-ignored");
    }
    let mut counts = testrun::cargo_test(root, &args)?;
    // The examples users are pointed at run (the others need a GPU, which CI has not).
    run(
        root,
        &cargo,
        &["run", "-q", "-p", "gpukit-ops", "--example", "ops"],
    )?;
    run(
        root,
        &cargo,
        &["run", "-q", "-p", "gpukit-llm", "--example", "generate"],
    )?;
    // The Python package: its wheel, installed in a virtual environment, under pytest.
    let py = python::test(root)?;
    counts.passed += py.passed;
    counts.failed += py.failed;
    counts.ignored += py.ignored;
    testrun::report(&counts, gpu)
}

fn require_gpu(task: &str) -> Result<()> {
    match gpukit_driver::device_count() {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => bail!("{task} needs a CUDA device and this machine has none"),
        Err(e) => bail!("{task} needs a CUDA device: {e}"),
    }
}

/// The benchmarks: (crate, bench target); each may have a peer `bench/peer_<target>.py`.
const BENCHES: [(&str, &str); 4] = [
    ("gpukit-mem", "mem"),
    ("gpukit-ops", "ops"),
    ("gpukit-llm", "decode"),
    ("gpukit-llm", "sched"),
];

fn bench(root: &Path, only: Option<&str>) -> Result<()> {
    let chosen: Vec<_> = BENCHES
        .iter()
        .filter(|(_, b)| only.is_none_or(|o| *b == o))
        .collect();
    let python_bench = only.is_none_or(|o| o == "python");
    let audio_bench = only.is_none_or(|o| o == "audio");
    let serve_bench = only.is_none_or(|o| o == "serve");
    let tts_bench = only.is_none_or(|o| o == "tts");
    if chosen.is_empty() && !python_bench && !audio_bench && !serve_bench && !tts_bench {
        bail!(
            "no benchmark named {}: choose mem, ops, decode, sched, python, audio, tts or serve",
            only.unwrap_or_default()
        );
    }
    cuda::setup()?;
    require_gpu("bench")?;
    let out = root.join("target").join("bench");
    let out = out.to_string_lossy().into_owned();
    let models = std::env::var("GPUKIT_DECODE_MODELS")
        .unwrap_or_else(|_| "/tmp/gpukit-decode-models".into());
    let env = [
        ("GPUKIT_BENCH_OUT", out.as_str()),
        ("GPUKIT_DECODE_MODELS", models.as_str()),
    ];
    for (krate, name) in chosen {
        if *name == "decode" || *name == "sched" {
            run(root, "python3", &["bench/decode_models.py", &models])?;
        }
        run_env(
            root,
            &cargo(),
            &["bench", "-p", krate, "--bench", name],
            &env,
        )?;
        let peer = format!("bench/peer_{name}.py");
        if root.join(&peer).is_file() {
            run(root, "python3", &[&peer, &out])?;
        }
    }
    if python_bench || audio_bench || tts_bench {
        // The module as users install it (release), beside torch (and the release CLI).
        let python = python::venv(root)?;
        let wheel = python::build_wheel(
            root,
            &python,
            "release",
            &root.join("target/wheels-release"),
        )?;
        let py = python.to_string_lossy().into_owned();
        run(
            root,
            &py,
            &[
                "-m",
                "pip",
                "install",
                "-q",
                "--force-reinstall",
                "--no-deps",
                &wheel.to_string_lossy(),
            ],
        )?;
        if python_bench {
            run(root, &cargo(), &["build", "--release", "-p", "gpukit-cli"])?;
            let cli = root.join("target/release/gpukit");
            run(
                root,
                &py,
                &["bench/python.py", &out, &cli.to_string_lossy()],
            )?;
        }
        if audio_bench {
            run(root, &py, &["bench/audio.py", &out])?;
        }
        if tts_bench {
            run(root, &py, &["bench/tts.py", &out])?;
        }
    }
    if serve_bench {
        // The release server under a seeded load, beside HF transformers' batched generate.
        run(
            root,
            "python3",
            &[
                "bench/decode_models.py",
                &models,
                "--models",
                "llama3.2-1b,llama3.1-8b",
            ],
        )?;
        run(root, &cargo(), &["build", "--release", "-p", "gpukit-cli"])?;
        let cli = root.join("target/release/gpukit");
        run_env(
            root,
            "python3",
            &["bench/serve.py", &out, &cli.to_string_lossy()],
            &env,
        )?;
    }
    Ok(())
}

fn sanitize(root: &Path) -> Result<()> {
    cuda::setup()?;
    require_gpu("sanitize")?;
    for tool in ["memcheck", "racecheck"] {
        let runner =
            format!("compute-sanitizer --tool {tool} --report-api-errors no --error-exitcode 9");
        eprintln!("$ CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER='{runner}' cargo test ...");
        let status = Command::new(cargo())
            .args([
                "test",
                "--workspace",
                "--",
                "--include-ignored",
                "--test-threads=1",
            ])
            .env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER", &runner)
            .current_dir(root)
            .status()
            .context("starting cargo test under compute-sanitizer")?;
        if !status.success() {
            bail!("compute-sanitizer {tool} reported errors ({status})");
        }
    }
    Ok(())
}

fn test_gpu(root: &Path) -> Result<()> {
    cuda::setup()?;
    require_gpu("test-gpu")?;
    let mut counts = testrun::cargo_test(
        root,
        &[
            "test",
            "--workspace",
            "--",
            "--include-ignored",
            "--test-threads=1",
        ],
    )?;
    let py = python::test(root)?;
    counts.passed += py.passed;
    counts.failed += py.failed;
    counts.ignored += py.ignored;
    testrun::report(&counts, true)
}
