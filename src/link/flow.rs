//! Flow: the classic distributed ThinLTO flow for any LLVM with lld (14+): the thin link writes
//! the index shards and imports lists, each module becomes a job run exactly as a DTLTO link's
//! jobs run (`engine`), then the final link takes the native objects in place of the bitcode.
//!
//! It knows the flow's steps and files (a private directory named after the link; archives
//! with bitcode extracted and passed between `--start-lib`/`--end-lib`); it does not know how
//! jobs are scheduled or run, lld's option spellings (`ldargs`), the command's origin
//! (`command`) or the ar formats (`archive`).

use super::command::*;
use super::inputs::*;
use super::options::Options;
use crate::job::parse::{Spec, SpecCommon, SpecJob};
use crate::link::fingerprint::Print;
use crate::link::ldargs;
use crate::local::process::{self, Watch};
use crate::render::escape;
use crate::report::{self, Fail};
use camino::{Utf8Component, Utf8Path};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::{Command, Stdio};

/// The link's inputs read, and where the thin link writes.
pub(super) struct Plan {
    pub(super) flavor: Flavor,
    pub(super) items: Vec<Item>,
    /// Every bitcode module this link passes, and whether it is lazy (an archive's member).
    pub(super) modules: BTreeMap<String, bool>,
    /// lld writes a module's files at this prefix followed by the module's path.
    pub(super) prefix: String,
    /// lld's list of the modules it linked.
    pub(super) list: String,
}

impl Plan {
    /// `prints` (for `--emit`) gets the fingerprint of each archive read.
    pub(super) fn new(
        command: &LinkCommand,
        cwd: &Utf8Path,
        dir: &Utf8Path,
        rel: &str,
        prints: Option<&mut BTreeMap<String, Print>>,
    ) -> Result<Plan, Fail> {
        let items = read_inputs(command.flavor, &command.args, cwd, dir, rel, prints)?;
        let modules: BTreeMap<String, bool> = items
            .iter()
            .flat_map(|item| match item {
                Item::Module { path, lazy } => vec![(path.clone(), *lazy)],
                Item::Members(m) => m
                    .members
                    .iter()
                    .filter(|(_, bitcode, _)| *bitcode)
                    .map(|(p, _, _)| (p.clone(), !m.whole))
                    .collect(),
                Item::Word(_) | Item::File(_) => vec![],
            })
            .collect();
        let flavor = command.flavor;
        // Deep enough that a module's `..` components keep its files inside the directory.
        let depth = modules.keys().map(|m| parents(m)).max().unwrap_or(0);
        Ok(Plan {
            flavor,
            items,
            modules,
            prefix: format!("{rel}/m/{}", "_/".repeat(depth)),
            list: format!("{rel}/modules.list"),
        })
    }

    /// lld's arguments for the thin link.
    pub(super) fn thin_args(&self) -> Vec<String> {
        let mut thin = render(self.flavor, &self.items, None);
        thin.extend(self.flavor.thin_options(&self.list, &self.prefix));
        thin
    }

    /// lld's arguments for the final link: each linked module's native object in its place.
    pub(super) fn final_args(&self, outputs: &BTreeMap<String, String>) -> Vec<String> {
        render(self.flavor, &self.items, Some(outputs))
    }

