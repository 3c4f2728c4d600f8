//! Command: the link command `dtlto-bridge link` was given — lld's program and arguments, from
//! clang's `-###` unless lld was run directly — checked to be lld's (ld.lld for ELF, lld-link for
//! COFF; not lld's MinGW driver) and to leave the thin link to `link`, and the target the
//! backend jobs compile for (lld's emulation, clang's triple).
//!
//! It knows clang's driver, lld's flavors and emulations; it does not read input files or run
//! the flow.

use super::options::Options;
use crate::link::coffargs;
use crate::link::ldargs::{self};
use crate::local::process::{self};
use crate::report::Fail;
use camino::Utf8Path;
use std::process::{Command, Stdio};

/// Which of lld's drivers the link runs: its options, response-file quoting and object format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flavor {
    /// ld.lld: GNU options, ELF.
    Elf,
    /// lld-link: MSVC options (`/out:`, `/defaultlib:`), Windows quoting, COFF.
    Coff,
}

impl Flavor {
    /// The flavor of the linker program `ld` (a path), by its name as lld tells its drivers.
    fn of(ld: &str) -> Flavor {
        let name = Utf8Path::new(ld).file_name().unwrap_or("");
        if name.to_ascii_lowercase().starts_with("lld-link") {
            Flavor::Coff
        } else {
            Flavor::Elf
        }
    }

    /// A word for this linker's response files.
    pub(super) fn rsp_word(self, word: &str) -> String {
        match self {
            Flavor::Elf => super::rsp::response_word(word),
            Flavor::Coff => super::rsp::windows_word(word),
        }
    }

    /// The words around objects the link treats as an archive's members.
    pub(super) fn lib_markers(self) -> (&'static str, &'static str) {
        match self {
            Flavor::Elf => ("--start-lib", "--end-lib"),
            Flavor::Coff => ("/start-lib", "/end-lib"),
        }
    }

    /// The thin link's options: write index shards and imports lists under `prefix` and the
    /// list of modules linked to `list`, then stop.
    pub(super) fn thin_options(self, list: &str, prefix: &str) -> [String; 3] {
        match self {
            Flavor::Elf => [
                format!("--thinlto-index-only={list}"),
                "--thinlto-emit-imports-files".to_string(),
                format!("--thinlto-prefix-replace=;{prefix}"),
            ],
            Flavor::Coff => [
                format!("/thinlto-index-only:{list}"),
                "/thinlto-emit-imports-files".to_string(),
                format!("/thinlto-prefix-replace:;{prefix}"),
            ],
        }
    }
}

/// The link command's parts: lld's program and arguments, and the compiler for the jobs.
pub(super) struct LinkCommand {
    pub(super) ld: String,
    pub(super) flavor: Flavor,
    pub(super) args: Vec<String>,
    pub(super) compiler: String,
    pub(super) triple: String,
}

/// lld's emulations of its MinGW driver (ld.lld for Windows targets).
const MINGW: &[&str] = &[
    "i386pe",
    "i386pep",
    "thumb2pe",
    "arm64pe",
    "arm64ecpe",
    "arm64xpe",
];

/// The link command, checked to be lld's and to leave the thin link to `link`.
pub(super) fn checked(options: &Options, cwd: &Utf8Path) -> Result<LinkCommand, Fail> {
    let command = link_command(options, cwd)?;
    check_lld(&command.ld)?;
    if command.flavor == Flavor::Elf {
        if let Some(m) = ldargs::emulation(&command.args).filter(|m| MINGW.contains(m)) {
            return Err(Fail::bad_input(format!(
                "link: the link runs lld's MinGW driver (-m {m}), which has no --start-lib and \
                 no --thinlto-index-only, so `dtlto-bridge link` cannot drive it; use \
                 integrated DTLTO: -Wl,--Xlink=/thinlto-distributor:ABS-PATH-OF-dtlto-bridge \
                 -Wl,--Xlink=/thinlto-remote-compiler:ABS-PATH-OF-clang"
            )));
        }
    }
    for bad in ["thinlto-distributor", "thinlto-index-only"] {
        let has = command.args.iter().any(|a| match command.flavor {
            Flavor::Elf => a.trim_start_matches('-').split('=').next() == Some(bad),
            Flavor::Coff => coffargs::option(a).is_some_and(|(n, _)| n == bad),
        });
        if has {
            return Err(Fail::bad_input(format!(
                "link: the link command already has {}{bad}; `dtlto-bridge link` runs the thin \
                 link itself (drop the distributor option to use this flow, or use it alone)",
                if command.flavor == Flavor::Coff {
                    "/"
                } else {
                    "--"
                }
            )));
        }
    }
    Ok(command)
}

impl LinkCommand {
    /// The link's output (`-o`, `/out:`), as lld names it.
    pub(super) fn output(&self) -> String {
        match self.flavor {
            Flavor::Elf => ldargs::values(&self.args, "o")
                .last()
                .map(|o| o.to_string())
                .unwrap_or_else(|| "a.out".to_string()),
            Flavor::Coff => coffargs::output(&self.args),
        }
    }

