//! `dptrain`: differentially private training with honest privacy accounting.

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
