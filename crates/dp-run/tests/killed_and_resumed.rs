//! The library example's run killed with SIGKILL mid-run (a child process: this program run
//! again with the folder in `DP_RUN_CHILD`), then resumed: it ends with the report and metrics
//! of an uninterrupted run of the same seed, and resuming a completed run is refused. Killed
//! before its first step, it resumes too (a run is checkpointed before it takes one).

#[path = "../examples/resumable_run.rs"]
#[allow(dead_code)]
mod example;

use dp_run::RunOptions;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The child's environment variable: the folder it trains in.
const CHILD: &str = "DP_RUN_CHILD";
/// The child's pause after each step, in milliseconds.
const PAUSE: &str = "DP_RUN_CHILD_PAUSE_MS";

/// The steps a run of the example plans (2,000 examples, lots of 100, 5 epochs).
const PLANNED: usize = 100;

/// The report without what differs between two runs of one seed (the time and the folder).
fn comparable(dir: &Path) -> Value {
    let mut report: Value = serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    for key in ["seconds", "run_dir", "curves"] {
        report.as_object_mut().unwrap().remove(key);
    }
    report
}

/// Steps logged in a run folder's metrics so far.
fn logged(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("metrics.jsonl")).map_or(0, |m| m.lines().count())
}

fn main() {
    if let Some(dir) = std::env::var_os(CHILD) {
        // The child: trains slowly (the pauses change no result) until it is killed.
        let pause = std::env::var(PAUSE).ok().and_then(|p| p.parse().ok()).unwrap_or(40);
        example::train(Path::new(&dir), false, RunOptions::default(), |_| {
            std::thread::sleep(Duration::from_millis(pause))
        })
        .unwrap();
        return;
    }
    killed_before_its_first_step_it_resumes();
    let tmp = tempfile::tempdir().unwrap();
    let (whole, killed) = (tmp.path().join("whole"), tmp.path().join("killed"));
    let uninterrupted = example::train(&whole, false, RunOptions::default(), |_| {}).unwrap();
    assert!(uninterrupted.completed && uninterrupted.steps == PLANNED as u64);

    let mut child = Command::new(std::env::current_exe().unwrap()).env(CHILD, &killed).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    // Killed after its first checkpoints, between two of them, with metrics logged past the last.
    while !(killed.join("checkpoint.bin").exists() && logged(&killed) >= 4) {
        assert!(Instant::now() < deadline && child.try_wait().unwrap().is_none(), "the child ended or hung");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(130));
    child.kill().unwrap(); // SIGKILL
    assert!(!child.wait().unwrap().success(), "killed mid-run");
    assert!(!killed.join("report.json").exists(), "the child did not finish");
    assert!(killed.join("run.key").exists(), "the key file stays until the run completes");
    let lines_at_kill = logged(&killed);

    let resumed = example::train(&killed, true, RunOptions::default(), |_| {}).unwrap();
    assert!(resumed.completed && !resumed.interrupted);
    assert_eq!(comparable(&killed), comparable(&whole), "the resumed run's report is the uninterrupted one's");
    let metrics = |dir: &Path| std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics(&killed), metrics(&whole), "and so are its metrics, line for line");
    assert!(!killed.join("run.key").exists(), "the key file goes when the run completes");
    let again = example::train(&killed, true, RunOptions::default(), |_| {}).unwrap_err().to_string();
    assert!(again.contains("the run is complete"), "{again}");
    println!("killed with {lines_at_kill} metrics lines logged; resumed to the uninterrupted report and metrics");
}

/// A child killed as soon as its checkpoint appears, before its first step (it pauses 3 s per
/// step; the cadence's first checkpoint comes at step 5), resumes to the uninterrupted run.
fn killed_before_its_first_step_it_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let (whole, killed) = (tmp.path().join("whole"), tmp.path().join("killed"));
    example::train(&whole, false, RunOptions::default(), |_| {}).unwrap();
    let mut child =
        Command::new(std::env::current_exe().unwrap()).env(CHILD, &killed).env(PAUSE, "3000").spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !killed.join("checkpoint.bin").exists() {
        assert!(Instant::now() < deadline && child.try_wait().unwrap().is_none(), "the child ended or hung");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success(), "killed");
    assert_eq!(logged(&killed), 0, "killed before a step was logged");
    let resumed = example::train(&killed, true, RunOptions::default(), |_| {}).unwrap();
    assert!(resumed.completed);
    assert_eq!(comparable(&killed), comparable(&whole), "resumed from step 0 with its own keys");
    println!("killed before its first step; resumed to the uninterrupted report");
}
