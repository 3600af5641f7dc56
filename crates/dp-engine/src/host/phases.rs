//! Where a training step's time goes, phase by phase (`dptrain bench --phases`): the step wraps
//! each phase in [`timed`], which only runs the phase unless a [`PhaseClock`] is running on this
//! thread. The clock synchronises the device at every boundary, so that a GPU's queued work is
//! counted in the phase that queued it (the synchronisations slow such a step a little; on the
//! CPU backends, which compute eagerly, they cost nothing).

use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// One phase of a training step, in the order a DP step runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The forward pass (with the tape's records, im2col patches included, in a DP step).
    Forward,
    /// The backward pass of the summed loss (a DP step's gives dL/dz of every DP layer).
    Backward,
    /// Each example's squared gradient norm, layer by layer.
    Norms,
    /// The clip factors from the norms.
    ClipFactors,
    /// The sum of the clipped per-example gradients.
    ClippedSums,
    /// The noise: its allocation, drawing it and adding it to the sums.
    Noise,
    /// Post-processing (smoothing) and the optimiser's update.
    Update,
}

impl Phase {
    /// Every phase, in step order.
    pub const ALL: [Phase; 7] = [
        Phase::Forward,
        Phase::Backward,
        Phase::Norms,
        Phase::ClipFactors,
        Phase::ClippedSums,
        Phase::Noise,
        Phase::Update,
    ];

    /// The phase's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Norms => "norms",
            Phase::ClipFactors => "clip-factors",
            Phase::ClippedSums => "clipped-sums",
            Phase::Noise => "noise",
            Phase::Update => "update",
        }
    }
}

/// Time spent in each phase of [`Phase::ALL`], in its order.
pub type PhaseTimes = [Duration; Phase::ALL.len()];

/// The running clock of this thread: how to synchronise the device, and the times so far.
struct Clock {
    sync: Rc<dyn Fn()>,
    times: PhaseTimes,
}

thread_local! {
    static CLOCK: RefCell<Option<Clock>> = const { RefCell::new(None) };
}

/// Runs `f` as `phase`: timed (from a synchronised device to a synchronised device) while a
/// [`PhaseClock`] runs on this thread, otherwise just run. Phases do not nest: a phase timed
/// inside another is counted in both.
pub fn timed<T>(phase: Phase, f: impl FnOnce() -> T) -> T {
    let Some(sync) = CLOCK.with(|c| c.borrow().as_ref().map(|c| c.sync.clone())) else { return f() };
    sync();
    let start = Instant::now();
    let out = f();
    sync();
    let took = start.elapsed();
    CLOCK.with(|c| {
        if let Some(clock) = c.borrow_mut().as_mut() {
            clock.times[phase as usize] += took;
        }
    });
    out
}

/// Times the phases of the steps run on this thread while it lives.
pub struct PhaseClock(());

impl PhaseClock {
    /// Starts timing, with `sync` waiting for the device's queued work; None when a clock already
    /// runs on this thread.
    pub fn start(sync: impl Fn() + 'static) -> Option<Self> {
        CLOCK.with(|c| {
            let mut c = c.borrow_mut();
            if c.is_some() {
                return None;
            }
            *c = Some(Clock { sync: Rc::new(sync), times: PhaseTimes::default() });
            Some(PhaseClock(()))
        })
    }

    /// The time of each phase since the start or the last lap, and a new lap started.
    pub fn lap(&self) -> PhaseTimes {
        CLOCK.with(|c| c.borrow_mut().as_mut().map(|clock| std::mem::take(&mut clock.times)).unwrap_or_default())
    }
}

impl Drop for PhaseClock {
    fn drop(&mut self) {
        CLOCK.with(|c| c.borrow_mut().take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn phases_are_timed_only_while_a_clock_runs_and_each_lap_starts_again() {
        let syncs = Rc::new(Cell::new(0));
        assert_eq!(timed(Phase::Norms, || 7), 7, "without a clock the phase just runs");
        let counted = syncs.clone();
        let clock = PhaseClock::start(move || counted.set(counted.get() + 1)).expect("no clock yet");
        assert!(PhaseClock::start(|| ()).is_none(), "one clock per thread");
        timed(Phase::Norms, || std::thread::sleep(Duration::from_millis(20)));
        timed(Phase::Update, || ());
        assert_eq!(syncs.get(), 4, "the device is synchronised before and after each phase");
        let lap = clock.lap();
        assert!(lap[Phase::Norms as usize] >= Duration::from_millis(20), "{lap:?}");
        assert!(lap[Phase::Forward as usize].is_zero() && lap[Phase::Update as usize] < Duration::from_millis(20));
        assert!(clock.lap().iter().all(Duration::is_zero), "a lap starts from zero");
        drop(clock);
        timed(Phase::Norms, || ());
        assert_eq!(syncs.get(), 4, "a dropped clock no longer synchronises");
        assert!(PhaseClock::start(|| ()).is_some(), "and a new one can start");
    }
}
