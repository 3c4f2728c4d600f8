//! Check: runs a build command with a link log and says which of its links went through
//! dtlto-bridge, failing when none did.
//!
//! It knows the log's lines (see `record::log_line`) and why a link may skip DTLTO silently
//! (clang drops -fthinlto-distributor= without -flto=thin, and for Windows MSVC targets; cargo
//! hides linker output) or fail (lld's MinGW driver has no --thinlto-distributor=), and reads
//! the build's stderr, passing it through, for the latter; it does not know the build tool.

use crate::cmd::cli::CheckArgs;
use crate::report::{self, Fail};
use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

/// What lld's MinGW driver says of the ELF spelling of the distributor option.
const MINGW_REFUSAL: &str = "unknown argument: --thinlto-distributor=";

/// This dtlto-bridge's absolute path, for advice.
fn bridge() -> String {
    std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "ABS-PATH-OF-dtlto-bridge".to_string())
}

/// The distributor options that work for Windows targets, MSVC's and MinGW's.
pub(crate) fn windows_advice() -> String {
    format!("{}; {}", msvc_advice(), mingw_advice())
}

/// The distributor options that work for a Windows MSVC target, with this binary's and clang's
/// paths.
fn msvc_advice() -> String {
    let (bridge, clang) = (bridge(), clang());
    format!(
        "for a Windows MSVC target, clang's driver does not pass -fthinlto-distributor= to \
         lld-link (the link runs in-process, silently): give lld-link the options, \
         -Wl,/thinlto-distributor:{bridge} -Wl,/thinlto-remote-compiler:{clang}"
    )
}

/// The distributor options that work for a MinGW target, with this binary's and clang's paths.
fn mingw_advice() -> String {
    let (bridge, clang) = (bridge(), clang());
    format!(
        "for a MinGW target, lld's MinGW driver has no --thinlto-distributor=: give the COFF \
         linker behind it the options, -Wl,--Xlink=/thinlto-distributor:{bridge} \
         -Wl,--Xlink=/thinlto-remote-compiler:{clang}"
    )
}

/// clang's absolute path, for advice: the first of clang-22 and clang on PATH.
fn clang() -> String {
    ["clang-22", "clang"]
        .iter()
        .find_map(|n| which::which(n).ok())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "ABS-PATH-OF-clang".to_string())
}

/// `dtlto-bridge check -- COMMAND...`.
pub fn check(args: &CheckArgs) -> Result<(), Fail> {
    let log = tempfile::Builder::new()
        .prefix("dtlto-bridge-check-")
        .suffix(".jsonl")
        .tempfile()
        .map_err(|e| Fail::environment(format!("create the link log: {e}")))?;
    let mut child = Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("DTLTO_BRIDGE_LOG", log.path())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Fail::environment(format!("run {}: {e}", args.command[0])))?;
    // The build's stderr, passed through line by line, watched for lld's MinGW refusal. Read
    // apart from the wait: a daemon the build started may hold the pipe long after it ends.
    let (seen, saw) = std::sync::mpsc::channel();
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(err);
            let mut line = Vec::new();
            let mut mingw = false;
            while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let mut out = std::io::stderr().lock();
                let _ = out.write_all(&line);
                let _ = out.flush();
                mingw |= String::from_utf8_lossy(&line).contains(MINGW_REFUSAL);
                line.clear();
            }
            let _ = seen.send(mingw);
        });
    }
    let status = child
        .wait()
        .map_err(|e| Fail::environment(format!("wait for {}: {e}", args.command[0])))?;
    // The rest of what the build wrote, unless something it left running holds the pipe.
    let mingw = saw
        .recv_timeout(std::time::Duration::from_millis(200))
        .unwrap_or(false);
    let text = std::fs::read_to_string(log.path()).unwrap_or_default();
    let links: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for l in &links {
        let t = &l["totals"];
        let verdict = if l["ok"].as_bool() == Some(true) {
            ""
        } else {
            ", FAILED"
        };
        report::note(&format!(
            "check: {} in {}: {} jobs ({} local, {} via wrapper, {} fell back){verdict}",
            l["linker_output"].as_str().unwrap_or("?"),
            l["dir"].as_str().unwrap_or("?"),
            t["jobs"],
            t["local"],
            t["via_wrapper"],
            t["fell_back"],
        ));
    }
    let command = crate::render::escape::shell_line(&args.command);
    if !status.success() {
        let hint = if mingw {
            format!("; lld said \"{MINGW_REFUSAL}\": {}", mingw_advice())
        } else {
            String::new()
        };
        return Err(Fail::failed(format!(
            "check {command}: the build failed ({}); {} link(s) went through dtlto-bridge{hint}",
            crate::local::process::describe(&status),
            links.len()
        )));
    }
    if links.is_empty() {
        return Err(Fail::failed(format!(
            "check {command}: no link went through dtlto-bridge. If it linked nothing (an up to \
             date build), clean and check again. Otherwise the linker never ran dtlto-bridge: \
             clang drops -fthinlto-distributor= unless the link also has -flto=thin (under cargo: \
             -C link-arg=-flto=thin), and the distributor's path must be absolute; {}",
            windows_advice()
        )));
    }
    report::note(&format!(
        "check: {} link(s) went through dtlto-bridge",
        links.len()
    ));
    Ok(())
}
