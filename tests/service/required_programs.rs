//! Programs the tests run that the project does not build (`redis-server`, `promtool`,
//! `chromium`): a missing one fails the test that needs it, saying how to install it. It never
//! skips the test: a skipped test would let CI pass without ever running it.

/// Panics with how to install `binary` (from the Debian package `package`) if it is not on
/// `PATH`, rather than with the bare "No such file or directory" a failed spawn would give.
pub fn require_on_path(binary: &str, package: &str) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|dir| dir.join(binary).is_file()) {
        panic!("{binary} not found: install it (apt-get install -y {package}), see README");
    }
}
