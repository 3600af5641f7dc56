//! The libraries' words for what a program does about an error, in `dptrain`'s flags: dp-run
//! tells a library user to call `RunFolder::resume` or set `RunOptions::overwrite`, where the
//! CLI's user types `--resume` or `--overwrite`. One table, applied to every error line the CLI
//! prints, so each library message has one wording per audience.

/// Library words and the flags (or the CLI's own words) that do the same.
const FLAGS: [(&str, &str); 8] = [
    ("RunFolder::resume", "--resume"),
    ("RunOptions::overwrite", "--overwrite"),
    ("RunOptions::stop_after", "--stop-after"),
    ("RunOptions::keep_key", "--keep-key"),
    ("PrivacyConfig::with_seed", "--seed"),
    ("Run::new's learning rate", "--learning-rate"),
    ("another run folder", "another --out-dir"),
    ("another program is running in this folder", "another dptrain process is running in this folder"),
];

/// `message` with the libraries' words replaced by the CLI's.
pub fn in_flags(message: &str) -> String {
    FLAGS.iter().fold(message.to_string(), |m, (library, flag)| m.replace(library, flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each library message reads, through the table, as `dptrain` printed it before the
    /// libraries had words of their own.
    #[test]
    fn library_messages_read_in_flags() {
        let cases = [
            (
                "runs/x holds another run (report.json): give RunFolder::resume to continue it, RunOptions::overwrite to replace it, or another run folder",
                "runs/x holds another run (report.json): give --resume to continue it, --overwrite to replace it, or another --out-dir",
            ),
            (
                "nothing is left to resume; start a new run with RunOptions::overwrite or another run folder",
                "nothing is left to resume; start a new run with --overwrite or another --out-dir",
            ),
            (
                "audit a whole run in one session (no RunFolder::resume or RunOptions::stop_after)",
                "audit a whole run in one session (no --resume or --stop-after)",
            ),
            (
                "RunFolder::resume takes the run's own seed (from its key file): drop PrivacyConfig::with_seed or give the run's",
                "--resume takes the run's own seed (from its key file): drop --seed or give the run's",
            ),
            (
                "loss is NaN at step 3; lower Run::new's learning rate (the last checkpoint is kept)",
                "loss is NaN at step 3; lower --learning-rate (the last checkpoint is kept)",
            ),
            (
                "is missing: a run's key file is removed when it completes (RunOptions::keep_key keeps it)",
                "is missing: a run's key file is removed when it completes (--keep-key keeps it)",
            ),
            (
                "another program is running in this folder (it holds its lock): wait for it to end, or give another run folder",
                "another dptrain process is running in this folder (it holds its lock): wait for it to end, or give another --out-dir",
            ),
        ];
        for (library, cli) in cases {
            assert_eq!(in_flags(library), cli);
        }
        assert_eq!(in_flags("privacy: epsilon 3"), "privacy: epsilon 3", "other messages pass as they are");
    }
}
