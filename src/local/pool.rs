//! Pool: the host-wide pool of job slots that concurrent links of one user share when there is
//! no jobserver.
//!
//! It knows the pool's per-user directory (created and checked: owned by this user, mode 0700,
//! not a symbolic link, the uid in its name) and the SysV semaphore that counts the free slots.
//! Waiting for a slot blocks in the kernel, first come first served; the kernel undoes a
//! process's operations when it dies, however it dies, so a `kill -9` never leaks a slot; the
//! last link to leave removes the semaphore. It does not know jobs or jobservers.

use camino::{Utf8Path, Utf8PathBuf};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// The most slots a pool can have (the largest value of a SysV semaphore).
pub const MAX_SLOTS: usize = 32767;

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Why the pool cannot be used: its path and the reason.
#[derive(Debug)]
pub struct Unusable {
    pub path: Utf8PathBuf,
    pub why: String,
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "use the host pool at {}: {}", self.path, self.why)
    }
}

fn unusable(path: &Utf8Path, why: impl Into<String>) -> Unusable {
    Unusable {
        path: path.to_owned(),
        why: why.into(),
    }
}

/// Where the per-user pool directory goes: `base` if given, else `$XDG_RUNTIME_DIR`, else TMPDIR.
pub fn base_dir(given: Option<&Utf8Path>) -> Utf8PathBuf {
    if let Some(b) = given {
        return b.to_owned();
    }
    let runtime = std::env::var("XDG_RUNTIME_DIR")
        .ok()
        .filter(|d| !d.is_empty() && Utf8Path::new(d).is_dir())
        .map(Utf8PathBuf::from);
    runtime.unwrap_or_else(|| {
        Utf8PathBuf::from_path_buf(std::env::temp_dir()).unwrap_or_else(|_| "/tmp".into())
    })
}

/// The pool directory of this user under `base`.
pub fn dir_in(base: &Utf8Path) -> Utf8PathBuf {
    base.join(format!("dtlto-bridge-pool-{}", uid()))
}

