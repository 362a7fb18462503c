//! PostgreSQL for the tests: a fresh database per test on 127.0.0.1 (or `WARRANT_TEST_PG_URL`),
//! dropped at the end. When no server answers, one throwaway server is started per test binary
//! (`initdb` + `pg_ctl` in a temp dir on a free port, installing Debian's `postgresql` when the
//! binaries are missing). The PostgreSQL tests never skip: without a server they fail, saying why.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use postgres::{Client, NoTls};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The URL of a database the tests may create databases from.
fn admin_url() -> &'static str {
    static ADMIN: OnceLock<Result<String, String>> = OnceLock::new();
    let found = ADMIN.get_or_init(|| {
        if let Ok(url) = std::env::var("WARRANT_TEST_PG_URL") {
            // Asked for this server: not answering is a failure, not a reason to start another.
            return try_connect(&url)
                .map(|()| url.clone())
                .map_err(|e| format!("WARRANT_TEST_PG_URL={url} does not answer: {e}"));
        }
        let default_error = match try_connect(DEFAULT_URL) {
            Ok(()) => return Ok(DEFAULT_URL.to_owned()),
            Err(e) => e,
        };
        let server = Throwaway::start().map_err(|e| {
            format!(
                "no PostgreSQL on 127.0.0.1:5432 ({default_error}) and no throwaway server could be started: {e}"
            )
        })?;
        say(&format!(
            "no PostgreSQL on 127.0.0.1:5432, started a throwaway server at {} (data in {})",
            server.url,
            server.dir.display()
        ));
        let url = server.url.clone();
        // Stopped by its watcher when this test binary exits.
        std::mem::forget(server);
        Ok(url)
    });
    match found {
        Ok(url) => url,
        Err(e) => panic!("PostgreSQL tests cannot run: {e}"),
    }
}

/// Straight to stderr: the test harness captures `eprintln!`, and this must be seen.
fn say(what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "warrant tests: {what}");
}

fn try_connect(url: &str) -> Result<(), String> {
    let mut config: postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
    config.connect_timeout(Duration::from_secs(3));
    let mut client = config.connect(NoTls).map_err(|e| {
        std::error::Error::source(&e).map_or_else(|| e.to_string(), |c| format!("{e}: {c}"))
    })?;
    client
        .simple_query("SELECT 1")
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A database created for one test, dropped (connections and all) when the test ends.
#[derive(Debug)]
pub struct TestDb {
    admin: String,
    name: String,
    pub url: String,
}

impl TestDb {
    #[allow(clippy::new_without_default)] // Creating a database is not a default value.
    pub fn new() -> Self {
        Self::on(admin_url())
    }

    pub fn on(admin: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "warrant_test_{}_{}_{nanos:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let mut client = Client::connect(admin, NoTls).unwrap();
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        Self {
            admin: admin.to_owned(),
            url: with_dbname(admin, &name),
            name,
        }
    }

    /// A raw connection to the test database, to set up or inspect what the store can't.
    pub fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let dropped = Client::connect(&self.admin, NoTls).and_then(|mut c| {
            c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
        });
        if let Err(e) = dropped {
            eprintln!("warrant tests: could not drop {}: {e}", self.name);
        }
    }
}

