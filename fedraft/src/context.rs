//! The client config file: which federation the CLI talks to, and as whom. One TOML file
//! (`--client-config`, `FEDRAFT_CLIENT_CONFIG`, or `~/.config/fedraft/client.toml`) holds named
//! contexts, one per federation, and the one in use:
//!
//! ```toml
//! current_context = "prod"
//! [contexts.prod]
//! server = "https://fed.example:8443"
//! token = "..."
//! ca_file = "/etc/fedraft/ca.pem"
//! namespace = "blue"          # the default for -n
//! ```
//!
//! Top-level `server`, `token`, `ca_file`, `cert_file` and `key_file` (the file's older form)
//! still work: they fill in whatever the chosen context leaves out. Flags beat environment
//! variables (`FEDRAFT_SERVER`, `FEDRAFT_TOKEN`, ...), which beat the context, which beats the
//! top level. `fedraft config get-contexts | current-context | use-context | set-context |
//! delete-context` read and write the file (0600: it holds tokens).
//!
//! Must not: send a request, or print a token.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

/// One federation's API, and the identity to use there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// The namespace `get`, `describe` and `delete` use when `-n` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl Context {
    /// `self`, with what it leaves out taken from `under`.
    fn over(self, under: &Context) -> Context {
        Context {
            server: self.server.or_else(|| under.server.clone()),
            token: self.token.or_else(|| under.token.clone()),
            ca_file: self.ca_file.or_else(|| under.ca_file.clone()),
            cert_file: self.cert_file.or_else(|| under.cert_file.clone()),
            key_file: self.key_file.or_else(|| under.key_file.clone()),
            namespace: self.namespace.or_else(|| under.namespace.clone()),
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub contexts: BTreeMap<String, Context>,
}

impl ClientFile {
    fn top_level(&self) -> Context {
        Context {
            server: self.server.clone(),
            token: self.token.clone(),
            ca_file: self.ca_file.clone(),
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            namespace: None,
        }
    }

    /// The settings of context `name` (or the current one), over the top-level ones. Naming a
    /// context the file lacks is an error; no context at all is the top level alone.
    pub fn resolve(&self, name: Option<&str>) -> anyhow::Result<Context> {
        let Some(name) = name.or(self.current_context.as_deref()) else {
            return Ok(self.top_level());
        };
        match self.contexts.get(name) {
            Some(c) => Ok(c.clone().over(&self.top_level())),
            None => bail!(
                "no context {name:?} in the client config (known: {})",
                known(self)
            ),
        }
    }
}

fn known(f: &ClientFile) -> String {
    if f.contexts.is_empty() {
        "none; add one with `fedraft config set-context`".into()
    } else {
        f.contexts.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Where the file is: the explicit path, else `~/.config/fedraft/client.toml` (None without a
/// home directory).
pub fn path(explicit: Option<&Path>) -> Option<PathBuf> {
    match explicit {
        Some(p) => Some(p.to_path_buf()),
        None => {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/fedraft/client.toml"))
        }
    }
}

/// Reads the file. A missing default file is an empty one; a missing explicit file is an error.
pub fn load(explicit: Option<&Path>) -> anyhow::Result<ClientFile> {
    let Some(path) = path(explicit) else {
        return Ok(ClientFile::default());
    };
    if explicit.is_none() && !path.exists() {
        return Ok(ClientFile::default());
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Writes the file whole, readable by its owner only (it holds tokens).
fn save(path: &Path, file: &ClientFile) -> anyhow::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let text = toml::to_string(file).context("encoding the client config")?;
    // Written next to the file and renamed over it, so a failed write leaves the old one.
    let tmp = path.with_extension("toml.tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

/// `fedraft config ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCmd {
    /// List the contexts; `*` marks the current one.
    GetContexts,
    /// Print the current context's name.
    CurrentContext,
    /// Make NAME the current context.
    UseContext {
        /// A context the file already has (see `get-contexts`).
        name: String,
    },
    /// Create or update context NAME from the global flags given with it (`--server`,
    /// `--token`, `--ca-file`, `--cert-file`, `--key-file`) and `--namespace`; settings not
    /// given keep their value. The first context becomes the current one.
    SetContext {
        /// The context's name (any text without spaces, e.g. the federation's).
        name: String,
        /// The default namespace for `get`, `describe` and `delete` in this context.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// Remove context NAME.
    DeleteContext {
        /// The context to remove.
        name: String,
    },
}

/// The client settings given on the command line itself (not from the environment), which
/// `set-context` stores.
#[derive(Debug, Default, Clone)]
pub struct GivenFlags {
    pub server: Option<String>,
    pub token: Option<String>,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

pub fn run(explicit: Option<&Path>, cmd: ConfigCmd, given: GivenFlags) -> anyhow::Result<ExitCode> {
    let Some(path) = path(explicit) else {
        bail!("no home directory: name the client config with --client-config");
    };
    // `set-context` creates the file; the others read an absent one as empty.
    let mut file = if path.exists() {
        load(Some(&path))?
    } else {
        ClientFile::default()
    };
    match cmd {
        ConfigCmd::GetContexts => print!("{}", contexts_table(&file)),
        ConfigCmd::CurrentContext => match &file.current_context {
            Some(c) => println!("{c}"),
            None => bail!("no current context is set"),
        },
        ConfigCmd::UseContext { name } => {
            if !file.contexts.contains_key(&name) {
                bail!("no context {name:?} (known: {})", known(&file));
            }
            file.current_context = Some(name.clone());
            save(&path, &file)?;
            println!("Switched to context {name:?}.");
        }
        ConfigCmd::SetContext { name, namespace } => {
            if name.is_empty() || name.contains(char::is_whitespace) {
                bail!("a context name must be non-empty and without spaces");
            }
            let created = !file.contexts.contains_key(&name);
            let entry = file.contexts.entry(name.clone()).or_default();
            let new = Context {
                server: given.server,
                token: given.token,
                ca_file: given.ca_file,
                cert_file: given.cert_file,
                key_file: given.key_file,
                namespace,
            };
            *entry = new.over(entry);
            if file.current_context.is_none() {
                file.current_context = Some(name.clone());
            }
            save(&path, &file)?;
            let verb = if created { "created" } else { "modified" };
            println!("Context {name:?} {verb}.");
        }
        ConfigCmd::DeleteContext { name } => {
            if file.contexts.remove(&name).is_none() {
                bail!("no context {name:?} (known: {})", known(&file));
            }
            if file.current_context.as_deref() == Some(name.as_str()) {
                file.current_context = None;
            }
            save(&path, &file)?;
            println!("Deleted context {name:?}.");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `CURRENT NAME SERVER NAMESPACE`, as `kubectl config get-contexts` lays it out.
fn contexts_table(file: &ClientFile) -> String {
    let rows: Vec<Vec<String>> = file
        .contexts
        .iter()
        .map(|(name, c)| {
            let c = c.clone().over(&file.top_level());
            vec![
                if file.current_context.as_deref() == Some(name.as_str()) {
                    "*".into()
                } else {
                    String::new()
                },
                name.clone(),
                c.server.unwrap_or_else(|| "-".into()),
                c.namespace.unwrap_or_default(),
            ]
        })
        .collect();
    crate::output::table(&["CURRENT", "NAME", "SERVER", "NAMESPACE"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> ClientFile {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn contexts_fill_in_from_the_top_level() {
        let f = file(
            "token = \"t0\"\nserver = \"http://top\"\ncurrent_context = \"b\"\n\
             [contexts.a]\nserver = \"http://a\"\nnamespace = \"blue\"\n\
             [contexts.b]\nserver = \"http://b\"\ntoken = \"tb\"\n",
        );
        let b = f.resolve(None).unwrap();
        assert_eq!(
            (b.server.as_deref(), b.token.as_deref()),
            (Some("http://b"), Some("tb"))
        );
        let a = f.resolve(Some("a")).unwrap();
        assert_eq!(
            (
                a.server.as_deref(),
                a.token.as_deref(),
                a.namespace.as_deref()
            ),
            (Some("http://a"), Some("t0"), Some("blue"))
        );
        assert!(f.resolve(Some("c")).is_err());
        // The older form: no contexts at all.
        let old = file("server = \"http://x\"\n");
        assert_eq!(
            old.resolve(None).unwrap().server.as_deref(),
            Some("http://x")
        );
    }

    #[test]
    fn set_use_and_delete_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/client.toml");
        let given = GivenFlags {
            server: Some("http://one".into()),
            token: Some("secret".into()),
            ..GivenFlags::default()
        };
        let set = |name: &str, g: GivenFlags, ns: Option<&str>| {
            run(
                Some(&p),
                ConfigCmd::SetContext {
                    name: name.into(),
                    namespace: ns.map(str::to_string),
                },
                g,
            )
            .unwrap()
        };
        set("one", given, None);
        set(
            "two",
            GivenFlags {
                server: Some("http://two".into()),
                ..GivenFlags::default()
            },
            Some("blue"),
        );
        let f = load(Some(&p)).unwrap();
        assert_eq!(f.current_context.as_deref(), Some("one"));
        // Updating keeps what is not given.
        set("one", GivenFlags::default(), Some("red"));
        let one = load(Some(&p)).unwrap().resolve(Some("one")).unwrap();
        assert_eq!(
            (
                one.server.as_deref(),
                one.token.as_deref(),
                one.namespace.as_deref()
            ),
            (Some("http://one"), Some("secret"), Some("red"))
        );
        run(
            Some(&p),
            ConfigCmd::UseContext { name: "two".into() },
            GivenFlags::default(),
        )
        .unwrap();
        let f = load(Some(&p)).unwrap();
        assert_eq!(
            f.resolve(None).unwrap().server.as_deref(),
            Some("http://two")
        );
        let table = contexts_table(&f);
        let current: Vec<Vec<&str>> = table
            .lines()
            .filter(|l| l.starts_with('*'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(current, [["*", "two", "http://two", "blue"]], "{table}");
        assert!(!table.contains("secret"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
        assert!(run(
            Some(&p),
            ConfigCmd::UseContext {
                name: "nope".into()
            },
            GivenFlags::default()
        )
        .is_err());
        run(
            Some(&p),
            ConfigCmd::DeleteContext { name: "two".into() },
            GivenFlags::default(),
        )
        .unwrap();
        let f = load(Some(&p)).unwrap();
        assert_eq!(f.current_context, None);
        assert_eq!(f.contexts.len(), 1);
    }
}
