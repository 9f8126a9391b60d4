//! Several models in one server: which options belong to which `--model`, and each model
//! admitted as a tenant of the device's scheduler (its QoS class, memory reservation and SM
//! partition) and loaded on a lane of it.

use std::path::{Path, PathBuf};

use clap::ArgMatches;
use gpukit_llm::engine::{ComputeDevice, Engine};
use gpukit_sched::{LanePriority, QosClass, Scheduler, SchedulerOptions, TenantSpec};

use super::{ServeArgs, parse_bytes};
use crate::generate::{Result, load_engine_on, model_path};

/// One `--model` and the per-model options that follow it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelEntry {
    /// The model file or directory (`None`: the default model).
    pub path: Option<PathBuf>,
    /// `--served-model-name`.
    pub name: Option<String>,
    /// `--qos`.
    pub qos: Option<QosClass>,
    /// `--sm`.
    pub sm: Option<f64>,
    /// `--memory`.
    pub memory: Option<String>,
    /// `--kv-memory`.
    pub kv_memory: Option<String>,
    /// `--tpot-slo`, milliseconds.
    pub tpot_slo: Option<f64>,
}

/// The model a per-model option at command-line index `at` belongs to: the last `--model`
/// before it, or the first model when no `--model` comes before it.
fn owner(models: &[usize], at: usize) -> usize {
    models.iter().filter(|&&m| m < at).count().saturating_sub(1)
}

/// Puts each value of one per-model option (`flag`, at command-line indices `at`) into its
/// model's entry.
fn place<T: Clone>(
    out: &mut [ModelEntry],
    models: &[usize],
    (flag, at, values): (&str, &[usize], &[T]),
    field: fn(&mut ModelEntry) -> &mut Option<T>,
) -> Result<()> {
    for (k, v) in values.iter().enumerate() {
        // Without indices (options built in code), the values go to the models in order.
        let i = at.get(k).map_or(k, |&a| owner(models, a));
        let n = out.len();
        let e = out
            .get_mut(i)
            .ok_or_else(|| format!("{flag} is given more times than there are models ({n})"))?;
        let slot = field(e);
        if slot.is_some() {
            return Err(format!(
                "{flag} is given twice for model {} (options apply to the --model before them)",
                i + 1
            )
            .into());
        }
        *slot = Some(v.clone());
    }
    Ok(())
}

/// The models to serve, each with its options: an option applies to the `--model` before it
/// (or to the first model when it comes before every `--model`). `matches` gives the options'
/// positions on the command line.
///
/// # Errors
/// An option given twice for one model, or more times than there are models.
pub fn entries(args: &ServeArgs, matches: Option<&ArgMatches>) -> Result<Vec<ModelEntry>> {
    let n = args.model.len().max(1);
    let mut out: Vec<ModelEntry> = (0..n)
        .map(|i| ModelEntry {
            path: args.model.get(i).cloned(),
            ..Default::default()
        })
        .collect();
    let idx = |id: &str| -> Vec<usize> {
        matches
            .and_then(|m| m.indices_of(id))
            .map(Iterator::collect)
            .unwrap_or_default()
    };
    let models = idx("model");
    let (names, qos, sm) = (idx("served_model_name"), idx("qos"), idx("sm"));
    let (memory, kv, slo) = (idx("memory"), idx("kv_memory"), idx("tpot_slo"));
    let m = &models;
    place(
        &mut out,
        m,
        ("--served-model-name", &names, &args.served_model_name),
        |e| &mut e.name,
    )?;
    place(&mut out, m, ("--qos", &qos, &args.qos), |e| &mut e.qos)?;
    place(&mut out, m, ("--sm", &sm, &args.sm), |e| &mut e.sm)?;
    place(&mut out, m, ("--memory", &memory, &args.memory), |e| {
        &mut e.memory
    })?;
    place(&mut out, m, ("--kv-memory", &kv, &args.kv_memory), |e| {
        &mut e.kv_memory
    })?;
    place(&mut out, m, ("--tpot-slo", &slo, &args.tpot_slo), |e| {
        &mut e.tpot_slo
    })?;
    Ok(out)
}

