//! The running server: UDP and TCP listeners (hickory-server), the request handler, and the
//! task that rebuilds the zone from the node's applied state.
//!
//! The zone is rebuilt after applied entries (a burst is coalesced into one rebuild) from
//! `FedNode::read_stale`: every node answers from its own applied state, never asking the
//! leader. The same task records when an entry last arrived; a node that saw none for longer
//! than `leader_contact_bound_ms` answers SERVFAIL, so resolvers move to another node rather
//! than trust a state that may have stopped following the log.
//!
//! UDP responses pass the response rate limiter (`rrl`) before any answer is computed: a
//! source network over its limit gets nothing, or every `slip`-th time an empty truncated
//! answer that sends a real client to TCP. Answers are capped in `answer`.
//!
//! Must not: propose to the log, or depend on the HTTP API.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use fedraft_raft::FedNode;
use hickory_proto::op::{Edns, Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{DNSClass, Record};
use hickory_server::net::runtime::Time;
use hickory_server::net::xfer::Protocol;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use hickory_server::Server;
use tokio::sync::broadcast::error::RecvError;

use crate::answer::{answer, Answer, Locality};
use crate::config::{DnsConfig, DEFAULT_ZONE_TTL_SECONDS};
use crate::error::DnsError;
use crate::metrics::DnsMetrics;
use crate::rrl::{RateLimitStats, RateLimiter, Verdict};
use crate::zone::Zone;

/// Largest UDP payload advertised in EDNS answers (the DNS flag day 2020 value: no
/// fragmentation on common paths).
const EDNS_MAX_PAYLOAD: u16 = 1232;
/// Per-connection buffer of queued TCP responses.
const TCP_RESPONSE_BUFFER: usize = 32;
/// Attempts at finding a port free for both UDP and TCP when the configured port is 0.
const BIND_ATTEMPTS: usize = 16;

/// What the handler and the refresher share.
pub(crate) struct Shared {
    zone: RwLock<Arc<Zone>>,
    started: Instant,
    /// Milliseconds after `started` when the last applied entry was seen.
    last_progress_ms: AtomicU64,
    bound: Duration,
    max_answers: usize,
    locality: Locality,
    metrics: DnsMetrics,
    rrl: RateLimiter,
}

impl Shared {
    fn zone(&self) -> Arc<Zone> {
        self.zone
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set_zone(&self, z: Zone) {
        *self
            .zone
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(z);
    }

    fn progress(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_progress_ms.store(ms, Ordering::Relaxed);
    }

    fn in_contact(&self) -> bool {
        let now = self.started.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_progress_ms.load(Ordering::Relaxed))
            <= self.bound.as_millis() as u64
    }
}

/// hickory's request handler over [`Shared`].
pub(crate) struct Handler {
    shared: Arc<Shared>,
}

fn client_address(request: &Request) -> IpAddr {
    let subnet = request
        .edns
        .as_ref()
        .and_then(|e| e.option(EdnsCode::Subnet))
        .and_then(|o| match o {
            EdnsOption::Subnet(s) => Some(s.addr()),
            _ => None,
        });
    subnet.unwrap_or_else(|| request.src().ip())
}

fn failed(request: &Request, code: ResponseCode) -> ResponseInfo {
    let mut metadata = Metadata::new(
        request.metadata.id,
        MessageType::Response,
        request.metadata.op_code,
    );
    metadata.response_code = code;
    ResponseInfo::from(Header {
        metadata,
        counts: HeaderCounts::default(),
    })
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        self.shared.metrics.query();
        let verdict = if request.protocol() == Protocol::Udp {
            self.shared.rrl.check(request.src().ip(), Instant::now())
        } else {
            Verdict::Send
        };
        if verdict != Verdict::Send {
            self.shared.metrics.rate_limited(verdict == Verdict::Slip);
        }
        if verdict == Verdict::Drop {
            return failed(request, ResponseCode::Refused);
        }
        let edns = request.edns.as_ref().map(|req| {
            let mut e = Edns::new();
            e.set_max_payload(req.max_payload().clamp(512, EDNS_MAX_PAYLOAD));
            e.set_version(0);
            e
        });
        let mut metadata = Metadata::new(
            request.metadata.id,
            MessageType::Response,
            request.metadata.op_code,
        );
        metadata.recursion_desired = request.metadata.recursion_desired;
        if verdict == Verdict::Slip {
            // Header and question only: no larger than the query, so worthless to a reflector.
            metadata.truncation = true;
            let builder = MessageResponseBuilder::new(&request.queries, edns.as_ref());
            return match response
                .send_response(builder.build_no_records(metadata))
                .await
            {
                Ok(info) => info,
                Err(e) => {
                    tracing::debug!(error = %e, "cannot send a truncated DNS response");
                    failed(request, ResponseCode::ServFail)
                }
            };
        }
        let zone = self.shared.zone();
        let result: Answer<'_> = match request.request_info() {
            _ if request.metadata.op_code != OpCode::Query => negative(ResponseCode::NotImp),
            _ if request.metadata.message_type != MessageType::Query => {
                negative(ResponseCode::FormErr)
            }
            Err(_) => negative(ResponseCode::FormErr),
            Ok(_) if !self.shared.in_contact() => negative(ResponseCode::ServFail),
            Ok(info) if info.query.query_class() != DNSClass::IN => negative(ResponseCode::Refused),
            Ok(info) => {
                let qname = info.query.name().to_string().to_ascii_lowercase();
                let qname = if qname.ends_with('.') {
                    qname
                } else {
                    qname + "."
                };
                answer(
                    &zone,
                    &qname,
                    info.query.query_type(),
                    Some(client_address(request)),
                    &self.shared.locality,
                    self.shared.max_answers,
                    &mut rand::rng(),
                )
            }
        };
        metadata.authoritative = result.authoritative;
        metadata.response_code = result.rcode;
        self.shared.metrics.answered(result.rcode);
        let builder = MessageResponseBuilder::new(&request.queries, edns.as_ref());
        let msg = builder.build(
            metadata,
            result.answers.iter().copied(),
            std::iter::empty::<&Record>(),
            result.soa,
            result.additionals.iter().copied(),
        );
        match response.send_response(msg).await {
            Ok(info) => info,
            Err(e) => {
                self.shared.metrics.send_failed();
                tracing::debug!(error = %e, "cannot send a DNS response");
                failed(request, ResponseCode::ServFail)
            }
        }
    }
}

