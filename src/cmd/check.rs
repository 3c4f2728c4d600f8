//! Check: runs a build command with a link log and says which of its links went through
//! dtlto-bridge, failing when none did.
//!
//! It knows the log's lines (see `record::log_line`) and why a link may skip DTLTO silently
//! (clang drops -fthinlto-distributor= without -flto=thin; cargo hides linker output); it does
//! not know the build tool.

use crate::cli::CheckArgs;
use crate::report::{self, Fail};
use std::process::Command;

/// `dtlto-bridge check -- COMMAND...`.
pub fn check(args: &CheckArgs) -> Result<(), Fail> {
    let log = tempfile::Builder::new()
        .prefix("dtlto-bridge-check-")
        .suffix(".jsonl")
        .tempfile()
        .map_err(|e| Fail::environment(format!("create the link log: {e}")))?;
    let status = Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("DTLTO_BRIDGE_LOG", log.path())
        .status()
        .map_err(|e| Fail::environment(format!("run {}: {e}", args.command[0])))?;
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
        return Err(Fail::failed(format!(
            "check {command}: the build failed ({}); {} link(s) went through dtlto-bridge",
            crate::exec::process::describe(&status),
            links.len()
        )));
    }
    if links.is_empty() {
        return Err(Fail::failed(format!(
            "check {command}: no link went through dtlto-bridge. If it linked nothing (an up to \
             date build), clean and check again. Otherwise the linker never ran dtlto-bridge: \
             clang drops -fthinlto-distributor= unless the link also has -flto=thin (under cargo: \
             -C link-arg=-flto=thin), and the distributor's path must be absolute"
        )));
    }
    report::note(&format!(
        "check: {} link(s) went through dtlto-bridge",
        links.len()
    ));
    Ok(())
}
