//! Link: the classic distributed ThinLTO flow for any LLVM with lld (14+): the thin link writes
//! the index shards and imports lists, each module becomes a job run exactly as a DTLTO link's
//! jobs run (`run.rs`), then the final link takes the native objects in place of the bitcode.
//!
//! It knows the flow's steps and files (a private directory; archives with bitcode extracted
//! and passed between `--start-lib`/`--end-lib`); it does not know how jobs are scheduled or
//! run, lld's option spellings (`ldargs.rs`) or the ar formats (`archive.rs`).

use crate::cli::LinkArgs;
use crate::exec::dir::StateDir;
use crate::exec::process::{self, Watch};
use crate::link::archive::{self, Archive, Kind};
use crate::link::fingerprint::Print;
use crate::link::ldargs::{self, Backend, Word};
use crate::render::escape;
use crate::report::{self, Fail};
use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::{Command, Stdio};

/// One word (or group of words) of lld's command line, as the flow rewrites it.
#[derive(Debug)]
enum Item {
    /// Passed on as it is.
    Word(String),
    /// An input file that is not bitcode: passed on as it is.
    File(String),
    /// A bitcode file: compiled by a job, its native object in the final link.
    Module { path: String, lazy: bool },
    /// An archive with bitcode members, replaced by its members.
    Members(Members),
}

#[derive(Debug)]
struct Members {
    /// The archive as the link named it (`libx.a`, `-lx`).
    named: String,
    /// Where the archive is.
    archive: String,
    /// Each member's path (extracted, or where a thin archive keeps it), and whether bitcode.
    members: Vec<(String, bool, String)>,
    /// In a `--whole-archive` region: every member is linked, so no `--start-lib`.
    whole: bool,
    /// Already inside the user's `--start-lib` group.
    in_lib: bool,
}

/// The link command's parts: lld's program and arguments, and the compiler for the jobs.
struct LinkCommand {
    ld: String,
    args: Vec<String>,
    compiler: String,
    triple: String,
}

pub fn link(args: &LinkArgs, jobserver: jobserver::FromEnv, watch: &Watch) -> Result<(), Fail> {
    if args.run.job_file.is_some() {
        return Err(Fail::bad_input(
            "link: takes the link command after `--`, not a job file",
        ));
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Fail::environment(format!("find the current directory: {e}")))?;
    let cwd = Utf8PathBuf::from_path_buf(cwd)
        .map_err(|p| Fail::environment(format!("use {}: not UTF-8", p.display())))?;
    if let Some(file) = &args.emit {
        // As the build tool will name it (`ninja -f` runs from here), so that the rule that
        // writes it again is its own.
        let (file, aliases) = file_names(&cwd, file);
        let file = &file;
        // One emit at a time in FILE's directory (two runs of its own rule at once would
        // each replace FILE.dtlto/); the second then finds nothing changed.
        let _one = lock_directory(&cwd.join(file))?;
        if args.emit_check
            && !crate::link::fingerprint::changed(&cwd.join(format!("{file}.dtlto")), &cwd)
        {
            return Ok(());
        }
        let result = checked(args, &cwd)
            .and_then(|command| emit(args, &command, &cwd, file, &aliases, watch));
        if result.is_err() {
            discard_emitted(&cwd, file);
        }
        return result;
    }
    let command = checked(args, &cwd)?;
    crate::exec::dir::remove_dead(&std::env::temp_dir());
    // Named after the link, so that a relink writes the same paths into the index shards and
    // a remote action cache knows its jobs.
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let name = crate::fsutil::stable_name(&[cwd.as_str().as_bytes(), command.output().as_bytes()]);
    let (state, why) =
        StateDir::create_named(&format!("link-{uid}-{name}")).map_err(Fail::environment)?;
    if let Some(why) = why {
        report::warning(&format!(
            "link: {why}; this run's files are in {} instead (a remote action cache knows \
             none of its jobs by those paths)",
            state.path()
        ));
    }
    let result = flow(args, &command, &cwd, state.path(), jobserver, watch);
    if args.run.keep {
        let kept = state.keep();
        report::note(&format!("link: kept {kept}"));
    }
    result
}

/// The link command, checked to be lld's and to leave the thin link to `link`.
fn checked(args: &LinkArgs, cwd: &Utf8Path) -> Result<LinkCommand, Fail> {
    let command = link_command(args, cwd)?;
    check_lld(&command.ld)?;
    for bad in ["thinlto-distributor", "thinlto-index-only"] {
        if command
            .args
            .iter()
            .any(|a| a.trim_start_matches('-').split('=').next() == Some(bad))
        {
            return Err(Fail::bad_input(format!(
                "link: the link command already has --{bad}; `dtlto-bridge link` runs the thin \
                 link itself (drop -fthinlto-distributor= to use this flow, or use it alone)"
            )));
        }
    }
    Ok(command)
}

