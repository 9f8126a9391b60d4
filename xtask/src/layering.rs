//! The layering rule: a gpukit crate depends only on crates of lower layers.

use anyhow::{Context, Result};

/// The layer of each workspace crate, bottom first. Crates of one layer may not depend on each
/// other (`gpukit-llm` and `gpukit-audio`; `gpukit-cli` and `gpukit-py`). `xtask` stands outside
/// the layers: it may use any crate, and no crate may use it.
pub const LAYERS: &[(&str, u32)] = &[
    ("gpukit-driver", 0),
    ("gpukit-mem", 1),
    ("gpukit-sched", 2),
    ("gpukit-kernels", 3),
    ("gpukit-ops", 4),
    ("gpukit-llm", 5),
    ("gpukit-audio", 5),
    ("gpukit-cli", 6),
    ("gpukit-py", 6),
];

const TOOL: &str = "xtask";

fn layer(name: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

/// Checks dependency edges `(crate, depends on)` between workspace crates; returns one message per
/// violation.
pub fn violations(workspace: &[String], edges: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for krate in workspace {
        if krate != TOOL && layer(krate).is_none() {
            out.push(format!(
                "{krate} is not in the layer table (xtask/src/layering.rs): give it a layer"
            ));
        }
    }
    for (from, to) in edges {
        if from == TOOL {
            continue;
        }
        if to == TOOL {
            out.push(format!(
                "{from} depends on xtask, which is a development tool"
            ));
            continue;
        }
        if let (Some(lf), Some(lt)) = (layer(from), layer(to))
            && lt >= lf
        {
            let how = if lt == lf { "beside" } else { "above" };
            out.push(format!(
                "{from} (layer {lf}) depends on {to} (layer {lt}), which is {how} it"
            ));
        }
    }
    out
}

/// Reads `cargo metadata` for the workspace and returns the violations.
pub fn check_workspace() -> Result<Vec<String>> {
    let meta = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("running cargo metadata")?;
    let members: Vec<String> = meta
        .workspace_packages()
        .iter()
        .map(|p| p.name.to_string())
        .collect();
    let mut edges = Vec::new();
    for p in meta.workspace_packages() {
        for d in &p.dependencies {
            if members.contains(&d.name) {
                edges.push((p.name.to_string(), d.name.clone()));
            }
        }
    }
    Ok(violations(&members, &edges))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn e(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn workspace_respects_layers() {
        let v = check_workspace().unwrap();
        assert!(v.is_empty(), "layering violations:\n{}", v.join("\n"));
    }

    #[test]
    fn every_workspace_crate_has_a_layer() {
        let meta = cargo_metadata::MetadataCommand::new()
            .no_deps()
            .exec()
            .unwrap();
        let names: Vec<String> = meta
            .workspace_packages()
            .iter()
            .map(|p| p.name.to_string())
            .collect();
        for (name, _) in LAYERS {
            assert!(
                names.iter().any(|n| n == name),
                "{name} missing from the workspace"
            );
        }
        assert!(names.iter().any(|n| n == TOOL));
    }

    /// A crate doc that names its layer (`(layer N, …`) names the one in [`LAYERS`].
    #[test]
    fn crate_docs_name_their_layer() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for (name, layer) in LAYERS {
            let lib = root.join(name).join("src/lib.rs");
            let Ok(text) = std::fs::read_to_string(&lib) else {
                continue;
            };
            if let Some(at) = text.find("(layer ") {
                let n: String = text[at + 7..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                assert_eq!(n, layer.to_string(), "{} says layer {n}", lib.display());
            }
        }
    }

    #[test]
    fn upward_sideways_and_tool_edges_are_rejected() {
        let ws = s(&[
            "gpukit-driver",
            "gpukit-mem",
            "gpukit-llm",
            "gpukit-audio",
            "xtask",
        ]);
        let bad = e(&[
            ("gpukit-driver", "gpukit-mem"),
            ("gpukit-llm", "gpukit-audio"),
            ("gpukit-mem", "xtask"),
        ]);
        let v = violations(&ws, &bad);
        assert_eq!(v.len(), 3, "{v:?}");
        assert!(v[0].contains("above"), "{}", v[0]);
        assert!(v[1].contains("beside"), "{}", v[1]);
        assert!(v[2].contains("development tool"), "{}", v[2]);
    }

    #[test]
    fn downward_edges_and_the_tool_are_accepted() {
        let ws = s(&["gpukit-driver", "gpukit-ops", "gpukit-cli", "xtask"]);
        let ok = e(&[
            ("gpukit-ops", "gpukit-driver"),
            ("gpukit-cli", "gpukit-ops"),
            ("xtask", "gpukit-cli"),
        ]);
        assert!(violations(&ws, &ok).is_empty());
    }

    #[test]
    fn unknown_crates_must_be_placed() {
        let v = violations(&s(&["gpukit-new"]), &[]);
        assert_eq!(v.len(), 1);
        assert!(v[0].contains("gpukit-new"));
    }
}