/// Whether the models run under a scheduler: several of them, or a QoS class asked for.
pub fn scheduled(entries: &[ModelEntry]) -> bool {
    entries.len() > 1 || entries.iter().any(|e| e.qos.is_some())
}

/// Checks the per-model options against each other and the device (`cuda`), before any
/// model is loaded.
///
/// # Errors
/// An option its model's class cannot use, an SM share or objective out of range, a second
/// latency objective, or a reservation asked of the CPU.
pub fn check(entries: &[ModelEntry], cuda: bool) -> Result<()> {
    for (i, e) in entries.iter().enumerate() {
        let which = match &e.path {
            Some(p) => format!("--model {}", p.display()),
            None => format!("model {}", i + 1),
        };
        let class = e.qos.unwrap_or(QosClass::BestEffort);
        if let Some(s) = e.sm {
            if class != QosClass::Guaranteed {
                return Err(format!(
                    "{which}: --sm reserves SMs for a guaranteed model; add --qos guaranteed"
                )
                .into());
            }
            if !(s > 0.0 && s < 1.0) {
                return Err(format!("{which}: --sm {s}: expected a share in (0, 1)").into());
            }
        }
        if e.memory.is_some() && class == QosClass::BestEffort {
            return Err(format!(
                "{which}: --memory reserves memory for a guaranteed or burstable model; a \
                 best-effort model reserves nothing"
            )
            .into());
        }
        if !cuda && (e.sm.is_some() || e.memory.is_some()) {
            return Err(format!(
                "{which}: --sm and --memory reserve parts of a CUDA device; on the CPU the \
                 models share the cores (--qos and --tpot-slo still pace them)"
            )
            .into());
        }
        if let Some(ms) = e.tpot_slo
            && !(ms > 0.0 && ms.is_finite())
        {
            return Err(format!("{which}: --tpot-slo {ms}: expected milliseconds > 0").into());
        }
    }
    if entries.iter().filter(|e| e.tpot_slo.is_some()).count() > 1 {
        return Err(
            "--tpot-slo is for one model: the best-effort models are paced to keep \
                    that model's objective"
                .into(),
        );
    }
    Ok(())
}

/// The name a model is served under: `--served-model-name`, else its file or directory name.
pub fn served_name(entry: &ModelEntry, path: &Path) -> String {
    entry.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .or(path.file_name())
            .map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned())
    })
}

/// Bytes of a model's weights on disk: the file, or a directory's safetensors files.
fn weight_bytes_on_disk(path: &Path) -> usize {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len() as usize);
    if path.is_dir() {
        std::fs::read_dir(path)
            .map(|d| {
                d.filter_map(std::result::Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
                    .map(|p| size(&p))
                    .sum()
            })
            .unwrap_or(0)
    } else {
        size(path)
    }
}

/// A model loaded for serving.
pub struct LoadedModel {
    /// Its options.
    pub entry: ModelEntry,
    /// The name it is served under.
    pub name: String,
    /// The engine.
    pub engine: Engine,
    /// Where it runs (for a scheduled model on CUDA, a lane of its tenant).
    pub device: ComputeDevice,
}

