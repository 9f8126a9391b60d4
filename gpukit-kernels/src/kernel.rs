//! Kernel ids: one typed enum per kernel family (one per CUDA source file), and [`Kernel`], the
//! id the registry loads, with one variant per family.
//!
//! A family's module (`elementwise`, `gemv`, `attention`, …) owns its kernel enum, the
//! entry-point names, the launch geometry and their tests. Adding a kernel touches that module
//! and its `.cu` file; adding a family adds one line to the list below.

use std::fmt::Debug;
use std::hash::Hash;

use gpukit_driver::{Arch, Nvrtc, Output};

use crate::targets::compile_options;
use crate::{DType, Error, Result};

/// What every family's kernel enum provides.
pub trait KernelFamily: Copy + Eq + Hash + Debug + Into<Kernel> {
    /// The `extern "C"` entry point, `<op>_<dtype>[_<variant>]`.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a dtype the kernel does not exist for;
    /// [`Error::InvalidArgument`] for a variant it is not built for.
    fn entry_point(&self) -> Result<String>;

    /// Whether the kernel supports programmatic dependent launch: it executes
    /// `griddepcontrol.wait` before touching memory that earlier kernels read or write. Launches
    /// of these kernels may set `LaunchConfig::programmatic` on sm_90+.
    fn programmatic(&self) -> bool;

    /// Every id of the family (the compile check looks each entry point up).
    #[cfg(test)]
    fn every() -> Vec<Self>;
}

