//! A fault-injecting disk for SQLite: a VFS shim over the platform's default VFS that
//! makes every write to a file under a chosen directory fail with `SQLITE_FULL` — what
//! SQLite reports when `write(2)` returns `ENOSPC` — while the fault is on.
//!
//! Every write fails, overwrites included: on copy-on-write filesystems (btrfs, ZFS) and
//! thin volumes a full disk refuses those too, and it keeps tests deterministic (a write
//! into space the WAL already holds would otherwise succeed or not depending on where the
//! WAL stands). Reads, locks and the shared-memory index keep working, as on a real full
//! disk. The shim is registered once per process as the default VFS; files outside every
//! faulty directory are untouched, so tests running in parallel do not see each other's
//! faults.
//!
//! ```ignore
//! let disk = faulty_disk::FaultyDir::new(tmp.path());
//! disk.fill();   // writes fail with "database or disk is full"
//! disk.free();   // writes work again
//! ```

#![allow(dead_code, unsafe_code, clippy::missing_safety_doc)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

use rusqlite::ffi;

/// The faulty directories: a path prefix and its switch (leaked: lives as long as the
/// process, like the VFS).
static DIRS: Mutex<Vec<(PathBuf, &'static AtomicBool)>> = Mutex::new(Vec::new());
static REGISTER: Once = Once::new();
static mut REAL: *mut ffi::sqlite3_vfs = std::ptr::null_mut();

/// A directory whose files can be made to fail every write.
pub struct FaultyDir {
    full: &'static AtomicBool,
}

impl FaultyDir {
    /// Registers `dir` (files opened later under it are watched); the disk starts healthy.
    pub fn new(dir: &Path) -> FaultyDir {
        register();
        let full: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        DIRS.lock().unwrap().push((dir, full));
        FaultyDir { full }
    }

    /// Every write under the directory fails with `SQLITE_FULL` from now on.
    pub fn fill(&self) {
        self.full.store(true, Ordering::SeqCst);
    }

    /// Writes work again.
    pub fn free(&self) {
        self.full.store(false, Ordering::SeqCst);
    }
}

/// Our file: SQLite allocates `szOsFile` bytes; the real VFS's file follows our header.
#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    full: *const AtomicBool,
    real: ffi::sqlite3_file,
}

unsafe fn real_file(f: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    unsafe { std::ptr::addr_of_mut!((*(f as *mut ShimFile)).real) }
}

unsafe fn real_methods(f: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    unsafe { &*(*real_file(f)).pMethods }
}

fn register() {
    REGISTER.call_once(|| unsafe {
        let real = ffi::sqlite3_vfs_find(std::ptr::null());
        assert!(!real.is_null(), "SQLite has no default VFS");
        REAL = real;
        let mut shim: ffi::sqlite3_vfs = std::ptr::read(real);
        shim.szOsFile = (std::mem::offset_of!(ShimFile, real) as c_int) + (*real).szOsFile;
        shim.zName = c"culprit-faulty-disk".as_ptr();
        shim.pNext = std::ptr::null_mut();
        shim.xOpen = Some(shim_open);
        let rc = ffi::sqlite3_vfs_register(Box::leak(Box::new(shim)), 1);
        assert_eq!(rc, ffi::SQLITE_OK, "cannot register the faulty-disk VFS");
    });
}

fn switch_for(name: *const c_char) -> *const AtomicBool {
    if name.is_null() {
        return std::ptr::null();
    }
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
    let dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    dirs.iter()
        .find(|(dir, _)| Path::new(&name).starts_with(dir))
        .map_or(std::ptr::null(), |(_, s)| *s as *const AtomicBool)
}

unsafe extern "C" fn shim_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    unsafe {
        let shim = file as *mut ShimFile;
        (*shim).base.pMethods = std::ptr::null();
        (*shim).full = switch_for(name);
        let rc = ((*REAL).xOpen.unwrap())(REAL, name, real_file(file), flags, out_flags);
        if rc == ffi::SQLITE_OK && !(*real_file(file)).pMethods.is_null() {
            (*shim).base.pMethods = &METHODS;
        }
        rc
    }
}

unsafe fn is_full(f: *mut ffi::sqlite3_file) -> bool {
    let s = unsafe { (*(f as *mut ShimFile)).full };
    !s.is_null() && unsafe { &*s }.load(Ordering::SeqCst)
}