    /// After the thin link: the job file (current schema) of the modules it linked, and each
    /// module's native object.
    pub(super) fn jobs(
        &self,
        options: &Options,
        command: &LinkCommand,
        cwd: &Utf8Path,
    ) -> Result<(Spec, BTreeMap<String, String>), Fail> {
        let list = &self.list;
        let linked = fs::read_to_string(cwd.join(list)).map_err(|e| {
            Fail::failed(format!("thin link: read its list of modules {list}: {e}"))
        })?;
        let mut jobs = Vec::new();
        let mut outputs: BTreeMap<String, String> = BTreeMap::new();
        for line in linked.lines().filter(|l| !l.is_empty()) {
            let module = identity(line, &self.prefix, &self.modules)?;
            let imports_file = format!("{line}.imports");
            let imports = fs::read_to_string(cwd.join(&imports_file)).map_err(|e| {
                Fail::failed(format!(
                    "thin link: read the imports of {module} ({imports_file}): {e}"
                ))
            })?;
            let mut inputs = vec![module.to_string(), crate::job::files::shard_name(line)];
            for import in imports.lines().filter(|l| !l.is_empty()) {
                if !self.modules.contains_key(import) {
                    return Err(mismatch(import, &format!("an import of {module}")));
                }
                inputs.push(import.to_string());
            }
            jobs.push(SpecJob {
                args: vec![
                    module.to_string(),
                    format!("-fthinlto-index={}", crate::job::files::shard_name(line)),
                    "-o".to_string(),
                    line.to_string(),
                ],
                inputs,
                outputs: vec![line.to_string()],
            });
            outputs.insert(module.to_string(), line.to_string());
        }
        for (module, lazy) in &self.modules {
            if !lazy && !outputs.contains_key(module) {
                return Err(Fail::failed(format!(
                    "thin link: did not list {module}, which it had to link (is it a full-LTO \
                     module? this flow handles -flto=thin modules)"
                )));
            }
        }
        let mut common = vec![
            command.compiler.clone(),
            "-c".to_string(),
            format!("--target={}", target(command, cwd, &jobs)),
        ];
        let derived = command.job_options();
        common.extend(derived.options());
        common.extend(options.backend_arg.iter().cloned());
        let common: Vec<String> = common
            .into_iter()
            .enumerate()
            .filter(|(i, w)| {
                *i == 0
                    || !options
                        .backend_remove
                        .iter()
                        .any(|p| ldargs::pattern_matches(p, w))
            })
            .map(|(_, w)| w)
            .collect();
        let file = Spec {
            common: SpecCommon {
                args: common,
                inputs: derived.sample_profile.into_iter().collect(),
                linker_output: command.output(),
            },
            jobs,
        };
        Ok((file, outputs))
    }
}

/// The target the jobs compile for: the first module's own triple, as lld's DTLTO takes it
/// (the link's, from its emulation or driver, would differ in the vendor and make every job
/// warn that it links modules of different triples); the link's when the module says none.
fn target(command: &LinkCommand, cwd: &Utf8Path, jobs: &[SpecJob]) -> String {
    let Some(module) = jobs.first().map(|j| &j.inputs[0]) else {
        return command.triple.clone();
    };
    match crate::job::bitcode::module::read_file(cwd.join(module).as_std_path()) {
        Ok(m) => m.triple,
        Err(e) => {
            report::warning(&format!(
                "link: read the target of {module}: {e}; the jobs compile for the link's, {}",
                command.triple
            ));
            command.triple.clone()
        }
    }
}

/// Everything after the private directory exists; the caller removes it.
pub(super) fn flow(
    options: &Options,
    command: &LinkCommand,
    cwd: &Utf8Path,
    private: &Utf8Path,
    jobserver: jobserver::FromEnv,
    watch: &Watch,
) -> Result<(), Fail> {
    let private_abs = private
        .canonicalize_utf8()
        .map_err(|e| Fail::environment(format!("find {private}: {e}")))?;
    let rel = relative(cwd, &private_abs);
    let plan = Plan::new(command, cwd, private, &rel, None)?;
    if plan.modules.is_empty() {
        // Quiet where there is no input at all (`--version`, `-v`: Kbuild asks those of LD).
        if plan.items.iter().any(|i| matches!(i, Item::File(_))) {
            report::note("link: no input is bitcode; linking as it is");
        }
        return final_link(command, &command.args, private, watch);
    }

    // Step 1: the thin link.
    run_ld(
        command,
        &plan.thin_args(),
        private,
        "thin.rsp",
        watch,
        "thin link",
    )?;
    let (spec, outputs) = plan.jobs(options, command, cwd)?;

    // Step 2: the jobs, through the same engine as a DTLTO link's; the file is written for
    // `--keep` and `--save`, the engine takes the jobs as they are.
    let job_file = private.join("jobs.json");
    fs::write(&job_file, spec.to_json())
        .map_err(|e| Fail::environment(format!("write {job_file}: {e}")))?;
    let file = spec
        .into_file()
        .map_err(|e| Fail::bad_input(format!("parse job file {job_file}: {e}")))?;
    crate::link::engine::run_file(
        &options.run,
        &job_file,
        cwd.as_std_path().to_path_buf(),
        file,
        jobserver,
        watch,
    )
    .map_err(|fail| Fail {
        code: fail.code,
        message: format!(
            "{}\nlink: the backend jobs failed; the final link did not run",
            fail.message
        ),
    })?;

    if let Some(dir) = &options.keep_objects {
        keep_objects(dir, &plan.items, &outputs, cwd)?;
    }

    // Step 3: the final link, native objects in place of the bitcode.
    final_link(command, &plan.final_args(&outputs), private, watch)
}

