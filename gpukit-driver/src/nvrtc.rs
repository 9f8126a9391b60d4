//! Run-time compilation of CUDA C++ with NVRTC, and its on-disk cache.
//!
//! NVRTC is found, in this order, in: `$GPUKIT_NVRTC_DIR`; `$CUDA_HOME` and `$CUDA_PATH`; the
//! standard library path (`ld.so` cache, `LD_LIBRARY_PATH`); `/usr/local/cuda`; and the cache that
//! `cargo xtask setup-cuda` fills from PyPI ([`cuda_tools_dir`]). The library found is loaded by
//! its full path, so cudarc's later look-up by soname resolves to the same, already loaded copy.
//! CUDA headers (`cuda_bf16.h`, …) are taken from the `include` folder beside the library.

use std::ffi::{CString, c_char, c_int};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::sys;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::module::ModuleImage;

/// The NVRTC library file name for CUDA 13.
const NVRTC_SONAME: &str = "libnvrtc.so.13";

/// gpukit's cache folder: `$GPUKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/gpukit`, else
/// `$HOME/.cache/gpukit`, else `gpukit-cache` under the system temporary folder.
pub fn cache_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("GPUKIT_CACHE_DIR") {
        return d;
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return d.join("gpukit");
    }
    if let Some(d) = var("HOME") {
        return d.join(".cache").join("gpukit");
    }
    std::env::temp_dir().join("gpukit-cache")
}

/// Where `cargo xtask setup-cuda` installs NVRTC 13.0 and the CUDA 13.0 headers from PyPI
/// (`pip install --target`): `<cache_dir>/cuda`, with the library in `nvidia/cu13/lib` and the
/// headers in `nvidia/cu13/include`.
pub fn cuda_tools_dir() -> PathBuf {
    cache_dir().join("cuda")
}

/// A GPU architecture to compile for: `sm_80`, `sm_86`, `sm_89`, `sm_90a`, …
///
/// `arch_specific` (the `a` suffix) enables features of exactly that architecture (e.g. `wgmma`
/// and `setmaxnreg` on sm_90a); such code runs only on that architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    /// `10 * major + minor`, e.g. 90.
    pub sm: u32,
    /// The `a` suffix.
    pub arch_specific: bool,
}

impl Arch {
    /// Ampere A100.
    pub const SM80: Arch = Arch::new(80);
    /// Ampere consumer / A10.
    pub const SM86: Arch = Arch::new(86);
    /// Ada (L4, L40, RTX 40).
    pub const SM89: Arch = Arch::new(89);
    /// Hopper (H100, H200) with its architecture-specific features.
    pub const SM90A: Arch = Arch {
        sm: 90,
        arch_specific: true,
    };

    /// A portable (non-`a`) architecture.
    pub const fn new(sm: u32) -> Arch {
        Arch {
            sm,
            arch_specific: false,
        }
    }

    /// The `--gpu-arch` value: `sm_90a` for a cubin, `compute_90a` for PTX.
    pub fn option(&self, output: Output) -> String {
        let prefix = match output {
            Output::Cubin => "sm",
            Output::Ptx => "compute",
        };
        let suffix = if self.arch_specific { "a" } else { "" };
        format!("--gpu-architecture={prefix}_{}{suffix}", self.sm)
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let suffix = if self.arch_specific { "a" } else { "" };
        write!(f, "sm_{}{suffix}", self.sm)
    }
}

/// What NVRTC produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    /// Machine code for exactly one real architecture.
    Cubin,
    /// PTX for a virtual architecture; the driver JIT-compiles it for any newer GPU.
    Ptx,
}

/// Where compiled images are cached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Cache {
    /// `<cache_dir>/nvrtc`.
    #[default]
    Default,
    /// A folder of the caller's choosing.
    At(PathBuf),
    /// Always compile.
    Off,
}

/// What to compile for and how.
#[derive(Clone, Debug)]
#[must_use]
pub struct CompileOptions {
    /// Target architecture.
    pub arch: Arch,
    /// Cubin or PTX.
    pub output: Output,
    /// Extra `-I` folders. Headers found through them are *not* part of the cache key: pass
    /// project headers through [`CompileOptions::headers`] instead.
    pub include_dirs: Vec<PathBuf>,
    /// In-memory headers `(include name, contents)`, e.g. `("common.cuh", "...")`; hashed into
    /// the cache key.
    pub headers: Vec<(String, String)>,
    /// Further NVRTC options, e.g. `-lineinfo`, `--use_fast_math`, `-DBLOCK=256`.
    pub flags: Vec<String>,
    /// Cache policy.
    pub cache: Cache,
}

