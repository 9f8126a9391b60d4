//! `GET /metrics`: the engine's counters, gauges and histograms in the Prometheus text
//! exposition format (version 0.0.4).

use std::fmt::Write;

use gpukit_llm::profile::Part;
use gpukit_llm::serving::{Histogram, Metrics};

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn scalar(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    family(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram) {
    family(out, name, "histogram", help);
    let mut cumulative = 0;
    for (bound, count) in h.bounds.iter().zip(&h.counts) {
        cumulative += count;
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum {}", h.sum);
    let _ = writeln!(out, "{name}_count {}", h.count);
}

/// The exposition text of `m`.
pub fn render(m: &Metrics) -> String {
    let mut out = String::new();
    let o = &mut out;
    let counters: [(&str, &str, u64); 9] = [
        (
            "gpukit_requests_total",
            "Requests accepted.",
            m.requests_total,
        ),
        (
            "gpukit_requests_rejected_total",
            "Requests refused: invalid, or the queue full.",
            m.requests_rejected,
        ),
        (
            "gpukit_requests_finished_total",
            "Requests finished, failed or cancelled.",
            m.requests_finished,
        ),
        (
            "gpukit_prompt_tokens_total",
            "Prompt tokens of accepted requests.",
            m.prompt_tokens_total,
        ),
        (
            "gpukit_prompt_tokens_cached_total",
            "Prompt tokens whose keys and values came from the prefix cache.",
            m.cached_prompt_tokens_total,
        ),
        (
            "gpukit_generation_tokens_total",
            "Tokens generated.",
            m.generated_tokens_total,
        ),
        (
            "gpukit_preemptions_total",
            "Sequences preempted (recomputed later) for lack of KV-cache blocks.",
            m.preemptions_total,
        ),
        (
            "gpukit_engine_steps_total",
            "Engine steps run.",
            m.steps_total,
        ),
        (
            "gpukit_engine_profiled_steps_total",
            "Engine steps profiled (--profile-every).",
            m.profiled_steps,
        ),
    ];
    for (name, help, v) in counters {
        scalar(o, name, "counter", help, v as f64);
    }
    let gauges: [(&str, &str, usize); 6] = [
        (
            "gpukit_requests_running",
            "Sequences in the running batch.",
            m.running,
        ),
        (
            "gpukit_requests_waiting",
            "Requests waiting to start (queue depth).",
            m.waiting,
        ),
        (
            "gpukit_batch_sequences",
            "Sequences in the last engine step.",
            m.last_batch_sequences,
        ),
        (
            "gpukit_batch_tokens",
            "Tokens (rows) in the last engine step.",
            m.last_batch_tokens,
        ),
        (
            "gpukit_kv_blocks_in_use",
            "KV-cache blocks held by sequences.",
            m.kv_blocks_in_use,
        ),
        (
            "gpukit_kv_blocks_total",
            "KV-cache blocks.",
            m.kv_blocks_total,
        ),
    ];
    for (name, help, v) in gauges {
        scalar(o, name, "gauge", help, v as f64);
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
    for (phase, v) in [
        ("schedule", m.schedule_seconds),
        ("forward", m.forward_seconds),
        ("sample", m.sample_seconds),
        ("output", m.output_seconds),
    ] {
        let _ = writeln!(
            o,
            "gpukit_engine_step_seconds_total{{phase=\"{phase}\"}} {v}"
        );
    }
    family(
        o,
        "gpukit_engine_profiled_device_seconds_total",
        "counter",
        "Device time of the profiled steps by kind of work: linear (projections and the LM \
         head), attention (KV-cache writes and attention), sampling, other (embedding, norms, \
         rope, residual adds, activations).",
    );
    for part in Part::ALL {
        let _ = writeln!(
            o,
            "gpukit_engine_profiled_device_seconds_total{{part=\"{}\"}} {}",
            part.name(),
            m.profile.get(part)
        );
    }
    histogram(
        o,
        "gpukit_time_to_first_token_seconds",
        "Time from a request's arrival to its first token.",
        &m.ttft,
    );
    histogram(
        o,
        "gpukit_time_per_output_token_seconds",
        "Time per output token after the first, per request.",
        &m.tpot,
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
        let text = render(&m);
        assert!(text.contains("gpukit_requests_total 3\n"));
        assert!(text.contains("gpukit_time_to_first_token_seconds_bucket{le=\"0.1\"} 1\n"));
        assert!(text.contains("gpukit_time_to_first_token_seconds_bucket{le=\"1\"} 3\n"));
        assert!(text.contains("gpukit_time_to_first_token_seconds_bucket{le=\"+Inf\"} 4\n"));
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
