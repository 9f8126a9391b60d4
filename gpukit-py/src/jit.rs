//! `gk.jit`: CUDA C++ compiled at run time with NVRTC (cached on disk), launched from Python.

use std::collections::HashMap;
use std::sync::Mutex;

use gpukit_driver::{
    Arch, CompileOptions, Dim3, Function, KernelArgs, LaunchConfig, Nvrtc, Output,
};
use gpukit_ops::Device;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};

use crate::device::{PyStream, default_cuda, resolve};
use crate::errors::{self, type_error, value};
use crate::tensor::PyTensor;

/// A kernel compiled by `gk.jit`: call it as `k(grid, block, args, shared_mem=0, stream=None)`.
///
/// `grid` and `block` are an int or a tuple of up to three. `args` are the kernel's parameters
/// in order: a `gk.Tensor` (on the launch's GPU) passes its data pointer; an int passes a 32- or
/// 64-bit integer and a float a `float` or `double`, as the kernel's parameter sizes say (the
/// driver reports them; a count or size that does not match raises `ValueError` before
/// anything runs). The launch is queued on `stream` (default: the current stream, else the
/// device's) and returns at once. Tensors must stay alive until the kernel has run when it runs
/// on a stream other than theirs.
#[pyclass(module = "gpukit", name = "Kernel", frozen)]
pub struct PyKernel {
    name: String,
    /// PTX or cubin, and the architecture it was built for.
    image: gpukit_driver::Compiled,
    arch: Arch,
    /// The loaded function per GPU ordinal.
    loaded: Mutex<HashMap<usize, Function>>,
}

fn dim(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Dim3> {
    if let Ok(n) = obj.extract::<u32>() {
        return Ok(Dim3::from(n));
    }
    let v: Vec<u32> = obj
        .extract()
        .map_err(|_| type_error(format!("{what}: an int or a tuple of up to 3 ints")))?;
    match v.as_slice() {
        [x] => Ok(Dim3::from(*x)),
        [x, y] => Ok(Dim3::from((*x, *y))),
        [x, y, z] => Ok(Dim3::from((*x, *y, *z))),
        _ => Err(value(format!("{what}: 1 to 3 dimensions, got {}", v.len()))),
    }
}

impl PyKernel {
    fn function(&self, device: &gpukit_ops::CudaDevice) -> PyResult<Function> {
        let dev = device.stream().device();
        let ordinal = dev.ordinal();
        let mut loaded = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(f) = loaded.get(&ordinal) {
            return Ok(f.clone());
        }
        let sm = dev.properties().compute_capability.sm();
        if self.arch.sm > sm || (self.arch.arch_specific && self.arch.sm != sm) {
            return Err(value(format!(
                "`{}` was compiled for sm_{}{} and cannot run on {} (sm_{sm})",
                self.name,
                self.arch.sm,
                if self.arch.arch_specific { "a" } else { "" },
                dev.properties().name
            )));
        }
        let module = dev
            .load_module(self.image.module_image().map_err(errors::drv)?)
            .map_err(errors::drv)?;
        let f = module.function(&self.name).map_err(errors::drv)?;
        loaded.insert(ordinal, f.clone());
        Ok(f)
    }
}

#[pymethods]
impl PyKernel {
    /// The kernel's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The architecture it was compiled for (`"sm_90"`, `"sm_90a"`, …).
    #[getter]
    fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.arch.sm,
            if self.arch.arch_specific { "a" } else { "" }
        )
    }

    /// Whether the compiled image came from the disk cache.
    #[getter(from_cache)]
    fn cached(&self) -> bool {
        self.image.from_cache
    }

    /// Launches the kernel (see the class docs).
    #[pyo3(signature = (grid, block, args, shared_mem=0, stream=None))]
    fn __call__(
        &self,
        py: Python<'_>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyAny>,
        shared_mem: u32,
        stream: Option<&Bound<'_, PyStream>>,
    ) -> PyResult<()> {
        let device = match stream {
            Some(s) => s.get().device.clone(),
            None => default_cuda()?,
        };
        let Device::Cuda(c) = &device else {
            return Err(value("a jit kernel launches on a CUDA device"));
        };
        let f = self.function(c)?;
        let args: Vec<Bound<'_, PyAny>> = match args.cast::<PyTuple>() {
            Ok(t) => t.iter().collect(),
            Err(_) => args.try_iter()?.collect::<PyResult<_>>()?,
        };
        let sizes = f.param_sizes().map(<[usize]>::to_vec);
        if let Some(s) = &sizes
            && s.len() != args.len()
        {
            return Err(value(format!(
                "`{}` takes {} arguments, {} given",
                self.name,
                s.len(),
                args.len()
            )));
        }
        let mut packed = KernelArgs::new();
        for (i, a) in args.iter().enumerate() {
            let size = sizes.as_ref().map(|s| s[i]);
            if let Ok(t) = a.cast::<PyTensor>() {
                let t = &t.get().t;
                match t.device() {
                    Device::Cuda(tc) if tc.stream().device() == c.stream().device() => {}
                    other => {
                        return Err(value(format!(
                            "argument {i}: a tensor on {} given to a launch on {}",
                            other.describe(),
                            device.describe()
                        )));
                    }
                }
                packed.push(gpukit_driver::DevicePtr(t.data_ptr()));
            } else if a.is_instance_of::<PyBool>() {
                packed.push(u8::from(a.extract::<bool>()?));
            } else if a.is_instance_of::<PyInt>() {
                let v: i64 = a.extract()?;
                match size {
                    Some(8) => packed.push(v),
                    Some(4) | None => {
                        let v32 = i32::try_from(v)
                            .or_else(|_| u32::try_from(v).map(|u| u as i32))
                            .map_err(|_| {
                                value(format!("argument {i}: {v} does not fit 32 bits"))
                            })?;
                        packed.push(v32);
                    }
                    Some(2) => {
                        packed.push(i16::try_from(v).map_err(|_| {
                            value(format!("argument {i}: {v} does not fit 16 bits"))
                        })?)
                    }
                    Some(1) => packed
                        .push(u8::try_from(v).map_err(|_| {
                            value(format!("argument {i}: {v} does not fit 8 bits"))
                        })?),
                    Some(n) => {
                        return Err(value(format!(
                            "argument {i}: an int for a {n}-byte parameter"
                        )));
                    }
                }
            } else if a.is_instance_of::<PyFloat>() {
                let v: f64 = a.extract()?;
                match size {
                    Some(8) => packed.push(v),
                    Some(4) | None => packed.push(v as f32),
                    Some(n) => {
                        return Err(value(format!(
                            "argument {i}: a float for a {n}-byte parameter"
                        )));
                    }
                }
            } else {
                return Err(type_error(format!(
                    "argument {i}: expected a gk.Tensor, an int or a float, got {}",
                    a.get_type().name()?
                )));
            }
        }
        let config =
            LaunchConfig::new(dim(grid, "grid")?, dim(block, "block")?).shared_mem(shared_mem);
        if shared_mem > 48 * 1024 {
            f.set_max_dynamic_shared_memory(shared_mem)
                .map_err(errors::drv)?;
        }
        let stream = c.stream().clone();
        // SAFETY: the argument count and sizes were checked against the kernel's parameters
        // (by `check_launch` inside `launch`, where the driver reports them); pointers are the
        // data of live tensors on this device. What the kernel does with them is the source's
        // contract, as with any CUDA launch.
        py.detach(move || unsafe { f.launch(&stream, &config, &packed) })
            .map_err(errors::drv)
    }

    fn __repr__(&self) -> String {
        format!("Kernel(\"{}\", {})", self.name, self.arch())
    }
}

