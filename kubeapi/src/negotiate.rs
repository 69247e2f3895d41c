//! Content negotiation: from an `Accept` header, which form a Kubernetes client asks for —
//! aggregated or legacy discovery, a `Table`, partial object metadata, or the objects
//! themselves. kubectl lists its preferences in order (`as=Table;v=v1;g=meta.k8s.io`, then
//! `v1beta1`, then plain JSON); the first acceptable one wins, `q=0` excludes. This module must
//! not render anything.

/// One entry of an `Accept` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRange {
    /// `type/subtype`, lowercased.
    pub essence: String,
    /// Parameters other than `q`, names lowercased, in header order.
    pub params: Vec<(String, String)>,
    /// Quality in thousandths (1000 when absent).
    pub quality: u16,
}

impl MediaRange {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether this range accepts JSON bodies (`application/json`, `application/*`, `*/*`).
    pub fn accepts_json(&self) -> bool {
        matches!(
            self.essence.as_str(),
            "application/json" | "application/*" | "*/*"
        )
    }

    /// `(as, g, v)` when this range names a Kubernetes kind (`as=Table;g=meta.k8s.io;v=v1`).
    fn kind(&self) -> Option<(&str, &str, &str)> {
        Some((self.param("as")?, self.param("g")?, self.param("v")?))
    }
}

/// Parses an `Accept` header into ranges, best first (stable by header order for equal
/// quality); ranges with `q=0` are dropped. An empty or missing header accepts anything.
pub fn parse_accept(header: Option<&str>) -> Vec<MediaRange> {
    let header = header
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or("*/*");
    let mut out: Vec<MediaRange> = Vec::new();
    for part in header.split(',') {
        let mut pieces = part.split(';').map(str::trim);
        let essence = pieces.next().unwrap_or("").to_ascii_lowercase();
        if essence.is_empty() {
            continue;
        }
        let mut params = Vec::new();
        let mut quality = 1000u16;
        for p in pieces {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let k = k.trim().to_ascii_lowercase();
            let v = v.trim().trim_matches('"').to_string();
            if k == "q" {
                quality = parse_quality(&v);
            } else {
                params.push((k, v));
            }
        }
        if quality > 0 {
            out.push(MediaRange {
                essence,
                params,
                quality,
            });
        }
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.quality));
    out
}

/// `0.5` → 500; anything unparsable counts as 1 (RFC 9110 leaves it to the server).
fn parse_quality(v: &str) -> u16 {
    match v.parse::<f64>() {
        Ok(q) if (0.0..=1.0).contains(&q) => (q * 1000.0).round() as u16,
        _ => 1000,
    }
}

/// The answer to `GET /api` or `GET /apis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryForm {
    /// `APIVersions` / `APIGroupList`, as `application/json`.
    Legacy,
    /// `APIGroupDiscoveryList` of `apidiscovery.k8s.io/v2`.
    AggregatedV2,
    /// `APIGroupDiscoveryList` of `apidiscovery.k8s.io/v2beta1`.
    AggregatedV2Beta1,
}

impl DiscoveryForm {
    /// The `Content-Type` of the reply.
    pub fn content_type(self) -> &'static str {
        match self {
            DiscoveryForm::Legacy => "application/json",
            DiscoveryForm::AggregatedV2 => {
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            }
            DiscoveryForm::AggregatedV2Beta1 => {
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            }
        }
    }
}

/// Which discovery form to answer; None when nothing acceptable is offered (406).
pub fn discovery_form(accept: Option<&str>) -> Option<DiscoveryForm> {
    for r in parse_accept(accept) {
        if !r.accepts_json() {
            continue;
        }
        match r.kind() {
            Some(("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2")) => {
                return Some(DiscoveryForm::AggregatedV2)
            }
            Some(("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2beta1")) => {
                return Some(DiscoveryForm::AggregatedV2Beta1)
            }
            Some(_) => continue,
            None if r.param("as").is_none() => return Some(DiscoveryForm::Legacy),
            None => continue,
        }
    }
    None
}

/// The answer to a get or list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectForm {
    /// The objects themselves (`application/json`).
    Object,
    /// A `meta.k8s.io` `Table` of that version ("v1" or "v1beta1").
    Table(&'static str),
    /// `PartialObjectMetadata` (a get) or `PartialObjectMetadataList` (a list), `meta.k8s.io/v1`.
    Metadata,
}

impl ObjectForm {
    /// The `Content-Type` of the reply (`list` picks the list kind of partial metadata).
    pub fn content_type(self, list: bool) -> String {
        match self {
            ObjectForm::Object => "application/json".into(),
            ObjectForm::Table(v) => format!("application/json;as=Table;v={v};g=meta.k8s.io"),
            ObjectForm::Metadata if list => {
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io".into()
            }
            ObjectForm::Metadata => {
                "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io".into()
            }
        }
    }
}

/// Which form a get or list answers in; None when nothing acceptable is offered (406).
pub fn object_form(accept: Option<&str>) -> Option<ObjectForm> {
    for r in parse_accept(accept) {
        if !r.accepts_json() {
            continue;
        }
        match r.kind() {
            Some(("Table", "meta.k8s.io", "v1")) => return Some(ObjectForm::Table("v1")),
            Some(("Table", "meta.k8s.io", "v1beta1")) => return Some(ObjectForm::Table("v1beta1")),
            Some(("PartialObjectMetadata" | "PartialObjectMetadataList", "meta.k8s.io", "v1")) => {
                return Some(ObjectForm::Metadata)
            }
            Some(_) => continue,
            None if r.param("as").is_none() => return Some(ObjectForm::Object),
            None => continue,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const KUBECTL_GET: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn discovery_cases() {
        let cases = [
            (Some(KUBECTL_DISCOVERY), Some(DiscoveryForm::AggregatedV2)),
            (
                Some("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
                Some(DiscoveryForm::AggregatedV2Beta1),
            ),
            (
                Some("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json"),
                Some(DiscoveryForm::Legacy),
            ),
            (Some("application/json"), Some(DiscoveryForm::Legacy)),
            (None, Some(DiscoveryForm::Legacy)),
            (Some("*/*"), Some(DiscoveryForm::Legacy)),
            (Some("application/yaml"), None),
            (
                Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0,application/json;q=0.5"),
                Some(DiscoveryForm::Legacy),
            ),
        ];
        for (accept, want) in cases {
            assert_eq!(discovery_form(accept), want, "{accept:?}");
        }
        assert!(DiscoveryForm::AggregatedV2.content_type().contains("v=v2;"));
    }

    #[test]
    fn object_cases() {
        let cases = [
            (Some(KUBECTL_GET), Some(ObjectForm::Table("v1"))),
            (
                Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
                Some(ObjectForm::Table("v1beta1")),
            ),
            (
                Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
                Some(ObjectForm::Metadata),
            ),
            (Some("application/json"), Some(ObjectForm::Object)),
            (Some("application/json;as=Table;v=v2;g=meta.k8s.io"), None),
            (
                Some("application/json;q=0.1, application/json;as=Table;v=v1;g=meta.k8s.io"),
                Some(ObjectForm::Table("v1")),
            ),
            (Some("text/html"), None),
        ];
        for (accept, want) in cases {
            assert_eq!(object_form(accept), want, "{accept:?}");
        }
        assert_eq!(
            ObjectForm::Table("v1").content_type(true),
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        );
    }
}
