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
    // Probing for a GPU loads the Vulkan loader, whose window-system code prints "error:
    // XDG_RUNTIME_DIR is invalid or not set" on every run without a session (ssh, containers,
    // CI). dptrain opens no window: pointing it at the temporary folder quietens it.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // SAFETY: no other thread exists yet to read the environment concurrently.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir()) }
    }
    // Burn restores an optimiser's state (on --resume) on its default device, CUDA first in a
    // CUDA build, then wgpu, and moves it to the run's device at the next step: the CPU opens on
    // every machine (a CUDA build without a driver cannot open CUDA) and initialises no GPU.
    if std::env::var_os("BURN_DEVICE").is_none() {
        // SAFETY: no other thread exists yet to read the environment concurrently.
        unsafe { std::env::set_var("BURN_DEVICE", "flex") }
    }
    cli::run()
}