/// After a failed `--emit`, the file and directory an earlier emit wrote (never anyone else's):
/// left there, they would build the old link.
fn discard_emitted(cwd: &Utf8Path, file: &Utf8Path) {
    let dir = cwd.join(format!("{file}.dtlto"));
    if dir.join(EMITTED).is_file() {
        let _ = fs::remove_file(cwd.join(file));
        let _ = fs::remove_dir_all(&dir);
    }
}

/// The link's inputs read, and where the thin link writes.
struct Plan {
    items: Vec<Item>,
    /// Every bitcode module this link passes, and whether it is lazy (an archive's member).
    modules: BTreeMap<String, bool>,
    /// lld writes a module's files at this prefix followed by the module's path.
    prefix: String,
    /// lld's list of the modules it linked.
    list: String,
}

impl Plan {
    /// `prints` (for `--emit`) gets the fingerprint of each archive read.
    fn new(
        command: &LinkCommand,
        cwd: &Utf8Path,
        dir: &Utf8Path,
        rel: &str,
        prints: Option<&mut BTreeMap<String, Print>>,
    ) -> Result<Plan, Fail> {
        let items = read_inputs(&command.args, cwd, dir, rel, prints)?;
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
        // Deep enough that a module's `..` components keep its files inside the directory.
        let depth = modules.keys().map(|m| parents(m)).max().unwrap_or(0);
        Ok(Plan {
            items,
            modules,
            prefix: format!("{rel}/m/{}", "_/".repeat(depth)),
            list: format!("{rel}/modules.list"),
        })
    }

    /// lld's arguments for the thin link.
    fn thin_args(&self) -> Vec<String> {
        let mut thin = render(&self.items, None);
        thin.extend([
            format!("--thinlto-index-only={}", self.list),
            "--thinlto-emit-imports-files".to_string(),
            format!("--thinlto-prefix-replace=;{}", self.prefix),
        ]);
        thin
    }

    /// After the thin link: the job file (current schema) of the modules it linked, and each
    /// module's native object.
    fn jobs(
        &self,
        args: &LinkArgs,
        command: &LinkCommand,
        cwd: &Utf8Path,
    ) -> Result<(serde_json::Value, BTreeMap<String, String>), Fail> {
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
            let mut inputs = vec![module.to_string(), format!("{line}.thinlto.bc")];
            for import in imports.lines().filter(|l| !l.is_empty()) {
                if !self.modules.contains_key(import) {
                    return Err(mismatch(import, &format!("an import of {module}")));
                }
                inputs.push(import.to_string());
            }
            jobs.push(serde_json::json!({
                "args": [module, format!("-fthinlto-index={line}.thinlto.bc"), "-o", line],
                "inputs": inputs,
                "outputs": [line],
            }));
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
            format!("--target={}", command.triple),
        ];
        let backend = Backend::from_args(&command.args);
        common.extend(backend.options());
        common.extend(args.backend_arg.iter().cloned());
        let common: Vec<String> = common
            .into_iter()
            .enumerate()
            .filter(|(i, w)| {
                *i == 0
                    || !args
                        .backend_remove
                        .iter()
                        .any(|p| ldargs::pattern_matches(p, w))
            })
            .map(|(_, w)| w)
            .collect();
        let file = serde_json::json!({
            "common": {
                "linker_output": command.output(),
                "args": common,
                "inputs": backend.sample_profile.iter().collect::<Vec<_>>(),
            },
            "jobs": jobs,
        });
        Ok((file, outputs))
    }
}

impl LinkCommand {
    /// The link's output (`-o`), as lld names it.
    fn output(&self) -> String {
        ldargs::values(&self.args, "o")
            .last()
            .map(|o| o.to_string())
            .unwrap_or_else(|| "a.out".to_string())
    }
}

/// Everything after the private directory exists; the caller removes it.
fn flow(
    args: &LinkArgs,
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
        report::note("link: no input is bitcode; linking as it is");
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
    let (file, outputs) = plan.jobs(args, command, cwd)?;

    // Step 2: the jobs, through the same engine as a DTLTO link's.
    let job_file = private.join("jobs.json");
    fs::write(
        &job_file,
        serde_json::to_vec_pretty(&file).expect("JSON of strings"),
    )
    .map_err(|e| Fail::environment(format!("write {job_file}: {e}")))?;
    let mut run = args.run.clone();
    run.job_file = Some(job_file);
    crate::cmd::run::run(&run, jobserver, watch).map_err(|fail| Fail {
        code: fail.code,
        message: format!(
            "{}\nlink: the backend jobs failed; the final link did not run",
            fail.message
        ),
    })?;

    if let Some(dir) = &args.keep_objects {
        keep_objects(dir, &plan.items, &outputs, cwd)?;
    }

    // Step 3: the final link, native objects in place of the bitcode.
    let last = render(&plan.items, Some(&outputs));
    final_link(command, &last, private, watch)
}

