//! The weights of an ONNX model, and the geometry of its convolutions.
//!
//! Only the part of the ONNX protobuf schema (`onnx/onnx.proto`, IR version 3 and later) that
//! holds weights is declared: the graph's initializers (float tensors, inline) and its nodes'
//! names, inputs and attributes. prost skips every other field. A network built from the
//! weights names each layer by its PyTorch module path; the path of a `Conv` node is its node
//! name (`/flow/flows.0/enc/in_layers.0/Conv` → `flow.flows.0.enc.in_layers.0`), which finds
//! weights that the exporter folded under anonymous names (weight-normalised layers).

use std::collections::HashMap;
use std::path::Path;

use gpukit_ops::signal::Conv1d;
use prost::Message;

use crate::{Error, Result};

#[derive(Clone, PartialEq, Message)]
struct ModelProto {
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphProto>,
}

#[derive(Clone, PartialEq, Message)]
struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    node: Vec<NodeProto>,
    #[prost(message, repeated, tag = "5")]
    initializer: Vec<TensorProto>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    input: Vec<String>,
    #[prost(string, tag = "3")]
    name: String,
    #[prost(string, tag = "4")]
    op_type: String,
    #[prost(message, repeated, tag = "5")]
    attribute: Vec<AttributeProto>,
}

#[derive(Clone, PartialEq, Message)]
struct AttributeProto {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(float, tag = "2")]
    f: f32,
    #[prost(int64, tag = "3")]
    i: i64,
    #[prost(int64, repeated, tag = "8")]
    ints: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    data_type: i32,
    #[prost(float, repeated, tag = "4")]
    float_data: Vec<f32>,
    #[prost(string, tag = "8")]
    name: String,
    #[prost(bytes = "vec", tag = "9")]
    raw_data: Vec<u8>,
    #[prost(int32, tag = "14")]
    data_location: i32,
}

/// ONNX's `TensorProto.DataType.FLOAT`.
const FLOAT: i32 = 1;

/// An f32 weight: its shape and values (row-major).
#[derive(Clone, Debug, PartialEq)]
pub struct Weight {
    /// The shape.
    pub shape: Vec<usize>,
    /// The values.
    pub values: Vec<f32>,
}

/// A convolution layer as the graph runs it: weight, optional bias and geometry (PyTorch's
/// stride, symmetric padding, dilation, groups), `transposed` for `ConvTranspose`.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvLayer {
    /// `[c_out, c_in/groups, taps]` (transposed: `[c_in, c_out/groups, taps]`).
    pub weight: Weight,
    /// `[c_out]`.
    pub bias: Option<Weight>,
    /// Stride, padding, dilation and groups.
    pub geometry: Conv1d,
    /// A transposed convolution.
    pub transposed: bool,
}

/// The float weights of an ONNX file by name, and its convolutions by module path.
#[derive(Debug)]
pub struct OnnxWeights {
    file: String,
    weights: HashMap<String, Weight>,
    convs: HashMap<String, ConvLayer>,
    gathers: HashMap<String, String>,
    /// Every node's inputs by node name.
    inputs: HashMap<String, Vec<String>>,
}