/// The module a line of lld's list names, checked to be a path this link passed.
pub(super) fn identity<'m>(
    line: &str,
    prefix: &str,
    modules: &'m BTreeMap<String, bool>,
) -> Result<&'m str, Fail> {
    let module = line.strip_prefix(prefix).unwrap_or(line);
    if let Some((k, _)) = modules.get_key_value(module) {
        return Ok(k.as_str());
    }
    let folded = crate::job::files::identity(module, "");
    if modules
        .keys()
        .any(|k| crate::job::files::identity(k, "") == folded)
    {
        return Err(mismatch(module, "a module of the thin link"));
    }
    Err(Fail::failed(format!(
        "thin link: lld linked the module {}, which dtlto-bridge did not read as an input of the \
         link (the word before it may have been read as an option's value); nothing was \
         compiled: please report the link command",
        escape::shell_word(module)
    )))
}

/// A module path the thin link recorded that this link did not pass (as the kernel's
/// `arch/x86/../../virt/kvm/kvm_main.o` against `virt/kvm/kvm_main.o`): compiling another
/// spelling of it would give a binary with undefined or duplicate symbols.
pub(super) fn mismatch(recorded: &str, what: &str) -> Fail {
    Fail::failed(format!(
        "thin link: {what} is recorded as {}, which is not a path this link passed; a backend \
         must compile a module under the exact path the thin link recorded, so nothing was \
         compiled (name each object by one path)",
        escape::shell_word(recorded)
    ))
}

/// How many `..` components a path has: how far above its directory lld may write.
pub(super) fn parents(path: &str) -> usize {
    Utf8Path::new(path)
        .components()
        .filter(|c| matches!(c, Utf8Component::ParentDir))
        .count()
}

/// `to` relative to `from`, both absolute and free of `.`/`..`.
pub(super) fn relative(from: &Utf8Path, to: &Utf8Path) -> String {
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out: Vec<&str> = vec![".."; a.len() - common];
    out.extend(b[common..].iter().map(|c| c.as_str()));
    if out.is_empty() {
        ".".to_string()
    } else {
        out.join("/")
    }
}

/// Writes `args` as the linker's response file `rsp`, quoted as the linker reads it.
pub(super) fn write_rsp(flavor: Flavor, rsp: &Utf8Path, args: &[String]) -> Result<(), Fail> {
    let text: Vec<String> = args.iter().map(|a| flavor.rsp_word(a)).collect();
    fs::write(rsp, text.join("\n") + "\n")
        .map_err(|e| Fail::environment(format!("write {rsp}: {e}")))
}

