//! The bincode codec of everything fedraft-raft sends to a peer or keeps on disk (log entries,
//! vote, snapshot meta, the outcomes in audit records), and the shapes of the peer messages.
//! (The API's JSON lives in fedraft-apiserver; nothing here is JSON.)
//!
//! Raft RPC bodies are openraft's own request/response types (serde) encoded with bincode 2's
//! standard config. `Applied` travels through a mirror struct because core's type carries no
//! serde derive; the mirror has the same fields and converts losslessly.

use fedraft_core::model::ObjectKey;
use fedraft_core::scheduler::Decision;
use fedraft_core::state::{Applied, Change, Outcome};
use serde::{Deserialize, Serialize};

use crate::error::RaftError;

/// Upper bound of any decoded body (snapshot chunks are far smaller; see `config`).
pub const MAX_BODY_BYTES: usize = 64 << 20;

pub fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, RaftError> {
    bincode::serde::encode_to_vec(v, bincode::config::standard())
        .map_err(|e| RaftError::Codec(e.to_string()))
}

pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, RaftError> {
    let cfg = bincode::config::standard().with_limit::<MAX_BODY_BYTES>();
    let (v, read) = bincode::serde::decode_from_slice(bytes, cfg)
        .map_err(|e| RaftError::Codec(e.to_string()))?;
    if read != bytes.len() {
        return Err(RaftError::Codec(format!(
            "{} trailing bytes",
            bytes.len() - read
        )));
    }
    Ok(v)
}

/// The state machine's answer for one raft entry: one `Applied` per command of its batch
/// (empty for raft-internal entries).
#[derive(Debug, Clone, Default)]
pub struct Response(pub Vec<Applied>);

#[derive(Serialize)]
struct AppliedRef<'a> {
    index: u64,
    outcome: &'a Outcome,
    changes: &'a [Change],
    decisions: &'a [(ObjectKey, Decision)],
    duplicate_of: Option<u64>,
}

#[derive(Deserialize)]
struct AppliedOwned {
    index: u64,
    outcome: Outcome,
    changes: Vec<Change>,
    decisions: Vec<(ObjectKey, Decision)>,
    duplicate_of: Option<u64>,
}

fn applied_ref(a: &Applied) -> AppliedRef<'_> {
    AppliedRef {
        index: a.index,
        outcome: &a.outcome,
        changes: &a.changes,
        decisions: &a.decisions,
        duplicate_of: a.duplicate_of,
    }
}

impl From<AppliedOwned> for Applied {
    fn from(o: AppliedOwned) -> Applied {
        Applied {
            index: o.index,
            outcome: o.outcome,
            changes: o.changes,
            decisions: o.decisions,
            duplicate_of: o.duplicate_of,
        }
    }
}

impl Serialize for Response {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let refs: Vec<AppliedRef<'_>> = self.0.iter().map(applied_ref).collect();
        refs.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Response {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Response(
            Vec::<AppliedOwned>::deserialize(d)?
                .into_iter()
                .map(Applied::from)
                .collect(),
        ))
    }
}

/// Encodes an `Applied` (for the audit archive's outcome bytes and forwarded replies).
pub fn encode_applied(a: &Applied) -> Result<Vec<u8>, RaftError> {
    encode(&applied_ref(a))
}

pub fn decode_applied(bytes: &[u8]) -> Result<Applied, RaftError> {
    decode::<AppliedOwned>(bytes).map(Applied::from)
}

/// Why a peer refused a forwarded proposal or read-index request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerRefusal {
    NotLeader {
        leader_id: Option<u64>,
        leader_addr: Option<String>,
    },
    NoQuorum {
        waited_ms: u64,
    },
    Shutdown,
    Other(String),
    /// Appended last: bincode numbers variants by position, so older peers still decode the rest.
    Timeout {
        waited_ms: u64,
    },
}

impl From<RaftError> for PeerRefusal {
    fn from(e: RaftError) -> Self {
        match e {
            RaftError::NotLeader {
                leader_id,
                leader_addr,
            } => PeerRefusal::NotLeader {
                leader_id,
                leader_addr,
            },
            RaftError::NoQuorum { waited_ms } => PeerRefusal::NoQuorum { waited_ms },
            RaftError::Timeout { waited_ms } => PeerRefusal::Timeout { waited_ms },
            RaftError::Shutdown => PeerRefusal::Shutdown,
            other => PeerRefusal::Other(other.to_string()),
        }
    }
}

impl From<PeerRefusal> for RaftError {
    fn from(r: PeerRefusal) -> Self {
        match r {
            PeerRefusal::NotLeader {
                leader_id,
                leader_addr,
            } => RaftError::NotLeader {
                leader_id,
                leader_addr,
            },
            PeerRefusal::NoQuorum { waited_ms } => RaftError::NoQuorum { waited_ms },
            PeerRefusal::Timeout { waited_ms } => RaftError::Timeout { waited_ms },
            PeerRefusal::Shutdown => RaftError::Shutdown,
            PeerRefusal::Other(m) => RaftError::Forward(m),
        }
    }
}

/// Reply body of `/raft/propose`: the applied outcome (encoded with [`encode_applied`]) or why not.
pub type ProposeReply = Result<Vec<u8>, PeerRefusal>;
/// Reply body of `/raft/read-index`: the index a follower must apply before reading.
pub type ReadIndexReply = Result<u64, PeerRefusal>;

/// Body of `/raft/propose-batch`: proposals a follower forwards in one call, each already
/// encoded with [`encode`] by the task that proposed it (so the forwarder only concatenates).
/// bincode's native `Vec<Vec<u8>>` encoding writes each inner vector as length + raw bytes.
pub fn encode_batch(items: &[Vec<u8>]) -> Result<Vec<u8>, RaftError> {
    bincode::encode_to_vec(items, bincode::config::standard())
        .map_err(|e| RaftError::Codec(e.to_string()))
}

pub fn decode_batch(bytes: &[u8]) -> Result<Vec<Vec<u8>>, RaftError> {
    let cfg = bincode::config::standard().with_limit::<MAX_BODY_BYTES>();
    let (v, read) = bincode::decode_from_slice::<Vec<Vec<u8>>, _>(bytes, cfg)
        .map_err(|e| RaftError::Codec(e.to_string()))?;
    if read != bytes.len() {
        return Err(RaftError::Codec(format!(
            "{} trailing bytes",
            bytes.len() - read
        )));
    }
    Ok(v)
}

/// Reply body of `/raft/propose-batch`: one [`ProposeReply`] per proposal, in request order.
pub type ProposeBatchReply = Vec<ProposeReply>;
