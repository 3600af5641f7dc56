//! `dptrain`: differentially private training with honest privacy accounting.

mod cli;

fn main() -> std::process::ExitCode {
    // Die quietly on a closed pipe (`dptrain ... | head`), as command-line tools do, instead of
    // panicking inside println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::run()
}
