//! The Python package `gpukit` (gpukit-py): a virtual environment under `target/`, the wheel
//! built by maturin, and the pytest suites — the package's own, and `gpukit serve`'s (the
//! binary driven by the `openai` client).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::testrun::Counts;

/// What the build and the tests need in the environment (pinned to ranges known to work):
/// librosa is the reference of gpukit.audio's parity tests, onnxruntime (running the voice's
/// ONNX file, which onnx opens to expose the sub-networks' outputs) that of gpukit.tts.
const TOOLS: [&str; 7] = [
    "maturin>=1.9.4,<2",
    "numpy>=1.23",
    PYTEST,
    OPENAI,
    "librosa>=0.10,<0.12",
    "onnx>=1.16",
    "onnxruntime>=1.17",
];

/// The Debian packages of real recordings the audio tests use, with the folder each unpacks:
/// speech (8 kHz 16-bit WAV) and desktop sounds (48 kHz Ogg Vorbis, for decoding).
const AUDIO_PACKAGES: [(&str, &str); 2] = [
    ("asterisk-core-sounds-en-wav", "usr/share/asterisk/sounds"),
    ("sound-theme-freedesktop", "usr/share/sounds/freedesktop"),
];

/// pytest, for the suites (here and in the GPU bundle).
pub const PYTEST: &str = "pytest>=8";

/// The `openai` client the server's tests drive it with (here and in the GPU bundle).
pub const OPENAI: &str = "openai>=1.40,<3";

/// The pytest suites, relative to the repository.
pub const SUITES: [&str; 2] = ["gpukit-py/tests", "gpukit-cli/tests"];

/// `target/audio-data/usr/share`: the recordings of [`AUDIO_PACKAGES`], each downloaded with
/// `apt-get download` (no root needed) and unpacked with `dpkg-deb` once.
pub fn audio_data(root: &Path) -> Result<PathBuf> {
    let dir = root.join("target/audio-data");
    std::fs::create_dir_all(&dir)?;
    for (package, unpacked) in AUDIO_PACKAGES {
        if dir.join(unpacked).exists() {
            continue;
        }
        // Without package lists (a fresh container) the download needs an update first.
        if crate::run(&dir, "apt-get", &["download", "-q", package]).is_err() {
            crate::run(&dir, "apt-get", &["update", "-q"])
                .and_then(|()| crate::run(&dir, "apt-get", &["download", "-q", package]))
                .with_context(|| {
                    format!("downloading the Debian package {package} (the audio tests' files)")
                })?;
        }
        let deb = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .context("apt-get download left no .deb")?;
        crate::run(&dir, "dpkg-deb", &["-x", &deb.to_string_lossy(), "."])?;
        std::fs::remove_file(&deb)?;
    }
    Ok(dir.join("usr/share"))
}

/// espeak-ng, the text-to-speech tests' phonemizer (a program gpukit runs), installed with
/// apt-get when it is not on PATH.
pub fn espeak() -> Result<()> {
    let found = Command::new("espeak-ng")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Ok(());
    }
    let install = ["install", "-y", "-q", "espeak-ng"];
    let root = Path::new("/");
    if crate::run(root, "apt-get", &install).is_err() {
        crate::run(root, "apt-get", &["update", "-q"])
            .and_then(|()| crate::run(root, "apt-get", &install))
            .context(
                "installing espeak-ng with apt-get (the text-to-speech tests' phonemizer); \
                 install it by hand if apt-get needs root here",
            )?;
    }
    Ok(())
}

/// `target/py-venv`, created (with maturin, numpy, pytest, openai, librosa, onnx and
/// onnxruntime from PyPI) if missing;
/// returns its `python`.
pub fn venv(root: &Path) -> Result<PathBuf> {
    let dir = root.join("target/py-venv");
    let python = dir.join("bin/python");
    if !python.exists() {
        crate::run(root, "python3", &["-m", "venv", &dir.to_string_lossy()])
            .context("creating the Python virtual environment (is python3-venv installed?)")?;
    }
    let py = python.to_string_lossy().into_owned();
    let mut args = vec!["-m", "pip", "install", "-q", "--disable-pip-version-check"];
    args.extend(TOOLS);
    crate::run(root, &py, &args)?;
    Ok(python)
}

