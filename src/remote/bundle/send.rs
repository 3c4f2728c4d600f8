//! Send: one job through distcc or icecc as a bundle (`dtlto-bridge __send SPEC`, the command
//! the link's scheduler gives a job's launcher): packs the job (`pack`), runs the wrapper with
//! `dtlto-clang -c BUNDLE.i -o OBJECT`, passes the wrapper's stderr on but for the entry's own
//! lines, which say where the job compiled or why a host refused it, and records that beside
//! the spec (`Sent`).
//!
//! The wrapper's environment has the entry on PATH (distcc and icecc run a job here when no
//! host takes it) and DTLTO_CLANG_HERE set, so an entry run here refuses, and the link runs
//! the job again on a local slot with its fallback warning. It knows one job; it does not know
//! the scheduler or the hosts.

use super::entry::{COMPILED, HERE_VAR, MARK, NAME, NOT_SENT, REFUSED};
use super::format::Compiler;
use crate::job::outcome::Sent;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What `__send` is told of its job, written by the link in its private directory.
#[derive(Debug, Serialize, Deserialize)]
pub struct Spec {
    pub cwd: PathBuf,
    pub command: Vec<String>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub compiler: Compiler,
    pub wrapper: Vec<String>,
    /// More of the wrapper's environment (`Carrier::env`).
    pub env: Vec<(String, String)>,
    /// The directory holding the `dtlto-clang` link, put first on the wrapper's PATH.
    pub entry_dir: PathBuf,
}

/// Where `send` writes job `index`'s bundle, and where it records what became of it.
pub fn paths(spec: &Path) -> (PathBuf, PathBuf) {
    (spec.with_extension("i"), spec.with_extension("sent"))
}

/// `__send SPEC`: returns the exit code.
pub fn main(spec_path: &Path) -> i32 {
    let fail = |what: String| {
        crate::report::error(&format!("send the job as a bundle: {what}"));
        1
    };
    let read = std::fs::read(spec_path).map_err(|e| e.to_string());
    let spec: Spec = match read.and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => return fail(format!("read {}: {e}", spec_path.display())),
    };
    let (bundle, record) = paths(spec_path);
    let command: Vec<&str> = spec.command.iter().map(String::as_str).collect();
    let inputs: Vec<&str> = spec.inputs.iter().map(String::as_str).collect();
    let outputs: Vec<&str> = spec.outputs.iter().map(String::as_str).collect();
    let bytes = match super::pack::pack(
        &spec.cwd,
        [&command, &inputs, &outputs],
        &spec.compiler,
        &bundle,
    ) {
        Ok(b) => b,
        Err(e) => return fail(format!("pack it: {e}")),
    };
    let [out] = spec.outputs.as_slice() else {
        return fail(format!("it has {} outputs, not one", spec.outputs.len()));
    };
    let env: Vec<(&str, &str)> = (spec.env.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let through = Through {
        wrapper: &spec.wrapper,
        entry_dir: &spec.entry_dir,
        cwd: &spec.cwd,
        compiler: &spec.compiler.path,
        env: &env,
    };
    let (code, mut sent) = through.run(&bundle, &spec.cwd.join(out));
    sent.bytes = bytes;
    let _ = std::fs::remove_file(&bundle);
    if let Ok(json) = serde_json::to_vec(&sent) {
        let _ = std::fs::write(&record, json);
    }
    code
}

/// How a bundle goes through the wrapper.
pub struct Through<'a> {
    pub wrapper: &'a [String],
    /// The directory of the `dtlto-clang` link, first on the wrapper's PATH.
    pub entry_dir: &'a Path,
    pub cwd: &'a Path,
    /// The job's compiler, for what the wrapper asks of it here (icecc: `-dumpmachine`).
    pub compiler: &'a str,
    /// More of the wrapper's environment (`host check`'s DISTCC_HOSTS).
    pub env: &'a [(&'a str, &'a str)],
}