impl OnnxWeights {
    /// Reads an ONNX model file.
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be read; [`Error::Format`] if it is not an ONNX model, keeps
    /// weights outside the file, or a convolution's attributes are not 1-D with symmetric
    /// padding.
    pub fn open(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// Parses ONNX model bytes; `file` names them in errors.
    ///
    /// # Errors
    /// As [`OnnxWeights::open`].
    pub fn parse(bytes: &[u8], file: &str) -> Result<Self> {
        let bad = |what: String| Error::Format {
            file: file.to_owned(),
            what,
        };
        let model = ModelProto::decode(bytes)
            .map_err(|e| bad(format!("not an ONNX model (protobuf: {e})")))?;
        let graph = model
            .graph
            .ok_or_else(|| bad("an ONNX model without a graph".into()))?;
        let mut weights = HashMap::new();
        for t in graph.initializer {
            if t.data_type != FLOAT {
                // Integer constants (shapes, indices) are the exporter's, not the network's.
                continue;
            }
            if t.data_location != 0 {
                return Err(bad(format!("weight {} is stored outside the file", t.name)));
            }
            let shape: Vec<usize> = t
                .dims
                .iter()
                .map(|&d| usize::try_from(d))
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| bad(format!("weight {} has a negative dimension", t.name)))?;
            let n: usize = shape.iter().product();
            let values: Vec<f32> = if t.raw_data.is_empty() {
                t.float_data
            } else {
                t.raw_data
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            };
            if values.len() != n {
                return Err(bad(format!(
                    "weight {} holds {} values for shape {shape:?}",
                    t.name,
                    values.len()
                )));
            }
            weights.insert(t.name, Weight { shape, values });
        }
        let mut convs = HashMap::new();
        let mut gathers = HashMap::new();
        let mut inputs = HashMap::new();
        for node in &graph.node {
            inputs.insert(node.name.clone(), node.input.clone());
            let transposed = match node.op_type.as_str() {
                "Conv" => false,
                "ConvTranspose" => true,
                "Gather" => {
                    if let Some(w) = node.input.first().filter(|w| weights.contains_key(*w)) {
                        gathers.insert(module_path(&node.name), w.clone());
                    }
                    continue;
                }
                _ => continue,
            };
            let path = module_path(&node.name);
            let get = |i: usize| {
                node.input
                    .get(i)
                    .filter(|n| !n.is_empty())
                    .map(|n| {
                        weights
                            .get(n)
                            .cloned()
                            .ok_or_else(|| bad(format!("{path}: input {n} is not a float weight")))
                    })
                    .transpose()
            };
            let weight = get(1)?.ok_or_else(|| bad(format!("{path}: no weight")))?;
            let bias = get(2)?;
            let geometry = conv_geometry(node).map_err(|e| bad(format!("{path}: {e}")))?;
            convs.insert(
                path,
                ConvLayer {
                    weight,
                    bias,
                    geometry,
                    transposed,
                },
            );
        }
        Ok(Self {
            file: file.to_owned(),
            weights,
            convs,
            gathers,
            inputs,
        })
    }

    /// The weight named `name`.
    ///
    /// # Errors
    /// [`Error::Format`] if the file has no float weight of that name.
    pub fn weight(&self, name: &str) -> Result<&Weight> {
        self.weights.get(name).ok_or_else(|| Error::Format {
            file: self.file.clone(),
            what: format!("no weight {name}"),
        })
    }

    /// The convolution at module path `path` (`dec.ups.0`).
    ///
    /// # Errors
    /// [`Error::Format`] if the graph has no convolution there.
    pub fn conv(&self, path: &str) -> Result<&ConvLayer> {
        self.convs.get(path).ok_or_else(|| Error::Format {
            file: self.file.clone(),
            what: format!("no convolution {path}"),
        })
    }

    /// The table a `Gather` at module path `path` reads (an embedding: `enc_p.emb`).
    ///
    /// # Errors
    /// [`Error::Format`] if the graph gathers from no weight there.
    pub fn embedding(&self, path: &str) -> Result<&Weight> {
        let name = self.gathers.get(path).ok_or_else(|| Error::Format {
            file: self.file.clone(),
            what: format!("no embedding {path}"),
        })?;
        self.weight(name)
    }

    /// The weight that node `node` (its ONNX name, `/dp/flows.0/Mul`) takes as input `i`: a
    /// constant the exporter folded (such as `exp(−logs)` of an affine flow).
    ///
    /// # Errors
    /// [`Error::Format`] if there is no such node, or that input is not a float weight.
    pub fn node_weight(&self, node: &str, i: usize) -> Result<&Weight> {
        let name = self
            .inputs
            .get(node)
            .and_then(|ins| ins.get(i))
            .ok_or_else(|| Error::Format {
                file: self.file.clone(),
                what: format!("no node {node} with an input {i}"),
            })?;
        self.weight(name)
    }

    /// The number of convolutions in the graph.
    pub fn conv_count(&self) -> usize {
        self.convs.len()
    }
}

/// `/flow/flows.0/enc/in_layers.0/Conv` → `flow.flows.0.enc.in_layers.0`.
fn module_path(node_name: &str) -> String {
    let parts: Vec<&str> = node_name.split('/').filter(|p| !p.is_empty()).collect();
    parts[..parts.len().saturating_sub(1)].join(".")
}

