//! Proto: the messages between a run and its per-job launchers, and the socket they travel on.
//!
//! One JSON object per line over a Unix stream socket in the run's private directory. A launcher
//! says hello with its job's index and then only runs what it is told; the run decides everything.
//! It knows the messages and how to reach the socket (also when its path is longer than a socket
//! address can hold); it does not know what the messages mean for a job.

use crate::job::outcome::Status;
use camino::Utf8Path;
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Write};
use std::os::unix::net::{UnixListener, UnixStream};

use crate::local::rundir::SOCKET;

/// From a launcher to the run.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ToRun {
    /// The launcher of job `index` is ready.
    Hello { index: usize, pid: u32 },
    /// The command it was told to run has ended.
    Exited(Status),
}

/// From the run to a launcher.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ToLauncher {
    /// Run this command, its stderr into that file, and report how it ended.
    Run(Run),
    /// Exit with this code: the job is over.
    Finish { code: i32 },
    /// Stop the running command with this signal (the run was cancelled).
    Cancel { signal: i32 },
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Run {
    pub argv: Vec<String>,
    pub stderr: String,
    pub outputs: Vec<String>,
    /// The job runs on a token of the parent build's jobserver, which the launcher gives back
    /// itself if the run dies before telling it to finish.
    pub token: bool,
}

/// Writes one message as one line.
pub fn send<T: Serialize>(mut stream: &UnixStream, message: &T) -> io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

/// Reads one message; None at the end of the stream.
pub fn receive<T: for<'de> Deserialize<'de>>(reader: &mut impl BufRead) -> io::Result<Option<T>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    serde_json::from_str(&line)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e}: {line:?}")))
}

/// The longest path a socket address holds, less its terminating NUL.
const MAX_ADDRESS: usize = 107;

/// Runs `f` with a path to `dir/SOCKET` short enough for a socket address: the path itself, or
/// one through a descriptor of `dir` (`/proc/self/fd/N/sched.sock`).
fn with_address<T>(dir: &Utf8Path, f: impl FnOnce(&str) -> io::Result<T>) -> io::Result<T> {
    let direct = dir.join(SOCKET);
    if direct.as_str().len() <= MAX_ADDRESS {
        return f(direct.as_str());
    }
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(dir)?;
    f(&format!("/proc/self/fd/{}/{SOCKET}", handle.as_raw_fd()))
}

/// Listens on the socket in the private directory `dir`.
pub fn listen(dir: &Utf8Path) -> io::Result<UnixListener> {
    with_address(dir, |a| UnixListener::bind(a))
}

/// Connects to the run that owns the private directory `dir`.
pub fn connect(dir: &Utf8Path) -> io::Result<UnixStream> {
    with_address(dir, |a| UnixStream::connect(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_over_a_socket_at_a_long_path() {
        let t = tempfile::tempdir().unwrap();
        let dir = Utf8Path::from_path(t.path()).unwrap().join("d".repeat(120));
        std::fs::create_dir(&dir).unwrap();
        let listener = listen(&dir).unwrap();
        let client = connect(&dir).unwrap();
        let (server, _) = listener.accept().unwrap();
        let hello = ToRun::Hello { index: 3, pid: 7 };
        send(&client, &hello).unwrap();
        let got: Option<ToRun> = receive(&mut io::BufReader::new(&server)).unwrap();
        assert_eq!(got, Some(hello));
        let run = ToLauncher::Run(Run {
            argv: vec!["cc".into(), "a\nb".into()],
            stderr: "/x/3.stderr".into(),
            outputs: vec!["-o.o".into()],
            token: true,
        });
        send(&server, &run).unwrap();
        drop(server);
        let mut reader = io::BufReader::new(&client);
        assert_eq!(receive::<ToLauncher>(&mut reader).unwrap(), Some(run));
        assert_eq!(receive::<ToLauncher>(&mut reader).unwrap(), None);
    }
}
