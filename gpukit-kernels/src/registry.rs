//! `KernelRegistry`: the kernel image for a device's SM, modules loaded lazily once per device,
//! functions looked up once and cached. Which kernel to launch, and how, is each family's
//! business (`crate::gemv`, `crate::attention`, …); this module only finds and loads it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use gpukit_driver::{Arch, Device, DeviceProperties, Function, Module, ModuleImage, Nvrtc, Output};

use crate::kernel::{Kernel, KernelModule, compile};
use crate::targets::TARGETS;
use crate::{Error, Result};

include!(concat!(env!("OUT_DIR"), "/prebuilt.rs"));

/// The image target for a device: its own cubin where one is built, the PTX fallback for newer
/// architectures, an error for older ones.
fn target_for(props: &DeviceProperties) -> Result<(&'static str, Arch, Output)> {
    let sm = props.compute_capability.sm();
    target_index(sm)
        .map(|i| TARGETS[i])
        .ok_or_else(|| Error::UnsupportedDevice {
            device: props.name.clone(),
            sm,
        })
}

/// The index in [`TARGETS`] of the image for SM `sm`: a cubin runs on its own SM and later
/// minor versions of the same major one (sm_80's on 8.0–8.5, sm_86's on 8.6–8.8), sm_90a's
/// only on 9.0, and the PTX on anything newer; `None` below 8.0.
fn target_index(sm: u32) -> Option<usize> {
    match sm {
        80..=85 => Some(0),
        86..=88 => Some(1),
        89 => Some(2),
        90 => Some(3),
        s if s > 90 => Some(4),
        _ => None,
    }
}

/// Where a module's image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageSource {
    /// Compiled when gpukit was built and embedded in the binary.
    Prebuilt,
    /// Compiled at run time with NVRTC (and cached on disk).
    Nvrtc,
}

/// Loaded kernels for one device. Modules are loaded on first use, once; functions are looked up
/// once and cached. Get the registry of a device with [`KernelRegistry::for_device`].
pub struct KernelRegistry {
    device: Device,
    target: (&'static str, Arch, Output),
    modules: Mutex<HashMap<KernelModule, (Module, ImageSource)>>,
    functions: Mutex<HashMap<Kernel, Function>>,
}

impl std::fmt::Debug for KernelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelRegistry({:?}, {})", self.device, self.target.0)
    }
}

impl KernelRegistry {
    /// The registry of `device` (one per device ordinal for the life of the process).
    ///
    /// # Errors
    /// [`Error::UnsupportedDevice`] before sm_80.
    pub fn for_device(device: &Device) -> Result<Arc<KernelRegistry>> {
        static REGISTRIES: OnceLock<Mutex<HashMap<usize, Arc<KernelRegistry>>>> = OnceLock::new();
        let map = REGISTRIES.get_or_init(|| Mutex::new(HashMap::new()));
        let mut map = map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = map.get(&device.ordinal()) {
            return Ok(r.clone());
        }
        let reg = Arc::new(KernelRegistry {
            device: device.clone(),
            target: target_for(device.properties())?,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
        });
        map.insert(device.ordinal(), reg.clone());
        Ok(reg)
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The image target chosen for this device, e.g. `sm_90a`.
    pub fn target(&self) -> &'static str {
        self.target.0
    }

    /// Whether a prebuilt image exists for `module` on this device.
    pub fn has_prebuilt(&self, module: KernelModule) -> bool {
        prebuilt(module.name(), self.target.0).is_some()
    }

    /// The function for `kernel`, loading its module if needed.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a dtype without that kernel; [`Error::NoKernelImage`] when the
    /// module has no prebuilt image and NVRTC is unavailable; driver errors.
    pub fn function(&self, kernel: impl Into<Kernel>) -> Result<Function> {
        let kernel = kernel.into();
        if let Some(f) = lock(&self.functions).get(&kernel) {
            return Ok(f.clone());
        }
        let name = kernel.entry_point()?;
        let module = self.module(kernel.module())?;
        let f = module.function(&name)?;
        lock(&self.functions).insert(kernel, f.clone());
        Ok(f)
    }

    /// Loads `module` (once) and says where its image came from.
    ///
    /// # Errors
    /// As [`KernelRegistry::function`].
    pub fn load(&self, module: KernelModule) -> Result<ImageSource> {
        self.module(module)?;
        Ok(lock(&self.modules)
            .get(&module)
            .map(|(_, s)| *s)
            .unwrap_or(ImageSource::Prebuilt))
    }

    fn module(&self, module: KernelModule) -> Result<Module> {
        let mut modules = lock(&self.modules);
        if let Some((m, _)) = modules.get(&module) {
            return Ok(m.clone());
        }
        let (m, source) = match prebuilt(module.name(), self.target.0) {
            Some(image) => {
                let img = match self.target.2 {
                    Output::Cubin => ModuleImage::Cubin(image),
                    Output::Ptx => ModuleImage::Ptx(std::str::from_utf8(image).map_err(|e| {
                        Error::InvalidArgument(format!("prebuilt PTX is not UTF-8: {e}"))
                    })?),
                };
                (self.device.load_module(img)?, ImageSource::Prebuilt)
            }
            None => (
                compile_at_run_time(&self.device, module, self.target)?,
                ImageSource::Nvrtc,
            ),
        };
        modules.insert(module, (m.clone(), source));
        Ok(m)
    }
}

/// Compiles `module` for `target` with NVRTC (disk-cached) and loads it.
fn compile_at_run_time(
    device: &Device,
    module: KernelModule,
    target: (&'static str, Arch, Output),
) -> Result<Module> {
    let nvrtc = Nvrtc::get().map_err(|e| Error::NoKernelImage {
        module: module.name(),
        arch: target.0.into(),
        why: e.to_string(),
    })?;
    let compiled = compile(nvrtc, module, target.1, target.2)?;
    Ok(device.load_module(compiled.module_image()?)?)
}

fn prebuilt(module: &str, target: &str) -> Option<&'static [u8]> {
    PREBUILT
        .iter()
        .find(|(m, t, _)| *m == module && *t == target)
        .map(|(_, _, img)| *img)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sm_gets_its_image() {
        let name = |sm| target_index(sm).map(|i| TARGETS[i].0);
        for (sm, want) in [
            (80, Some("sm_80")),
            (86, Some("sm_86")),
            (87, Some("sm_86")),
            (89, Some("sm_89")),
            (90, Some("sm_90a")),
            (100, Some("compute_90")),
            (120, Some("compute_90")),
            (75, None),
            (70, None),
        ] {
            assert_eq!(name(sm), want, "sm {sm}");
        }
        assert_eq!(TARGETS[4].2, Output::Ptx);
    }
}
