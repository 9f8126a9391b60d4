//! Where a step's device time goes: the time between consecutive marks placed between a step's
//! kernels, summed by kind of work ([`Part`]).
//!
//! On CUDA the marks are timing events recorded on the lane's stream, so the step runs as it
//! would unprofiled (nothing waits until [`StepProfiler::finish`]) and each interval is the device
//! time between two marks (`cuEventElapsedTime`, resolution about 0.5 µs): the kernels between
//! them, and any time the device spent waiting for the host to enqueue them (a step whose host
//! side is slower than its kernels shows that wait in its parts). On the CPU backend ops run
//! synchronously and the marks are host clock readings. Recording an event costs the host about
//! a microsecond, so a server profiles a sample of its steps, not all.

use std::time::Instant;

use gpukit_driver::Event;
use gpukit_ops::{Device, Result};

/// A kind of work in a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// The projections and the LM head (GEMM or GEMV).
    Linear,
    /// KV-cache writes and attention.
    Attention,
    /// Sampling the next ids from the logits.
    Sampling,
    /// Everything else: embedding, norms, rope, residual adds, activations.
    Other,
}

impl Part {
    /// Every part, in the order of [`StepProfile::seconds`].
    pub const ALL: [Part; 4] = [Part::Linear, Part::Attention, Part::Sampling, Part::Other];

    /// The part's name as a metrics label: `linear`, `attention`, `sampling`, `other`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Linear => "linear",
            Part::Attention => "attention",
            Part::Sampling => "sampling",
            Part::Other => "other",
        }
    }

    fn index(self) -> usize {
        match self {
            Part::Linear => 0,
            Part::Attention => 1,
            Part::Sampling => 2,
            Part::Other => 3,
        }
    }
}

/// Seconds of device time by [`Part`] (indexed in the order of [`Part::ALL`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepProfile {
    /// Seconds per part.
    pub seconds: [f64; 4],
}

impl StepProfile {
    /// The seconds spent in `part`.
    pub fn get(&self, part: Part) -> f64 {
        self.seconds[part.index()]
    }

    /// The seconds of all parts together.
    pub fn total(&self) -> f64 {
        self.seconds.iter().sum()
    }

    /// Adds `other`'s seconds to these.
    pub fn add(&mut self, other: &StepProfile) {
        for (a, b) in self.seconds.iter_mut().zip(other.seconds) {
            *a += b;
        }
    }
}

enum Marks {
    Cuda {
        stream: gpukit_driver::Stream,
        /// Timing events, reused from step to step; the first `used` hold this step's marks.
        events: Vec<Event>,
        used: usize,
    },
    Host(Vec<Instant>),
}

/// Places marks between a step's kernels and sums the intervals by [`Part`].
///
/// Usage: [`start`](Self::start), then after each run of kernels of one kind
/// [`split`](Self::split) with that kind, then [`finish`](Self::finish).
pub struct StepProfiler {
    marks: Marks,
    parts: Vec<Part>,
}

impl StepProfiler {
    /// A profiler for steps on `device`.
    pub fn new(device: &Device) -> StepProfiler {
        let marks = match device {
            Device::Cuda(c) => Marks::Cuda {
                stream: c.stream().clone(),
                events: Vec::new(),
                used: 0,
            },
            _ => Marks::Host(Vec::new()),
        };
        StepProfiler {
            marks,
            parts: Vec::new(),
        }
    }

    /// Begins a step: forgets the last one's marks and places the first.
    ///
    /// # Errors
    /// Driver errors creating or recording an event.
    pub fn start(&mut self) -> Result<()> {
        self.parts.clear();
        match &mut self.marks {
            Marks::Cuda { used, .. } => *used = 0,
            Marks::Host(t) => t.clear(),
        }
        self.mark()
    }

    /// Closes the interval since the previous mark and files it under `part`.
    ///
    /// # Errors
    /// Driver errors creating or recording an event.
    pub fn split(&mut self, part: Part) -> Result<()> {
        self.parts.push(part);
        self.mark()
    }

    fn mark(&mut self) -> Result<()> {
        match &mut self.marks {
            Marks::Cuda {
                stream,
                events,
                used,
            } => {
                if *used == events.len() {
                    events.push(stream.device().new_event(true)?);
                }
                stream.record(&events[*used])?;
                *used += 1;
            }
            Marks::Host(t) => t.push(Instant::now()),
        }
        Ok(())
    }

    /// Waits for the step's last mark and returns the time between marks by part (nothing for
    /// a profiler that was not started).
    ///
    /// # Errors
    /// Asynchronous errors of the step's work.
    pub fn finish(&mut self) -> Result<StepProfile> {
        let mut profile = StepProfile::default();
        match &self.marks {
            Marks::Cuda { events, used, .. } => {
                let Some(last) = used.checked_sub(1) else {
                    return Ok(profile);
                };
                events[last].synchronize()?;
                for (i, part) in self.parts.iter().enumerate() {
                    let ms = Event::elapsed_ms(&events[i], &events[i + 1])?;
                    profile.seconds[part.index()] += f64::from(ms) / 1e3;
                }
            }
            Marks::Host(t) => {
                for (w, part) in t.windows(2).zip(&self.parts) {
                    profile.seconds[part.index()] += (w[1] - w[0]).as_secs_f64();
                }
            }
        }
        Ok(profile)
    }
}
