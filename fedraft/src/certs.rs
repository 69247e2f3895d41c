//! `fedraft certs`: a cluster CA plus node and client certificates (rcgen, ECDSA P-256).
//!
//! One directory holds everything: `ca.crt` / `ca.key` (created on the first run, reused after,
//! so adding a node or renewing one certificate keeps the CA), `node<ID>.crt` / `node<ID>.key`
//! (server and client auth: used on the API, on the peer port and to call peers) and
//! `client-<NAME>.crt` / `client-<NAME>.key` (client auth only). Keys are written 0600, the
//! directory 0700. Existing files are never overwritten without `--force`.
//!
//! Must not: print a private key, or write a key file readable by anyone but its owner.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// Directory for the CA, node and client files (created 0700 if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// A node certificate: `ID=SAN[,SAN...]`, each SAN a DNS name or an IP address; repeat per
    /// node. The SANs must cover every host name or address peers and clients use for it.
    #[arg(long = "node", value_name = "ID=SANS")]
    pub nodes: Vec<String>,
    /// A client certificate with this common name (for API clients when the API requires one).
    #[arg(long = "client", value_name = "NAME")]
    pub clients: Vec<String>,
    /// Validity of node and client certificates, in days.
    #[arg(long, default_value_t = 365)]
    pub days: i64,
    /// Validity of a newly created CA, in days.
    #[arg(long, default_value_t = 3650)]
    pub ca_days: i64,
    /// Common name of a newly created CA.
    #[arg(long, default_value = "fedraft cluster CA")]
    pub ca_name: String,
    /// Replace node and client files that already exist (certificate renewal).
    #[arg(long)]
    pub force: bool,
}

/// A node certificate request parsed from `ID=SAN,SAN`.
#[derive(Debug, PartialEq, Eq)]
struct NodeSpec {
    id: u64,
    sans: Vec<String>,
}

fn parse_node(s: &str) -> anyhow::Result<NodeSpec> {
    let Some((id, sans)) = s.split_once('=') else {
        bail!("--node {s:?}: expected ID=SAN[,SAN...], e.g. 1=fedraft-1.dc1.example.com,10.0.1.5");
    };
    let id: u64 = id
        .trim()
        .parse()
        .with_context(|| format!("--node {s:?}: the id must be a number"))?;
    let sans: Vec<String> = sans
        .split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect();
    if sans.is_empty() {
        bail!("--node {s:?}: at least one SAN is required");
    }
    Ok(NodeSpec { id, sans })
}

fn valid_client_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

pub fn run(args: CertsArgs) -> anyhow::Result<()> {
    let nodes = args
        .nodes
        .iter()
        .map(|s| parse_node(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for c in &args.clients {
        if !valid_client_name(c) {
            bail!("--client {c:?}: use 1 to 64 letters, digits, '-', '_' or '.'");
        }
    }
    if args.days <= 0 || args.ca_days <= 0 {
        bail!("--days and --ca-days must be positive");
    }
    create_private_dir(&args.out)?;
    let (ca_pem, ca_key) = load_or_create_ca(&args)?;
    let issuer =
        Issuer::from_ca_cert_pem(&ca_pem, ca_key).context("reading the CA certificate (ca.crt)")?;
    for n in &nodes {
        let cn = format!("fedraft-node-{}", n.id);
        let eku = [
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        issue(&args, &issuer, &format!("node{}", n.id), &cn, &n.sans, &eku)?;
    }
    for c in &args.clients {
        let eku = [ExtendedKeyUsagePurpose::ClientAuth];
        issue(&args, &issuer, &format!("client-{c}"), c, &[], &eku)?;
    }
    Ok(())
}

fn load_or_create_ca(args: &CertsArgs) -> anyhow::Result<(String, KeyPair)> {
    let (crt, key) = (args.out.join("ca.crt"), args.out.join("ca.key"));
    match (crt.exists(), key.exists()) {
        (true, true) => {
            let pem = std::fs::read_to_string(&crt)
                .with_context(|| format!("reading {}", crt.display()))?;
            let key_pem = std::fs::read_to_string(&key)
                .with_context(|| format!("reading {}", key.display()))?;
            let kp = KeyPair::from_pem(&key_pem)
                .with_context(|| format!("parsing {}", key.display()))?;
            println!("using the existing CA {}", crt.display());
            Ok((pem, kp))
        }
        (false, false) => {
            let kp = KeyPair::generate().context("generating the CA key")?;
            let mut p = CertificateParams::new(Vec::<String>::new())?;
            p.distinguished_name.push(DnType::CommonName, &args.ca_name);
            p.distinguished_name
                .push(DnType::OrganizationName, "fedraft");
            p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
            p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            let now = OffsetDateTime::now_utc();
            p.not_before = now - Duration::hours(1);
            p.not_after = now + Duration::days(args.ca_days);
            let cert = p.self_signed(&kp).context("signing the CA")?;
            write_file(&key, kp.serialize_pem().as_bytes(), 0o600, false)?;
            write_file(&crt, cert.pem().as_bytes(), 0o644, false)?;
            println!("created CA {} (key {})", crt.display(), key.display());
            Ok((cert.pem(), kp))
        }
        _ => bail!(
            "{} has only one of ca.crt and ca.key: restore the missing one or move both away",
            args.out.display()
        ),
    }
}

fn issue(
    args: &CertsArgs,
    issuer: &Issuer<'_, KeyPair>,
    stem: &str,
    cn: &str,
    sans: &[String],
    eku: &[ExtendedKeyUsagePurpose],
) -> anyhow::Result<()> {
    let (crt, key) = (
        args.out.join(format!("{stem}.crt")),
        args.out.join(format!("{stem}.key")),
    );
    let kp = KeyPair::generate().with_context(|| format!("generating the key of {stem}"))?;
    let mut p = CertificateParams::new(sans.to_vec()).with_context(|| format!("SANs of {stem}"))?;
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, "fedraft");
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = eku.to_vec();
    p.use_authority_key_identifier_extension = true;
    let now = OffsetDateTime::now_utc();
    p.not_before = now - Duration::hours(1);
    p.not_after = now + Duration::days(args.days);
    let cert = p
        .signed_by(&kp, issuer)
        .with_context(|| format!("signing {stem}"))?;
    write_file(&key, kp.serialize_pem().as_bytes(), 0o600, args.force)?;
    write_file(&crt, cert.pem().as_bytes(), 0o644, args.force)?;
    println!("wrote {} and {}", crt.display(), key.display());
    Ok(())
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    set_mode(dir, 0o700)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> anyhow::Result<()> {
    Ok(())
}

/// Writes through a temporary file created with `mode` from the start (a key is never readable
/// by others, not even briefly), then renames it into place.
fn write_file(path: &Path, bytes: &[u8], mode: u32, force: bool) -> anyhow::Result<()> {
    if path.exists() && !force {
        bail!("{} exists; pass --force to replace it", path.display());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut builder = tempfile::Builder::new();
    builder.prefix(".fedraft-certs");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut tmp = builder
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_specs_parse_and_refuse_junk() {
        assert_eq!(
            parse_node("2=a.example.com, 10.0.0.2").unwrap(),
            NodeSpec {
                id: 2,
                sans: vec!["a.example.com".into(), "10.0.0.2".into()]
            }
        );
        assert!(parse_node("x=a").is_err());
        assert!(parse_node("1=").is_err());
        assert!(parse_node("1").is_err());
        assert!(valid_client_name("ci-bot.1"));
        assert!(!valid_client_name("a b"));
    }
}
