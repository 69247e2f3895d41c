//! Integration tests of fedraft-kubeapi through its public API only: the laws the patch and
//! apply functions must obey (property tests), patches shaped as kubectl sends them, and the
//! tables `kubectl get` prints.

mod laws;
mod printing;
