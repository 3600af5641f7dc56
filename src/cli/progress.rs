//! Progress output on stderr for long work. On a terminal, an indicatif bar; on a pipe or a log
//! file, where indicatif draws nothing, plain lines: every note, and the position at most every
//! [`LINE_EVERY`], so that a run under nohup or CI shows it is alive instead of hours of silence.

use indicatif::{ProgressBar, ProgressStyle};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// How often a progress line redraws on its own, so its elapsed time keeps counting during a
/// long run that reports nothing.
pub const TICK: Duration = Duration::from_millis(250);

/// The least time between two position lines when stderr is not a terminal.
pub const LINE_EVERY: Duration = Duration::from_secs(30);

/// A bar of `len` steps named `unit` (or a spinner when `len` is None) on a terminal, plain
/// lines elsewhere.
pub struct Progress {
    bar: ProgressBar,
    unit: &'static str,
    started: Instant,
    last_line: Cell<Option<Instant>>,
}

impl Progress {
    /// A bar counting `len` `unit`s, or a spinner showing its message when `len` is None.
    pub fn new(len: Option<u64>, unit: &'static str) -> Self {
        let (bar, template) = match len {
            Some(n) => {
                (ProgressBar::new(n), format!("{{bar:30}} {{pos}}/{{len}} {unit} {{msg}} [{{elapsed}}<{{eta}}]"))
            }
            None => (ProgressBar::new_spinner(), "{spinner} {msg} [{elapsed}]".to_string()),
        };
        let bar =
            bar.with_style(ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()));
        bar.enable_steady_tick(TICK);
        Self { bar, unit, started: Instant::now(), last_line: Cell::new(None) }
    }

    /// A spinner showing `message` until it is finished.
    pub fn spinner(message: &str) -> Self {
        let progress = Self::new(None, "");
        progress.set_message(message.to_string());
        progress
    }

    /// Prints `line` above the bar (or as a plain line).
    pub fn note(&self, line: impl AsRef<str>) {
        match self.bar.is_hidden() {
            true => eprintln!("{}", line.as_ref()),
            false => self.bar.println(line.as_ref()),
        }
    }

    /// Sets the total.
    pub fn set_length(&self, len: u64) {
        self.bar.set_length(len);
    }

    /// Sets the message (on a pipe it is printed at once: it says what starts now).
    pub fn set_message(&self, message: String) {
        if self.bar.is_hidden() && !message.is_empty() {
            self.line(&message);
        }
        self.bar.set_message(message);
    }

    /// Sets the message without printing it on a pipe (a figure that changes every step).
    pub fn set_status(&self, message: String) {
        self.bar.set_message(message);
    }

    /// Moves to `pos`; on a pipe, prints the position when [`LINE_EVERY`] has passed.
    pub fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
        let due = self.last_line.get().is_none_or(|t| t.elapsed() >= LINE_EVERY);
        if self.bar.is_hidden() && due && pos > 0 {
            let of = self.bar.length().map_or(String::new(), |n| format!("/{n}"));
            self.line(&format!("{pos}{of} {}", self.unit));
        }
    }

    /// Advances by one.
    pub fn inc(&self) {
        self.set_position(self.bar.position() + 1);
    }

    /// One plain line with the elapsed time.
    fn line(&self, what: &str) {
        self.last_line.set(Some(Instant::now()));
        eprintln!("{what} [{:.0} s]", self.started.elapsed().as_secs_f64());
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
