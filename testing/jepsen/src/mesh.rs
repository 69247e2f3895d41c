//! A full mesh of [`LinkProxy`]s between `n` nodes: one proxy per ordered pair, so node `a` reaches node `b`
//! by dialling `addr(a, b)` instead of `b`'s real address. Each node must therefore be configured with its own
//! peer table (see [`Mesh::peer_addrs`]; for `fedraft server`, its `[peer_dial]` section). The mesh cuts, heals and delays links; which links a fault cuts is
//! decided by the nemesis (`nemesis::Partition::cut_links`), not here.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::proxy::LinkProxy;
use crate::Error;

/// Proxies for every ordered pair of distinct nodes. Dropping the mesh stops them all.
#[derive(Debug)]
pub struct Mesh {
    nodes: usize,
    links: BTreeMap<(usize, usize), LinkProxy>,
}

impl Mesh {
    /// Starts a proxy on an ephemeral loopback port for every ordered pair; `upstreams[i]` is node `i`'s real
    /// peer (raft) address.
    pub async fn start(upstreams: &[SocketAddr]) -> Result<Mesh, Error> {
        Self::start_on(upstreams, |_, _| SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Like [`Mesh::start`], with the listening address of link `from -> to` chosen by `listen` (for scripts
    /// that need fixed ports).
    pub async fn start_on(
        upstreams: &[SocketAddr],
        listen: impl Fn(usize, usize) -> SocketAddr,
    ) -> Result<Mesh, Error> {
        let mut links = BTreeMap::new();
        for from in 0..upstreams.len() {
            for (to, upstream) in upstreams.iter().enumerate() {
                if from != to {
                    links.insert(
                        (from, to),
                        LinkProxy::start(listen(from, to), *upstream).await?,
                    );
                }
            }
        }
        Ok(Mesh {
            nodes: upstreams.len(),
            links,
        })
    }

    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The proxy carrying connections `from` opens to `to`.
    pub fn link(&self, from: usize, to: usize) -> Result<&LinkProxy, Error> {
        self.links.get(&(from, to)).ok_or(Error::NoSuchLink {
            from,
            to,
            nodes: self.nodes,
        })
    }

    /// The address node `from` must use for peer `to`.
    pub fn addr(&self, from: usize, to: usize) -> Result<SocketAddr, Error> {
        Ok(self.link(from, to)?.local_addr())
    }

    /// Node `from`'s peer table: `(peer, address to dial)` for every other node.
    pub fn peer_addrs(&self, from: usize) -> Vec<(usize, SocketAddr)> {
        self.links
            .iter()
            .filter(|((f, _), _)| *f == from)
            .map(|((_, to), p)| (*to, p.local_addr()))
            .collect()
    }

    /// Cuts each listed directed link.
    pub fn cut_links(&self, links: &[(usize, usize)]) -> Result<(), Error> {
        for &(from, to) in links {
            self.link(from, to)?.cut();
        }
        tracing::info!(?links, "links cut");
        Ok(())
    }

    /// Cuts every link to and from `node`.
    pub fn isolate(&self, node: usize) -> Result<(), Error> {
        let links: Vec<_> = (0..self.nodes)
            .filter(|&o| o != node)
            .flat_map(|o| [(node, o), (o, node)])
            .collect();
        self.cut_links(&links)
    }

    /// Heals every link.
    pub fn heal_all(&self) {
        self.links.values().for_each(LinkProxy::heal);
        tracing::info!("all links healed");
    }

    /// Sets the per-direction latency on every link (a round trip between two nodes gains twice `delay`).
    pub fn set_delay_all(&self, delay: Duration) {
        self.links.values().for_each(|l| l.set_delay(delay));
    }

    /// The directed links currently cut.
    pub fn cut_now(&self) -> Vec<(usize, usize)> {
        self.links
            .iter()
            .filter(|(_, l)| l.state().cut)
            .map(|(k, _)| *k)
            .collect()
    }
}
