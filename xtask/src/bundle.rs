//! `cargo xtask gpu-bundle`: a folder to carry to the GPU machine, which has the NVIDIA driver and
//! CUDA 13 but no Rust toolchain.
//!
//! Layout of `target/gpu-bundle/`:
//! - `tests/<crate>__<target>`: every test binary that holds GPU tests, built with the
//!   `bundle` profile (optimised, no symbols);
//! - `benches/<crate>__<target>`: every bench binary;
//! - `bin/<name>`: the user-facing binaries (`gpukit`);
//! - `run.sh`: runs them (see its header) and prints a one-line summary last;
//! - `include/gpukit_shared.cuh`: the header the kernels include, generated from
//!   `gpukit-kernels/src/shared.rs`, for building the probes of `gpukit-kernels/dev/` there;
//!
//! The binaries are stored xz-compressed (`*.xz`, a fifth of their size, so that the bundle and
//! the checkout fit the 64 MiB copied to the GPU machine); `run.sh` unpacks them in place first.
//! - `python/`: the `gpukit` wheel (same profile) and pytest's wheels, which `run.sh` installs
//!   into a folder on `PYTHONPATH` for the machine's own python3 (which has torch and cupy);
//! - `BUNDLE.txt`: what was built from which commit.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// What the copy to the GPU machine takes at most (64 MiB), less room for the checkout itself.
const MAX_BUNDLE_BYTES: u64 = 56 << 20;

/// Kernel images embedded in the bundle's binaries: the GPU machine's H100/H200 (sm_90) only, so
/// that every binary does not carry five images of every kernel. Any other GPU compiles the
/// kernels at run time with NVRTC (installed there). Read by `gpukit-kernels/build.rs`.
const BUNDLE_EMBED_TARGETS: &str = "sm_90a";

const RUN_SH: &str = include_str!("run.sh");

/// The values the kernels share with Rust: the bundle carries the header generated from them.
#[path = "../../gpukit-kernels/src/shared.rs"]
#[allow(dead_code, reason = "the bundle needs only the header generator")]
mod shared;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Test,
    Bench,
    Bin,
}

struct Artifact {
    name: String,
    path: PathBuf,
    kind: Kind,
}