impl CompileOptions {
    /// Options for `arch` and `output`, C++17, default cache, nothing else.
    pub fn new(arch: Arch, output: Output) -> Self {
        CompileOptions {
            arch,
            output,
            include_dirs: Vec::new(),
            headers: Vec::new(),
            flags: vec!["-std=c++17".into()],
            cache: Cache::Default,
        }
    }

    /// Adds an in-memory header.
    pub fn header(mut self, name: impl Into<String>, contents: impl Into<String>) -> Self {
        self.headers.push((name.into(), contents.into()));
        self
    }

    /// Adds an NVRTC option.
    pub fn flag(mut self, flag: impl Into<String>) -> Self {
        self.flags.push(flag.into());
        self
    }

    /// Adds an include folder.
    pub fn include_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.include_dirs.push(dir.into());
        self
    }

    /// Sets the cache policy.
    pub fn cache(mut self, cache: Cache) -> Self {
        self.cache = cache;
        self
    }
}

/// A compiled image.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The cubin bytes, or the PTX text (without a trailing NUL).
    pub image: Vec<u8>,
    /// Which of the two `image` is.
    pub output: Output,
    /// The architecture it was compiled for.
    pub arch: Arch,
    /// NVRTC's log (warnings); empty when loaded from the cache.
    pub log: String,
    /// Whether it came from the on-disk cache.
    pub from_cache: bool,
}

impl Compiled {
    /// The image, ready for [`Device::load_module`](crate::Device::load_module).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if PTX output is not UTF-8 (never for NVRTC output).
    pub fn module_image(&self) -> Result<ModuleImage<'_>> {
        Ok(match self.output {
            Output::Cubin => ModuleImage::Cubin(&self.image),
            Output::Ptx => ModuleImage::Ptx(
                std::str::from_utf8(&self.image)
                    .map_err(|e| Error::InvalidArgument(format!("PTX is not UTF-8: {e}")))?,
            ),
        })
    }
}

/// A loaded NVRTC library. Get it with [`Nvrtc::get`]; compile with [`Nvrtc::compile`].
/// Thread-safe.
#[derive(Debug)]
pub struct Nvrtc {
    library: PathBuf,
    include_dir: Option<PathBuf>,
    version: (i32, i32),
}

enum Candidate {
    Dir(PathBuf),
    System,
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Candidate::Dir(d) => write!(f, "{}", d.display()),
            Candidate::System => write!(f, "the standard library path"),
        }
    }
}

fn candidates() -> Vec<Candidate> {
    let mut out = Vec::new();
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("GPUKIT_NVRTC_DIR") {
        out.extend([d.clone(), d.join("lib"), d.join("lib64")].map(Candidate::Dir));
    }
    for k in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = var(k) {
            out.extend(toolkit_lib_dirs(&d).into_iter().map(Candidate::Dir));
        }
    }
    out.push(Candidate::System);
    out.extend(
        toolkit_lib_dirs(Path::new("/usr/local/cuda"))
            .into_iter()
            .map(Candidate::Dir),
    );
    out.push(Candidate::Dir(cuda_tools_dir().join("nvidia/cu13/lib")));
    out
}

fn toolkit_lib_dirs(root: &Path) -> Vec<PathBuf> {
    vec![
        root.join("lib64"),
        root.join("lib"),
        root.join("targets/x86_64-linux/lib"),
    ]
}

