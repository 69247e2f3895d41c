//! A small WebDriver client (W3C JSON over HTTP with reqwest) driving headless Chromium through
//! chromedriver, for the console's browser test. It speaks the handful of commands the test
//! needs (navigate, find, click, type, run a script, screenshot) instead of pulling in a client
//! crate and its dependency tree; reqwest is already here.
//!
//! Must not: leave a browser behind: dropping the [`Browser`] ends the session and kills the
//! chromedriver it started (which ends its Chromium).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// WebDriver's key for an element reference in JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
    shots: PathBuf,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session with a fresh profile.
    /// Screenshots go to `shots`.
    pub async fn start(shots: &Path) -> Browser {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(bin).exists(),
                "{bin} is missing: the console's browser test needs Debian's chromium and \
                 chromium-driver (scripts/setup-deps installs them)"
            );
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(shots).unwrap();
        let mut b = Browser {
            driver,
            base,
            http,
            _profile: profile,
            shots: shots.to_path_buf(),
        };
        let started = Instant::now();
        loop {
            if let Ok(r) = b.http.get(format!("{}/status", b.base)).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--user-data-dir={}", b._profile.path().display())])
        .collect::<Vec<_>>();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let v = b.raw("POST", "/session", caps).await;
        let id = v["sessionId"].as_str().expect("a session id").to_string();
        b.base = format!("{}/session/{id}", b.base);
        b
    }

    async fn raw(&self, method: &str, path: &str, body: Value) -> Value {
        match self.try_raw(method, path, body).await {
            Ok(v) => v,
            Err(e) => panic!("WebDriver {method} {path}: {e}"),
        }
    }

    /// One command; the error is the driver's answer (status and body) when it refused.
    async fn try_raw(&self, method: &str, path: &str, body: Value) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let resp = req.send().await.expect("chromedriver answers");
        let status = resp.status();
        let v: Value = resp.json().await.expect("chromedriver answers JSON");
        if !status.is_success() {
            return Err(format!("{status} {v}"));
        }
        Ok(v["value"].clone())
    }

    pub async fn goto(&self, url: &str) {
        self.raw("POST", "/url", json!({ "url": url })).await;
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page; its return value.
    pub async fn js(&self, script: &str, args: Value) -> Value {
        self.raw(
            "POST",
            "/execute/sync",
            json!({ "script": script, "args": args }),
        )
        .await
    }

    /// The first element matching `css`, waiting up to `limit` for it.
    pub async fn find(&self, css: &str, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let url = format!("{}/element", self.base);
            let body = json!({"using": "css selector", "value": css});
            let mut last = Value::Null;
            if let Ok(r) = self.http.post(url).json(&body).send().await {
                if let Ok(v) = r.json::<Value>().await {
                    if let Some(id) = v["value"][ELEMENT].as_str() {
                        return id.to_string();
                    }
                    last = v;
                }
            }
            if start.elapsed() > limit {
                let page = self
                    .js(
                        "return location.href + ' ' + document.body.outerHTML.slice(0, 800)",
                        json!([]),
                    )
                    .await;
                panic!("no element {css} within {limit:?}: {last} (page: {page})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the first element matching `css`. The console re-renders live views as the log
    /// moves, so an element found a moment ago may be gone: then it is looked up again.
    pub async fn click(&self, css: &str) {
        let mut last = String::new();
        for _ in 0..20 {
            let id = self.find(css, Duration::from_secs(20)).await;
            match self
                .try_raw("POST", &format!("/element/{id}/click"), json!({}))
                .await
            {
                Ok(_) => return,
                Err(e) if e.contains("stale element") => last = e,
                Err(e) => panic!("clicking {css}: {e}"),
            }
        }
        panic!("clicking {css}: still stale after 20 tries: {last}");
    }

    /// Sends `keys` (WebDriver key codes allowed) to whatever element has focus, as a person
    /// at the keyboard would.
    pub async fn press_keys(&self, keys: &str) {
        let actions: Vec<Value> = keys
            .chars()
            .flat_map(|k| {
                [
                    json!({"type": "keyDown", "value": k.to_string()}),
                    json!({"type": "keyUp", "value": k.to_string()}),
                ]
            })
            .collect();
        self.raw(
            "POST",
            "/actions",
            json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]}),
        )
        .await;
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css, Duration::from_secs(20)).await;
        self.raw("POST", &format!("/element/{id}/clear"), json!({}))
            .await;
        self.raw(
            "POST",
            &format!("/element/{id}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// Polls `script` (returning a truthy value when satisfied) until it holds; its value.
    pub async fn wait_for(&self, what: &str, limit: Duration, script: &str) -> Value {
        let start = Instant::now();
        loop {
            let v = self.js(script, json!([])).await;
            let ok = match &v {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if ok {
                return v;
            }
            if start.elapsed() > limit {
                self.screenshot(&format!("failed-{}", what.replace(' ', "-")))
                    .await;
                panic!("{what}: not within {limit:?} (last {v})");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Saves a PNG of the page as `NAME.png` in the screenshot directory.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let v = self.raw("GET", "/screenshot", json!({})).await;
        let png = decode_base64(v.as_str().unwrap_or_default());
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium; killing the driver ends anything left over.
        let url = self.base.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    let c = reqwest::Client::new();
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), c.delete(url).send()).await;
                });
            }
        })
        .join();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (what WebDriver screenshots are), ignoring padding and line breaks.
fn decode_base64(text: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for v in text.bytes().filter_map(val) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[test]
fn base64_decodes_what_webdriver_sends() {
    assert_eq!(decode_base64("iVBORw0KGgo="), b"\x89PNG\r\n\x1a\n");
    assert_eq!(decode_base64("Zm9vYmFy"), b"foobar");
    assert_eq!(decode_base64("Zm9vYg=="), b"foob");
}
