//! Reading a secret from a file (`{ file = "…" }`) the way ssh reads a private key and
//! libpq `.pgpass`: only a regular file (a symlink is followed to one, as Kubernetes mounts
//! a Secret through `..data/`), at most [`MAX_SECRET_BYTES`] of it, and never one that
//! another user could replace.
//!
//! * A directory, FIFO, socket or device is refused before it is opened: a FIFO would
//!   block the read until someone writes, `/dev/zero` would never end.
//! * A file larger than [`MAX_SECRET_BYTES`] is refused; the read itself stops one byte
//!   past the bound, whatever the file's size says (`/proc` files say 0).
//! * Group- or world-writable (mode `& 0o022`): refused, since any such user could put
//!   their own token in and be let in, or point culprit's posts elsewhere.
//! * World-readable (mode `& 0o004`, e.g. 0644, a Kubernetes Secret's default mode):
//!   accepted with a warning, since every local user can read it. Group-readable (0440,
//!   the shipped Deployment's `defaultMode` with its `fsGroup`) is fine.
//!
//! Errors and warnings name the file and its mode, never a byte of its content.

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::Path;
use std::sync::Mutex;

/// The warnings given so far, each logged once (a templated Flink cluster resolves its
/// secret per job).
static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Logs `warning` at WARN the first time it is given.
pub fn warn_once(warning: &str) {
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.insert(warning.to_string()) {
        tracing::warn!("{warning}");
    }
}

/// Every warning given so far (for `check-config`, which prints them).
pub fn warnings() -> Vec<String> {
    WARNED.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect()
}

/// The largest secret file read, bytes. Tokens, keys, passwords and webhook URLs are well
/// under 1 KiB; 64 KiB leaves room for anything reasonable while a wrong path (a log, a
/// device) fails at once instead of being read whole.
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// A secret file's content, and a warning to log when others may read it.
pub struct SecretFile {
    pub text: String,
    pub warning: Option<String>,
}

/// What `kind` of file this is, in words, when it is not a regular file.
fn not_regular(kind: std::fs::FileType) -> Option<&'static str> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return Some("a FIFO");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
        if kind.is_char_device() || kind.is_block_device() {
            return Some("a device");
        }
    }
    if kind.is_dir() {
        Some("a directory")
    } else if kind.is_file() {
        None
    } else {
        Some("not a regular file")
    }
}

/// Reads the secret file at `path` (see the module docs). The error is one sentence
/// naming the file, e.g. "the secret file /run/x can be changed by other users (mode
/// 0666); make it 0600 or 0400 (chmod go-w)".
pub fn read(path: &Path) -> Result<SecretFile, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read the secret file {shown}: {e}"))?;
    if let Some(kind) = not_regular(meta.file_type()) {
        return Err(format!("the secret file {shown} is {kind}, not a regular file"));
    }
    let warning = permissions(path, &meta)?;
    if meta.len() > MAX_SECRET_BYTES {
        return Err(too_big(path, Some(meta.len())));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read the secret file {shown}: {e}"))?;
    // The file opened is the one checked (not swapped for a FIFO or device meanwhile).
    let opened = file.metadata().map_err(|e| format!("cannot read the secret file {shown}: {e}"))?;
    if let Some(kind) = not_regular(opened.file_type()) {
        return Err(format!("the secret file {shown} is {kind}, not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the secret file {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_SECRET_BYTES {
        return Err(too_big(path, None));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("the secret file {shown} is not UTF-8 text"))?;
    Ok(SecretFile { text, warning })
}

fn too_big(path: &Path, size: Option<u64>) -> String {
    let size = size.map(|s| format!("{s} bytes")).unwrap_or_else(|| format!("more than {MAX_SECRET_BYTES} bytes"));
    format!(
        "the secret file {} is {size}, more than a secret may be ({} KiB); is it the right file?",
        path.display(),
        MAX_SECRET_BYTES / 1024
    )
}

/// Refuses a group- or world-writable file; a warning for a world-readable one.
#[cfg(unix)]
fn permissions(path: &Path, meta: &std::fs::Metadata) -> Result<Option<String>, String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "the secret file {} can be changed by other users (mode {mode:04o}); make it 0600 or 0400 (chmod go-w)",
            path.display()
        ));
    }
    Ok((mode & 0o004 != 0).then(|| {
        format!(
            "the secret file {} is readable by every local user (mode {mode:04o}); make it 0600, 0400 or 0440 (chmod o-r; on Kubernetes, the Secret volume's defaultMode)",
            path.display()
        )
    }))
}

#[cfg(not(unix))]
fn permissions(_path: &Path, _meta: &std::fs::Metadata) -> Result<Option<String>, String> {
    Ok(None)
}