impl Nvrtc {
    /// Finds and loads NVRTC once per process (see the module docs for the search order).
    ///
    /// # Errors
    /// [`Error::NvrtcNotFound`] listing every place searched (the same error on every call).
    pub fn get() -> Result<&'static Nvrtc> {
        static NVRTC: OnceLock<std::result::Result<Nvrtc, String>> = OnceLock::new();
        match NVRTC.get_or_init(|| locate(&candidates())) {
            Ok(n) => Ok(n),
            Err(searched) => Err(Error::NvrtcNotFound {
                searched: searched.clone(),
            }),
        }
    }

    /// NVRTC's version, e.g. `(13, 0)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The library file that was loaded.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The CUDA include folder used for every compile, if one was found beside the library.
    pub fn include_dir(&self) -> Option<&Path> {
        self.include_dir.as_deref()
    }

    /// Real architectures this NVRTC can compile for, as SM numbers (`nvrtcGetSupportedArchs`).
    ///
    /// # Errors
    /// [`Error::Nvrtc`] if the call fails.
    pub fn supported_archs(&self) -> Result<Vec<u32>> {
        let mut n: c_int = 0;
        // SAFETY: NVRTC is loaded (we exist); `n` is a valid out-pointer.
        nvrtc_check("nvrtcGetNumSupportedArchs", unsafe {
            sys::nvrtcGetNumSupportedArchs(&mut n)
        })?;
        let mut archs = vec![0 as c_int; usize::try_from(n).unwrap_or(0)];
        // SAFETY: `archs` has room for the `n` entries NVRTC reported.
        nvrtc_check("nvrtcGetSupportedArchs", unsafe {
            sys::nvrtcGetSupportedArchs(archs.as_mut_ptr())
        })?;
        Ok(archs
            .into_iter()
            .filter_map(|a| u32::try_from(a).ok())
            .collect())
    }

    /// Compiles `source` (CUDA C++, device code only) as program `program` (the name shown in the
    /// log), or returns the cached image from an identical earlier compile. The cache key is the
    /// SHA-256 of the source, the in-memory headers, every option (architecture included) and the
    /// NVRTC version.
    ///
    /// # Errors
    /// [`Error::Compile`] with NVRTC's full log when the source does not compile;
    /// [`Error::InvalidArgument`] for text with NUL bytes; [`Error::Nvrtc`] for other failures.
    pub fn compile(&self, program: &str, source: &str, opts: &CompileOptions) -> Result<Compiled> {
        let mut options = vec![opts.arch.option(opts.output)];
        for dir in self.include_dir.iter().chain(&opts.include_dirs) {
            options.push(format!("-I{}", dir.display()));
        }
        options.extend(opts.flags.iter().cloned());

        let cache_file = match &opts.cache {
            Cache::Off => None,
            Cache::Default => Some(cache_dir().join("nvrtc")),
            Cache::At(d) => Some(d.clone()),
        }
        .map(|dir| {
            let ext = match opts.output {
                Output::Cubin => "cubin",
                Output::Ptx => "ptx",
            };
            dir.join(format!(
                "{}.{ext}",
                self.cache_key(program, source, opts, &options)
            ))
        });
        if let Some(path) = &cache_file
            && let Ok(image) = std::fs::read(path)
            && !image.is_empty()
        {
            return Ok(Compiled {
                image,
                output: opts.output,
                arch: opts.arch,
                log: String::new(),
                from_cache: true,
            });
        }

        let (image, log) = self.compile_uncached(program, source, opts, &options)?;
        if let Some(path) = &cache_file {
            // The cache only saves time: a read-only or full disk must not fail the compile.
            let _ = write_atomically(path, &image);
        }
        Ok(Compiled {
            image,
            output: opts.output,
            arch: opts.arch,
            log,
            from_cache: false,
        })
    }

    fn cache_key(
        &self,
        program: &str,
        source: &str,
        opts: &CompileOptions,
        options: &[String],
    ) -> String {
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(b"gpukit-nvrtc-cache-v1");
        field(format!("{:?}", self.version).as_bytes());
        field(program.as_bytes());
        field(source.as_bytes());
        for (name, contents) in &opts.headers {
            field(name.as_bytes());
            field(contents.as_bytes());
        }
        for o in options {
            field(o.as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn compile_uncached(
        &self,
        program: &str,
        source: &str,
        opts: &CompileOptions,
        options: &[String],
    ) -> Result<(Vec<u8>, String)> {
        let cstr = |s: &str, what: &str| {
            CString::new(s).map_err(|_| Error::InvalidArgument(format!("{what} contains NUL")))
        };
        let src = cstr(source, "the source")?;
        let name = cstr(program, "the program name")?;
        let header_names = opts
            .headers
            .iter()
            .map(|(n, _)| cstr(n, "a header name"))
            .collect::<Result<Vec<_>>>()?;
        let header_bodies = opts
            .headers
            .iter()
            .map(|(_, b)| cstr(b, "a header"))
            .collect::<Result<Vec<_>>>()?;
        let copts = options
            .iter()
            .map(|o| cstr(o, "an option"))
            .collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<*const c_char> = header_names.iter().map(|c| c.as_ptr()).collect();
        let body_ptrs: Vec<*const c_char> = header_bodies.iter().map(|c| c.as_ptr()).collect();
        let opt_ptrs: Vec<*const c_char> = copts.iter().map(|c| c.as_ptr()).collect();
        let n_headers = c_int::try_from(name_ptrs.len())
            .map_err(|_| Error::InvalidArgument("too many headers".into()))?;
        let n_opts = c_int::try_from(opt_ptrs.len())
            .map_err(|_| Error::InvalidArgument("too many options".into()))?;

        let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
        // cudarc's `create_program` takes no headers, so this calls `sys` directly.
        // SAFETY: every pointer is a live NUL-terminated string; the arrays have `n_headers`
        // entries; `prog` is a valid out-pointer.
        nvrtc_check("nvrtcCreateProgram", unsafe {
            sys::nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                name.as_ptr(),
                n_headers,
                body_ptrs.as_ptr(),
                name_ptrs.as_ptr(),
            )
        })?;
        let prog = ProgramGuard(prog);
        // SAFETY: `prog` is a live program; `opt_ptrs` has `n_opts` live C strings.
        let status = unsafe { sys::nvrtcCompileProgram(prog.0, n_opts, opt_ptrs.as_ptr()) };
        let log = program_log(prog.0)?;
        match status {
            sys::nvrtcResult::NVRTC_SUCCESS => {}
            sys::nvrtcResult::NVRTC_ERROR_COMPILATION => {
                return Err(Error::Compile {
                    program: program.into(),
                    arch: opts.arch.to_string(),
                    log,
                });
            }
            other => {
                return Err(Error::Compile {
                    program: program.into(),
                    arch: opts.arch.to_string(),
                    log: format!("{other:?}\n{log}"),
                });
            }
        }
        let image = match opts.output {
            Output::Cubin => {
                let mut size = 0usize;
                // SAFETY: live, compiled program; valid out-pointer.
                nvrtc_check("nvrtcGetCUBINSize", unsafe {
                    sys::nvrtcGetCUBINSize(prog.0, &mut size)
                })?;
                let mut buf = vec![0u8; size];
                // SAFETY: `buf` has the size NVRTC reported.
                nvrtc_check("nvrtcGetCUBIN", unsafe {
                    sys::nvrtcGetCUBIN(prog.0, buf.as_mut_ptr().cast())
                })?;
                buf
            }
            Output::Ptx => {
                let mut size = 0usize;
                // SAFETY: live, compiled program; valid out-pointer.
                nvrtc_check("nvrtcGetPTXSize", unsafe {
                    sys::nvrtcGetPTXSize(prog.0, &mut size)
                })?;
                let mut buf = vec![0u8; size];
                // SAFETY: `buf` has the size NVRTC reported (including the NUL).
                nvrtc_check("nvrtcGetPTX", unsafe {
                    sys::nvrtcGetPTX(prog.0, buf.as_mut_ptr().cast())
                })?;
                while buf.last() == Some(&0) {
                    buf.pop();
                }
                buf
            }
        };
        Ok((image, log))
    }
}

/// Destroys an NVRTC program on every path out of `compile_uncached`.
struct ProgramGuard(sys::nvrtcProgram);

impl Drop for ProgramGuard {
    fn drop(&mut self) {
        // SAFETY: the program was created by `nvrtcCreateProgram` and is destroyed once. A failure
        // here can only leak host memory, so it is ignored rather than panicking.
        let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
    }
}

fn program_log(prog: sys::nvrtcProgram) -> Result<String> {
    let mut size = 0usize;
    // SAFETY: live program; valid out-pointer.
    nvrtc_check("nvrtcGetProgramLogSize", unsafe {
        sys::nvrtcGetProgramLogSize(prog, &mut size)
    })?;
    let mut buf = vec![0u8; size.max(1)];
    // SAFETY: `buf` has the size NVRTC reported.
    nvrtc_check("nvrtcGetProgramLog", unsafe {
        sys::nvrtcGetProgramLog(prog, buf.as_mut_ptr().cast())
    })?;
    while buf.last() == Some(&0) {
        buf.pop();
    }
    Ok(String::from_utf8_lossy(&buf).trim_end().to_string())
}

fn nvrtc_check(call: &'static str, status: sys::nvrtcResult) -> Result<()> {
    if status == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(Error::Nvrtc {
            call,
            code: status as u32,
            name: format!("{status:?}"),
        })
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("image"),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Tries each candidate in order; returns the first NVRTC that loads and answers, or the list
/// of places searched (with why each failed, when it existed but did not load).
fn locate(candidates: &[Candidate]) -> std::result::Result<Nvrtc, String> {
    let mut searched = Vec::new();
    for c in candidates {
        match try_candidate(c) {
            Ok(Some(n)) => return Ok(n),
            Ok(None) => searched.push(c.to_string()),
            Err(why) => searched.push(format!("{c} ({why})")),
        }
    }
    Err(searched.join(", "))
}

/// `Ok(None)`: nothing there. `Err`: something there that failed to load.
fn try_candidate(c: &Candidate) -> std::result::Result<Option<Nvrtc>, String> {
    let (lib, path) = match c {
        Candidate::Dir(dir) => {
            let file = dir.join(NVRTC_SONAME);
            if !file.is_file() {
                return Ok(None);
            }
            // NVRTC dlopens its builtins library by soname; loading it first from the same
            // folder lets that succeed without LD_LIBRARY_PATH.
            if let Some(builtins) = builtins_in(dir) {
                // SAFETY: loading NVIDIA's library runs only its (side-effect free) initialisers.
                let b = unsafe { libloading::Library::new(&builtins) }
                    .map_err(|e| format!("{}: {e}", builtins.display()))?;
                keep_loaded(b);
            }
            // SAFETY: as above.
            let lib = unsafe { libloading::Library::new(&file) }.map_err(|e| e.to_string())?;
            (lib, file)
        }
        Candidate::System => {
            // SAFETY: as above.
            let Ok(lib) = (unsafe { libloading::Library::new(NVRTC_SONAME) }) else {
                return Ok(None);
            };
            let path = loaded_path(NVRTC_SONAME).unwrap_or_else(|| PathBuf::from(NVRTC_SONAME));
            (lib, path)
        }
    };
    let own_version = {
        type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
        // SAFETY: `nvrtcVersion` has this signature in every NVRTC.
        let f = unsafe { lib.get::<VersionFn>(b"nvrtcVersion\0") }.map_err(|e| e.to_string())?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: valid out-pointers.
        if unsafe { f(&mut major, &mut minor) } != 0 {
            return Err("nvrtcVersion failed".into());
        }
        (major, minor)
    };
    keep_loaded(lib);
    // cudarc resolves NVRTC by soname; with ours loaded, that finds the same copy. Check it did.
    // SAFETY: only dlopens candidates by name.
    if !unsafe { sys::is_culib_present() } {
        return Err("loaded, but cudarc cannot resolve it by soname".into());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present, so cudarc's symbol lookup cannot panic.
    nvrtc_check("nvrtcVersion", unsafe {
        sys::nvrtcVersion(&mut major, &mut minor)
    })
    .map_err(|e| e.to_string())?;
    if (major, minor) != own_version {
        return Err(format!(
            "another NVRTC ({major}.{minor}) shadows this one ({}.{}) on the library path",
            own_version.0, own_version.1
        ));
    }
    let include_dir = path.parent().and_then(include_dir_for);
    Ok(Some(Nvrtc {
        library: path,
        include_dir,
        version: own_version,
    }))
}

/// Keeps a library loaded for the life of the process: unloading NVRTC would pull it from under
/// cudarc, which keeps its own handle and function pointers.
fn keep_loaded(lib: libloading::Library) {
    std::mem::forget(lib);
}

fn builtins_in(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc-builtins.so.") && !n.contains(".alt."))
        })
        .collect();
    found.sort();
    found.pop()
}

/// The CUDA include folder for a library folder: `../include` (toolkit, PyPI layout).
fn include_dir_for(lib_dir: &Path) -> Option<PathBuf> {
    let parent = lib_dir.parent()?;
    let inc = parent.join("include");
    inc.join("cuda_fp16.h").is_file().then_some(inc)
}

/// The full path of an already loaded library, from `/proc/self/maps`.
fn loaded_path(soname: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with(soname))
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_nvrtc_lists_every_place_searched() {
        let dirs = [
            PathBuf::from("/nonexistent/gpukit-a"),
            PathBuf::from("/nonexistent/gpukit-b"),
        ];
        let err = locate(&dirs.map(Candidate::Dir)).unwrap_err();
        assert!(err.contains("/nonexistent/gpukit-a"), "{err}");
        assert!(err.contains("/nonexistent/gpukit-b"), "{err}");
    }

    #[test]
    fn arch_options_and_names() {
        assert_eq!(
            Arch::SM90A.option(Output::Cubin),
            "--gpu-architecture=sm_90a"
        );
        assert_eq!(
            Arch::SM90A.option(Output::Ptx),
            "--gpu-architecture=compute_90a"
        );
        assert_eq!(
            Arch::SM80.option(Output::Ptx),
            "--gpu-architecture=compute_80"
        );
        assert_eq!(Arch::SM89.to_string(), "sm_89");
        assert_eq!(Arch::SM90A.to_string(), "sm_90a");
    }
}
