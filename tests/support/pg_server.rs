//! A real PostgreSQL for tests: `initdb` in a temporary directory, `postgres` on a free
//! TCP port of 127.0.0.1 (password authentication, SCRAM) with its unix socket in the same
//! directory, stopped and removed when dropped — or, for the server shared by a test
//! binary, by a watchdog once the test process is gone.
//!
//! The binaries are Debian's (`postgresql` package, `/usr/lib/postgresql/<version>/bin`,
//! or `CULPRIT_PG_BIN`). PostgreSQL refuses to run as root: as root, every command runs as
//! the `postgres` user the package creates.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The superuser and its password (a test secret).
pub const USER: &str = "culprit";
pub const PASSWORD: &str = "test-only-pg-password";

pub struct PgServer {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    /// Whether `drop` stops it (the shared server is stopped by its watchdog).
    owned: bool,
}

/// The environment variable that lets the PostgreSQL tests be skipped on a machine
/// without PostgreSQL: set to `1`, they pass without running (a message says so); unset,
/// a missing PostgreSQL fails them.
pub const SKIP_ENV: &str = "CULPRIT_SKIP_POSTGRES_TESTS";

/// Whether [`SKIP_ENV`] is set to `1`.
pub fn skip_requested() -> bool {
    std::env::var(SKIP_ENV).is_ok_and(|v| v == "1")
}

/// What a test says when PostgreSQL is not installed and no skip was asked for.
pub fn not_installed() -> String {
    format!(
        "PostgreSQL is not installed: the PostgreSQL tests cannot run. Install it (apt-get install postgresql; \
         scripts/test.sh does it), point CULPRIT_PG_BIN at its bin directory, or set {SKIP_ENV}=1 to skip them on purpose"
    )
}

/// The directory of PostgreSQL's binaries, if installed.
pub fn bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("CULPRIT_PG_BIN") {
        let dir = PathBuf::from(dir);
        return dir.join("initdb").exists().then_some(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists() && p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// A command run as the `postgres` user when we are root.
fn command(bin: &Path, program: &str) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

fn run(mut c: Command, what: &str) {
    let out = c.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl PgServer {
    /// A new server of our own. `durable`: fsync as in production (for benches); tests
    /// run without. PostgreSQL not installed is a failure with the way out (CI installs it,
    /// `scripts/test.sh` too), never a silent pass: only with [`SKIP_ENV`]` = 1` set on
    /// purpose is it `None` (the caller skips, with a message).
    pub fn start(durable: bool) -> Option<PgServer> {
        let Some(bin) = bin_dir() else {
            if skip_requested() {
                eprintln!("SKIPPED: PostgreSQL is not installed and {SKIP_ENV}=1: the PostgreSQL tests did not run");
                return None;
            }
            panic!("{}", not_installed());
        };
        let dir = std::env::temp_dir().join(format!("culprit-pg-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("pw"), PASSWORD).unwrap();
        if is_root() {
            run(
                {
                    let mut c = Command::new("chown");
                    c.args(["-R", "postgres:"]).arg(&dir);
                    c
                },
                "chown",
            );
        }
        let mut init = command(&bin, "initdb");
        init.arg("-D").arg(dir.join("data")).args(["-U", USER, "--auth-local=trust", "--auth-host=scram-sha-256"]);
        init.arg(format!("--pwfile={}", dir.join("pw").display())).args(["-E", "UTF8", "--no-sync"]);
        run(init, "initdb");
        let server = PgServer { dir, bin, port: free_port(), owned: true };
        server.configure(durable);
        server.pg_ctl_start();
        Some(server)
    }

    /// The server shared by the tests of this process (each test makes its own database).
    pub fn shared() -> Option<&'static PgServer> {
        static SHARED: OnceLock<Option<PgServer>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                let mut s = PgServer::start(false)?;
                s.owned = false;
                s.watchdog();
                Some(s)
            })
            .as_ref()
    }

    fn configure(&self, durable: bool) {
        // Without `durable`, no fsync: a stopped (even killed) server loses nothing the
        // kernel holds, and only a machine crash would. Commits stay synchronous: an
        // acknowledged commit is in the WAL the kernel holds.
        let sync = if durable { "on" } else { "off" };
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{}'\nmax_connections = 300\nshared_buffers = 64MB\nfsync = {sync}\nsynchronous_commit = on\nfull_page_writes = {sync}\nlog_min_messages = warning\n",
            self.port,
            self.dir.display()
        );
        let path = self.dir.join("data/postgresql.auto.conf");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&conf);
        std::fs::write(&path, text).unwrap();
    }

    fn pg_ctl_start(&self) {
        let mut c = command(&self.bin, "pg_ctl");
        c.arg("-D").arg(self.dir.join("data")).arg("-l").arg(self.dir.join("log")).args(["-w", "-t", "60", "start"]);
        run(c, "pg_ctl start");
    }

    /// Stops it at once (as a crash or an operator's restart would: connections cut).
    pub fn stop(&self) {
        let mut c = command(&self.bin, "pg_ctl");
        c.arg("-D").arg(self.dir.join("data")).args(["-w", "-m", "immediate", "stop"]);
        run(c, "pg_ctl stop");
    }

    /// Starts it again after [`PgServer::stop`].
    pub fn restart(&self) {
        self.pg_ctl_start();
    }

    /// Stops the shared server and removes its directory once this process is gone.
    fn watchdog(&self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let as_pg = if is_root() { "runuser -u postgres -- " } else { "" };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {as_pg}{pg_ctl} -D {dir}/data -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            pg_ctl = pg_ctl.display(),
            dir = self.dir.display()
        );
        // Outlives this process on purpose: it cleans up after it.
        #[allow(clippy::zombie_processes)]
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the watchdog starts");
    }

    /// Creates database `name` and returns its URL (without the password).
    pub fn database(&self, name: &str) -> String {
        let mut c = command(&self.bin, "psql");
        c.arg("-h").arg(&self.dir).args(["-p", &self.port.to_string(), "-U", USER, "-d", "postgres", "-q", "-c"]);
        c.arg(format!("CREATE DATABASE \"{name}\""));
        run(c, "CREATE DATABASE");
        self.url(name)
    }

    /// The URL of database `name` (no password: it comes from `store.password`).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs SQL in database `name` (as an operator would), returning psql's output.
    pub fn psql(&self, name: &str, sql: &str) -> String {
        let mut c = command(&self.bin, "psql");
        c.arg("-h").arg(&self.dir).args(["-p", &self.port.to_string(), "-U", USER, "-d", name]);
        c.args(["-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql]);
        let out = c.stdin(Stdio::null()).output().expect("psql runs");
        assert!(out.status.success(), "psql failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.owned {
            let mut c = command(&self.bin, "pg_ctl");
            c.arg("-D").arg(self.dir.join("data")).args(["-m", "immediate", "stop"]);
            let _ = c.stdout(Stdio::null()).stderr(Stdio::null()).status();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