/// Loads the models: one on the whole device when it is alone and has no class; otherwise
/// each admitted as a tenant of a scheduler over the device (all admitted before any lane
/// exists, so that the SM partitions are cut once), then loaded on a lane of its tenant. On
/// the CPU the models are loaded side by side. Returns the scheduler when there is one.
///
/// # Errors
/// A refused admission (saying what is short), bad options, a model that fails to load.
pub fn load_models(
    args: &ServeArgs,
    entries: Vec<ModelEntry>,
) -> Result<(Vec<LoadedModel>, Option<Scheduler>)> {
    let dtype = args.dtype.as_deref();
    let runtime = ComputeDevice::open_runtime(&args.device)?;
    check(&entries, runtime.is_some())?;
    let paths = entries
        .iter()
        .map(|e| model_path(e.path.as_deref()))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = entries
        .iter()
        .zip(&paths)
        .map(|(e, p)| served_name(e, p))
        .collect();
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(format!(
                "two models are served as `{n}`: give them names with --served-model-name"
            )
            .into());
        }
    }
    let (devices, scheduler) = match runtime {
        None => (entries.iter().map(|_| ComputeDevice::cpu()).collect(), None),
        Some(rt) if !scheduled(&entries) => {
            let whole = ComputeDevice::tenant(&rt.default_tenant(), LanePriority::Normal)?;
            (vec![whole], None)
        }
        Some(rt) => {
            let scheduler = rt.scheduler(SchedulerOptions::default())?;
            let total = rt.device().memory_info()?.total;
            let mut tenants = Vec::new();
            for ((entry, path), name) in entries.iter().zip(&paths).zip(&names) {
                let class = entry.qos.unwrap_or(QosClass::BestEffort);
                let mut spec = TenantSpec::new(name, class);
                if class != QosClass::BestEffort {
                    spec.memory_bytes = match &entry.memory {
                        Some(m) => parse_bytes("--memory", m, total)?,
                        // The weights, and as much again for the KV cache and the workspace.
                        None => (2 * weight_bytes_on_disk(path)).max(1 << 30),
                    };
                }
                spec.sm_share = entry.sm;
                let tenant = scheduler
                    .admit(&spec)
                    .map_err(|e| format!("model `{name}` ({}): {e}", class.name()))?;
                tenants.push(tenant);
            }
            // Lanes only once every tenant is admitted: a partition cannot be re-cut under
            // live lanes.
            let devices = tenants
                .iter()
                .map(|t| ComputeDevice::tenant(t, LanePriority::Normal))
                .collect::<gpukit_llm::Result<Vec<_>>>()?;
            (devices, Some(scheduler))
        }
    };
    let several = entries.len() > 1;
    let mut out = Vec::new();
    for (((entry, path), name), device) in entries.into_iter().zip(paths).zip(names).zip(devices) {
        let label = if several {
            format!("{name} ")
        } else {
            String::new()
        };
        let engine = load_engine_on(&path, &device, dtype, &label)?;
        out.push(LoadedModel {
            entry,
            name,
            engine,
            device,
        });
    }
    Ok((out, scheduler))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_belong_to_the_model_before_them() {
        // --qos A-opt --model A --qos g --sm 0.5 --model B --qos be
        let models = [3, 9];
        assert_eq!(owner(&models, 1), 0);
        assert_eq!(owner(&models, 5), 0);
        assert_eq!(owner(&models, 7), 0);
        assert_eq!(owner(&models, 11), 1);
        assert_eq!(owner(&[], 4), 0);
    }

    #[test]
    fn classes_and_reservations_are_checked_before_loading() {
        let g = ModelEntry {
            qos: Some(QosClass::Guaranteed),
            sm: Some(0.5),
            memory: Some("8GiB".into()),
            tpot_slo: Some(20.0),
            ..Default::default()
        };
        let be = ModelEntry {
            qos: Some(QosClass::BestEffort),
            ..Default::default()
        };
        assert!(check(&[g.clone(), be.clone()], true).is_ok());
        let bad = |e: ModelEntry, cuda: bool| check(&[e], cuda).unwrap_err().to_string();
        assert!(
            bad(
                ModelEntry {
                    sm: Some(0.5),
                    ..be.clone()
                },
                true
            )
            .contains("--qos guaranteed")
        );
        assert!(
            bad(
                ModelEntry {
                    sm: Some(1.5),
                    ..g.clone()
                },
                true
            )
            .contains("(0, 1)")
        );
        assert!(
            bad(
                ModelEntry {
                    memory: Some("1GiB".into()),
                    ..be.clone()
                },
                true
            )
            .contains("reserves nothing")
        );
        assert!(bad(g.clone(), false).contains("CUDA device"));
        assert!(
            bad(
                ModelEntry {
                    tpot_slo: Some(-1.0),
                    ..be.clone()
                },
                true
            )
            .contains("> 0")
        );
        let two = check(&[g.clone(), g], true).unwrap_err().to_string();
        assert!(two.contains("one model"), "{two}");
        assert!(scheduled(&[be]));
        assert!(!scheduled(&[ModelEntry::default()]));
    }
}
