//! Runs the built `propjet` binary from the crate root, as the command-line tests do.

use std::process::{Command, Output};

/// Runs `propjet` with `args` and returns status code, stdout and stderr.
pub fn propjet(args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_propjet"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the propjet binary runs");
    let code = status
        .code()
        .expect("propjet exits with a status, not by a signal");
    (
        code,
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}
