//! Child processes the harness starts (fedraft nodes, simulated member clusters): spawned with their output
//! appended to a log file, killed with SIGKILL and reaped when dropped, and asked to die with the harness
//! (`PR_SET_PDEATHSIG`) so not even a SIGKILL of the harness leaves them running. It owns only processes it
//! spawned and signals them by their own pid.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};

/// A supervised child process.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Option<Child>,
    paused: bool,
}

impl Proc {
    /// Spawns `cmd` with stderr (and stdout unless `capture_stdout`) appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path, capture_stdout: bool) -> Result<Proc> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let err = file.try_clone().context("duplicating a log handle")?;
        cmd.stdin(Stdio::null()).stderr(Stdio::from(err));
        if capture_stdout {
            cmd.stdout(Stdio::piped());
        } else {
            cmd.stdout(Stdio::from(file));
        }
        // SAFETY: prctl is async-signal-safe and touches only the child being set up.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", cmd.get_program()))?;
        tracing::info!(name, pid = child.id(), "process started");
        Ok(Proc {
            name: name.to_string(),
            child: Some(child),
            paused: false,
        })
    }

    /// The child's stdout, when it was captured (taken once).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.as_mut().and_then(|c| c.stdout.take())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the process has not exited (a paused process is alive).
    pub fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn signal(&self, sig: libc::c_int) -> Result<()> {
        let Some(pid) = self.pid() else {
            anyhow::bail!("{} is not running", self.name)
        };
        let pid = libc::pid_t::try_from(pid).context("pid out of range")?;
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        if unsafe { libc::kill(pid, sig) } != 0 {
            return Err(std::io::Error::last_os_error())
                .context(format!("signal {sig} to {}", self.name));
        }
        Ok(())
    }

    /// SIGSTOP.
    pub fn pause(&mut self) -> Result<()> {
        self.signal(libc::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    /// SIGCONT (a no-op when not paused).
    pub fn resume(&mut self) -> Result<()> {
        if self.paused {
            self.signal(libc::SIGCONT)?;
            self.paused = false;
        }
        Ok(())
    }

    pub fn paused(&self) -> bool {
        self.paused
    }

    /// SIGKILL and reap; a process already gone is fine.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            tracing::info!(name = %self.name, "process killed");
        }
        self.paused = false;
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
