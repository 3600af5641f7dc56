//! Progress output on stderr for long work (indicatif hides it when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

/// How often a progress line redraws on its own, so its elapsed time keeps counting during a
/// long run that reports nothing.
pub const TICK: Duration = Duration::from_millis(250);

/// A spinner showing `message` and the elapsed time until it is finished.
pub fn spinner(message: &str) -> ProgressBar {
    let style = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("static template");
    let spinner = ProgressBar::new_spinner().with_style(style).with_message(message.to_string());
    spinner.enable_steady_tick(TICK);
    spinner
}
