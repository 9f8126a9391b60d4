//! The OpenAI API's request bodies, as this server reads them, and its error format.
//!
//! Bodies are parsed strictly: a field the server does not know is an error that names it (a
//! silently ignored option is a wrong answer later), and options it knows but does not offer
//! (`n` > 1, the frequency and presence penalties, top alternatives) are refused with a message
//! saying so. [`parse`] reads the shared fields ([`Common`]) and the endpoint's own from one
//! object, so that a field of the wrong type is named in the error.

use serde::Deserialize;
use serde_json::{Value, json};

/// An OpenAI-style error: the HTTP status, the body's `error.type`, `code` and message.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<&'static str>,
    pub message: String,
}

impl ApiError {
    /// 400: the request cannot be served as sent.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            kind: "invalid_request_error",
            code: None,
            param: None,
            message: message.into(),
        }
    }

    /// 400 naming the parameter at fault.
    pub fn param(param: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            param: Some(param),
            ..ApiError::invalid(message)
        }
    }

    /// The body: `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

/// `stop`: one string or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

impl Stop {
    fn list(self) -> Vec<String> {
        match self {
            Stop::One(s) => vec![s],
            Stop::Many(v) => v,
        }
    }
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// The fields of [`Common`].
const COMMON_FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "n",
    "frequency_penalty",
    "presence_penalty",
    "user",
    "ignore_eos",
];

/// The fields of [`ChatRequest`] besides the shared ones.
pub const CHAT_FIELDS: &[&str] = &[
    "messages",
    "max_completion_tokens",
    "logprobs",
    "top_logprobs",
];

/// The fields of [`CompletionRequest`] besides the shared ones.
pub const COMPLETION_FIELDS: &[&str] = &["prompt", "logprobs", "echo", "suffix"];

/// What both endpoints share: sampling, limits, streaming, and the options refused unless at
/// their defaults.
#[derive(Debug, Default, Deserialize)]
pub struct Common {
    pub model: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    /// gpukit (and vLLM) extensions.
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub seed: Option<u64>,
    pub stop: Option<Stop>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub n: Option<u64>,
    pub frequency_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    /// gpukit (and vLLM) extension: generate `max_tokens` whatever the model says.
    #[serde(default)]
    pub ignore_eos: bool,
    // `user` (an end-user id for abuse monitoring) is accepted by name and not used.
}

/// A chat message's content: text, or a list of parts of which only text ones are taken.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Value>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    pub role: String,
    pub content: Option<Content>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub logprobs: bool,
    pub top_logprobs: Option<u64>,
}

/// A completion prompt: text, token ids, or a list of one of either.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PromptIn {
    Text(String),
    Ids(Vec<u32>),
    Texts(Vec<String>),
    IdLists(Vec<Vec<u32>>),
}

/// `POST /v1/completions`.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    pub prompt: PromptIn,
    /// Log-probabilities of the chosen tokens when set (only 0 alternatives are offered).
    pub logprobs: Option<u64>,
    #[serde(default)]
    pub echo: bool,
    pub suffix: Option<String>,
}

/// Parses a JSON object body into the endpoint's fields `T` (named in `fields`) and the shared
/// ones. A field outside both lists is refused by name, as is a field of the wrong type (its
/// path and serde's message), with a 400.
pub fn parse<T: serde::de::DeserializeOwned>(
    body: &[u8],
    fields: &[&str],
) -> Result<(T, Common), ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the body is not valid JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(ApiError::invalid("the body must be a JSON object"));
    };
    if let Some(k) = map
        .keys()
        .find(|k| !COMMON_FIELDS.contains(&k.as_str()) && !fields.contains(&k.as_str()))
    {
        let mut known: Vec<&str> = COMMON_FIELDS.iter().chain(fields).copied().collect();
        known.sort_unstable();
        return Err(ApiError::invalid(format!(
            "unknown field `{k}`; this server takes {}",
            known.join(", ")
        )));
    }
    let (own, shared): (serde_json::Map<String, Value>, _) = map
        .into_iter()
        .partition(|(k, _)| fields.contains(&k.as_str()));
    fn typed<U: serde::de::DeserializeOwned>(
        m: serde_json::Map<String, Value>,
    ) -> Result<U, ApiError> {
        serde_path_to_error::deserialize(Value::Object(m)).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            match path.as_str() {
                "." => ApiError::invalid(format!("invalid request: {inner}")),
                _ => ApiError::invalid(format!("invalid `{path}`: {inner}")),
            }
        })
    }
    Ok((typed(own)?, typed(shared)?))
}

/// Sampling and limits from the shared fields, checked.
pub struct Sampling {
    pub max_tokens: Option<usize>,
    pub params: gpukit_ops::sampling::SamplingParams,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    pub ignore_eos: bool,
}

impl Common {
    /// Checks the options and turns them into the engine's; `max_tokens` from the endpoint's
    /// own field where it has one.
    pub fn sampling(self, max_tokens: Option<u64>) -> Result<Sampling, ApiError> {
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::param(
                "n",
                "n must be 1: send one request per completion (they are batched together)",
            ));
        }
        for (name, v) in [
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
        ] {
            if v.is_some_and(|v| v != 0.0) {
                return Err(ApiError::param(
                    if name == "frequency_penalty" {
                        "frequency_penalty"
                    } else {
                        "presence_penalty"
                    },
                    format!("{name} is not offered; use repetition_penalty (1 = none) instead"),
                ));
            }
        }
        if self.stream_options.is_some() && !self.stream {
            return Err(ApiError::param(
                "stream_options",
                "stream_options is only allowed with stream: true",
            ));
        }
        let max_tokens = match max_tokens.or(self.max_tokens) {
            Some(0) => {
                return Err(ApiError::param(
                    "max_tokens",
                    "max_tokens must be at least 1",
                ));
            }
            Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            None => None,
        };
        let top_k = match self.top_k {
            None | Some(-1) => 0,
            Some(k) if k >= 0 => k as usize,
            Some(k) => {
                return Err(ApiError::param(
                    "top_k",
                    format!("top_k {k}: expected -1 or 0 (all tokens) or a positive count"),
                ));
            }
        };
        let params = gpukit_ops::sampling::SamplingParams {
            temperature: self.temperature.unwrap_or(1.0),
            top_k,
            top_p: self.top_p.unwrap_or(1.0),
            min_p: self.min_p.unwrap_or(0.0),
            repetition_penalty: self.repetition_penalty.unwrap_or(1.0),
            seed: self.seed.unwrap_or(0),
        };
        params
            .validate()
            .map_err(|e| ApiError::invalid(format!("invalid sampling parameters: {e}")))?;
        let stop = self.stop.map(Stop::list).unwrap_or_default();
        if stop.len() > 4 || stop.iter().any(String::is_empty) {
            return Err(ApiError::param(
                "stop",
                "stop takes up to 4 non-empty strings",
            ));
        }
        Ok(Sampling {
            max_tokens,
            params,
            stop,
            stream: self.stream,
            include_usage: self.stream_options.is_some_and(|o| o.include_usage),
            ignore_eos: self.ignore_eos,
        })
    }
}

/// The text of a message's content: the string, or its text parts joined.
pub fn content_text(content: Option<Content>) -> Result<String, ApiError> {
    match content {
        None => Ok(String::new()),
        Some(Content::Text(s)) => Ok(s),
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => text.push_str(t),
                    (kind, _) => {
                        return Err(ApiError::param(
                            "messages",
                            format!(
                                "content part of type {}: only text parts are accepted",
                                kind.unwrap_or("(none)")
                            ),
                        ));
                    }
                }
            }
            Ok(text)
        }
    }
}
