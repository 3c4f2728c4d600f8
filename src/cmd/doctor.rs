//! Doctor: reports what a link through dtlto-bridge would find on this machine, and what is missing.
//!
//! It knows how to ask clang, lld, make and ninja for their versions and DTLTO support, how to
//! read the jobserver in the environment, and what known wrappers do; it reads no job file.

use crate::cmd::cli::DoctorArgs;
use crate::local::slots;
use crate::render::Format;
use crate::report::{self, Fail};
use std::path::PathBuf;
use std::process::Command;

/// One line of the report: a topic, what was found, and whether a link can do without it.
struct Line {
    topic: &'static str,
    text: String,
    problem: bool,
}

/// The first of `names` on PATH.
fn find(names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|n| which::which(n).ok())
}

/// Runs `program args` and returns its stdout, or None when it cannot run.
fn output(program: &PathBuf, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// "22.1.8" from a line like "Debian clang version 22.1.8 (...)" or "LLD 22.1.8 ...".
fn version(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(|w| w.trim_end_matches([',', ')']).to_string())
}

fn major_minor(v: &str) -> (u32, u32) {
    let mut parts = v.split(['.', '-']).map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// A compiler or linker, and whether its --help offers the DTLTO option.
fn dtlto_tool(topic: &'static str, names: &[&str], option: &str) -> Line {
    let Some(path) = find(names) else {
        return Line {
            topic,
            text: format!("none of {} on PATH", names.join(", ")),
            problem: true,
        };
    };
    let v = output(&path, &["--version"]).and_then(|t| version(&t));
    let help = output(&path, &["--help"]).unwrap_or_default();
    let supported = help.contains(option);
    Line {
        topic,
        text: format!(
            "{} {}: {}",
            path.display(),
            v.as_deref().unwrap_or("(version unknown)"),
            if supported {
                format!("supports DTLTO ({option})")
            } else {
                format!("no DTLTO support (no {option}); LLVM 21 or newer has it")
            }
        ),
        problem: !supported,
    }
}

/// lld-link, and the distributor spellings that work for Windows targets (clang's driver does
/// not pass -fthinlto-distributor= on for them). Never a problem: ELF links need none of it.
fn windows_line() -> Line {
    let spellings = crate::cmd::check::windows_advice();
    let text = match find(&["lld-link-22", "lld-link"]) {
        None => format!("no lld-link on PATH (COFF links need it); {spellings}"),
        Some(path) => {
            let v = output(&path, &["--version"]).and_then(|t| version(&t));
            let help = output(&path, &["-help"]).unwrap_or_default();
            let dtlto = if help.contains("/thinlto-distributor:") {
                "supports DTLTO (/thinlto-distributor:)"
            } else {
                "no DTLTO support (no /thinlto-distributor:); LLVM 21 or newer has it"
            };
            format!(
                "{} {}: {dtlto}; {spellings}",
                path.display(),
                v.as_deref().unwrap_or("(version unknown)")
            )
        }
    };
    Line {
        topic: "windows",
        text,
        problem: false,
    }
}

/// make or ninja: where, which version, and how it deals with a jobserver.
fn build_tool(format: Format, program: &str, needed: bool) -> Line {
    let topic = format.tool();
    let Some(path) = which::which(program).ok() else {
        return Line {
            topic,
            text: format!("{program} is not on PATH"),
            problem: needed,
        };
    };
    let v = output(&path, &["--version"]).and_then(|t| version(&t).or(Some(t.trim().to_string())));
    let v = v.unwrap_or_else(|| "(version unknown)".into());
    let (major, minor) = major_minor(&v);
    let jobserver = match format {
        Format::Make if (major, minor) >= (4, 4) => "joins pipe and fifo jobservers",
        Format::Make if major >= 4 => "joins pipe jobservers in '+' recipes; no fifo (4.4+)",
        Format::Make => "joins pipe jobservers in '+' recipes",
        Format::Ninja if (major, minor) >= (1, 13) => "joins a jobserver when run without -j",
        Format::Ninja => "ignores jobservers (1.13+ joins them)",
    };
    Line {
        topic,
        text: format!(
            "{} {v}: {jobserver}; dtlto-bridge schedules the jobs itself either way{}",
            path.display(),
            if needed { " (links use it)" } else { "" }
        ),
        problem: false,
    }
}

fn jobserver_line(from_env: &jobserver::FromEnv) -> Line {
    let text = match (&from_env.client, slots::advertised(from_env)) {
        (Ok(_), Some(var)) => format!("usable, from {var}: jobs take its tokens"),
        (Err(e), Some(var)) if slots::unusable(e) => format!(
            "advertised in {var} but unusable: {e}. Links here share the host pool instead; \
             mark the link recipe with '+' so make passes its jobserver"
        ),
        _ => "none in the environment: links share the host pool".to_string(),
    };
    Line {
        topic: "jobserver",
        text,
        problem: false,
    }
}

/// The host pool a link here would use (unless a usable jobserver or `-j` is there).
fn pool_line(args: &DoctorArgs, parallelism: usize) -> Line {
    let slots = args.host_slots.unwrap_or(parallelism);
    let text = if slots == 0 {
        format!("off (--host-slots 0): each link runs up to {parallelism} jobs at once")
    } else {
        let base = crate::local::pool::base_dir(args.host_pool.as_deref());
        match crate::local::pool::Pool::open(&base, slots) {
            Ok(pool) => {
                let text = match pool.state() {
                    Ok((free, waiting)) => format!(
                        "{} slots at {}: {free} free, {waiting} waiting",
                        pool.size(),
                        pool.dir()
                    ),
                    Err(e) => format!("{} slots at {}: {e}", pool.size(), pool.dir()),
                };
                text
            }
            Err(e) => {
                return Line {
                    topic: "host pool",
                    text: format!("{e}; links would run up to {parallelism} jobs at once each"),
                    problem: false,
                }
            }
        }
    };
    Line {
        topic: "host pool",
        text,
        problem: false,
    }
}

fn wrapper_line(words: &[String]) -> Line {
    let text = match words.first() {
        None => "none: jobs run on this machine".to_string(),
        Some(first) => match (which::which(first), crate::job::wrapper::known_local(words)) {
            (Err(_), _) => {
                return Line {
                    topic: "wrapper",
                    text: format!("{first} is not on PATH"),
                    problem: true,
                }
            }
            (Ok(_), Some(local)) => local,
            (Ok(path), None) if crate::remote::bundle::sends_bundles(words) => {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                crate::job::wrapper::bundles(&name)
            }
            (Ok(path), None) if path.file_name().is_some_and(|n| n == "ccache") => {
                let v = output(&path, &["--version"]).and_then(|t| version(&t));
                crate::job::wrapper::ccache(v.as_deref().map(|v| (major_minor(v), v)))
            }
            (Ok(path), None) => format!(
                "{}: dtlto-bridge does not know what it does with a backend job; a job it fails \
                 is run again locally",
                path.display()
            ),
        },
    };
    Line {
        topic: "wrapper",
        text,
        problem: false,
    }
}

/// `dtlto-bridge doctor`: prints the report; fails when a link could not run.
pub fn doctor(args: &DoctorArgs) -> Result<(), Fail> {
    let from_env = slots::probe();
    let wrapper = args.wrapper.words().map_err(Fail::bad_input)?;
    let ninja_found = which::which(&args.tools.ninja).is_ok();
    // None: jobs start without a build tool (`direct`).
    let backend = match args.backend {
        Some(crate::cmd::cli::Backend::Direct) => None,
        asked => Some(crate::render::choose_backend(
            asked.and_then(crate::cmd::cli::Backend::format),
            ninja_found,
        )),
    };
    let parallelism = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1);
    let remote = args.remote.options().map_err(Fail::bad_input)?;
    let mut lines = vec![
        dtlto_tool("clang", &["clang-22", "clang"], "-fthinlto-distributor="),
        dtlto_tool("ld.lld", &["ld.lld-22", "ld.lld"], "--thinlto-distributor="),
        windows_line(),
        build_tool(
            Format::Ninja,
            &args.tools.ninja,
            backend == Some(Format::Ninja),
        ),
        build_tool(
            Format::Make,
            &args.tools.make,
            backend == Some(Format::Make),
        ),
        jobserver_line(&from_env),
        pool_line(args, parallelism),
        wrapper_line(&wrapper),
    ];
    if let Some(options) = &remote {
        lines.push(match crate::remote::probe(options) {
            Ok(text) => Line {
                topic: "remote",
                text,
                problem: false,
            },
            Err(text) => Line {
                topic: "remote",
                text,
                problem: true,
            },
        });
        if let Some(text) = options.target.exposed_headers() {
            lines.push(Line {
                topic: "remote",
                text,
                problem: false,
            });
        }
    }
    for l in &lines {
        report::print(&format!(
            "{:<10} {}{}\n",
            format!("{}:", l.topic),
            if l.problem { "MISSING: " } else { "" },
            l.text
        ));
    }
    let missing: Vec<&str> = lines
        .iter()
        .filter(|l| l.problem)
        .map(|l| l.topic)
        .collect();
    if missing.is_empty() {
        report::print("ok: dtlto-bridge can run links here\n");
        Ok(())
    } else {
        report::warning("some of what a link needs is missing");
        Err(Fail::environment(format!(
            "check this machine: missing or unusable: {}",
            missing.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_tool_banners() {
        let table = [
            ("Debian clang version 22.1.8 (++20250101)", "22.1.8"),
            ("LLD 22.1.8 (compatible with GNU linkers)", "22.1.8"),
            ("GNU Make 4.3\nBuilt for x86_64", "4.3"),
            (
                "1.13.2.git.kitware.jobserver-pipe-1",
                "1.13.2.git.kitware.jobserver-pipe-1",
            ),
        ];
        for (banner, want) in table {
            assert_eq!(version(banner).as_deref(), Some(want), "{banner}");
        }
        assert_eq!(major_minor("1.13.2.git"), (1, 13));
        assert_eq!(major_minor("4.4.1"), (4, 4));
    }
}
