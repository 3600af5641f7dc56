//! The libraries' words for what a program does about an error, in `dptrain`'s flags: dp-run
//! tells a library user to call `RunFolder::resume` or set `RunOptions::overwrite`, where the
//! CLI's user types `--resume` or `--overwrite`; the engine says "the ls-sgd mechanism" where the
//! CLI's user types `--mechanism ls-sgd`. One table, applied to every error line the CLI prints,
//! so each library message has one wording per audience.

use dp_engine::privacy::mechanism::registry::BUILTIN;

/// Library words and the flags (or the CLI's own words) that do the same.
const FLAGS: [(&str, &str); 16] = [
    ("RunFolder::resume", "--resume"),
    ("RunOptions::overwrite", "--overwrite"),
    ("RunOptions::stop_after", "--stop-after"),
    ("RunOptions::keep_key", "--keep-key"),
    ("PrivacyConfig::with_seed", "--seed"),
    ("Run::new's learning rate", "--learning-rate"),
    ("another run folder", "another --out-dir"),
    ("another program is running in this folder", "another dptrain process is running in this folder"),
    ("PrivacyConfig::with_target_epsilon", "--target-epsilon"),
    ("PrivacyConfig::with_noise_multiplier", "--noise-multiplier"),
    ("(OwnData::classes)", "(--classes NAME,NAME,...)"),
    ("hold out training examples for validation", "hold out training examples with --validation N"),
    ("lower Settings::learning_rate", "lower --learning-rate"),
    ("raise Settings::lambda", "raise --lambda"),
    ("use the cpu device", "use --device cpu"),
    ("use the wgpu device", "use --device wgpu"),
];

/// `message` with the libraries' words replaced by the CLI's.
pub fn in_flags(message: &str) -> String {
    let message = FLAGS.iter().fold(message.to_string(), |m, (library, flag)| m.replace(library, flag));
    BUILTIN.iter().fold(message, |m, entry| {
        m.replace(&format!("the {} mechanism", entry.name), &format!("--mechanism {}", entry.name))
    })
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
            (
                "invalid mechanism option: `ls_sigma` applies to the ls-sgd mechanism or the ls-adam mechanism only, not to the optimized-paper mechanism",
                "invalid mechanism option: `ls_sigma` applies to --mechanism ls-sgd or --mechanism ls-adam only, not to --mechanism optimized-paper",
            ),
            (
                "ls-adam is DP-LSAdam; use the ls-sgd mechanism for SGD",
                "ls-adam is DP-LSAdam; use --mechanism ls-sgd for SGD",
            ),
            (
                "optimized-paper derives its noise from the budget (Eq. 12): give PrivacyConfig::with_target_epsilon, not PrivacyConfig::with_noise_multiplier",
                "optimized-paper derives its noise from the budget (Eq. 12): give --target-epsilon, not --noise-multiplier",
            ),
            (
                "declare the table's classes in label order (OwnData::classes): they are public input",
                "declare the table's classes in label order (--classes NAME,NAME,...): they are public input",
            ),
            (
                "holds no test: add one, or hold out training examples for validation",
                "holds no test: add one, or hold out training examples with --validation N",
            ),
            (
                "gradient descent diverged; lower Settings::learning_rate",
                "gradient descent diverged; lower --learning-rate",
            ),
            ("(Eq. 14 assumes it is); raise Settings::lambda", "(Eq. 14 assumes it is); raise --lambda"),
            (
                "no wgpu adapter could be opened (install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers, or use the cpu device)",
                "no wgpu adapter could be opened (install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers, or use --device cpu)",
            ),
            (
                "no CUDA device could be opened (an NVIDIA GPU and its driver are needed; or use the wgpu device)",
                "no CUDA device could be opened (an NVIDIA GPU and its driver are needed; or use --device wgpu)",
            ),
        ];
        for (library, cli) in cases {
            assert_eq!(in_flags(library), cli);
        }
        assert_eq!(in_flags("privacy: epsilon 3"), "privacy: epsilon 3", "other messages pass as they are");
    }
}