/// A `Conv`/`ConvTranspose` node's 1-D geometry.
fn conv_geometry(node: &NodeProto) -> std::result::Result<Conv1d, String> {
    let mut g = Conv1d::default();
    let one = |name: &str, v: &[i64]| -> std::result::Result<usize, String> {
        match v {
            [x] => usize::try_from(*x).map_err(|_| format!("negative {name}")),
            _ => Err(format!("{name} {v:?} is not 1-D")),
        }
    };
    for a in &node.attribute {
        match a.name.as_str() {
            "strides" => g.stride = one("strides", &a.ints)?,
            "dilations" => g.dilation = one("dilations", &a.ints)?,
            "group" => g.groups = usize::try_from(a.i).map_err(|_| "negative group")?,
            "pads" => match a.ints[..] {
                [l, r] if l == r => g.padding = usize::try_from(l).map_err(|_| "negative pad")?,
                _ => return Err(format!("pads {:?} are not symmetric 1-D", a.ints)),
            },
            "output_padding" if a.ints.iter().any(|&p| p != 0) => {
                return Err("output_padding is not supported".into());
            }
            _ => {}
        }
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv_node(name: &str, pads: Vec<i64>) -> NodeProto {
        let ints = |name: &str, ints: Vec<i64>| AttributeProto {
            name: name.into(),
            ints,
            ..Default::default()
        };
        NodeProto {
            input: vec!["x".into(), "w".into(), "b".into()],
            name: name.into(),
            op_type: "Conv".into(),
            attribute: vec![
                ints("dilations", vec![3]),
                ints("pads", pads),
                ints("strides", vec![1]),
                AttributeProto {
                    name: "group".into(),
                    i: 2,
                    ..Default::default()
                },
            ],
        }
    }

    fn tensor(name: &str, dims: Vec<i64>, values: &[f32]) -> TensorProto {
        TensorProto {
            dims,
            data_type: FLOAT,
            name: name.into(),
            raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn reads_initializers_and_convolutions_by_module_path() {
        let model = ModelProto {
            graph: Some(GraphProto {
                node: vec![conv_node("/enc/layers.0/Conv", vec![3, 3])],
                initializer: vec![
                    tensor("w", vec![2, 1, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
                    tensor("b", vec![2], &[0.5, -0.5]),
                    TensorProto {
                        dims: vec![1],
                        data_type: 7,
                        name: "shape".into(),
                        ..Default::default()
                    },
                ],
            }),
        };
        let w = OnnxWeights::parse(&model.encode_to_vec(), "t.onnx").unwrap();
        let c = w.conv("enc.layers.0").unwrap();
        assert_eq!(c.weight.shape, [2, 1, 3]);
        assert_eq!(c.bias.as_ref().unwrap().values, [0.5, -0.5]);
        assert_eq!(
            c.geometry,
            Conv1d {
                stride: 1,
                padding: 3,
                dilation: 3,
                groups: 2
            }
        );
        assert!(!c.transposed);
        assert!(w.weight("shape").is_err(), "integer constants are skipped");
        let e = w.conv("enc.layers.1").unwrap_err().to_string();
        assert!(e.contains("t.onnx") && e.contains("enc.layers.1"), "{e}");
    }

    #[test]
    fn malformed_files_are_clear_errors() {
        let e = OnnxWeights::parse(b"\xff\xff\xff", "bad.onnx").unwrap_err();
        assert!(e.to_string().contains("not an ONNX model"), "{e}");
        let lopsided = ModelProto {
            graph: Some(GraphProto {
                node: vec![conv_node("/a/Conv", vec![1, 2])],
                initializer: vec![
                    tensor("w", vec![2, 1, 3], &[0.0; 6]),
                    tensor("b", vec![2], &[0.0; 2]),
                ],
            }),
        };
        let e = OnnxWeights::parse(&lopsided.encode_to_vec(), "x.onnx").unwrap_err();
        assert!(e.to_string().contains("symmetric"), "{e}");
        let short = ModelProto {
            graph: Some(GraphProto {
                node: vec![],
                initializer: vec![tensor("w", vec![2, 3], &[0.0; 5])],
            }),
        };
        let e = OnnxWeights::parse(&short.encode_to_vec(), "x.onnx").unwrap_err();
        assert!(e.to_string().contains("5 values"), "{e}");
    }
}
