//! Build targets and compile options, shared by the build script (`#[path]`-included there) and
//! the run-time fallback, so both compile kernels identically.

use gpukit_driver::{Arch, CompileOptions, Output};

/// Every image the build embeds: (target name, architecture, output). Cubins for the real
/// architectures gpukit supports, and PTX for the newest virtual one as a forward fallback.
pub const TARGETS: [(&str, Arch, Output); 5] = [
    ("sm_80", Arch::SM80, Output::Cubin),
    ("sm_86", Arch::SM86, Output::Cubin),
    ("sm_89", Arch::SM89, Output::Cubin),
    ("sm_90a", Arch::SM90A, Output::Cubin),
    ("compute_90", Arch::new(90), Output::Ptx),
];

/// NVRTC options for one target, with the project headers passed in memory (so they are part of
/// the compile cache key).
pub fn compile_options<'a>(
    arch: Arch,
    output: Output,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> CompileOptions {
    let mut opts = CompileOptions::new(arch, output);
    for (name, body) in headers {
        opts = opts.header(name, body);
    }
    opts
}
