//! openraft's storage conformance suite against fedraft's log store and state machine on real
//! RocksDB in temp dirs.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use fedraft_raft::log_store::LogStore;
use fedraft_raft::state_machine::StateMachine;
use fedraft_raft::TypeConfig;
use fedraft_store::Store;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{AnyError, StorageError, StorageIOError};

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
        let store = Store::open(dir.path(), "suite")
            .map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
        let sm = StateMachine::open(store.clone())
            .await
            .map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
        Ok((dir, LogStore::new(store, Arc::new(AtomicU64::new(0))), sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).unwrap();
}
