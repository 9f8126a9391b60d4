//! Installs NVRTC and the CUDA headers from PyPI into the gpukit cache.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Pinned: PTX from a newer NVRTC is rejected by the CUDA 13.0 driver of the GPU machine.
const PACKAGES: &[&str] = &["nvidia-cuda-nvrtc==13.0.88", "nvidia-cuda-runtime==13.0.96"];

/// Ensures `<cache>/cuda` holds NVRTC and the headers; returns that folder.
pub fn setup() -> Result<PathBuf> {
    let dest = gpukit_driver::cuda_tools_dir();
    let marker = dest.join(format!("gpukit-installed-{}", PACKAGES.join("+")));
    if marker.is_file() {
        return Ok(dest);
    }
    eprintln!(
        "setup-cuda: installing {} into {} (once)",
        PACKAGES.join(" "),
        dest.display()
    );
    let parent = dest.parent().context("cache folder has no parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let staging = parent.join(format!("cuda.installing.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok())
        .context("setup-cuda needs Python 3 with pip (python3 -m pip) to fetch NVRTC from PyPI")?;
    let status = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--no-deps",
            "--target",
        ])
        .arg(&staging)
        .args(PACKAGES)
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .status()
        .context("running pip")?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        bail!(
            "pip could not install {} ({status}). Check that pip can reach the package index, \
             or install the CUDA 13 toolkit and set CUDA_HOME (or GPUKIT_NVRTC_DIR)",
            PACKAGES.join(" ")
        );
    }
    for needed in [
        "nvidia/cu13/lib/libnvrtc.so.13",
        "nvidia/cu13/include/cuda_bf16.h",
    ] {
        if !staging.join(needed).is_file() {
            bail!("the installed packages lack {needed}; their layout changed");
        }
    }
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::rename(&staging, &dest)
        .with_context(|| format!("moving {} to {}", staging.display(), dest.display()))?;
    std::fs::write(&marker, PACKAGES.join("\n"))
        .with_context(|| format!("writing {}", marker.display()))?;
    Ok(dest)
}
