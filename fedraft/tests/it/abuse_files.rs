//! Secret files on the real binary: `fedraft server --config` refuses to start (exit code not 0,
//! a message naming the file and the fix) when the token file, the cluster secret file or the
//! TLS key is readable by group or others, when a token or the secret is too short, and when
//! two principals share a token; the same files made right start a node.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fedraft_testkit::net::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
const ADMIN: &str = "abuse-files-admin-token-0123456789abcdef";
const OPS: &str = "abuse-files-operator-token-0123456789abcdef";
const SECRET: &str = "abuse-files-cluster-secret-0123456789abcdef";
/// A refused start happens before raft opens; a loaded machine still gets this long.
const REFUSAL_WITHIN: Duration = Duration::from_secs(30);

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// One node's files, all correct until a case spoils one.
struct Node {
    dir: PathBuf,
    api: u16,
    tls: bool,
}

impl Node {
    fn new(root: &Path, name: &str, tls: bool) -> Node {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        write(
            &dir.join("tokens"),
            &format!("{ADMIN} admin admin\n{OPS} ops operator\n"),
            0o600,
        );
        write(&dir.join("secret"), &format!("{SECRET}\n"), 0o600);
        if tls {
            let o = Command::new(BIN)
                .args(["certs", "--out"])
                .arg(dir.join("tls"))
                .args(["--node", "1=127.0.0.1"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let node = Node {
            dir,
            api: free_port(),
            tls,
        };
        node.config("cluster_secret_file = \"SECRET\"\n");
        node
    }

    fn tokens(&self) -> PathBuf {
        self.dir.join("tokens")
    }
    fn secret(&self) -> PathBuf {
        self.dir.join("secret")
    }
    fn key(&self) -> PathBuf {
        self.dir.join("tls/node1.key")
    }

    /// Writes the configuration with `secret_line` (SECRET stands for the secret file's path).
    fn config(&self, secret_line: &str) {
        let peer = free_port();
        let mut text = format!(
            "node_id = 1\napi_listen = \"127.0.0.1:{api}\"\npeer_listen = \"127.0.0.1:{peer}\"\n\
             data_dir = \"{data}\"\ntoken_file = \"{tokens}\"\n{secret}\n\
             [peers]\n1 = \"127.0.0.1:{peer}\"\n\n[executors]\nenabled = false\n",
            api = self.api,
            data = self.dir.join("data").display(),
            tokens = self.tokens().display(),
            secret = secret_line.replace("SECRET", &self.secret().display().to_string()),
        );
        if self.tls {
            let t = self.dir.join("tls");
            text.push_str(&format!(
                "[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\nca_file = \"{}\"\n",
                t.join("node1.crt").display(),
                self.key().display(),
                t.join("ca.crt").display()
            ));
        }
        std::fs::write(self.dir.join("node.toml"), text).unwrap();
    }

    fn spawn(&self) -> Child {
        Command::new(BIN)
            .args(["server", "--config"])
            .arg(self.dir.join("node.toml"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Starts the server and expects it to stop by itself with an error; returns its stderr.
    fn refused(&self) -> String {
        let mut child = self.spawn();
        let deadline = Instant::now() + REFUSAL_WITHIN;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the server started with {}", self.dir.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(!status.success(), "exit status {status}: {err}");
        assert!(
            !data_opened(&self.dir),
            "refused before opening the data directory"
        );
        err
    }

    /// Starts the server and expects its API port to accept connections.
    fn starts(&self) {
        let mut child = self.spawn();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("the server stopped ({status}): {err}");
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.api)).is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "the API never listened");
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn data_opened(dir: &Path) -> bool {
    dir.join("data").join("CURRENT").exists()
}

fn assert_names(err: &str, needles: &[&str]) {
    for n in needles {
        assert!(err.contains(n), "{n:?} missing from: {err}");
    }
    for secret in [ADMIN, OPS, SECRET] {
        assert!(!err.contains(secret), "a secret leaked into: {err}");
    }
}

#[test]
fn shared_readable_secret_files_are_refused_with_the_fix() {
    let root = fedraft_testkit::temp_dir("abuse-files");
    let node = Node::new(root.path(), "perm", true);
    let tokens = node.tokens().display().to_string();
    let secret = node.secret().display().to_string();
    let key = node.key().display().to_string();

    for mode in [0o644, 0o640, 0o604, 0o620] {
        std::fs::set_permissions(node.tokens(), std::fs::Permissions::from_mode(mode)).unwrap();
        let err = node.refused();
        assert_names(&err, &[&tokens, &format!("chmod 600 {tokens}")]);
    }
    std::fs::set_permissions(node.tokens(), std::fs::Permissions::from_mode(0o400)).unwrap();

    std::fs::set_permissions(node.secret(), std::fs::Permissions::from_mode(0o640)).unwrap();
    let err = node.refused();
    assert_names(
        &err,
        &["cluster secret file", &format!("chmod 600 {secret}")],
    );
    std::fs::set_permissions(node.secret(), std::fs::Permissions::from_mode(0o600)).unwrap();

    std::fs::set_permissions(node.key(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = node.refused();
    assert_names(&err, &["private key", &format!("chmod 600 {key}")]);
    std::fs::set_permissions(node.key(), std::fs::Permissions::from_mode(0o600)).unwrap();

    // Made right (a read-only token file included), the same files start a TLS node.
    node.starts();
}

#[test]
fn short_and_shared_tokens_and_short_secrets_are_refused() {
    let root = fedraft_testkit::temp_dir("abuse-files");
    let node = Node::new(root.path(), "tokens", false);
    let tokens = node.tokens().display().to_string();

    write(
        &node.tokens(),
        &format!("{ADMIN} admin admin\nshort-token-of-31-bytes-0123456 ops operator\n"),
        0o600,
    );
    let err = node.refused();
    assert_names(&err, &[&tokens, "line 2", "ops", "at least 32 bytes"]);
    assert!(!err.contains("short-token-of-31"), "{err}");

    write(
        &node.tokens(),
        &format!("{ADMIN} admin admin\n# rotated\n{ADMIN} robot tenant:blue\n"),
        0o600,
    );
    let err = node.refused();
    assert_names(&err, &[&tokens, "line 3", "robot", "admin (line 1)"]);

    write(
        &node.tokens(),
        &format!("{ADMIN} admin admin\n{OPS} ops operator\n"),
        0o600,
    );
    write(&node.secret(), "only-31-bytes-of-cluster-secret\n", 0o600);
    let err = node.refused();
    assert_names(&err, &[&node.secret().display().to_string(), "at least 32"]);
    node.config("cluster_secret = \"an-inline-secret-of-30-bytes-x\"\n");
    let err = node.refused();
    assert_names(&err, &["cluster secret", "at least 32"]);

    write(&node.secret(), &format!("{SECRET}\n"), 0o600);
    node.config("cluster_secret_file = \"SECRET\"\n");
    node.starts();
}
