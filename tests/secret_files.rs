//! Secret files (`{ file = "…" }`) are read as ssh reads a key (REPORT H1, H6): real files
//! with real modes, a real FIFO (`mkfifo`), `/dev/zero`, a directory, a file over the
//! bound, a Kubernetes-style symlink; and `culprit check-config` on them (the binary).

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use culprit::config::SecretSource;
use culprit::config::secret_file::MAX_SECRET_BYTES;
use secrecy::ExposeSecret as _;

const TOKEN: &str = "s3cr3t-t0ken-value";

fn secret(dir: &Path, name: &str, content: &[u8], mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn resolve(path: &Path) -> Result<String, String> {
    SecretSource::File(path.to_path_buf()).resolve().map(|s| s.expose_secret().to_string())
}

#[test]
fn a_private_file_is_read_and_a_group_readable_one_too() {
    let tmp = tempfile::tempdir().unwrap();
    for mode in [0o600, 0o400, 0o440, 0o640] {
        let path = secret(tmp.path(), &format!("t{mode:o}"), format!("{TOKEN}\n").as_bytes(), mode);
        assert_eq!(resolve(&path).unwrap(), TOKEN, "{mode:o}");
    }
}

#[test]
fn a_file_other_users_can_write_is_refused_naming_the_file_and_its_mode_never_the_value() {
    let tmp = tempfile::tempdir().unwrap();
    for mode in [0o666, 0o662, 0o620, 0o602] {
        let path = secret(tmp.path(), &format!("t{mode:o}"), TOKEN.as_bytes(), mode);
        let err = resolve(&path).unwrap_err();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains(&format!("(mode {mode:04o})")) && err.contains("changed by other users"), "{err}");
        assert!(!err.contains(TOKEN), "{err}");
    }
}

#[test]
fn a_world_readable_file_is_read_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let path = secret(tmp.path(), "t644", TOKEN.as_bytes(), 0o644);
    assert_eq!(resolve(&path).unwrap(), TOKEN);
    let warnings = culprit::config::secret_file::warnings();
    let w = warnings.iter().find(|w| w.contains(&path.display().to_string())).expect("warned");
    assert!(w.contains("readable by every local user (mode 0644)") && !w.contains(TOKEN), "{w}");
}

#[test]
fn a_fifo_a_device_and_a_directory_are_refused_at_once_without_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    // No one ever writes to it: opening it to read would block forever.
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let started = Instant::now();
    let cases =
        [(fifo, "is a FIFO"), ("/dev/zero".into(), "is a device"), (tmp.path().to_path_buf(), "is a directory")];
    for (path, why) in cases {
        let err = resolve(&path).unwrap_err();
        assert!(err.contains(why) && err.contains("not a regular file"), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
    assert!(started.elapsed() < Duration::from_secs(5), "nothing blocked");
}

#[test]
fn a_file_over_the_bound_is_refused_and_one_at_the_bound_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    // 64 KiB = 65536 bytes is the most; one byte more is refused.
    let at = secret(tmp.path(), "at", &vec![b'a'; MAX_SECRET_BYTES as usize], 0o600);
    assert_eq!(resolve(&at).unwrap().len(), 65_536);
    let over = secret(tmp.path(), "over", &vec![b'a'; MAX_SECRET_BYTES as usize + 1], 0o600);
    let err = resolve(&over).unwrap_err();
    assert!(err.contains("is 65537 bytes, more than a secret may be (64 KiB)"), "{err}");
}

#[test]
fn a_kubernetes_secret_mount_is_followed_through_its_symlinks_and_its_target_checked() {
    // The kubelet's layout: key -> ..data/key, ..data -> ..2026_12_01_21_00_00.1234/.
    let tmp = tempfile::tempdir().unwrap();
    let version = tmp.path().join("..2026_12_01_21_00_00.1234");
    std::fs::create_dir(&version).unwrap();
    secret(&version, "webhook-token", TOKEN.as_bytes(), 0o440);
    std::os::unix::fs::symlink("..2026_12_01_21_00_00.1234", tmp.path().join("..data")).unwrap();
    let key = tmp.path().join("webhook-token");
    std::os::unix::fs::symlink("..data/webhook-token", &key).unwrap();
    assert_eq!(resolve(&key).unwrap(), TOKEN);
    // The link's own mode (0777) does not count; the target's does.
    std::fs::set_permissions(version.join("webhook-token"), std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(resolve(&key).unwrap_err().contains("(mode 0666)"));
}

fn check_config(dir: &Path, token: &Path) -> (Option<i32>, String, String) {
    let config = dir.join("culprit.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nauth = {{ type = \"bearer\", token = {{ file = \"{}\" }} }}\n",
        token.display()
    );
    std::fs::write(&config, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_culprit"))
        .arg("check-config")
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("check-config hung on {}", token.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn check_config_refuses_a_writable_secret_a_fifo_and_dev_zero_and_warns_about_a_readable_one() {
    let tmp = tempfile::tempdir().unwrap();
    let readable = secret(tmp.path(), "readable", TOKEN.as_bytes(), 0o644);
    let (code, out, err) = check_config(tmp.path(), &readable);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("warning: the secret file") && out.contains("(mode 0644)"), "{out}");
    let writable = secret(tmp.path(), "writable", TOKEN.as_bytes(), 0o666);
    let (code, out, err) = check_config(tmp.path(), &writable);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        out.contains("problem: server.auth.token: the secret file") && out.contains("changed by other users"),
        "{out}"
    );
    let fifo = tmp.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for path in [fifo, "/dev/zero".into()] {
        let (code, out, err) = check_config(tmp.path(), &path);
        assert_eq!(code, Some(2), "{out}{err}");
        assert!(out.contains("not a regular file"), "{out}");
        for text in [&out, &err] {
            assert!(!text.contains(TOKEN));
        }
    }
}