unsafe extern "C" fn x_close(f: *mut ffi::sqlite3_file) -> c_int {
    unsafe { (real_methods(f).xClose.unwrap())(real_file(f)) }
}
unsafe extern "C" fn x_read(f: *mut ffi::sqlite3_file, buf: *mut c_void, n: c_int, off: i64) -> c_int {
    unsafe { (real_methods(f).xRead.unwrap())(real_file(f), buf, n, off) }
}
unsafe extern "C" fn x_write(f: *mut ffi::sqlite3_file, buf: *const c_void, n: c_int, off: i64) -> c_int {
    unsafe {
        if is_full(f) {
            return ffi::SQLITE_FULL;
        }
        (real_methods(f).xWrite.unwrap())(real_file(f), buf, n, off)
    }
}
unsafe extern "C" fn x_truncate(f: *mut ffi::sqlite3_file, size: i64) -> c_int {
    unsafe { (real_methods(f).xTruncate.unwrap())(real_file(f), size) }
}
unsafe extern "C" fn x_sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    unsafe { (real_methods(f).xSync.unwrap())(real_file(f), flags) }
}
unsafe extern "C" fn x_file_size(f: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    unsafe { (real_methods(f).xFileSize.unwrap())(real_file(f), size) }
}
unsafe extern "C" fn x_lock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe { (real_methods(f).xLock.unwrap())(real_file(f), level) }
}
unsafe extern "C" fn x_unlock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe { (real_methods(f).xUnlock.unwrap())(real_file(f), level) }
}
unsafe extern "C" fn x_check_reserved_lock(f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    unsafe { (real_methods(f).xCheckReservedLock.unwrap())(real_file(f), out) }
}
unsafe extern "C" fn x_file_control(f: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    unsafe { (real_methods(f).xFileControl.unwrap())(real_file(f), op, arg) }
}
unsafe extern "C" fn x_sector_size(f: *mut ffi::sqlite3_file) -> c_int {
    unsafe { (real_methods(f).xSectorSize.unwrap())(real_file(f)) }
}
unsafe extern "C" fn x_device_characteristics(f: *mut ffi::sqlite3_file) -> c_int {
    unsafe { (real_methods(f).xDeviceCharacteristics.unwrap())(real_file(f)) }
}
unsafe extern "C" fn x_shm_map(
    f: *mut ffi::sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    unsafe {
        match real_methods(f).xShmMap {
            Some(m) if real_methods(f).iVersion >= 2 => m(real_file(f), page, size, extend, out),
            _ => ffi::SQLITE_IOERR,
        }
    }
}
unsafe extern "C" fn x_shm_lock(f: *mut ffi::sqlite3_file, offset: c_int, n: c_int, flags: c_int) -> c_int {
    unsafe {
        match real_methods(f).xShmLock {
            Some(m) if real_methods(f).iVersion >= 2 => m(real_file(f), offset, n, flags),
            _ => ffi::SQLITE_IOERR,
        }
    }
}
unsafe extern "C" fn x_shm_barrier(f: *mut ffi::sqlite3_file) {
    unsafe {
        if let Some(m) = real_methods(f).xShmBarrier
            && real_methods(f).iVersion >= 2
        {
            m(real_file(f))
        }
    }
}
unsafe extern "C" fn x_shm_unmap(f: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    unsafe {
        match real_methods(f).xShmUnmap {
            Some(m) if real_methods(f).iVersion >= 2 => m(real_file(f), delete),
            _ => ffi::SQLITE_OK,
        }
    }
}
unsafe extern "C" fn x_fetch(f: *mut ffi::sqlite3_file, off: i64, n: c_int, out: *mut *mut c_void) -> c_int {
    unsafe {
        match real_methods(f).xFetch {
            Some(m) if real_methods(f).iVersion >= 3 => m(real_file(f), off, n, out),
            _ => {
                *out = std::ptr::null_mut();
                ffi::SQLITE_OK
            }
        }
    }
}
unsafe extern "C" fn x_unfetch(f: *mut ffi::sqlite3_file, off: i64, p: *mut c_void) -> c_int {
    unsafe {
        match real_methods(f).xUnfetch {
            Some(m) if real_methods(f).iVersion >= 3 => m(real_file(f), off, p),
            _ => ffi::SQLITE_OK,
        }
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};