/// Creates this user's directory under `base` if needed and checks that only this user can use
/// it: the pool lives there, and other per-user state (see `advice`).
pub fn user_dir(base: &Utf8Path) -> Result<Utf8PathBuf, Unusable> {
    fs::create_dir_all(base).map_err(|e| unusable(base, format!("create it: {e}")))?;
    let dir = dir_in(base);
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unusable(&dir, format!("create it: {e}"))),
    }
    let meta = fs::symlink_metadata(&dir).map_err(|e| unusable(&dir, e.to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(unusable(&dir, "it is a symbolic link"));
    }
    if !meta.is_dir() {
        return Err(unusable(&dir, "it is not a directory"));
    }
    if meta.uid() != uid() {
        return Err(unusable(
            &dir,
            format!("it belongs to uid {}, not to uid {}", meta.uid(), uid()),
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(unusable(
            &dir,
            format!("other users may use it (mode {mode:o}); make it 700 or remove it"),
        ));
    }
    Ok(dir)
}

/// A file in the pool directory, created if asked (mode 0600) and opened read-only, never
/// through a symbolic link.
fn open_in(dir: &Utf8Path, name: &str, create: bool) -> io::Result<File> {
    let path = dir.join(name);
    let read = || {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
    };
    match read() {
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
            let made = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path);
            match made {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            read()
        }
        other => other,
    }
}

/// A file in the pool directory written whole: under a temporary name, then renamed.
fn write_in(dir: &Utf8Path, name: &str, text: &str) -> io::Result<()> {
    crate::job::util::whole::write_whole(
        dir.join(name).as_std_path(),
        text.as_bytes(),
        0o600,
        || Ok(()),
    )
}

/// A semaphore set: slot count (0), cookie (1) and the processes that have the pool open (2),
/// owned by this user, mode 0600.
struct Sem(libc::c_int);

impl Sem {
    fn value(&self, n: libc::c_int) -> io::Result<i32> {
        // SAFETY: GETVAL takes no further argument.
        let v = unsafe { libc::semctl(self.0, n, libc::GETVAL) };
        if v < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(v)
    }

    fn waiting(&self) -> io::Result<i32> {
        // SAFETY: GETNCNT takes no further argument.
        let v = unsafe { libc::semctl(self.0, 0, libc::GETNCNT) };
        if v < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(v)
    }

    fn set(&self, n: libc::c_int, value: i32) -> io::Result<()> {
        // SAFETY: SETVAL takes the value as an int (the `val` member of union semun).
        if unsafe { libc::semctl(self.0, n, libc::SETVAL, value) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether the set is this user's, private, and carries `cookie`.
    fn is_ours(&self, cookie: i32) -> bool {
        // SAFETY: a zeroed semid_ds is a valid buffer for IPC_STAT.
        let mut ds: libc::semid_ds = unsafe { std::mem::zeroed() };
        // SAFETY: IPC_STAT takes a pointer to a semid_ds.
        if unsafe { libc::semctl(self.0, 0, libc::IPC_STAT, &mut ds as *mut libc::semid_ds) } < 0 {
            return false;
        }
        ds.sem_perm.uid == uid()
            && ds.sem_perm.cuid == uid()
            && ds.sem_perm.mode & 0o777 == 0o600
            && ds.sem_nsems == 3
            && self.value(1).ok() == Some(cookie)
    }

    /// Adds `delta` to semaphore `n` (the slot count, or the users), blocking while it would
    /// go below zero; the kernel undoes it when this process dies.
    fn op(&self, n: u16, delta: i16) -> io::Result<()> {
        let mut op = libc::sembuf {
            sem_num: n,
            sem_op: delta,
            sem_flg: libc::SEM_UNDO as i16,
        };
        // SAFETY: one valid sembuf.
        if unsafe { libc::semop(self.0, &mut op, 1) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The semaphores of a set: the free slots, and the processes that have the pool open.
const SLOTS: u16 = 0;
const USERS: u16 = 2;

/// The file that names the set of a pool of `size` slots (its id and cookie). Named apart from
/// the `sem-N` of the two-semaphore sets of older versions, which count no users and remove
/// their set, and that file, whenever they leave with every slot free.
fn set_file(size: usize) -> String {
    format!("sems-{size}")
}

/// The host-wide pool of one size, open.
pub struct Pool {
    dir: Utf8PathBuf,
    size: usize,
    sem: Sem,
}

impl Pool {
    /// Opens (creating if needed) the pool of `size` slots of this user under `base`.
    pub fn open(base: &Utf8Path, size: usize) -> Result<Pool, Unusable> {
        if size == 0 || size > MAX_SLOTS {
            return Err(unusable(
                base,
                format!("a pool has 1 to {MAX_SLOTS} slots, not {size}"),
            ));
        }
        let dir = user_dir(base)?;
        let lock = Self::lock(&dir)?;
        let name = set_file(size);
        let found = fs::read_to_string(dir.join(&name)).ok().and_then(|t| {
            let mut w = t.split_whitespace().map(str::parse::<i32>);
            let (Some(Ok(id)), Some(Ok(cookie))) = (w.next(), w.next()) else {
                return None;
            };
            let sem = Sem(id);
            sem.is_ours(cookie).then_some(sem)
        });
        let sem = match found {
            Some(sem) => sem,
            None => Self::create(&dir, &name, size)?,
        };
        // One more user, under the lock: the last to leave removes the set, never one that
        // leaves while another link still has it (whose next slot would fail with EINVAL).
        sem.op(USERS, 1)
            .map_err(|e| unusable(&dir, format!("join the semaphore: {e}")))?;
        drop(lock);
        Ok(Pool { dir, size, sem })
    }

    fn lock(dir: &Utf8Path) -> Result<File, Unusable> {
        let file =
            open_in(dir, "lock", true).map_err(|e| unusable(dir, format!("open lock: {e}")))?;
        file.lock()
            .map_err(|e| unusable(dir, format!("lock it: {e}")))?;
        Ok(file)
    }

    fn create(dir: &Utf8Path, name: &str, size: usize) -> Result<Sem, Unusable> {
        // SAFETY: semget has no memory-safety preconditions.
        let id = unsafe { libc::semget(libc::IPC_PRIVATE, 3, libc::IPC_CREAT | 0o600) };
        if id < 0 {
            let e = io::Error::last_os_error();
            return Err(unusable(dir, format!("create a semaphore: {e}")));
        }
        let sem = Sem(id);
        let cookie = 1 + ((std::process::id() as i32 ^ state_nanos()) & 0x3fff);
        let init = sem.set(0, size as i32).and_then(|()| sem.set(1, cookie));
        let written = init.and_then(|()| write_in(dir, name, &format!("{id} {cookie}\n")));
        if let Err(e) = written {
            remove_set(id);
            return Err(unusable(dir, format!("set up the semaphore: {e}")));
        }
        Ok(sem)
    }

    pub fn dir(&self) -> &Utf8Path {
        &self.dir
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// (free slots, processes waiting for one), for `doctor`.
    pub fn state(&self) -> io::Result<(i32, i32)> {
        Ok((self.sem.value(0)?, self.sem.waiting()?))
    }

    /// Takes a slot, blocking until one is free; `Interrupted` when a signal arrives first.
    ///
    /// semop fails with EINVAL (EIDRM while waiting) only when the set is gone. The links of
    /// this version remove it only once no process has it open (`Drop`); before the users were
    /// counted, a link that left while another still used the pool removed it whenever every
    /// slot happened to be free, and the other's next slot failed with `Invalid argument (os
    /// error 22)`. What may still remove it under a link is outside: `ipcrm`, or
    /// systemd-logind's `RemoveIPC=yes` (systemd's default) when the user's last session ends, as a
    /// build left running after logging out; the error then says so.
    pub fn acquire(&self) -> io::Result<()> {
        self.sem.op(SLOTS, -1).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL | libc::EIDRM) => io::Error::new(
                e.kind(),
                format!(
                    "its semaphore set {} was removed under this link (by ipcrm, or by \
                     systemd-logind's RemoveIPC when this user's last session ended): {e}",
                    self.sem.0
                ),
            ),
            _ => e,
        })
    }

    /// Gives a slot back.
    pub fn release(&self) -> io::Result<()> {
        self.sem.op(SLOTS, 1)
    }
}

impl Drop for Pool {
    /// Leaves the pool: removes the semaphore when no other process has it open, every slot
    /// is free and nobody waits, so it lives no longer than the links that use it.
    fn drop(&mut self) {
        let Ok(lock) = Self::lock(&self.dir) else {
            return;
        };
        let _ = self.sem.op(USERS, -1);
        let idle = self.sem.value(USERS as libc::c_int).ok() == Some(0)
            && self.sem.value(0).ok() == Some(self.size as i32)
            && self.sem.waiting().ok() == Some(0);
        if idle {
            // The file, only while it names this set: the pool directory may have been emptied
            // (a tmp cleaner, logind's end of XDG_RUNTIME_DIR) and a later link made another.
            let file = self.dir.join(set_file(self.size));
            let names = fs::read_to_string(&file)
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse::<libc::c_int>().ok());
            if names == Some(self.sem.0) {
                let _ = fs::remove_file(file);
            }
            remove_set(self.sem.0);
        }
        drop(lock);
    }
}

fn remove_set(id: libc::c_int) {
    // SAFETY: IPC_RMID takes no further argument.
    unsafe {
        libc::semctl(id, 0, libc::IPC_RMID);
    }
}

fn state_nanos() -> i32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as i32)
}

/// A thread that takes pool slots on request, blocking in the kernel, and hands each to `f`.
pub struct Helper {
    state: Arc<HelperState>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct HelperState {
    requests: Mutex<usize>,
    wake: Condvar,
    stop: AtomicBool,
}

extern "C" fn ignore(_: libc::c_int) {}

impl Helper {
    /// Starts the thread; `f` gets `Ok(())` for each slot taken (the caller then owns it and
    /// gives it back with `Pool::release`), or the error that ended the thread.
    pub fn start(
        pool: Arc<Pool>,
        mut f: impl FnMut(io::Result<()>) + Send + 'static,
    ) -> io::Result<Helper> {
        // A no-op handler without SA_RESTART, so SIGUSR1 interrupts a waiting semop.
        // SAFETY: a zeroed sigaction with a valid handler.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            if libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let state = Arc::new(HelperState::default());
        let s = state.clone();
        let thread = std::thread::Builder::new()
            .name("host pool".into())
            .spawn(move || loop {
                {
                    let mut n = crate::job::util::sync::lock(&s.requests);
                    while *n == 0 && !s.stop.load(Ordering::SeqCst) {
                        n = s.wake.wait(n).unwrap_or_else(|e| e.into_inner());
                    }
                    if s.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    *n -= 1;
                }
                loop {
                    match pool.acquire() {
                        Ok(()) if s.stop.load(Ordering::SeqCst) => {
                            let _ = pool.release();
                            return;
                        }
                        Ok(()) => {
                            f(Ok(()));
                            break;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                            if s.stop.load(Ordering::SeqCst) {
                                return;
                            }
                        }
                        Err(e) => {
                            f(Err(e));
                            return;
                        }
                    }
                }
            })?;
        Ok(Helper {
            state,
            thread: Some(thread),
        })
    }

    /// Asks for one more slot.
    pub fn request(&self) {
        *crate::job::util::sync::lock(&self.state.requests) += 1;
        self.state.wake.notify_one();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        self.state.wake.notify_one();
        if let Some(t) = self.thread.take() {
            use std::os::unix::thread::JoinHandleExt;
            let id = t.as_pthread_t();
            while !t.is_finished() {
                // SAFETY: the thread has not been joined, so its id is valid.
                unsafe { libc::pthread_kill(id, libc::SIGUSR1) };
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> (tempfile::TempDir, Utf8PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let p = Utf8PathBuf::from_path_buf(t.path().to_path_buf()).unwrap();
        (t, p)
    }

    #[test]
    fn slots_are_counted_shared_and_removed_when_idle() {
        let (_t, base) = base();
        let a = Pool::open(&base, 2).unwrap();
        let b = Pool::open(&base, 2).unwrap();
        assert_eq!(a.sem.0, b.sem.0, "one semaphore per user and size");
        a.acquire().unwrap();
        b.acquire().unwrap();
        assert_eq!(a.state().unwrap(), (0, 0));
        a.release().unwrap();
        b.release().unwrap();
        let id = a.sem.0;
        // One leaving while the other still has the pool open leaves it in place: the other's
        // next slot is taken as ever (EINVAL once: the set was removed under it).
        drop(b);
        a.acquire().unwrap();
        a.release().unwrap();
        drop(a);
        assert!(!Sem(id).is_ours(1) && Sem(id).value(0).is_err(), "removed");
        assert!(!dir_in(&base).join("sems-2").exists());
    }

    #[test]
    fn a_set_removed_under_a_link_is_named_and_a_link_that_leaves_keeps_anothers_file() {
        let (_t, base) = base();
        let a = Pool::open(&base, 2).unwrap();
        // Removed from outside (ipcrm, or logind's RemoveIPC at the last logout): the next slot
        // fails with EINVAL, and says why.
        remove_set(a.sem.0);
        let e = a.acquire().unwrap_err();
        assert_eq!(e.raw_os_error(), None, "wrapped: {e}");
        assert!(e.to_string().contains("was removed under this link"), "{e}");
        assert!(e.to_string().contains("os error 22"), "{e}");
        drop(a);
        // The pool directory emptied under a link; a later link makes another set and file.
        let c = Pool::open(&base, 2).unwrap();
        let file = dir_in(&base).join("sems-2");
        fs::remove_file(&file).unwrap();
        let d = Pool::open(&base, 2).unwrap();
        assert_ne!(c.sem.0, d.sem.0);
        // c leaves its idle set: d's file stays, so the next link shares d's set.
        drop(c);
        assert!(file.exists(), "another link's file kept");
        let e = Pool::open(&base, 2).unwrap();
        assert_eq!(e.sem.0, d.sem.0);
        drop(e);
        drop(d);
        assert!(!file.exists());
    }

    #[test]
    fn a_directory_of_another_shape_is_refused_with_its_path() {
        let (_t, base) = base();
        let dir = dir_in(&base);
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let e = Pool::open(&base, 2).err().unwrap();
        assert_eq!(e.path, dir);
        assert!(e.why.contains("mode 755"), "{e}");
        fs::remove_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&base, &dir).unwrap();
        let e = Pool::open(&base, 2).err().unwrap();
        assert!(e.why.contains("symbolic link"), "{e}");
    }

    #[test]
    fn a_waiting_helper_is_woken_by_a_release_and_stops_when_dropped() {
        let (_t, base) = base();
        let pool = Arc::new(Pool::open(&base, 1).unwrap());
        pool.acquire().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let helper = Helper::start(pool.clone(), move |r| tx.send(r.is_ok()).unwrap()).unwrap();
        helper.request();
        helper.request();
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(100))
            .is_err());
        pool.release().unwrap();
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap());
        drop(helper); // the second request still waits: dropping interrupts it
        pool.release().unwrap();
    }
}