    /// The ThinLTO backend options lld's DTLTO derives from this link.
    pub(super) fn job_options(&self) -> ldargs::JobOptions {
        match self.flavor {
            Flavor::Elf => ldargs::JobOptions::from_args(&self.args),
            Flavor::Coff => coffargs::job_options(&self.args),
        }
    }
}

/// The link command: lld's, from the driver's `-###` unless the user ran lld itself.
pub(super) fn link_command(options: &Options, cwd: &Utf8Path) -> Result<LinkCommand, Fail> {
    let user = &options.command;
    let program = Utf8Path::new(&user[0]).file_name().unwrap_or("");
    let is_ld = program.starts_with("ld.") || program == "ld" || program.starts_with("lld");
    let (ld, rest, compiler) = if is_ld {
        let compiler = options.compiler.clone().ok_or_else(|| {
            Fail::bad_input(format!(
                "link: {program} is a linker; name the compiler of the backend jobs with \
                 --compiler (e.g. clang-19), or give the clang link command"
            ))
        })?;
        (user[0].clone(), user[1..].to_vec(), compiler)
    } else {
        let out = Command::new(&user[0])
            .args(&user[1..])
            .arg("-###")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Fail::environment(format!("link: run {}: {e}", user[0])))?;
        let text = String::from_utf8_lossy(&out.stderr);
        // clang 14 reports a missing input and exits 0 under -###, leaving the input out.
        let complained = text.lines().any(|l| {
            l.split_once(": error: ")
                .is_some_and(|(p, _)| !p.contains(' '))
        });
        if !out.status.success() || complained {
            // The driver's own complaints, without the commands it would have run.
            let errors: Vec<&str> = text.lines().filter(|l| l.contains("error")).collect();
            return Err(Fail::failed(format!(
                "link: ask {} for its linker command (-###): {}\n{}",
                user[0],
                if out.status.success() {
                    "it reported an error".to_string()
                } else {
                    process::describe(&out.status)
                },
                if errors.is_empty() {
                    text.trim_end().to_string()
                } else {
                    errors.join("\n")
                }
            )));
        }
        let commands = ldargs::driver_commands(&text).map_err(Fail::environment)?;
        if let Some(cc1) = commands.iter().find(|c| c.iter().any(|w| w == "-cc1")) {
            let source = cc1
                .iter()
                .find(|w| w.ends_with(".c") || w.ends_with(".cpp"));
            return Err(Fail::bad_input(format!(
                "link: the command compiles {} as well as linking; compile first, then give \
                 `link` the link of the objects",
                source.map(|s| s.as_str()).unwrap_or("a source")
            )));
        }
        let Some(ld) = commands.last().filter(|c| !c.is_empty()) else {
            return Err(Fail::bad_input(format!(
                "link: {} runs no linker for this command (is it a link?)",
                user[0]
            )));
        };
        let compiler = options.compiler.clone().unwrap_or_else(|| user[0].clone());
        (ld[0].clone(), ld[1..].to_vec(), compiler)
    };
    let flavor = Flavor::of(&ld);
    let args_expanded = match flavor {
        Flavor::Elf => ldargs::expand_response_files(&rest, cwd, &super::rsp::response_split),
        // lld-link reads `_LINK_` and `LINK` too; the flow passes their words itself.
        Flavor::Coff => coffargs::expand(
            &rest,
            cwd,
            std::env::var("LINK").ok().as_deref(),
            std::env::var("_LINK_").ok().as_deref(),
        ),
    }
    .map_err(|e| Fail::bad_input(format!("link: {e}")))?;
    let triple = target_triple(&compiler, if is_ld { &[] } else { &user[1..] })?;
    // lld run directly: its -m emulation names the target's architecture.
    let emulation = ldargs::emulation(&args_expanded)
        .filter(|m| is_ld && flavor == Flavor::Elf && !MINGW.contains(m));
    let triple = match emulation.map(|m| (m, emulation_arch(m))) {
        Some((_, Some((arch, env)))) => with_arch(&triple, arch, env),
        Some((m, None)) => {
            return Err(Fail::bad_input(format!(
                "link: lld's emulation -m {m} names no target dtlto-bridge knows; give the \
                 clang link command, or --compiler with its target (e.g. \
                 --compiler='clang-19 --target=...')"
            )))
        }
        None => triple,
    };
    Ok(LinkCommand {
        ld,
        flavor,
        args: args_expanded,
        compiler,
        triple,
    })
}