/// `url` with its database name replaced (query parameters kept).
pub fn with_dbname(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(i) => &base[..authority_start + i],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// A PostgreSQL server of our own in a temporary directory, stopped and removed on drop, or
/// by its watcher process when the test binary exits without dropping it.
#[derive(Debug)]
pub struct Throwaway {
    pub url: String,
    pub dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
    /// The server's options (`pg_ctl start -o`), for starting it again after a stop.
    options: String,
}

/// The certificates of a TLS throwaway server ([`Throwaway::start_tls`]), all PEM files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA that signed the server's and the client's certificates.
    pub ca: PathBuf,
    /// A CA that signed nothing here: trusting it alone must refuse the server.
    pub other_ca: PathBuf,
    /// A client certificate for the role `certuser` (who may log in only with it), and its key
    /// (mode 0600).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// On a TLS throwaway server, the role that logs in with a password (SCRAM), and its password.
pub const PASSWORD_ROLE: &str = "pwuser";
pub const PASSWORD: &str = "s3cret-store-pw-4f1c";

/// The server certificate's names: 127.0.0.1 and `db.warrant.test`, so `localhost` does not match.
const SERVER_SAN: &str = "subjectAltName=IP:127.0.0.1,DNS:db.warrant.test";

impl Throwaway {
    pub fn start() -> Result<Self, String> {
        Self::start_with(None)
    }

    /// A server that accepts TCP connections over TLS only (plain TCP is rejected by its
    /// `pg_hba.conf`), with a certificate from a CA made for it; the role `certuser` logs in
    /// with its client certificate only, [`PASSWORD_ROLE`] with [`PASSWORD`] only. Its `url` is
    /// the Unix socket (for setup).
    pub fn start_tls() -> Result<(Self, TlsFiles), String> {
        let dir = tempfile::Builder::new()
            .prefix("warrant-pg-certs-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?
            .keep();
        let files = make_certificates(&dir)?;
        let server = Self::start_with(Some(&dir))?;
        let mut admin = Client::connect(&server.url, NoTls)
            .map_err(|e| format!("connecting over the socket: {e}"))?;
        admin
            .batch_execute(&format!(
                "CREATE ROLE certuser LOGIN SUPERUSER; CREATE ROLE {PASSWORD_ROLE} LOGIN SUPERUSER PASSWORD '{PASSWORD}'"
            ))
            .map_err(|e| format!("creating certuser: {e}"))?;
        Ok((server, files))
    }

    /// Restarts the server (`pg_ctl restart -m fast`): every connection is closed by it.
    pub fn restart(&self) -> Result<(), String> {
        let data = self.dir.join("data");
        self.run_pg(
            "pg_ctl",
            &[
                "restart".as_ref(),
                "-w".as_ref(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                self.dir.join("server.log").as_os_str(),
            ],
        )
    }

    /// Stops the server (`pg_ctl stop -m fast`) until [`Throwaway::start_again`]: an outage.
    pub fn stop(&self) -> Result<(), String> {
        let data = self.dir.join("data");
        self.run_pg(
            "pg_ctl",
            &[
                "stop".as_ref(),
                "-w".as_ref(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
            ],
        )
    }

    /// Starts the server [`Throwaway::stop`] stopped, on the same port and data.
    pub fn start_again(&self) -> Result<(), String> {
        let data = self.dir.join("data");
        self.run_pg(
            "pg_ctl",
            &[
                "start".as_ref(),
                "-w".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                self.dir.join("server.log").as_os_str(),
                "-o".as_ref(),
                self.options.as_ref(),
            ],
        )
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit_once("port=")
            .and_then(|(_, p)| p.split_whitespace().next())
            .or_else(|| {
                self.url
                    .rsplit_once(':')
                    .and_then(|(_, p)| p.split('/').next())
            })
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    }

    fn start_with(certs: Option<&std::path::Path>) -> Result<Self, String> {
        let bin = match find_bin() {
            Some(bin) => bin,
            None => {
                say("initdb/pg_ctl not found, running `apt-get install -y postgresql`");
                install_postgresql()?;
                find_bin().ok_or("apt-get installed postgresql but no initdb/pg_ctl was found under /usr/lib/postgresql/*/bin")?
            }
        };
        let as_postgres = is_root()?;
        let dir = tempfile::Builder::new()
            .prefix("warrant-pg-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?
            .keep();
        if as_postgres {
            // initdb and pg_ctl refuse to run as root; the server's files belong to `postgres`.
            run(Command::new("chown").arg("postgres:postgres").arg(&dir))?;
        }
        let mut server = Self {
            url: String::new(),
            dir,
            bin,
            as_postgres,
            options: String::new(),
        };
        let data = server.dir.join("data");
        server.run_pg(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("finding a free port: {e}"))?
            .port();
        let mut options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            server.dir.display()
        );
        if let Some(certs) = certs {
            // The server's key must belong to the server's user and be readable by it alone.
            for name in ["server.crt", "server.key", "ca.crt"] {
                std::fs::copy(certs.join(name), server.dir.join(name))
                    .map_err(|e| format!("copying {name}: {e}"))?;
            }
            let hba = server.dir.join("pg_hba.conf");
            std::fs::write(
                &hba,
                "local all all trust\n\
                 hostssl all certuser 127.0.0.1/32 cert\n\
                 hostssl all pwuser 127.0.0.1/32 scram-sha-256\n\
                 hostssl all all 127.0.0.1/32 trust\n\
                 hostnossl all all 0.0.0.0/0 reject\n",
            )
            .map_err(|e| format!("writing pg_hba.conf: {e}"))?;
            if as_postgres {
                run(Command::new("chown")
                    .arg("postgres:postgres")
                    .args(["server.crt", "server.key", "ca.crt", "pg_hba.conf"])
                    .current_dir(&server.dir))?;
            }
            run(Command::new("chmod")
                .args(["0600", "server.key"])
                .current_dir(&server.dir))?;
            let d = server.dir.display();
            options.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={d}/server.crt -c ssl_key_file={d}/server.key -c ssl_ca_file={d}/ca.crt -c hba_file={d}/pg_hba.conf"
            ));
        }
        server.run_pg(
            "pg_ctl",
            &[
                "start".as_ref(),
                "-w".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                server.dir.join("server.log").as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
            ],
        )?;
        server.options = options;
        server.spawn_watcher()?;
        let url = if certs.is_some() {
            // Plain TCP is refused by design; setup goes through the socket.
            format!(
                "host={} port={port} user=postgres dbname=postgres",
                server.dir.display()
            )
        } else {
            format!("postgres://postgres@127.0.0.1:{port}/postgres")
        };
        try_connect(&url).map_err(|e| format!("the throwaway server does not answer: {e}"))?;
        server.url = url;
        Ok(server)
    }

    fn command(&self, tool: &str) -> Command {
        let path = self.bin.join(tool);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn run_pg(&self, tool: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
        run(self.command(tool).args(args).current_dir(&self.dir))
    }

    /// A shell that waits for this process to exit, then stops the server and removes its
    /// directory: a static is never dropped, and the server must not outlive the tests.
    fn spawn_watcher(&self) -> Result<(), String> {
        let pg_ctl = self.bin.join("pg_ctl");
        let runuser = if self.as_postgres {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {runuser}'{pg_ctl}' stop -m immediate -D '{data}'; rm -rf '{dir}'",
            pid = std::process::id(),
            pg_ctl = pg_ctl.display(),
            data = self.dir.join("data").display(),
            dir = self.dir.display(),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(|_| ())
            .map_err(|e| format!("starting the server's watcher: {e}"))
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let stopped = run(self.command("pg_ctl").args([
            "stop".as_ref(),
            "-m".as_ref(),
            "fast".as_ref(),
            "-D".as_ref(),
            data.as_os_str(),
        ]));
        if let Err(e) = stopped {
            eprintln!("warrant tests: stopping the throwaway server: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A CA, a server certificate it signed (see [`SERVER_SAN`]), a client certificate for
/// `certuser`, and an unrelated CA, made with the `openssl` command.
fn make_certificates(dir: &std::path::Path) -> Result<TlsFiles, String> {
    let openssl = |args: &[&str]| run(Command::new("openssl").args(args).current_dir(dir));
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    for (name, cn) in [("ca", "warrant test CA"), ("other-ca", "unrelated CA")] {
        let subject = format!("/CN={cn}");
        let (k, c) = (format!("{name}.key"), format!("{name}.crt"));
        let mut args = vec!["req", "-x509"];
        args.extend(key);
        args.extend(["-keyout", &k, "-out", &c, "-days", "2", "-subj", &subject]);
        args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
        args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(&args)?;
    }
    std::fs::write(dir.join("server.ext"), format!("{SERVER_SAN}\n"))
        .map_err(|e| format!("writing server.ext: {e}"))?;
    std::fs::write(dir.join("client.ext"), "basicConstraints=CA:FALSE\n")
        .map_err(|e| format!("writing client.ext: {e}"))?;
    for (name, cn) in [("server", "db.warrant.test"), ("client", "certuser")] {
        let subject = format!("/CN={cn}");
        let (k, r, c, e) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        let mut args = vec!["req"];
        args.extend(key);
        args.extend(["-keyout", &k, "-out", &r, "-subj", &subject]);
        openssl(&args)?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            &r,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &c,
            "-days",
            "2",
            "-extfile",
            &e,
        ])?;
    }
    run(Command::new("chmod")
        .args(["0600", "client.key"])
        .current_dir(dir))?;
    Ok(TlsFiles {
        ca: dir.join("ca.crt"),
        other_ca: dir.join("other-ca.crt"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
    })
}

/// The newest `/usr/lib/postgresql/VERSION/bin` that has both `initdb` and `pg_ctl`.
fn find_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn install_postgresql() -> Result<(), String> {
    let install = || {
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "postgresql"])
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    install().or_else(|_| {
        // The package lists may be missing or stale on a fresh machine.
        run(Command::new("apt-get").args(["update", "-q"]))?;
        install()
    })
}

fn is_root() -> Result<bool, String> {
    let out = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("id -u: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