/// The marker that says a directory is an emitted link's, which a later `--emit` may replace.
const EMITTED: &str = "dtlto-bridge-link";

/// `--emit FILE`: the thin link now, with its files in FILE.dtlto/; the whole flow in FILE.
fn emit(
    args: &LinkArgs,
    command: &LinkCommand,
    cwd: &Utf8Path,
    file: &Utf8Path,
    aliases: &[String],
    watch: &Watch,
) -> Result<(), Fail> {
    let dir = Utf8PathBuf::from(format!("{file}.dtlto"));
    let at = cwd.join(&dir);
    if at.exists() {
        if !at.join(EMITTED).is_file() {
            return Err(Fail::bad_input(format!(
                "link --emit: {dir} exists and was not written by dtlto-bridge; move it away"
            )));
        }
        // The file written with that directory goes too: without it, it would build nothing
        // right, should this emit fail.
        match fs::remove_file(cwd.join(file)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Fail::environment(format!("remove {file}: {e}"))),
        }
        fs::remove_dir_all(&at).map_err(|e| Fail::environment(format!("remove {dir}: {e}")))?;
    }
    let fail = |e: std::io::Error| Fail::environment(format!("create {dir}: {e}"));
    fs::create_dir_all(&at).map_err(fail)?;
    fs::write(
        at.join(EMITTED),
        "files of a link emitted by dtlto-bridge link --emit\n",
    )
    .map_err(fail)?;
    emit_in(args, command, cwd, file, aliases, &at, watch)
}

fn emit_in(
    args: &LinkArgs,
    command: &LinkCommand,
    cwd: &Utf8Path,
    file: &Utf8Path,
    aliases: &[String],
    dir: &Utf8Path,
    watch: &Watch,
) -> Result<(), Fail> {
    let abs = dir
        .canonicalize_utf8()
        .map_err(|e| Fail::environment(format!("find {dir}: {e}")))?;
    let rel = relative(cwd, &abs);
    // FILE is dated when the first archive was read, so an archive rewritten since is newer
    // and its own rule looks at it.
    let started = std::time::SystemTime::now();
    let mut prints = BTreeMap::new();
    let plan = Plan::new(command, cwd, dir, &rel, Some(&mut prints))?;
    if plan.modules.is_empty() {
        return Err(Fail::bad_input(
            "link --emit: no input is bitcode; there is no ThinLTO flow to write",
        ));
    }
    let thin = plan.thin_args();
    run_ld(command, &thin, dir, "thin.rsp", watch, "thin link")?;
    let stamp = format!("{rel}/thin.stamp");
    fs::write(cwd.join(&stamp), "")
        .map_err(|e| Fail::environment(format!("write {stamp}: {e}")))?;
    let (jobs, outputs) = plan.jobs(args, command, cwd)?;
    let jobs_text = serde_json::to_string_pretty(&jobs).expect("JSON of strings");
    let jobs_path = format!("{rel}/jobs.json");
    fs::write(cwd.join(&jobs_path), &jobs_text)
        .map_err(|e| Fail::environment(format!("write {jobs_path}: {e}")))?;
    let last = render(&plan.items, Some(&outputs));
    let rsp = dir.join("final.rsp");
    let words: Vec<String> = last.iter().map(|a| escape::response_word(a)).collect();
    fs::write(&rsp, words.join("\n") + "\n")
        .map_err(|e| Fail::environment(format!("write {rsp}: {e}")))?;

    let mut thin_inputs = BTreeSet::new();
    let mut archives = BTreeSet::new();
    let mut final_inputs: Vec<String> = outputs.values().cloned().collect();
    for item in &plan.items {
        match item {
            Item::Module { path, .. } => {
                thin_inputs.insert(path.clone());
            }
            Item::File(path) => {
                thin_inputs.insert(path.clone());
                final_inputs.push(path.clone());
            }
            Item::Members(m) => {
                archives.insert(m.archive.clone());
                for (path, bitcode, _) in &m.members {
                    thin_inputs.insert(path.clone());
                    if !bitcode {
                        final_inputs.push(path.clone());
                    }
                }
            }
            Item::Word(_) => {}
        }
    }
    let archives: Vec<String> = archives.into_iter().collect();
    // Dated in the future (clock skew): ninja and make cannot tell by dates whether it changed
    // until then, so the file's own rule looks at every run.
    let skewed = crate::link::fingerprint::future(cwd, &archives);
    if !skewed.is_empty() {
        report::warning(&format!(
            "link --emit: {} dated in the future (clock skew?): until then, every run of {file} \
             checks whether an archive changed",
            skewed.join(", ")
        ));
    }
    crate::link::fingerprint::record(dir, prints, !skewed.is_empty()).map_err(Fail::environment)?;
    let mut thin_outputs = vec![plan.list.clone()];
    for native in outputs.values() {
        thin_outputs.push(format!("{native}.thinlto.bc"));
        thin_outputs.push(format!("{native}.imports"));
    }
    let parsed = crate::job::parse::parse(&jobs_text)
        .map_err(|e| Fail::environment(format!("read back {jobs_path}: {e}")))?;
    let wrapper = args.run.wrapper.words().map_err(Fail::bad_input)?;
    let format = args.run.backend.unwrap_or(crate::render::Format::Ninja);
    let output = command.output();
    let text = crate::render::linkfile::render(
        format,
        &parsed,
        &wrapper,
        &jobs_path,
        &crate::render::linkfile::Steps {
            build_file: file.as_str(),
            ld: &command.ld,
            thin_rsp: &format!("{rel}/thin.rsp"),
            thin_inputs: &thin_inputs.into_iter().collect::<Vec<_>>(),
            thin_outputs: &thin_outputs,
            stamp: &stamp,
            final_rsp: &format!("{rel}/final.rsp"),
            final_inputs: &final_inputs,
            output: &output,
            regenerate: &regenerate(args, cwd, command, format, file)?,
            archives: &archives,
            aliases,
            check_always: !skewed.is_empty(),
        },
    )
    .map_err(|e| Fail::bad_input(format!("link --emit: render {file}: {e}")))?;
    crate::fsutil::write_atomically(&cwd.join(file), |f| {
        std::io::Write::write_all(f, text.as_bytes())?;
        f.set_modified(started)
    })
    .map_err(|e| Fail::environment(format!("write {file}: {e}")))?;
    if !args.run.quiet {
        report::note(&format!(
            "link: wrote {file} ({} jobs; files in {rel}); link with: {} -f {}",
            outputs.len(),
            format.tool(),
            escape::shell_word(file.as_str())
        ));
    }
    Ok(())
}