impl Through<'_> {
    /// Runs the wrapper on `bundle`, the object to `out`; its exit code and where it went.
    pub fn run(&self, bundle: &Path, out: &Path) -> (i32, Sent) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.entry_dir.to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        let mut cmd = Command::new(&self.wrapper[0]);
        cmd.args(&self.wrapper[1..])
            .args([NAME, "-c"])
            .arg(bundle)
            .arg("-o")
            .arg(out)
            .current_dir(self.cwd)
            .env("PATH", std::env::join_paths(dirs).unwrap_or(path))
            .env(HERE_VAR, "1")
            .env(super::compilers::COMPILER_VAR, self.compiler)
            .envs(self.env.iter().copied())
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        match cmd.spawn() {
            Ok(child) => relay(child, &self.wrapper[0], out),
            Err(e) => {
                eprintln!("dtlto-bridge: run {}: {e}", self.wrapper[0]);
                (1, Sent::default())
            }
        }
    }
}

/// Passes the wrapper's stderr on, but for the entry's own lines, which say where the bundle
/// went; the wrapper's exit code (non-zero when no host said it compiled the bundle).
fn relay(mut child: std::process::Child, wrapper: &str, out: &Path) -> (i32, Sent) {
    let mut sent = Sent::default();
    let stderr = child.stderr.take().expect("piped");
    let mut err = std::io::stderr().lock();
    for line in std::io::BufReader::new(stderr)
        .split(b'\n')
        .map_while(Result::ok)
    {
        let text = String::from_utf8_lossy(&line);
        match text.strip_prefix(MARK) {
            Some(rest) if rest.starts_with(COMPILED) => {
                let host = rest[COMPILED.len()..].split(" with ").next().unwrap_or("");
                sent.host = Some(host.to_string());
            }
            Some(rest) if rest.starts_with(NOT_SENT) => sent.here = true,
            Some(rest) if rest.starts_with(REFUSED) => {
                sent.refused.push(rest[REFUSED.len()..].to_string());
                let _ = writeln!(err, "{text}");
            }
            _ => {
                let _ = err.write_all(&line);
                let _ = err.write_all(b"\n");
            }
        }
    }
    let code = match child.wait() {
        Ok(s) if s.success() && sent.host.is_some() => 0,
        Ok(s) if s.success() => {
            // A host's refusal, in the object's place (`entry::REFUSAL`), or whatever else.
            let _ = std::fs::remove_file(out);
            if sent.refused.is_empty() {
                let _ = writeln!(
                    err,
                    "dtlto-bridge: {wrapper} exited 0, but no host said it compiled the bundle"
                );
            }
            1
        }
        Ok(s) => s.code().unwrap_or(1).max(1),
        Err(_) => 1,
    };
    (code, sent)
}

/// Why a job whose bundle did not compile on a host ran here, in one line that jobs alike
/// share (so a link of a thousand jobs says it once): the first host's refusal, or, when the
/// wrapper ran it here, the wrapper's first error (`distcc[PID] ERROR: ...`, its PID and
/// function dropped). None when nothing is known beyond the wrapper's stderr.
pub fn fallback_reason(sent: &Sent, stderr: &str) -> Option<String> {
    if let Some(first) = sent.refused.first() {
        return Some(format!("refused on {first}"));
    }
    if !sent.here {
        return None;
    }
    let error = stderr.lines().find_map(|l| {
        let at = l.find("ERROR: ").or_else(|| l.find("Warning: "))?;
        Some(l[at..].to_string())
    });
    Some(match error {
        Some(e) => format!("no host took its bundle: {e}"),
        None => "no host took its bundle".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fallback_says_why_in_words_alike_jobs_share() {
        let refused = Sent {
            refused: vec!["b: the compiler here is 19".into()],
            ..Sent::default()
        };
        assert_eq!(
            fallback_reason(&refused, "anything").as_deref(),
            Some("refused on b: the compiler here is 19")
        );
        let here = Sent {
            here: true,
            ..Sent::default()
        };
        let stderr = "distcc[17] (dcc_connect) ERROR: nonblocking connect to 127.0.0.1:1 failed\n\
                      dtlto-clang: not sent: ...\n";
        assert_eq!(
            fallback_reason(&here, stderr).as_deref(),
            Some("no host took its bundle: ERROR: nonblocking connect to 127.0.0.1:1 failed")
        );
        assert_eq!(fallback_reason(&Sent::default(), stderr), None);
    }
}