pub fn build(root: &Path) -> Result<()> {
    let mut artifacts = compile(
        root,
        &["build", "--workspace", "--bins", "--exclude", "xtask"],
    )?;
    artifacts.extend(compile(
        root,
        &["test", "--workspace", "--tests", "--benches", "--no-run"],
    )?);
    let out = root.join("target/gpu-bundle");
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("removing {}", out.display()))?;
    }
    for dir in ["tests", "benches", "bin", "include"] {
        std::fs::create_dir_all(out.join(dir))?;
    }
    std::fs::write(out.join("include/gpukit_shared.cuh"), shared::cuda_header())?;
    let mut manifest = format!(
        "gpukit GPU bundle\ncommit: {}\nembedded kernel images: {BUNDLE_EMBED_TARGETS}\n",
        git_head(root)
    );
    let mut total = 0u64;
    for a in &artifacts {
        let dir = match a.kind {
            // CPU-side criterion benches (`host`) have no business on the GPU machine.
            Kind::Bench if a.name.ends_with("__host") => continue,
            Kind::Bench => "benches",
            Kind::Bin => "bin",
            Kind::Test => {
                let gpu_tests = count_gpu_tests(&a.path)?;
                if gpu_tests == 0 {
                    continue;
                }
                manifest.push_str(&format!("{}: {gpu_tests} GPU tests\n", a.name));
                "tests"
            }
        };
        let dest = out.join(dir).join(&a.name);
        std::fs::copy(&a.path, &dest)
            .with_context(|| format!("copying {} to {}", a.path.display(), dest.display()))?;
        // Carried xz-compressed (a fifth of their size, 40% less than gzip -9: the bundle and
        // the checkout must fit the 64 MiB copied); run.sh unpacks them on arrival.
        let status = Command::new("xz")
            .args(["-6", "-T0", "-f"])
            .arg(&dest)
            .status()
            .context("running xz (install xz-utils: the bundle is carried compressed)")?;
        if !status.success() {
            bail!("xz {} failed", dest.display());
        }
        let mut packed = dest.into_os_string();
        packed.push(".xz");
        total += std::fs::metadata(&packed)?.len();
    }
    // The Python package and what its tests need that the GPU machine lacks (it has no network).
    let python = crate::python::venv(root)?;
    let wheels = out.join("python");
    let wheel = crate::python::build_wheel(root, &python, "bundle", &wheels)?;
    total += std::fs::metadata(&wheel)?.len();
    manifest.push_str(&format!(
        "python: {}\n",
        wheel.file_name().unwrap_or_default().to_string_lossy()
    ));
    // pytest and the `openai` client (with its dependencies) as wheels for the GPU machine's
    // Python 3.12: pydantic-core is compiled per Python version.
    crate::run(
        root,
        &python.to_string_lossy(),
        &[
            "-m",
            "pip",
            "download",
            "-q",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--platform",
            "manylinux_2_17_x86_64",
            "-d",
            &wheels.to_string_lossy(),
            crate::python::PYTEST,
            crate::python::OPENAI,
        ],
    )?;
    let run = out.join("run.sh");
    std::fs::write(&run, RUN_SH)?;
    set_executable(&run)?;
    std::fs::write(out.join("BUNDLE.txt"), &manifest)?;
    eprint!("{manifest}");
    if total > MAX_BUNDLE_BYTES {
        bail!(
            "the bundle is {} MiB, over the {} MiB the GPU machine accepts",
            total >> 20,
            MAX_BUNDLE_BYTES >> 20
        );
    }
    eprintln!(
        "gpu-bundle: {} ({:.1} MiB). On the GPU machine: bash target/gpu-bundle/run.sh",
        out.display(),
        total as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// Runs `cargo <command>` with the `bundle` profile; returns the executables it built.
fn compile(root: &Path, command: &[&str]) -> Result<Vec<Artifact>> {
    let cargo = crate::cargo();
    let mut args = command.to_vec();
    args.extend([
        "--profile",
        "bundle",
        "--message-format=json-render-diagnostics",
    ]);
    eprintln!("$ {cargo} {}", args.join(" "));
    let mut child = Command::new(&cargo)
        .args(&args)
        .env("GPUKIT_EMBED_TARGETS", BUNDLE_EMBED_TARGETS)
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut artifacts = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let kinds: Vec<&str> = msg["target"]["kind"]
            .as_array()
            .map(|k| k.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let package = msg["package_id"]
            .as_str()
            .and_then(package_name)
            .unwrap_or("unknown");
        let target = msg["target"]["name"].as_str().unwrap_or("unknown");
        let test_harness = msg["profile"]["test"].as_bool().unwrap_or(false);
        let (kind, name) = if kinds.contains(&"bench") {
            (Kind::Bench, format!("{package}__{target}"))
        } else if kinds.contains(&"bin") && !test_harness {
            (Kind::Bin, target.to_string())
        } else {
            (Kind::Test, format!("{package}__{target}").replace('-', "_"))
        };
        artifacts.push(Artifact {
            name,
            path: PathBuf::from(exe),
            kind,
        });
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(artifacts)
}

/// `path+file:///work/main/gpukit-driver#0.1.0` or `registry+...#name@1.0` → the crate name.
fn package_name(id: &str) -> Option<&str> {
    let tail = id.rsplit('/').next()?;
    let name = match tail.split_once('#') {
        Some((dir, rest)) => match rest.split_once('@') {
            Some((n, _)) => n,
            None => dir,
        },
        None => tail,
    };
    Some(name)
}

/// Counts a test binary's ignored tests — the GPU tests, by this workspace's convention.
fn count_gpu_tests(exe: &Path) -> Result<usize> {
    let out = Command::new(exe)
        .args(["--list", "--ignored", "--format", "terse"])
        .output()
        .with_context(|| format!("listing tests of {}", exe.display()))?;
    if !out.status.success() {
        bail!("{} --list failed", exe.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.ends_with(": test"))
        .count())
}

fn git_head(root: &Path) -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::package_name;

    #[test]
    fn package_names_from_ids() {
        assert_eq!(
            package_name("path+file:///work/main/gpukit-driver#0.1.0"),
            Some("gpukit-driver")
        );
        assert_eq!(
            package_name("path+file:///work/main/crates/x#gpukit-mem@0.1.0"),
            Some("gpukit-mem")
        );
    }
}