/// Locks the directory that holds `file` until the returned handle is dropped (blocking).
fn lock_directory(file: &Utf8Path) -> Result<fs::File, Fail> {
    let dir = file.parent().unwrap_or(Utf8Path::new("."));
    let handle = fs::File::open(dir).map_err(|e| Fail::environment(format!("open {dir}: {e}")))?;
    handle
        .lock()
        .map_err(|e| Fail::environment(format!("lock {dir}: {e}")))?;
    Ok(handle)
}

/// This program as it was run (absolute, found on PATH if named bare), not where a symbolic
/// link to it points: an upgrade that moves the link runs the new one.
fn invoked_as(cwd: &Utf8Path) -> Result<String, Fail> {
    let argv0 = std::env::args_os().next();
    let found = argv0.as_ref().and_then(|a| a.to_str()).and_then(|a| {
        let path = if a.contains('/') {
            cwd.join(a)
        } else {
            Utf8PathBuf::from_path_buf(which::which(a).ok()?).ok()?
        };
        path.is_file().then(|| path.to_string())
    });
    match found {
        Some(path) => Ok(path),
        None => crate::cmd::run::own_exe(),
    }
}

/// The build file as the build tool names it from `cwd` (an absolute path inside it made
/// relative, as `ninja -f FILE` names it), and its absolute names (the physical one, and the
/// one through `$PWD` when that is a symbolic link), which `-f` may give as well.
fn file_names(cwd: &Utf8Path, file: &Utf8Path) -> (Utf8PathBuf, Vec<String>) {
    let logical = std::env::var("PWD")
        .ok()
        .map(Utf8PathBuf::from)
        .filter(|pwd| pwd.is_absolute() && pwd.canonicalize_utf8().is_ok_and(|p| p == cwd));
    let mut roots = vec![cwd.to_owned()];
    roots.extend(logical);
    let relative = roots
        .iter()
        .find_map(|root| file.strip_prefix(root).ok())
        .filter(|inside| file.is_absolute() && !inside.as_str().is_empty())
        .map(Utf8Path::to_owned);
    let stored = relative.unwrap_or_else(|| file.to_owned());
    let mut aliases: Vec<String> = roots
        .iter()
        .map(|root| crate::job::output::identity(root.join(&stored).as_str(), "").into_owned())
        .filter(|a| a.as_str() != stored.as_str())
        .collect();
    aliases.dedup();
    (stored, aliases)
}

