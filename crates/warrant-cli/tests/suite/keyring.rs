//! Credentials in the OS keyring (issue 21): a real Secret Service (GNOME Keyring on a private
//! session bus this test starts), `credentials set/list/check/delete` against it, the first
//! hour's `configure` storing the provider key there and a run reading it back as `cred:NAME`;
//! a locked collection and an absent keyring refused with their codes and nothing written.
//! Skipped, loudly, only when `dbus-daemon` or `gnome-keyring-daemon` is not installed
//! (`.ci/run` installs both).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::first_hour::{KEY, completion, configure, endpoint};
use super::harness::{Sandbox, stderr, stdout, wait_until};

/// A private session bus and a GNOME Keyring serving `org.freedesktop.secrets` on it; both
/// stopped when dropped.
struct SecretService {
    address: String,
    bus: Child,
    keyring: Child,
    dir: tempfile::TempDir,
}

impl Drop for SecretService {
    fn drop(&mut self) {
        for child in [&mut self.keyring, &mut self.bus] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

impl SecretService {
    /// Starts the bus and the keyring, its `login` collection created and unlocked with a
    /// password given on standard input. `None` (with a loud message) when not installed.
    fn start() -> Option<Self> {
        let missing: Vec<&str> = [
            "dbus-daemon",
            "dbus-send",
            "gnome-keyring-daemon",
            "secret-tool",
        ]
        .into_iter()
        .filter(|p| !installed(p))
        .collect();
        if !missing.is_empty() {
            eprintln!(
                "\n*** SKIPPING the OS keyring test: {missing:?} not installed \
                 (apt-get install -y gnome-keyring dbus dbus-x11 libsecret-tools) ***\n"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .arg(format!(
                "--address=unix:path={}",
                dir.path().join("bus").display()
            ))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(bus.stdout.take().unwrap()).lines();
        let address = lines.next().unwrap().unwrap();
        std::thread::spawn(move || for _ in lines {});
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .envs(Self::env_of(dir.path(), &address))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = keyring.stdin.take().unwrap();
        stdin.write_all(b"keyring-test-password").unwrap();
        drop(stdin);
        let ss = Self {
            address,
            bus,
            keyring,
            dir,
        };
        wait_until(
            "the keyring to own org.freedesktop.secrets",
            Duration::from_secs(20),
            || {
                ss.tool(
                    "dbus-send",
                    &[
                        "--session",
                        "--dest=org.freedesktop.DBus",
                        "--type=method_call",
                        "--print-reply",
                        "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.NameHasOwner",
                        "string:org.freedesktop.secrets",
                    ],
                )
                .contains("boolean true")
            },
        );
        Some(ss)
    }

    fn env_of(dir: &Path, address: &str) -> Vec<(String, String)> {
        let home = dir.join("home");
        vec![
            ("DBUS_SESSION_BUS_ADDRESS".into(), address.to_owned()),
            ("HOME".into(), home.display().to_string()),
            (
                "XDG_DATA_HOME".into(),
                home.join(".local/share").display().to_string(),
            ),
            (
                "XDG_RUNTIME_DIR".into(),
                dir.join("run").display().to_string(),
            ),
        ]
    }

    /// Runs a D-Bus or libsecret tool on this bus: the independent view of the keyring.
    fn tool(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .envs(Self::env_of(self.dir.path(), &self.address))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The value libsecret finds for a Warrant credential of this name (any workspace).
    fn lookup(&self, name: &str) -> String {
        self.tool(
            "secret-tool",
            &[
                "lookup",
                "application",
                "warrant",
                "warrant-credential",
                name,
            ],
        )
    }

    fn lock(&self) {
        let reply = self.tool(
            "dbus-send",
            &[
                "--session",
                "--dest=org.freedesktop.secrets",
                "--type=method_call",
                "--print-reply",
                "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service.Lock",
                "array:objpath:/org/freedesktop/secrets/collection/login",
            ],
        );
        assert!(reply.contains("collection/login"), "{reply}");
    }

    /// A sandbox whose commands see this bus.
    fn sandbox(&self, sb: Sandbox) -> Sandbox {
        let mut sb = sb;
        sb.extra_env
            .push(("DBUS_SESSION_BUS_ADDRESS".into(), self.address.clone()));
        sb
    }
}

fn use_key(sb: &Sandbox, url: &str, credential: &str) {
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[providers.openai]\nbase_url = \"{url}\"\napi_key = \"cred:{credential}\"\n"
    ));
    std::fs::write(&config, text).unwrap();
}

#[test]
fn credentials_live_in_a_real_secret_service_and_a_run_reads_its_key() {
    let Some(ss) = SecretService::start() else {
        return;
    };
    let sb = ss.sandbox(Sandbox::init());

    // Asked for by name: the keyring, and the value is there for any Secret Service client.
    let out = sb.run_stdin(
        &["credentials", "set", "openai-key", "--in", "keyring"],
        &format!("{KEY}\n"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("in the OS keyring"),
        "{}",
        stdout(&out)
    );
    assert_eq!(ss.lookup("openai-key"), KEY);
    assert!(!sb.exists(".warrant/credentials.json"));

    // By default too, when the keyring answers.
    let out = sb.run_stdin(&["credentials", "set", "sink-token"], "tok-ring-1\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(ss.lookup("sink-token"), "tok-ring-1");

    let (url, seen) = endpoint(vec![completion(
        json!({"role": "assistant", "content": "Hello from the endpoint."}),
    )]);
    use_key(&sb, &url, "openai-key");
    let mut list = sb.json(&["credentials", "list", "--json"]);
    for row in list["credentials"].as_array_mut().unwrap() {
        assert!(row["set_at"].is_string(), "{row}");
        row["set_at"] = Value::Null;
    }
    assert!(
        list["note"]
            .as_str()
            .unwrap()
            .starts_with("the OS keyring answered"),
        "{list}"
    );
    assert_eq!(
        list["credentials"],
        json!([
            {"name": "openai-key", "stored_in": "OS keyring", "path": "Secret Service collection `Login`",
             "set_at": null, "used_by": ["providers.openai.api_key"], "readable": true},
            {"name": "sink-token", "stored_in": "OS keyring", "path": "Secret Service collection `Login`",
             "set_at": null, "used_by": [], "readable": true},
        ])
    );
    let out = sb.run(&["credentials", "check", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    // The run's provider key is `cred:openai-key`, read from the keyring.
    let out = sb.run(&["run", "--model", "openai:gpt-test", "say hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].authorization, Some(format!("Bearer {KEY}")));

    // Control: with the keyring switched off the same reference does not resolve (the key
    // above came from the keyring, nowhere else).
    let out = sb
        .cmd(&["run", "--model", "openai:gpt-test", "say hello"])
        .env("WARRANT_TEST_DISABLE", "keyring")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-CRED-004"), "{}", stderr(&out));

    // Stored in the vault by name: the keyring's copy goes, one place per name.
    let out = sb.run_stdin(
        &["credentials", "set", "sink-token", "--in", "vault"],
        "tok-vault-2\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("replaced"), "{}", stdout(&out));
    assert_eq!(ss.lookup("sink-token"), "");

    let out = sb.run(&["credentials", "delete", "openai-key"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(ss.lookup("openai-key"), "");
    let out = sb.run(&["credentials", "delete", "openai-key"]);
    assert!(
        stderr(&out).starts_with("error[W-CRED-002]"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn configure_stores_the_provider_key_in_the_keyring_and_the_run_uses_it() {
    let Some(ss) = SecretService::start() else {
        return;
    };
    let sb = ss.sandbox(Sandbox::new());
    let (url, seen) = endpoint(vec![
        completion(json!({"role": "assistant", "content": "OK"})),
        completion(json!({"role": "assistant", "content": "Done."})),
    ]);
    let out = configure(&sb, &url, "gpt-test", KEY);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(ss.lookup("openai-api-key"), KEY);
    assert!(!sb.exists(".warrant/credentials.json"));
    let out = sb.run(&["run", "say done"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        seen.lock().unwrap().last().unwrap().authorization,
        Some(format!("Bearer {KEY}"))
    );
}

#[test]
fn a_locked_or_absent_keyring_is_refused_when_asked_for_and_nothing_is_written() {
    let Some(ss) = SecretService::start() else {
        return;
    };
    let sb = ss.sandbox(Sandbox::init());
    let out = sb.run_stdin(&["credentials", "set", "ring-key"], &format!("{KEY}\n"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (url, seen) = endpoint(Vec::new());
    use_key(&sb, &url, "ring-key");
    ss.lock();

    // Asked for by name: refused, with the collection named and nothing written anywhere.
    let out = sb.run_stdin(
        &["credentials", "set", "new-one", "--in", "keyring"],
        "v-1\n",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error[W-CRED-006]") && stderr(&out).contains("`Login` is locked"),
        "{}",
        stderr(&out)
    );
    assert!(!sb.exists(".warrant/credentials.json"));

    // By default: the vault, and the person is told why.
    let out = sb.run_stdin(&["credentials", "set", "new-one"], "v-1\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("in the encrypted vault"),
        "{}",
        stdout(&out)
    );
    assert!(stderr(&out).contains("W-CRED-006"), "{}", stderr(&out));

    let list = sb.json(&["credentials", "list", "--json"]);
    let rows: Vec<(String, String, bool)> = list["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["stored_in"].as_str().unwrap().to_owned(),
                r["readable"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("new-one".to_owned(), "encrypted vault".to_owned(), true),
            ("ring-key".to_owned(), "OS keyring".to_owned(), false),
        ]
    );
    assert!(
        list["note"].as_str().unwrap().contains("is locked"),
        "{list}"
    );

    // A run whose key is in the locked collection: a clear refusal, nothing sent.
    let out = sb.run(&["run", "--model", "openai:gpt-test", "say hello"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("W-CRED-008") && stderr(&out).contains("locked"),
        "{}",
        stderr(&out)
    );
    assert!(seen.lock().unwrap().is_empty());
    let out = sb.run(&["credentials", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("W-CRED-006"), "{}", stdout(&out));

    // No keyring at all (a bus nobody listens on): refused by name, the vault by default.
    let mut absent = Sandbox::init();
    absent.extra_env.push((
        "DBUS_SESSION_BUS_ADDRESS".into(),
        format!("unix:path={}", absent.dir.path().join("nobody").display()),
    ));
    let out = absent.run_stdin(&["credentials", "set", "k", "--in", "keyring"], "v-2\n");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error[W-CRED-005]"),
        "{}",
        stderr(&out)
    );
    assert!(!absent.exists(".warrant/credentials.json"));
    let out = absent.run_stdin(&["credentials", "set", "k"], "v-2\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-CRED-005"), "{}", stderr(&out));
}