fn negative<'z>(rcode: ResponseCode) -> Answer<'z> {
    Answer {
        rcode,
        authoritative: false,
        answers: Vec::new(),
        soa: None,
        additionals: Vec::new(),
    }
}

/// A running DNS server of one node.
pub struct DnsServer {
    udp: SocketAddr,
    tcp: SocketAddr,
    server: Server<Handler>,
    refresher: tokio::task::JoinHandle<()>,
    metrics: DnsMetrics,
    shared: Arc<Shared>,
}

async fn bind(
    listen: SocketAddr,
) -> Result<(tokio::net::UdpSocket, tokio::net::TcpListener), DnsError> {
    let mut last = None;
    for _ in 0..BIND_ATTEMPTS {
        let udp = tokio::net::UdpSocket::bind(listen)
            .await
            .map_err(|source| DnsError::Bind {
                proto: "udp",
                addr: listen,
                source,
            })?;
        let addr = udp.local_addr().map_err(|source| DnsError::Bind {
            proto: "udp",
            addr: listen,
            source,
        })?;
        match tokio::net::TcpListener::bind(addr).await {
            Ok(tcp) => return Ok((udp, tcp)),
            // An ephemeral UDP port may be taken for TCP: try another one.
            Err(source) if listen.port() == 0 => last = Some(source),
            Err(source) => {
                return Err(DnsError::Bind {
                    proto: "tcp",
                    addr,
                    source,
                })
            }
        }
    }
    Err(DnsError::Bind {
        proto: "tcp",
        addr: listen,
        source: last.unwrap_or_else(|| std::io::Error::other("no port free for UDP and TCP")),
    })
}