/// Runs lld with `args` through a response file (a kernel's link outgrows the argument limit).
pub(super) fn run_ld(
    command: &LinkCommand,
    args: &[String],
    private: &Utf8Path,
    name: &str,
    watch: &Watch,
    step: &str,
) -> Result<(), Fail> {
    let rsp = private.join(name);
    write_rsp(command.flavor, &rsp, args)?;
    let mut cmd = Command::new(&command.ld);
    // lld-link would add `LINK`'s and `_LINK_`'s words again: they are in `args` already.
    cmd.arg(format!("@{rsp}"))
        .stdin(Stdio::null())
        .env_remove("LINK")
        .env_remove("_LINK_");
    let child = process::spawn(
        &mut cmd,
        watch,
        &process::Options {
            group: false,
            parent_death: Some(libc::SIGKILL),
            forward: true,
        },
    )
    .map_err(|e| Fail::environment(format!("{step}: run {}: {e}", command.ld)))?;
    let status = child
        .wait(watch)
        .map_err(|e| Fail::environment(format!("{step}: wait for {}: {e}", command.ld)))?;
    if let Some(sig) = watch.received() {
        return Err(Fail::new(
            process::exit_code(sig),
            format!("{step}: interrupted by signal {sig}"),
        ));
    }
    if !status.success() {
        return Err(Fail::new(
            status.code().filter(|&c| c != 0).unwrap_or(1),
            format!(
                "{step}: {} failed ({}); its arguments: {}",
                command.ld,
                process::describe(&status),
                args.iter()
                    .map(|a| escape::shell_word(a))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        ));
    }
    Ok(())
}

pub(super) fn final_link(
    command: &LinkCommand,
    args: &[String],
    private: &Utf8Path,
    watch: &Watch,
) -> Result<(), Fail> {
    run_ld(command, args, private, "final.rsp", watch, "final link")
}

/// Copies each native object to DIR, named after its module (an archive's member under
/// `ARCHIVE.d/`).
pub(super) fn keep_objects(
    dir: &Utf8Path,
    items: &[Item],
    outputs: &BTreeMap<String, String>,
    cwd: &Utf8Path,
) -> Result<(), Fail> {
    let mut names = BTreeSet::new();
    let mut kept = Vec::new();
    for item in items {
        match item {
            Item::Module { path, .. } => kept.push((path.clone(), clean(path))),
            Item::Members(m) => {
                for (path, bitcode, name) in &m.members {
                    if *bitcode {
                        kept.push((
                            path.clone(),
                            format!("{}.d/{}", clean(&m.named), safe_name(name)),
                        ));
                    }
                }
            }
            Item::Word(_) | Item::File(_) => {}
        }
    }
    for (module, mut name) in kept {
        let Some(object) = outputs.get(&module) else {
            continue;
        };
        let mut n = 1;
        while !names.insert(name.clone()) {
            n += 1;
            name = format!("{name}.{n}");
        }
        let to = dir.join(&name);
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| Fail::environment(format!("keep objects: create {parent}: {e}")))?;
        }
        fs::copy(cwd.join(object), &to)
            .map_err(|e| Fail::environment(format!("keep objects: copy {object} to {to}: {e}")))?;
    }
    Ok(())
}

/// A path as a relative name under a directory: no root, `..` as `__`.
pub(super) fn clean(path: &str) -> String {
    Utf8Path::new(path)
        .components()
        .filter_map(|c| match c {
            Utf8Component::Normal(n) => Some(n.to_string()),
            Utf8Component::ParentDir => Some("__".to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(relative("/a/b".into(), "/a/b/c".into()), "c");
        assert_eq!(relative("/a/b".into(), "/tmp/x".into()), "../../tmp/x");
        assert_eq!(relative("/a".into(), "/a".into()), ".");
    }

    #[test]
    fn module_identity_is_checked() {
        let modules: BTreeMap<String, bool> = [
            ("main.o".to_string(), false),
            ("arch/x86/../../virt/kvm.o".to_string(), false),
        ]
        .into();
        assert_eq!(identity("P/m/main.o", "P/m/", &modules).unwrap(), "main.o");
        assert_eq!(
            identity("P/m/arch/x86/../../virt/kvm.o", "P/m/", &modules).unwrap(),
            "arch/x86/../../virt/kvm.o"
        );
        let e = identity("P/m/virt/kvm.o", "P/m/", &modules).unwrap_err();
        assert!(
            e.message.contains("recorded as virt/kvm.o"),
            "{}",
            e.message
        );
        let e = identity("P/m/other.o", "P/m/", &modules).unwrap_err();
        assert!(
            e.message.contains("did not read as an input"),
            "{}",
            e.message
        );
    }

    #[test]
    fn names_of_kept_objects() {
        assert_eq!(clean("../lib/a.o"), "__/lib/a.o");
        assert_eq!(clean("/abs/a.o"), "abs/a.o");
        assert_eq!(safe_name("sub/m.o/"), "m.o");
        assert_eq!(safe_name(".."), "member");
        assert_eq!(parents("a/../../b.o"), 2);
    }
}