/// Builds the wheel with cargo profile `profile` into `out` (emptied first); returns its path.
pub fn build_wheel(root: &Path, python: &Path, profile: &str, out: &Path) -> Result<PathBuf> {
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("removing {}", out.display()))?;
    }
    let maturin = python.with_file_name("maturin");
    crate::run(
        root,
        &maturin.to_string_lossy(),
        &[
            "build",
            "--quiet",
            "-m",
            "gpukit-py/Cargo.toml",
            "--profile",
            profile,
            "--interpreter",
            &python.to_string_lossy(),
            "-o",
            &out.to_string_lossy(),
        ],
    )?;
    let wheel = std::fs::read_dir(out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("maturin built no wheel")?;
    Ok(wheel)
}

/// Totals of one pytest summary line (`3 passed, 1 skipped, 2 failed in 1.2s`).
pub fn add_pytest_summary(line: &str, counts: &mut Counts) -> bool {
    let line = line.trim().trim_matches('=').trim();
    if !line.contains(" in ") || !(line.contains("passed") || line.contains("failed")) {
        return false;
    }
    let body = line.split(" in ").next().unwrap_or_default();
    for part in body.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        match what {
            "passed" => counts.passed += n,
            "failed" | "error" | "errors" => counts.failed += n,
            "skipped" => counts.ignored += n,
            _ => {}
        }
    }
    true
}

/// Builds the wheel (dev profile: shares the test build's compiled crates) and the `gpukit`
/// binary, installs the wheel into the virtual environment and runs the pytest suites (the
/// binary's path in `GPUKIT_BIN`); returns their totals.
pub fn test(root: &Path) -> Result<Counts> {
    let python = venv(root)?;
    crate::run(root, "cargo", &["build", "-q", "-p", "gpukit-cli"])?;
    let bin = root.join("target/debug/gpukit");
    let wheel = build_wheel(root, &python, "dev", &root.join("target/wheels"))?;
    let py = python.to_string_lossy().into_owned();
    crate::run(
        root,
        &py,
        &[
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--force-reinstall",
            "--no-deps",
            &wheel.to_string_lossy(),
        ],
    )?;
    let audio = audio_data(root)?;
    espeak()?;
    let mut args = vec!["-m", "pytest"];
    args.extend(SUITES);
    args.extend(["-q", "-rs", "-p", "no:cacheprovider"]);
    eprintln!(
        "$ GPUKIT_BIN={} GPUKIT_AUDIO_DATA={} {py} {}",
        bin.display(),
        audio.display(),
        args.join(" ")
    );
    let mut child = Command::new(&python)
        .args(args)
        .env("GPUKIT_BIN", &bin)
        .env("GPUKIT_AUDIO_DATA", &audio)
        .env("GPUKIT_REQUIRE_ESPEAK", "1")
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting pytest")?;
    let mut counts = Counts::default();
    let stdout = child.stdout.take().context("no stdout")?;
    let mut summarised = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading pytest output")?;
        println!("{line}");
        summarised |= add_pytest_summary(&line, &mut counts);
    }
    let status = child.wait().context("waiting for pytest")?;
    if !status.success() && counts.failed == 0 {
        bail!("pytest failed before running every test ({status})");
    }
    if !summarised {
        bail!("pytest printed no summary");
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_summaries_are_totalled() {
        let mut c = Counts::default();
        assert!(add_pytest_summary(
            "==== 77 passed, 72 skipped, 2 failed, 1 error in 12.29s ====",
            &mut c
        ));
        assert!(add_pytest_summary("3 passed in 0.5s", &mut c));
        assert!(!add_pytest_summary("tests/test_ops.py ....s", &mut c));
        assert_eq!(
            c,
            Counts {
                passed: 80,
                failed: 3,
                ignored: 72
            }
        );
    }
}
