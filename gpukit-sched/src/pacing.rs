//! A [`Pacer`] shared between threads: the guaranteed tenant's thread reports its steps, the
//! best-effort threads ask before each launch.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::policy::Pacer;

/// A [`Pacer`] behind a lock, with the clock its slices are counted on. Cheap to clone; clones
/// share the pacer.
#[derive(Clone, Debug)]
pub struct SharedPacer {
    pacer: Arc<Mutex<Pacer>>,
    epoch: Instant,
}

impl SharedPacer {
    /// Shares `pacer`; its clock starts now.
    pub fn new(pacer: Pacer) -> Self {
        SharedPacer {
            pacer: Arc::new(Mutex::new(pacer)),
            epoch: Instant::now(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pacer> {
        // The pacer's state is valid after any panic elsewhere: a poisoned lock is still used.
        self.pacer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Feeds one guaranteed step's wall time ([`Pacer::observe`]).
    pub fn observe(&self, step: Duration) {
        self.lock().observe(step);
    }

    /// Asks to start one best-effort launch now: `Ok` when the slice's budget allows it (and
    /// counts it), or `Err` with how long until the next slice.
    ///
    /// # Errors
    /// Not an error condition: `Err(wait)` means "held back", to be asked again after `wait`.
    pub fn try_launch(&self) -> Result<(), Duration> {
        let now = self.epoch.elapsed();
        let mut p = self.lock();
        if p.try_launch(now) {
            Ok(())
        } else {
            Err(p.wait(now))
        }
    }

    /// The current budget of launches per slice.
    pub fn budget(&self) -> u32 {
        self.lock().budget()
    }

    /// The guaranteed tenant's step-time objective.
    pub fn objective(&self) -> Duration {
        self.lock().objective()
    }
}
