//! What a [`crate::Run`] says on stderr when its program gave it no observer of its own: the
//! lines `dptrain train` shows (the set-up, each evaluation with the privacy spent so far), and
//! its progress every tenth of the planned steps. `Run::quiet` silences it.

use crate::event::Event;

/// The default observer of a run whose model is scored on `evaluated_on`.
pub(crate) struct Speaker {
    evaluated_on: String,
    planned_steps: u64,
}

impl Speaker {
    /// A speaker for a run scored on `evaluated_on` ("test", say).
    pub(crate) fn new(evaluated_on: String) -> Self {
        Self { evaluated_on, planned_steps: 0 }
    }

    /// The lines `event` reads as (none for most steps).
    pub(crate) fn lines(&mut self, event: &Event) -> Vec<String> {
        match event {
            Event::Started { planned_steps, .. } => {
                self.planned_steps = *planned_steps;
                event.setup_lines()
            }
            Event::Progress { step } => {
                let tenth = (self.planned_steps / 10).max(1);
                match step % tenth == 0 && *step < self.planned_steps {
                    true => vec![format!("step {step} of {}", self.planned_steps)],
                    false => Vec::new(),
                }
            }
            Event::Evaluated { .. } => event.evaluated_line(&self.evaluated_on).into_iter().collect(),
            Event::Step { .. } => Vec::new(),
        }
    }

    /// Says `event` on stderr.
    pub(crate) fn say(&mut self, event: &Event) {
        self.lines(event).into_iter().for_each(|line| eprintln!("{line}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_speaks_at_a_tenth_of_its_steps_and_at_each_evaluation() {
        let mut speaker = Speaker::new("test".into());
        speaker.planned_steps = 50;
        let said: Vec<u64> = (1..=50).filter(|&step| !speaker.lines(&Event::Progress { step }).is_empty()).collect();
        assert_eq!(said, [5, 10, 15, 20, 25, 30, 35, 40, 45], "the last step is the final evaluation's");
        assert!(speaker.lines(&Event::Step { step: 5, loss: 0.3, accuracy: None }).is_empty());
        speaker.planned_steps = 3;
        assert_eq!(speaker.lines(&Event::Progress { step: 1 }), ["step 1 of 3"]);
    }
}
