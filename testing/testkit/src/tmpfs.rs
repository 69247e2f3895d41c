//! A size-limited tmpfs mounted over a test's directory, for the disk-full tests: mounted on
//! request, grown as an operator freeing space would, unmounted on drop. Must not: decide
//! whether a test runs; a refused mount is returned, and the test says it skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs, unmounted on drop.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount's notation: `16m`) at `at`; the error is mount's own
    /// message (tests run unprivileged may not mount).
    pub fn mount(at: &Path, size: &str) -> Result<Tmpfs, String> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs(at.to_path_buf()))
    }

    /// Gives the filesystem more room, as an operator freeing space would.
    pub fn grow(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .expect("running mount");
        assert!(status.success(), "remounting {} larger", self.0.display());
    }

    /// Free bytes on the filesystem.
    pub fn available(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.0)
            .output()
            .expect("running df");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df prints the free bytes")
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