/// The command that writes `file` again, as this run wrote it: this program, and every option
/// that shapes the file resolved (the format, wrapper and compiler may have come from the
/// environment, which the build tool's may not be).
fn regenerate(
    args: &LinkArgs,
    cwd: &Utf8Path,
    command: &LinkCommand,
    format: crate::render::Format,
    file: &Utf8Path,
) -> Result<Vec<String>, Fail> {
    let mut words = vec![
        invoked_as(cwd)?,
        "link".to_string(),
        "--quiet".to_string(),
        "--emit-check".to_string(),
        format!("--backend={}", format.tool()),
        format!("--wrapper={}", args.run.wrapper.wrapper),
        format!("--compiler={}", command.compiler),
    ];
    words.extend(
        args.backend_arg
            .iter()
            .map(|a| format!("--backend-arg={a}")),
    );
    words.extend(
        args.backend_remove
            .iter()
            .map(|a| format!("--backend-remove={a}")),
    );
    words.push(format!("--emit={file}"));
    words.push("--".to_string());
    words.extend(args.command.iter().cloned());
    Ok(words)
}

/// The module a line of lld's list names, checked to be a path this link passed.
fn identity<'m>(
    line: &str,
    prefix: &str,
    modules: &'m BTreeMap<String, bool>,
) -> Result<&'m str, Fail> {
    let module = line.strip_prefix(prefix).unwrap_or(line);
    if let Some((k, _)) = modules.get_key_value(module) {
        return Ok(k.as_str());
    }
    let folded = crate::job::output::identity(module, "");
    if modules
        .keys()
        .any(|k| crate::job::output::identity(k, "") == folded)
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
fn mismatch(recorded: &str, what: &str) -> Fail {
    Fail::failed(format!(
        "thin link: {what} is recorded as {}, which is not a path this link passed; a backend \
         must compile a module under the exact path the thin link recorded, so nothing was \
         compiled (name each object by one path)",
        escape::shell_word(recorded)
    ))
}

/// How many `..` components a path has: how far above its directory lld may write.
fn parents(path: &str) -> usize {
    Utf8Path::new(path)
        .components()
        .filter(|c| matches!(c, Utf8Component::ParentDir))
        .count()
}

