//! The device a command asks for, opened as a run should: a GPU is proven with the smoke run of
//! the engine's kernels before it is taken (`dp_engine::OpenDevice`): one named that fails is an
//! error, and each device `auto` passed over is one line on stderr, naming it and why.

use anyhow::Result;
use dp_engine::{DeviceChoice, OpenDevice, SelectedDevice};

/// `choice` opened; a device named that cannot open is an error in one line.
pub fn open(choice: DeviceChoice) -> Result<SelectedDevice> {
    let device = choice.open()?;
    for trial in device.tried.iter().filter(|t| t.passed_over()) {
        eprintln!("note: {}", trial.line());
    }
    Ok(device)
}
