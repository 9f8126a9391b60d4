//! Runs `cargo test`, echoing its output, and totals the results.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Totals over every test binary.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
}

/// Adds the numbers of one libtest summary line (`test result: ok. 3 passed; 0 failed; 1
/// ignored; ...`) to `counts`; returns whether the line was one.
pub fn add_summary(line: &str, counts: &mut Counts) -> bool {
    let Some(rest) = line.trim().strip_prefix("test result: ") else {
        return false;
    };
    for part in rest.split(';') {
        let mut words = part.split_whitespace().rev();
        let (Some(what), Some(n)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        match what {
            "passed" => counts.passed += n,
            "failed" => counts.failed += n,
            "ignored" => counts.ignored += n,
            _ => {}
        }
    }
    true
}

/// Runs cargo with `args` in `root`; echoes stdout while totalling the summaries.
pub fn cargo_test(root: &Path, args: &[&str]) -> Result<Counts> {
    let cargo = crate::cargo();
    eprintln!("$ {cargo} {}", args.join(" "));
    // espeak-ng was installed first (`python::espeak`): the speech tests require it here.
    let mut child = Command::new(&cargo)
        .args(args)
        .env("GPUKIT_REQUIRE_ESPEAK", "1")
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo test")?;
    let mut counts = Counts::default();
    let stdout = child.stdout.take().context("no stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo test output")?;
        println!("{line}");
        add_summary(&line, &mut counts);
    }
    let status = child.wait().context("waiting for cargo test")?;
    if !status.success() && counts.failed == 0 {
        bail!("cargo test failed before running every test ({status})");
    }
    Ok(counts)
}

/// Prints the closing summary; fails if a test failed.
pub fn report(c: &Counts, gpu: bool) -> Result<()> {
    if !gpu && c.ignored > 0 {
        println!(
            "{} GPU tests skipped: no CUDA device on this machine. `cargo xtask test-gpu` runs \
             them on a GPU machine; `cargo xtask gpu-bundle` packs them for one without Rust.",
            c.ignored
        );
    }
    println!(
        "gpukit: {} passed, {} failed, {} skipped",
        c.passed, c.failed, c.ignored
    );
    if c.failed > 0 {
        bail!("{} tests failed", c.failed);
    }
    if c.passed == 0 {
        bail!("no test ran");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_totalled() {
        let mut c = Counts::default();
        assert!(add_summary(
            "test result: ok. 12 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out; finished in 0.01s",
            &mut c
        ));
        assert!(add_summary(
            "test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out",
            &mut c
        ));
        assert!(!add_summary("running 3 tests", &mut c));
        assert_eq!(
            c,
            Counts {
                passed: 13,
                failed: 2,
                ignored: 3
            }
        );
    }
}

/// `cargo xtask test` reports every ignored test as a skipped GPU test, so `#[ignore]` is kept
/// for exactly that.
#[cfg(test)]
mod policy {
    use std::path::Path;

    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    rust_files(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn only_gpu_tests_are_ignored() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut files = Vec::new();
        rust_files(root, &mut files);
        assert!(files.len() > 5);
        let attr = concat!("#[", "ignore");
        let mut bad = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (i, line) in text.lines().enumerate() {
                if line.trim_start().starts_with(attr)
                    && !line.contains("= \"needs a CUDA device\"")
                {
                    bad.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(
            bad.is_empty(),
            "only GPU tests may be ignored, with reason \"needs a CUDA device\":\n{}",
            bad.join("\n")
        );
    }
}
