//! The named failpoints at fedraft's durability seams, and their configuration from the
//! `FAILPOINTS` environment variable. This is the one table of failpoints; each name is a stable
//! interface of the crash tests (`fedraft/tests/it/failpoints.rs`) and of `ROBUSTNESS.md`.
//!
//! Failpoints are compiled in only with the `failpoints` cargo feature (of this crate, of
//! fedraft-raft and of fedraft-executors, all forwarding to the `fail` crate's); without it every
//! `fail_point!` expands to nothing and [`configure_from_env`] only warns when `FAILPOINTS` is
//! set. Product builds never turn it on; fedraft's own tests do, from a dev-dependency.
//!
//! | name | where | `return` takes the path of |
//! | --- | --- | --- |
//! | `store::wal_sync` | `store/src/writer.rs`, the group commit's WAL fsync | a failed fsync |
//! | `store::after_wal_sync` | `store/src/writer.rs`, after the fsync, before the appends' durability callbacks | a failed fsync |
//! | `store::audit_write` | `store/src/writer.rs`, the audit records of applied commands | a failed write |
//! | `store::checkpoint_write` | `store/src/db.rs`, a periodic state checkpoint | a failed write |
//! | `store::snapshot_write` | `store/src/db.rs`, a snapshot this node built | a failed write |
//! | `store::snapshot_install` | `store/src/writer.rs`, a snapshot received from the leader | a failed write |
//! | `store::log_purge` | `store/src/writer.rs`, deleting the log up to a snapshot | a failed write |
//! | `raft::peer_send` | `raft/src/network/client.rs`, before an RPC to a peer leaves | an unreachable peer |
//! | `raft::peer_receive` | `raft/src/network/server.rs`, before a peer's RPC is handled | a failed RPC (HTTP 500) |
//! | `raft::append_entry` | `raft/src/network/client.rs`, an AppendEntries about to leave | `return(MS)` waits MS per entry first: a link whose transfer time grows with the batch |
//! | `raft::health_hash` | `raft/src/node/health.rs`, the state hash a node reports in its health | a hash that differs from the other members' (reporting only) |
//! | `executors::member_write` | `executors/src/reconciler.rs`, before a server-side apply to a member | a failed API call |
//!
//! Actions are the `fail` crate's: `return` (the seam's error path, with the failpoint's name in
//! the message), `panic` (a crash: with failpoints configured a panic on any thread aborts the
//! process, so it is the same as being killed there), `sleep(MS)`, `off`, with `N*` counts,
//! `P%` chances and `->` sequences. `FAILPOINTS='store::wal_sync=20*off->return'` fails the
//! 21st WAL sync; several go separated by `;`.
//!
//! Must not: be configured by anything but the environment at process start (or a test in the
//! same process); a failpoint's error must not be special-cased by the code around it.

use crate::error::StoreError;

/// Every failpoint name, as in the table above.
pub const ALL: [&str; 12] = [
    "store::wal_sync",
    "store::after_wal_sync",
    "store::audit_write",
    "store::checkpoint_write",
    "store::snapshot_write",
    "store::snapshot_install",
    "store::log_purge",
    "raft::peer_send",
    "raft::peer_receive",
    "raft::append_entry",
    "raft::health_hash",
    "executors::member_write",
];

/// The environment variable [`configure_from_env`] reads.
pub const ENV: &str = "FAILPOINTS";

/// The error a `return` action injects at a store seam: the variant a failed RocksDB write or
/// sync comes back as, so the code after it cannot tell them apart.
pub fn injected(name: &str, arg: Option<String>) -> StoreError {
    StoreError::Rocks(format!(
        "IO error: injected by failpoint {name}{}",
        arg.map(|a| format!(" ({a})")).unwrap_or_default()
    ))
}

/// Whether this build has failpoints compiled in.
pub const fn enabled() -> bool {
    cfg!(feature = "failpoints")
}

/// Configures the failpoints `FAILPOINTS` names (`name=actions;name=actions`) and returns the
/// names configured. A name not in [`ALL`] or actions the `fail` crate cannot parse are refused:
/// a test that mistyped a seam would otherwise pass without ever reaching it.
///
/// With failpoints configured, a panic on any thread aborts the process (after the usual panic
/// message): a failpoint's `panic` is a crash at that seam, not the end of one thread.
pub fn configure_from_env() -> Result<Vec<String>, StoreError> {
    match std::env::var(ENV) {
        Ok(spec) if !spec.trim().is_empty() => configure(&spec),
        _ => Ok(Vec::new()),
    }
}

/// [`configure_from_env`] for a given specification.
pub fn configure(spec: &str) -> Result<Vec<String>, StoreError> {
    let parsed = parse(spec)?;
    if !enabled() {
        tracing::warn!(
            "{ENV} is set but this build has no failpoints (cargo feature `failpoints`); ignored"
        );
        return Ok(Vec::new());
    }
    for (name, actions) in &parsed {
        fail::cfg(name.as_str(), actions)
            .map_err(|e| StoreError::Invalid(format!("{ENV}: {name}={actions}: {e}")))?;
        tracing::warn!(failpoint = %name, %actions, "failpoint configured");
    }
    if !parsed.is_empty() {
        abort_on_panic();
    }
    Ok(parsed.into_iter().map(|(n, _)| n).collect())
}

fn parse(spec: &str) -> Result<Vec<(String, String)>, StoreError> {
    spec.split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|part| {
            let (name, actions) = part.split_once('=').ok_or_else(|| {
                StoreError::Invalid(format!("{ENV}: {part:?} is not NAME=ACTIONS"))
            })?;
            let name = name.trim();
            if !ALL.contains(&name) {
                return Err(StoreError::Invalid(format!(
                    "{ENV}: unknown failpoint {name:?} (known: {})",
                    ALL.join(", ")
                )));
            }
            Ok((name.to_string(), actions.trim().to_string()))
        })
        .collect()
}

/// A panic anywhere stops the whole process, as a crash at that point would.
fn abort_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        std::process::abort();
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_names_known_seams_only() {
        let ok = parse("store::wal_sync=20*off->panic; raft::peer_send=sleep(10)").unwrap();
        assert_eq!(
            ok,
            vec![
                ("store::wal_sync".into(), "20*off->panic".into()),
                ("raft::peer_send".into(), "sleep(10)".into())
            ]
        );
        assert!(parse("").unwrap().is_empty());
        assert!(matches!(
            parse("store::wal_synk=panic"),
            Err(StoreError::Invalid(m)) if m.contains("unknown failpoint")
        ));
        assert!(matches!(
            parse("store::wal_sync"),
            Err(StoreError::Invalid(_))
        ));
    }

    #[test]
    fn an_injected_error_is_an_io_error_naming_its_seam() {
        let e = injected("store::wal_sync", Some("EIO".into()));
        assert!(matches!(&e, StoreError::Rocks(m) if m.starts_with("IO error")));
        assert!(e.to_string().contains("store::wal_sync (EIO)"), "{e}");
    }
}