impl DnsServer {
    /// Binds UDP and TCP on `cfg.listen` (port 0: one ephemeral port for both) and serves the
    /// zone of `node`'s applied state.
    pub async fn start(node: FedNode, cfg: DnsConfig) -> Result<DnsServer, DnsError> {
        cfg.validate()?;
        let first = node.read_stale(|s| Zone::build(&cfg.zone, DEFAULT_ZONE_TTL_SECONDS, s))?;
        let shared = Arc::new(Shared {
            zone: RwLock::new(Arc::new(first)),
            started: Instant::now(),
            last_progress_ms: AtomicU64::new(0),
            bound: cfg.leader_contact_bound(),
            max_answers: cfg.max_answers,
            locality: Locality {
                by_cluster: cfg.locality.clone().into_iter().collect(),
            },
            metrics: DnsMetrics::default(),
            rrl: RateLimiter::new(cfg.rate_limit.clone(), Instant::now()),
        });
        let (udp, tcp) = bind(cfg.listen).await?;
        let udp_addr = udp.local_addr().map_err(|source| DnsError::Bind {
            proto: "udp",
            addr: cfg.listen,
            source,
        })?;
        let tcp_addr = tcp.local_addr().map_err(|source| DnsError::Bind {
            proto: "tcp",
            addr: cfg.listen,
            source,
        })?;
        let mut server = Server::new(Handler {
            shared: shared.clone(),
        });
        server.register_socket(udp);
        server.register_listener(
            tcp,
            Duration::from_millis(cfg.tcp_idle_timeout_ms),
            TCP_RESPONSE_BUFFER,
        );
        let metrics = shared.metrics.clone();
        let refresher = tokio::spawn(refresh(node, cfg.zone.clone(), shared.clone()));
        tracing::info!(udp = %udp_addr, tcp = %tcp_addr, zone = %cfg.zone, "DNS serving");
        Ok(DnsServer {
            udp: udp_addr,
            tcp: tcp_addr,
            server,
            refresher,
            metrics,
            shared,
        })
    }

    /// What this server measures, for the binary's registry ([`DnsMetrics::register`]).
    pub fn metrics(&self) -> &DnsMetrics {
        &self.metrics
    }

    /// What the response rate limiter decided so far (UDP only).
    pub fn rate_limit_stats(&self) -> RateLimitStats {
        self.shared.rrl.stats()
    }

    pub fn udp_addr(&self) -> SocketAddr {
        self.udp
    }

    pub fn tcp_addr(&self) -> SocketAddr {
        self.tcp
    }

    /// Stops listening and waits for in-flight requests.
    pub async fn shutdown(mut self) {
        self.refresher.abort();
        if let Err(e) = self.server.shutdown_gracefully().await {
            tracing::debug!(error = %e, "DNS server stopped with an error");
        }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.refresher.abort();
        self.server.shutdown_token().cancel();
    }
}

/// Rebuilds the zone after applied entries, coalescing bursts.
async fn refresh(node: FedNode, origin: String, shared: Arc<Shared>) {
    let mut applied = node.subscribe();
    loop {
        match applied.recv().await {
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
        while let Ok(_) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) =
            applied.try_recv()
        {}
        shared.progress();
        match node.read_stale(|s| Zone::build(&origin, DEFAULT_ZONE_TTL_SECONDS, s)) {
            Ok(z) => shared.set_zone(z),
            // Names come from validated state and a validated zone: this would be a bug.
            Err(e) => tracing::error!(error = %e, "cannot build the DNS zone"),
        }
    }
}