/// `to` relative to `from`, both absolute and free of `.`/`..`.
fn relative(from: &Utf8Path, to: &Utf8Path) -> String {
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

/// The link command: lld's, from the driver's `-###` unless the user ran lld itself.
fn link_command(args: &LinkArgs, cwd: &Utf8Path) -> Result<LinkCommand, Fail> {
    let user = &args.command;
    let program = Utf8Path::new(&user[0]).file_name().unwrap_or("");
    let is_ld = program.starts_with("ld.") || program == "ld" || program.starts_with("lld");
    let (ld, rest, compiler) = if is_ld {
        let compiler = args.compiler.clone().ok_or_else(|| {
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
        let compiler = args.compiler.clone().unwrap_or_else(|| user[0].clone());
        (ld[0].clone(), ld[1..].to_vec(), compiler)
    };
    let args_expanded = ldargs::expand_response_files(&rest, cwd)
        .map_err(|e| Fail::bad_input(format!("link: {e}")))?;
    let triple = target_triple(&compiler, if is_ld { &[] } else { &user[1..] })?;
    // lld run directly: its -m emulation names the target's architecture.
    let emulation = ldargs::emulation(&args_expanded);
    let triple = match emulation.filter(|_| is_ld).map(|m| (m, emulation_arch(m))) {
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
        args: args_expanded,
        compiler,
        triple,
    })
}

/// The architecture (and the environment, where it tells) of an lld emulation.
fn emulation_arch(m: &str) -> Option<(&'static str, Option<&'static str>)> {
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
fn with_arch(triple: &str, arch: &str, env: Option<&str>) -> String {
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
fn target_triple(compiler: &str, user: &[String]) -> Result<String, Fail> {
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
fn check_lld(ld: &str) -> Result<(), Fail> {
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

/// Reads lld's arguments into items: bitcode inputs become modules; archives (named or `-l`)
/// with bitcode members are extracted into the private directory.
fn read_inputs(
    args: &[String],
    cwd: &Utf8Path,
    private: &Utf8Path,
    rel: &str,
    mut prints: Option<&mut BTreeMap<String, Print>>,
) -> Result<Vec<Item>, Fail> {
    let search = search_paths(args);
    let mut items = Vec::new();
    let mut in_lib = false;
    // What --push-state saves and --pop-state restores, as lld does: --whole-archive and
    // -static (and --as-needed, which does not change what is read here).
    let mut state = State::default();
    let mut saved = Vec::new();
    let mut archives = 0;
    for word in ldargs::classify(args) {
        let (named, path) = match &word {
            Word::Option(o) => {
                match o.trim_start_matches('-') {
                    "whole-archive" => state.whole = true,
                    "no-whole-archive" => state.whole = false,
                    "start-lib" => in_lib = true,
                    "end-lib" => in_lib = false,
                    "Bstatic" | "static" | "dn" | "non_shared" => state.statik = true,
                    "Bdynamic" | "dy" | "call_shared" => state.statik = false,
                    "push-state" => saved.push(state),
                    "pop-state" => {
                        state = saved.pop().ok_or_else(|| {
                            Fail::bad_input(
                                "link: --pop-state without a --push-state (lld: \
                                             unbalanced --push-state/--pop-state)",
                            )
                        })?
                    }
                    _ => {}
                }
                items.push(Item::Word(o.clone()));
                continue;
            }
            Word::Input(p) => (p.clone(), Some(Utf8PathBuf::from(p))),
            Word::Library(name) => (
                format!("-l{name}"),
                find_library(name, &search, state.statik, cwd),
            ),
        };
        let as_given = || match &word {
            Word::Input(p) if archive::kind(&cwd.join(p)) != Kind::Missing => Item::File(p.clone()),
            Word::Input(p) => Item::Word(p.clone()),
            _ => Item::Word(named.clone()),
        };
        let Some(path) = path else {
            items.push(as_given());
            continue;
        };
        match archive::kind(&cwd.join(&path)) {
            Kind::Bitcode => items.push(Item::Module {
                path: path.to_string(),
                lazy: in_lib,
            }),
            Kind::Archive | Kind::ThinArchive => {
                // Its metadata before its bytes: a change while it is read shows later.
                let stat = crate::link::fingerprint::stat(&cwd.join(&path));
                let read =
                    Archive::read(&path, cwd).map_err(|e| Fail::bad_input(format!("link: {e}")))?;
                if !read.has_bitcode() {
                    items.push(as_given());
                    continue;
                }
                if let Some(prints) = prints.as_deref_mut() {
                    prints.insert(path.to_string(), Print::new(stat, read.bytes()));
                }
                archives += 1;
                let dir = private.join("x").join(archives.to_string());
                let mut members = Vec::new();
                for (i, m) in read.members.iter().enumerate() {
                    if !m.linkable && state.whole {
                        return Err(Fail::bad_input(format!(
                            "link: {named}: member {} is neither a relocatable object nor \
                             bitcode, and --whole-archive links every member (lld: not an ELF \
                             file)",
                            m.name
                        )));
                    }
                    if !m.linkable {
                        crate::report::warning(&format!(
                            "{named}: member {} is neither a relocatable object nor bitcode; \
                             left out, as lld leaves it",
                            m.name
                        ));
                        continue;
                    }
                    let at = match &m.path {
                        Some(thin) => thin.to_string(),
                        None => {
                            fs::create_dir_all(&dir)
                                .map_err(|e| Fail::environment(format!("create {dir}: {e}")))?;
                            let file = format!("{i}-{}", safe_name(&m.name));
                            fs::write(dir.join(&file), read.data(m)).map_err(|e| {
                                Fail::environment(format!("extract {} from {named}: {e}", m.name))
                            })?;
                            format!("{rel}/x/{archives}/{file}")
                        }
                    };
                    members.push((at, m.bitcode, m.name.clone()));
                }
                items.push(Item::Members(Members {
                    named,
                    archive: path.to_string(),
                    members,
                    whole: state.whole,
                    in_lib,
                }));
            }
            Kind::Other | Kind::Missing => items.push(as_given()),
        }
    }
    Ok(items)
}

/// The state `--push-state` saves.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    whole: bool,
    statik: bool,
}

/// The `-L` directories in command-line order, however each is spelled (`-LDIR`, `-L DIR`,
/// `--library-path DIR`, `--library-path=DIR`): lld searches them in that order, wherever they
/// stand relative to the `-l` options. A directory starting with `=` is under `--sysroot`.
fn search_paths(args: &[String]) -> Vec<String> {
    let sysroot = ldargs::values(args, "sysroot")
        .last()
        .copied()
        .unwrap_or("");
    let mut out: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        let bare = arg.trim_start_matches('-');
        if bare == "L" || bare == "library-path" {
            if let Some(dir) = args.get(i) {
                out.push(dir.as_str());
            }
            i += 1;
        } else if let Some(dir) = bare.strip_prefix("library-path=") {
            out.push(dir);
        } else if let Some(dir) = arg.strip_prefix("-L").filter(|d| !d.is_empty()) {
            out.push(dir);
        } else if ldargs::takes_value(bare) {
            i += 1;
        }
    }
    out.into_iter()
        .map(|d| match d.strip_prefix('=') {
            Some(under) => format!("{sysroot}{under}"),
            None => d.to_string(),
        })
        .collect()
}

/// A member's name as a file name: its last component, `/` and NUL never in it.
fn safe_name(name: &str) -> String {
    let last = name.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if last.is_empty() || last == "." || last == ".." {
        "member".to_string()
    } else {
        last.to_string()
    }
}

/// Where lld finds `-lNAME`: `lib NAME .so` then `.a` in each directory (`.a` only when linking
/// statically); `-l:FILE` names the file.
fn find_library(
    name: &str,
    search: &[String],
    statik: bool,
    cwd: &Utf8Path,
) -> Option<Utf8PathBuf> {
    let names: Vec<String> = match name.strip_prefix(':') {
        Some(file) => vec![file.to_string()],
        None if statik => vec![format!("lib{name}.a")],
        None => vec![format!("lib{name}.so"), format!("lib{name}.a")],
    };
    for dir in search {
        for n in &names {
            let p = Utf8Path::new(dir).join(n);
            if cwd.join(&p).is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// lld's arguments for the thin link (`native` None) or the final link (each linked module's
/// native object; modules the thin link dropped are left out).
fn render(items: &[Item], native: Option<&BTreeMap<String, String>>) -> Vec<String> {
    let mut out = Vec::new();
    let pick = |path: &str, bitcode: bool| -> Option<String> {
        match (native, bitcode) {
            (Some(map), true) => map.get(path).cloned(),
            _ => Some(path.to_string()),
        }
    };
    for item in items {
        match item {
            Item::Word(w) | Item::File(w) => out.push(w.clone()),
            Item::Module { path, .. } => out.extend(pick(path, true)),
            Item::Members(m) => {
                let group = !m.whole && !m.in_lib;
                if group {
                    out.push("--start-lib".to_string());
                }
                for (path, bitcode, _) in &m.members {
                    out.extend(pick(path, *bitcode));
                }
                if group {
                    out.push("--end-lib".to_string());
                }
            }
        }
    }
    out
}

/// Runs lld with `args` through a response file (a kernel's link outgrows the argument limit).
fn run_ld(
    command: &LinkCommand,
    args: &[String],
    private: &Utf8Path,
    name: &str,
    watch: &Watch,
    step: &str,
) -> Result<(), Fail> {
    let rsp = private.join(name);
    let text: Vec<String> = args.iter().map(|a| escape::response_word(a)).collect();
    fs::write(&rsp, text.join("\n") + "\n")
        .map_err(|e| Fail::environment(format!("write {rsp}: {e}")))?;
    let mut cmd = Command::new(&command.ld);
    cmd.arg(format!("@{rsp}")).stdin(Stdio::null());
    let child = process::spawn(
        &mut cmd,
        watch,
        &process::Options {
            group: false,
            parent_death: libc::SIGKILL,
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

fn final_link(
    command: &LinkCommand,
    args: &[String],
    private: &Utf8Path,
    watch: &Watch,
) -> Result<(), Fail> {
    run_ld(command, args, private, "final.rsp", watch, "final link")
}

/// Copies each native object to DIR, named after its module (an archive's member under
/// `ARCHIVE.d/`).
fn keep_objects(
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
fn clean(path: &str) -> String {
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
    fn the_build_file_is_named_as_the_build_tool_names_it() {
        let lexical = |p| crate::job::output::identity(p, "").into_owned();
        assert_eq!(lexical("/a/./b/../c"), "/a/c");
        assert_eq!(lexical("/a/../../c"), "/c");
        assert_eq!(lexical("../x/./y"), "../x/y");
        let cwd = Utf8Path::new("/nonexistent/w");
        let names = |f: &str| {
            let (stored, aliases) = file_names(cwd, f.into());
            (stored.to_string(), aliases)
        };
        assert_eq!(
            names("/nonexistent/w/l.ninja"),
            ("l.ninja".into(), vec!["/nonexistent/w/l.ninja".to_string()])
        );
        assert_eq!(
            names("../o/l.ninja"),
            (
                "../o/l.ninja".into(),
                vec!["/nonexistent/o/l.ninja".to_string()]
            )
        );
        assert_eq!(
            names("/elsewhere/l.ninja"),
            ("/elsewhere/l.ninja".into(), vec![])
        );
    }

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

    #[test]
    fn names_of_kept_objects() {
        assert_eq!(clean("../lib/a.o"), "__/lib/a.o");
        assert_eq!(clean("/abs/a.o"), "abs/a.o");
        assert_eq!(safe_name("sub/m.o/"), "m.o");
        assert_eq!(safe_name(".."), "member");
        assert_eq!(parents("a/../../b.o"), 2);
    }

    /// A regular archive of (name, contents) members.
    fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = b"!<arch>\n".to_vec();
        for (name, data) in members {
            let header = format!(
                "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                format!("{name}/"),
                0,
                0,
                0,
                644,
                data.len()
            );
            out.extend(header.as_bytes());
            out.extend(*data);
            if data.len() % 2 == 1 {
                out.push(b'\n');
            }
        }
        out
    }

    #[test]
    fn state_search_order_and_unlinkable_members_as_lld_reads_them() {
        let dir =
            std::env::temp_dir().join(format!("dtlto-bridge-link-test-{}", std::process::id()));
        let cwd = Utf8PathBuf::from_path_buf(dir).unwrap();
        let _ = fs::remove_dir_all(&cwd);
        for d in ["d1", "d2", "p"] {
            fs::create_dir_all(cwd.join(d)).unwrap();
        }
        let lib = ar(&[("a.o", b"BC\xC0\xDE...."), ("README", b"text")]);
        fs::write(cwd.join("libx.a"), &lib).unwrap();
        fs::write(cwd.join("d1/libq.a"), ar(&[("one.o", b"BC\xC0\xDE....")])).unwrap();
        fs::write(cwd.join("d2/libq.a"), ar(&[("two.o", b"BC\xC0\xDE....")])).unwrap();
        let words = |w: &[&str]| -> Vec<String> { w.iter().map(|a| a.to_string()).collect() };
        let args = words(&[
            "--whole-archive",
            "--push-state",
            "--no-whole-archive",
            "libx.a",
            "--pop-state",
            "--build-id",
            "-L",
            "d2",
            "-Ld1",
            "--library-path=d3",
            "-Bstatic",
            "-lq",
        ]);
        let items = read_inputs(&args, &cwd, &cwd.join("p"), "p", None).unwrap();
        let groups: Vec<(&str, bool, Vec<&str>)> = items
            .iter()
            .filter_map(|i| match i {
                Item::Members(m) => Some((
                    m.named.as_str(),
                    m.whole,
                    m.members.iter().map(|(_, _, name)| name.as_str()).collect(),
                )),
                _ => None,
            })
            .collect();
        // --pop-state brings --whole-archive back; -lq is d2's, the first -L given; the lazy
        // archive's README member is left out.
        assert_eq!(
            groups,
            [("libx.a", false, vec!["a.o"]), ("-lq", true, vec!["two.o"])]
        );
        // As lld: a member it cannot link is an error where every member is linked, and so
        // is a --pop-state with nothing pushed.
        let read = |w: &[&str]| read_inputs(&words(w), &cwd, &cwd.join("p"), "p", None);
        let err = read(&["--whole-archive", "libx.a"]).err().unwrap().message;
        assert!(err.contains("libx.a: member README is neither"), "{err}");
        let err = read(&["--pop-state", "libx.a"]).err().unwrap().message;
        assert!(err.contains("--pop-state without a --push-state"), "{err}");
        assert_eq!(search_paths(&args), ["d2", "d1", "d3"]);
        let rooted: Vec<String> = ["--sysroot=/s", "-L=/usr/lib"].map(String::from).to_vec();
        assert_eq!(search_paths(&rooted), ["/s/usr/lib"]);
        fs::remove_dir_all(&cwd).unwrap();
    }

    #[test]
    fn archives_become_lazy_members_and_dropped_modules_are_left_out() {
        let items = vec![
            Item::Word("-o".into()),
            Item::Word("prog".into()),
            Item::Module {
                path: "main.o".into(),
                lazy: false,
            },
            Item::Members(Members {
                named: "libx.a".into(),
                archive: "libx.a".into(),
                members: vec![
                    ("x/1/0-a.o".into(), true, "a.o".into()),
                    ("x/1/1-n.o".into(), false, "n.o".into()),
                    ("x/1/2-b.o".into(), true, "b.o".into()),
                ],
                whole: false,
                in_lib: false,
            }),
        ];
        let thin = render(&items, None);
        assert_eq!(
            thin,
            [
                "-o",
                "prog",
                "main.o",
                "--start-lib",
                "x/1/0-a.o",
                "x/1/1-n.o",
                "x/1/2-b.o",
                "--end-lib"
            ]
        );
        let native: BTreeMap<String, String> = [
            ("main.o".to_string(), "m/main.o".to_string()),
            ("x/1/0-a.o".to_string(), "m/x/1/0-a.o".to_string()),
        ]
        .into();
        assert_eq!(
            render(&items, Some(&native)),
            [
                "-o",
                "prog",
                "m/main.o",
                "--start-lib",
                "m/x/1/0-a.o",
                "x/1/1-n.o",
                "--end-lib"
            ]
        );
    }
}