macro_rules! families {
    ($($(#[$m:meta])* $var:ident($ty:ty) => $file:literal,)*) => {
        /// A CUDA source file of `gpukit-kernels/cuda/`: the unit that is compiled and loaded,
        /// one per kernel family.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum KernelModule {
            $($(#[$m])* $var,)*
        }

        impl KernelModule {
            /// Every module.
            pub const ALL: &[KernelModule] = &[$(KernelModule::$var),*];

            /// The file stem.
            pub fn name(self) -> &'static str {
                match self {
                    $(KernelModule::$var => $file,)*
                }
            }

            /// The CUDA source, embedded for run-time compilation.
            pub fn source(self) -> &'static str {
                match self {
                    $(KernelModule::$var => include_str!(concat!("../cuda/", $file, ".cu")),)*
                }
            }
        }

        /// A kernel entry point, by what it computes: its family's id. The entry-point name is
        /// derived from it, never written by hand at a call site.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Kernel {
            $($(#[$m])* $var($ty),)*
        }

        impl Kernel {
            /// The source module.
            pub fn module(&self) -> KernelModule {
                match self {
                    $(Kernel::$var(_) => KernelModule::$var,)*
                }
            }

            /// The `extern "C"` entry point ([`KernelFamily::entry_point`]).
            ///
            /// # Errors
            /// As [`KernelFamily::entry_point`].
            pub fn entry_point(&self) -> Result<String> {
                match self {
                    $(Kernel::$var(k) => k.entry_point(),)*
                }
            }

            /// Whether the kernel supports programmatic dependent launch
            /// ([`KernelFamily::programmatic`]).
            pub fn programmatic(&self) -> bool {
                match self {
                    $(Kernel::$var(k) => k.programmatic(),)*
                }
            }

            /// Every kernel of every family.
            #[cfg(test)]
            fn every() -> Vec<Kernel> {
                let mut v = Vec::new();
                $(v.extend(<$ty as KernelFamily>::every().into_iter().map(Kernel::$var));)*
                v
            }
        }

        $(impl From<$ty> for Kernel {
            fn from(k: $ty) -> Kernel {
                Kernel::$var(k)
            }
        })*
    };
}

families! {
    /// `elementwise.cu`: binary, unary, scalar, clamp, where, copy, cast.
    Elementwise(crate::elementwise::ElementwiseKernel) => "elementwise",
    /// `reduce.cu`: sum, mean, max, min, argmax, softmax, log-softmax.
    Reduce(crate::reduce::ReduceKernel) => "reduce",
    /// `norm.cu`: rms_norm, layer_norm, add_rms_norm.
    Norm(crate::norm::NormKernel) => "norm",
    /// `gather.cu`: index_select (embedding lookup) and gather along an axis.
    Gather(crate::gather::GatherKernel) => "gather",
    /// `gemv.cu`: matrix-vector products for M ≤ 8, and the decode step's fused GEMVs.
    Gemv(crate::gemv::GemvKernel) => "gemv",
    /// `rope.cu`: rotary position embeddings, and RoPE with the KV-cache append.
    Rope(crate::rope::RopeKernel) => "rope",
    /// `quant.cu`: dequantization of GGML block formats and the quantized GEMV.
    Quant(crate::quant::QuantKernel) => "quant",
    /// `kv.cu`: KV-cache append.
    Kv(crate::kv::KvKernel) => "kv",
    /// `attention.cu`: scaled dot-product attention (flash prefill, split-K decode).
    Attention(crate::attention::AttentionKernel) => "attention",
    /// `linear.cu`: the batch-invariant tiled linear (tensor cores, one tile for every batch).
    Linear(crate::linear::LinearKernel) => "linear",
    /// `paged.cu`: the paged KV cache's writes and batched attention through block tables.
    Paged(crate::paged::PagedKernel) => "paged",
    /// `sampling.cu`: token sampling (Philox, penalties, temperature, top-k/p, min-p).
    Sampling(crate::sampling::SamplingKernel) => "sampling",
    /// `signal.cu`: batched FFTs (Stockham, Bluestein), padding, overlap-add.
    Signal(crate::signal::SignalKernel) => "signal",
}

/// The shared header, generated from [`crate::shared`], and the hand-written ones, for run-time
/// compilation (the build script compiles against the same three).
pub(crate) fn headers() -> [(&'static str, &'static str); 3] {
    static SHARED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    [
        (
            "gpukit_shared.cuh",
            SHARED.get_or_init(crate::shared::cuda_header).as_str(),
        ),
        ("common.cuh", include_str!("../cuda/common.cuh")),
        ("attention.cuh", include_str!("../cuda/attention.cuh")),
    ]
}

/// Compiles one module for one target with the project's headers and flags (used at run time and
/// by the kernel check of `cargo xtask test`).
///
/// # Errors
/// [`gpukit_driver::Error::Compile`] with NVRTC's log.
pub fn compile(
    nvrtc: &Nvrtc,
    module: KernelModule,
    arch: Arch,
    output: Output,
) -> Result<gpukit_driver::Compiled> {
    let opts = compile_options(arch, output, headers());
    Ok(nvrtc.compile(&format!("{}.cu", module.name()), module.source(), &opts)?)
}

/// `dt`'s name for a kernel that exists for the float types only.
pub(crate) fn float_name(op: &'static str, dt: DType) -> Result<&'static str> {
    if dt.is_float() {
        Ok(dt.name())
    } else {
        Err(Error::Unsupported { op, dtype: dt })
    }
}

/// `dt`'s name for a tensor-core kernel (f16 or bf16 only).
pub(crate) fn half_name(op: &'static str, dt: DType) -> Result<&'static str> {
    if matches!(dt, DType::F16 | DType::BF16) {
        Ok(dt.name())
    } else {
        Err(Error::Unsupported { op, dtype: dt })
    }
}

/// `<dtype>_<index dtype>` for the indexing kernels (any dtype but u8; i32 or i64 indices).
pub(crate) fn indexed_name(op: &'static str, dtype: DType, index: DType) -> Result<String> {
    if dtype == DType::U8 {
        return Err(Error::Unsupported { op, dtype });
    }
    if !matches!(index, DType::I32 | DType::I64) {
        return Err(Error::Unsupported {
            op: "indices",
            dtype: index,
        });
    }
    Ok(format!("{}_{}", dtype.name(), index.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::TARGETS;

    /// Every module compiles for every target and exports every entry point its family can
    /// name. This is the kernel check of CI (NVRTC from `cargo xtask setup-cuda`).
    #[test]
    fn every_kernel_compiles_for_every_architecture() {
        let nvrtc = Nvrtc::get().expect("NVRTC (run `cargo xtask setup-cuda`)");
        let kernels = Kernel::every();
        for &module in KernelModule::ALL {
            for (_, arch, output) in TARGETS {
                compile(nvrtc, module, arch, output).unwrap_or_else(|e| panic!("{e}"));
            }
            // PTX text lists every entry point: check the families' names exist.
            let ptx = compile(nvrtc, module, Arch::new(90), Output::Ptx).unwrap();
            let text = String::from_utf8(ptx.image).unwrap();
            for kernel in kernels.iter().filter(|k| k.module() == module) {
                if let Ok(name) = kernel.entry_point() {
                    assert!(
                        text.contains(&format!(".entry {name}(")),
                        "{name} missing from {}.cu",
                        module.name()
                    );
                }
            }
        }
    }

    /// The generated header defines each shared constant once, with its Rust value, and the
    /// argument structs field by field.
    #[test]
    fn the_generated_header_carries_the_shared_values() {
        let h = crate::shared::cuda_header();
        assert!(h.contains("#define GEMV_RING_WARPS 8\n"));
        assert!(h.contains("#define OP_POW 6\n"));
        assert!(h.contains("#define QFMT_Q6_K 5\n"));
        assert!(h.contains("    long long stride[3][6];\n"));
        assert!(h.contains("    const int* position;\n"));
        assert_eq!(h.matches("#define SAMPLE_CHUNK ").count(), 1);
        // The decode merge area's size, checked against sdpa_merge_bytes where it is compiled.
        assert!(h.contains("static_assert(SDPA_MERGE_BYTES(128) == 35328, "));
    }
}
