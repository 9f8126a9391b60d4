//! Compiles every `cuda/*.cu` with NVRTC for each target architecture (cubin for sm_80, sm_86,
//! sm_89 and sm_90a; PTX for compute_90 as the forward fallback) and embeds the images, so that a
//! machine with only the NVIDIA driver can run every built-in op.
//!
//! NVRTC is found as at run time (GPUKIT_NVRTC_DIR, CUDA_HOME/CUDA_PATH, the library path,
//! /usr/local/cuda, the cache `cargo xtask setup-cuda` fills). Without it the build still
//! succeeds, with a warning, and kernels are compiled at run time instead. With it, a kernel that
//! does not compile fails the build: this is the kernel check `cargo xtask test` relies on.
//!
//! `GPUKIT_EMBED_TARGETS=sm_90a,...` embeds only the listed targets (the GPU bundle does this to
//! stay small); the others are compiled at run time.

// A build script reports failure by panicking: that is how cargo fails the build.
#![allow(clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use gpukit_driver::Nvrtc;

#[path = "src/targets.rs"]
mod targets;
use targets::{TARGETS, compile_options};

// The values both sides need: the header the kernels include is generated from them. The build
// script uses only the generator, not every constant.
#[path = "src/shared.rs"]
#[allow(
    dead_code,
    reason = "the crate uses the constants; the build script the header"
)]
mod shared;

/// Whether to embed `target`: all of them, or only those listed in `GPUKIT_EMBED_TARGETS`
/// (comma-separated target names, e.g. `sm_90a`; the GPU bundle uses it to stay small). The
/// others are then compiled at run time with NVRTC.
fn embed(target: &str) -> bool {
    std::env::var("GPUKIT_EMBED_TARGETS")
        .map_or(true, |list| list.split(',').any(|t| t.trim() == target))
}

fn main() {
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-changed=src/shared.rs");
    for var in [
        "GPUKIT_NVRTC_DIR",
        "CUDA_HOME",
        "CUDA_PATH",
        "GPUKIT_CACHE_DIR",
        "XDG_CACHE_HOME",
        "GPUKIT_EMBED_TARGETS",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cuda = Path::new("cuda");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(cuda)
        .expect("gpukit-kernels/cuda exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();
    let shared_header = shared::cuda_header();
    std::fs::write(out_dir.join("gpukit_shared.cuh"), &shared_header)
        .expect("write gpukit_shared.cuh");
    let mut headers: Vec<(String, String)> = std::fs::read_dir(cuda)
        .expect("gpukit-kernels/cuda exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cuh"))
        .map(|p| {
            let name = p.file_name().expect("file").to_string_lossy().to_string();
            (name, std::fs::read_to_string(&p).expect("readable header"))
        })
        .collect();
    headers.push(("gpukit_shared.cuh".into(), shared_header));

    let mut table =
        String::from("/// Kernel images compiled at build time: (module, target, image).\n");
    table.push_str("pub(crate) static PREBUILT: &[(&str, &str, &[u8])] = &[\n");
    match Nvrtc::get() {
        Ok(nvrtc) => {
            for src_path in &sources {
                let module = src_path
                    .file_stem()
                    .expect("stem")
                    .to_string_lossy()
                    .to_string();
                let source = std::fs::read_to_string(src_path).expect("readable source");
                for (target, arch, output) in TARGETS {
                    if !embed(target) {
                        continue;
                    }
                    let opts = compile_options(
                        arch,
                        output,
                        headers.iter().map(|(n, b)| (n.as_str(), b.as_str())),
                    );
                    let compiled = match nvrtc.compile(&format!("{module}.cu"), &source, &opts) {
                        Ok(c) => c,
                        Err(e) => panic!(
                            "gpukit-kernels: {module}.cu does not compile for {target}:\n{e}"
                        ),
                    };
                    let file = out_dir.join(format!("{module}.{target}.bin"));
                    std::fs::write(&file, &compiled.image).expect("write kernel image");
                    table.push_str(&format!(
                        "    (\"{module}\", \"{target}\", include_bytes!({:?})),\n",
                        file.display().to_string()
                    ));
                }
            }
        }
        Err(e) => {
            println!(
                "cargo:warning=gpukit-kernels: no NVRTC at build time, kernels will be compiled at \
                 run time ({e})"
            );
            // Re-run once NVRTC appears in the cache.
            let marker = gpukit_driver::cuda_tools_dir().join("nvidia/cu13/lib/libnvrtc.so.13");
            println!("cargo:rerun-if-changed={}", marker.display());
        }
    }
    table.push_str("];\n");
    std::fs::write(out_dir.join("prebuilt.rs"), table).expect("write prebuilt.rs");
}