/// The architecture (and the environment, where it tells) of an lld emulation.
pub(super) fn emulation_arch(m: &str) -> Option<(&'static str, Option<&'static str>)> {
    let m = m.strip_suffix("_fbsd").unwrap_or(m);
    Some(match m {
        "elf_x86_64" | "elf_amd64" => ("x86_64", None),
        "elf32_x86_64" => ("x86_64", Some("gnux32")),
        "elf_i386" | "elf_iamcu" => ("i386", None),
        "aarch64linux" | "aarch64elf" => ("aarch64", None),
        "aarch64linuxb" | "aarch64elfb" => ("aarch64_be", None),
        "armelf" | "armelf_linux_eabi" => ("arm", None),
        "armelfb" | "armelfb_linux_eabi" => ("armeb", None),
        "elf32lriscv" => ("riscv32", None),
        "elf64lriscv" => ("riscv64", None),
        "elf32ppc" | "elf32ppclinux" => ("powerpc", None),
        "elf32lppc" | "elf32lppclinux" => ("powerpcle", None),
        "elf64ppc" => ("powerpc64", None),
        "elf64lppc" => ("powerpc64le", None),
        "elf64_s390" => ("s390x", None),
        "elf64loongarch" => ("loongarch64", None),
        "elf32loongarch" => ("loongarch32", None),
        "elf32btsmip" => ("mips", None),
        "elf32ltsmip" => ("mipsel", None),
        "elf64btsmip" => ("mips64", None),
        "elf64ltsmip" => ("mips64el", None),
        "elf32_sparc" => ("sparc", None),
        "elf64_sparc" => ("sparcv9", None),
        "msp430elf" => ("msp430", None),
        "elf32_hexagon" => ("hexagon", None),
        _ => return None,
    })
}

/// `triple` (the compiler's default) for another architecture: its OS and environment kept, its
/// vendor kept only when the architecture is the same.
pub(super) fn with_arch(triple: &str, arch: &str, env: Option<&str>) -> String {
    let mut parts: Vec<&str> = triple.split('-').collect();
    // arch-os-env, without a vendor.
    if parts.len() == 3 && ["linux", "freebsd", "netbsd", "openbsd", "none"].contains(&parts[1]) {
        parts.insert(1, "unknown");
    }
    if parts.first() == Some(&arch) && env.is_none() {
        return triple.to_string();
    }
    let os = parts.get(2).copied().unwrap_or("linux");
    let default_env = parts.get(3).copied();
    let vendor = if parts.first() == Some(&arch) {
        parts.get(1).copied().unwrap_or("unknown")
    } else {
        "unknown"
    };
    match env.or(default_env) {
        Some(e) => format!("{arch}-{vendor}-{os}-{e}"),
        None => format!("{arch}-{vendor}-{os}"),
    }
}

/// The target of the jobs, as the compiler sees it for the user's target options.
pub(super) fn target_triple(compiler: &str, user: &[String]) -> Result<String, Fail> {
    let mut target = Vec::new();
    let mut i = 0;
    while i < user.len() {
        let w = &user[i];
        if (w == "-target" || w == "--target") && i + 1 < user.len() {
            target.extend([w.clone(), user[i + 1].clone()]);
            i += 1;
        } else if w.starts_with("--target=") || matches!(w.as_str(), "-m32" | "-m64" | "-mx32") {
            target.push(w.clone());
        }
        i += 1;
    }
    let out = Command::new(compiler)
        .args(&target)
        .arg("-print-target-triple")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Fail::environment(format!("link: run {compiler}: {e}")))?;
    let triple = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || triple.is_empty() {
        return Err(Fail::environment(format!(
            "link: ask {compiler} for its target (-print-target-triple): {}\n{}",
            process::describe(&out.status),
            String::from_utf8_lossy(&out.stderr).trim_end()
        )));
    }
    Ok(triple)
}

/// Refuses a linker that is not lld: the flow needs lld's --thinlto-index-only.
pub(super) fn check_lld(ld: &str) -> Result<(), Fail> {
    let out = Command::new(ld)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Fail::environment(format!("link: run the linker {ld}: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !text.contains("LLD") {
        return Err(Fail::bad_input(format!(
            "link: the linker is {ld} ({}), not lld; add -fuse-ld=lld (or lld-N) to the link \
             command",
            text.lines().next().unwrap_or("").trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lld_emulations_name_the_target() {
        let t = |m: &str| {
            let (arch, env) = emulation_arch(m).unwrap();
            with_arch("x86_64-pc-linux-gnu", arch, env)
        };
        assert_eq!(t("elf_x86_64"), "x86_64-pc-linux-gnu");
        assert_eq!(t("elf_i386"), "i386-unknown-linux-gnu");
        assert_eq!(t("elf32_x86_64"), "x86_64-pc-linux-gnux32");
        assert_eq!(t("aarch64linux"), "aarch64-unknown-linux-gnu");
        assert_eq!(t("elf_x86_64_fbsd"), "x86_64-pc-linux-gnu");
        assert_eq!(
            with_arch("x86_64-linux-gnu", "riscv64", None),
            "riscv64-unknown-linux-gnu"
        );
        assert!(emulation_arch("elf_unknown").is_none());
    }
}
