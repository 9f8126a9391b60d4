//! `GET /metrics`: the engines' counters, gauges and histograms in the Prometheus text
//! exposition format (version 0.0.4), every series labelled with its `model`.

use std::fmt::Write;

use gpukit_llm::profile::Part;
use gpukit_llm::serving::{Histogram, Metrics};

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// `model="…"` with the label value escaped as the format asks.
fn model_label(model: &str) -> String {
    let v = model
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("model=\"{v}\"")
}

/// One family with a sample per model: `value` picks the number out of a model's metrics.
fn scalar(
    out: &mut String,
    all: &[(String, Metrics)],
    (name, kind, help): (&str, &str, &str),
    value: impl Fn(&Metrics) -> f64,
) {
    family(out, name, kind, help);
    for (model, m) in all {
        let _ = writeln!(out, "{name}{{{}}} {}", model_label(model), value(m));
    }
}

fn histogram(
    out: &mut String,
    all: &[(String, Metrics)],
    (name, help): (&str, &str),
    pick: impl Fn(&Metrics) -> &Histogram,
) {
    family(out, name, "histogram", help);
    for (model, m) in all {
        let (l, h) = (model_label(model), pick(m));
        let mut cumulative = 0;
        for (bound, count) in h.bounds.iter().zip(&h.counts) {
            cumulative += count;
            let _ = writeln!(out, "{name}_bucket{{{l},le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{l},le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum{{{l}}} {}", h.sum);
        let _ = writeln!(out, "{name}_count{{{l}}} {}", h.count);
    }
}

type Pick = fn(&Metrics) -> f64;

/// The exposition text of every model's metrics.
pub fn render(all: &[(String, Metrics)]) -> String {
    let mut out = String::new();
    let o = &mut out;
    let counters: [(&str, &str, Pick); 11] = [
        ("gpukit_requests_total", "Requests accepted.", |m| {
            m.requests_total as f64
        }),
        (
            "gpukit_requests_rejected_total",
            "Requests refused: invalid, or the queue full.",
            |m| m.requests_rejected as f64,
        ),
        (
            "gpukit_requests_finished_total",
            "Requests finished, failed or cancelled.",
            |m| m.requests_finished as f64,
        ),
        (
            "gpukit_prompt_tokens_total",
            "Prompt tokens of accepted requests.",
            |m| m.prompt_tokens_total as f64,
        ),
        (
            "gpukit_prompt_tokens_cached_total",
            "Prompt tokens whose keys and values came from the prefix cache.",
            |m| m.cached_prompt_tokens_total as f64,
        ),
        ("gpukit_generation_tokens_total", "Tokens generated.", |m| {
            m.generated_tokens_total as f64
        }),
        (
            "gpukit_preemptions_total",
            "Sequences preempted (recomputed later) for lack of KV-cache blocks.",
            |m| m.preemptions_total as f64,
        ),
        ("gpukit_engine_steps_total", "Engine steps run.", |m| {
            m.steps_total as f64
        }),
        (
            "gpukit_engine_profiled_steps_total",
            "Engine steps profiled (--profile-every).",
            |m| m.profiled_steps as f64,
        ),
        (
            "gpukit_engine_paced_total",
            "Times a best-effort model's engine held a step back to keep another model's \
             --tpot-slo.",
            |m| m.paced_total as f64,
        ),
        (
            "gpukit_engine_paced_seconds_total",
            "Time a best-effort model's engine spent holding steps back.",
            |m| m.paced_seconds,
        ),
    ];
    for (name, help, v) in counters {
        scalar(o, all, (name, "counter", help), v);
    }
    let gauges: [(&str, &str, Pick); 6] = [
        (
            "gpukit_requests_running",
            "Sequences in the running batch.",
            |m| m.running as f64,
        ),
        (
            "gpukit_requests_waiting",
            "Requests waiting to start (queue depth).",
            |m| m.waiting as f64,
        ),
        (
            "gpukit_batch_sequences",
            "Sequences in the last engine step.",
            |m| m.last_batch_sequences as f64,
        ),
        (
            "gpukit_batch_tokens",
            "Tokens (rows) in the last engine step.",
            |m| m.last_batch_tokens as f64,
        ),
        (
            "gpukit_kv_blocks_in_use",
            "KV-cache blocks held by sequences.",
            |m| m.kv_blocks_in_use as f64,
        ),
        ("gpukit_kv_blocks_total", "KV-cache blocks.", |m| {
            m.kv_blocks_total as f64
        }),
    ];
    for (name, help, v) in gauges {
        scalar(o, all, (name, "gauge", help), v);
    }
    family(
        o,
        "gpukit_engine_step_seconds_total",
        "counter",
        "Time engine steps spent per phase: schedule (choosing rows, preempting, block tables), \
         forward (enqueueing the forward pass; on the CPU, the pass itself), sample (waiting for \
         the device's forward pass, then sampling, until the ids are on the host), output \
         (detokenizing, handing out results).",
    );
    for (model, m) in all {
        let l = model_label(model);
        for (phase, v) in [
            ("schedule", m.schedule_seconds),
            ("forward", m.forward_seconds),
            ("sample", m.sample_seconds),
            ("output", m.output_seconds),
        ] {
            let _ = writeln!(
                o,
                "gpukit_engine_step_seconds_total{{{l},phase=\"{phase}\"}} {v}"
            );
        }
    }
    family(
        o,
        "gpukit_engine_profiled_device_seconds_total",
        "counter",
        "Device time of the profiled steps by kind of work: linear (projections and the LM \
         head), attention (KV-cache writes and attention), sampling, other (embedding, norms, \
         rope, residual adds, activations).",
    );
    for (model, m) in all {
        let l = model_label(model);
        for part in Part::ALL {
            let _ = writeln!(
                o,
                "gpukit_engine_profiled_device_seconds_total{{{l},part=\"{}\"}} {}",
                part.name(),
                m.profile.get(part)
            );
        }
    }
    histogram(
        o,
        all,
        (
            "gpukit_time_to_first_token_seconds",
            "Time from a request's arrival to its first token.",
        ),
        |m| &m.ttft,
    );
    histogram(
        o,
        all,
        (
            "gpukit_time_per_output_token_seconds",
            "Time per output token after the first, per request.",
        ),
        |m| &m.tpot,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_every_family_is_typed() {
        let m = Metrics {
            requests_total: 3,
            ttft: Histogram {
                bounds: vec![0.1, 1.0],
                counts: vec![1, 2, 1],
                sum: 2.5,
                count: 4,
            },
            ..Metrics::default()
        };
        let other = Metrics {
            requests_total: 5,
            ..Metrics::default()
        };
        let text = render(&[("a".into(), m), ("b\"2".into(), other)]);
        assert!(text.contains("gpukit_requests_total{model=\"a\"} 3\n"));
        assert!(text.contains("gpukit_requests_total{model=\"b\\\"2\"} 5\n"));
        assert_eq!(text.matches("# TYPE gpukit_requests_total ").count(), 1);
        let bucket = "gpukit_time_to_first_token_seconds_bucket{model=\"a\",";
        assert!(text.contains(&format!("{bucket}le=\"0.1\"}} 1\n")));
        assert!(text.contains(&format!("{bucket}le=\"1\"}} 3\n")));
        assert!(text.contains(&format!("{bucket}le=\"+Inf\"}} 4\n")));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let base = name
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            assert!(
                text.contains(&format!("# TYPE {base} ")),
                "{name} has no TYPE line"
            );
        }
    }
}