fn parse_arch(s: &str) -> PyResult<Arch> {
    let body = s
        .strip_prefix("sm_")
        .or_else(|| s.strip_prefix("compute_"))
        .ok_or_else(|| value(format!("arch \"{s}\": expected sm_NN or sm_NNa")))?;
    let (num, specific) = match body.strip_suffix('a') {
        Some(n) => (n, true),
        None => (body, false),
    };
    let sm: u32 = num
        .parse()
        .map_err(|_| value(format!("arch \"{s}\": expected sm_NN or sm_NNa")))?;
    Ok(Arch {
        sm,
        arch_specific: specific,
    })
}

/// Compiles CUDA C++ `source` with NVRTC and returns kernel `name` (declared
/// `extern "C" __global__`). `options` are NVRTC flags (`["-DN=4", "--use_fast_math"]`). The
/// target is `arch` (`"sm_90a"`), else the GPU of `device` (default GPU 0); without a GPU and
/// without `arch`, portable PTX for sm_80 (loads on any newer GPU). Compiled images are cached
/// on disk by source, options and NVRTC version, so a second `jit` of the same source is
/// immediate.
///
/// Raises `RuntimeError` with NVRTC's log when the source does not compile, or when NVRTC is
/// missing (`cargo xtask setup-cuda` installs it).
#[pyfunction]
#[pyo3(signature = (source, name, *, options=Vec::new(), arch=None, device=None))]
pub fn jit(
    py: Python<'_>,
    source: &str,
    name: &str,
    options: Vec<String>,
    arch: Option<&str>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyKernel> {
    let (arch, output) = match arch {
        Some(a) => (parse_arch(a)?, Output::Ptx),
        None => {
            let dev = match device {
                Some(d) => match resolve(Some(d))? {
                    Device::Cuda(c) => Some(c),
                    Device::Cpu => {
                        return Err(value("jit compiles for a CUDA device, not the CPU"));
                    }
                },
                None if crate::device::cuda_available() => match default_cuda()? {
                    Device::Cuda(c) => Some(c),
                    Device::Cpu => None,
                },
                None => None,
            };
            let sm = dev.map_or(80, |c| {
                c.stream().device().properties().compute_capability.sm()
            });
            (Arch::new(sm), Output::Ptx)
        }
    };
    let mut opts = CompileOptions::new(arch, output);
    for o in options {
        opts = opts.flag(o);
    }
    let program = format!("{name}.cu");
    let source = source.to_string();
    let image = py
        .detach(move || Nvrtc::get()?.compile(&program, &source, &opts))
        .map_err(errors::drv)?;
    if !image_has_entry(&image, name) {
        return Err(value(format!(
            "kernel `{name}` is not in the compiled source (declare it extern \"C\" __global__)"
        )));
    }
    Ok(PyKernel {
        name: name.to_string(),
        image,
        arch,
        loaded: Mutex::new(HashMap::new()),
    })
}

/// Whether PTX text declares entry `name` (cubins are checked when loaded).
fn image_has_entry(image: &gpukit_driver::Compiled, name: &str) -> bool {
    match std::str::from_utf8(&image.image) {
        Ok(ptx) => {
            ptx.contains(&format!(".entry {name}(")) || ptx.contains(&format!(".entry {name}\n"))
        }
        Err(_) => true,
    }
}
