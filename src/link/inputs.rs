//! Inputs: lld's arguments read as lld reads them — `--push-state`/`--pop-state`, `-L` order,
//! `-l` search, `--whole-archive` and `--start-lib` regions; lld-link's `/libpath:` search,
//! `/defaultlib:`, `/wholearchive` and `/start-lib` — into the items the flow rewrites:
//! bitcode modules, archives whose bitcode members are extracted, and everything else as it is;
//! and those items written back as lld's arguments for the thin and the final link.
//!
//! It knows lld's input options (their spellings come from `ldargs` and `coffargs`) and asks
//! `archive` what a file is; it does not run anything.

use crate::job::object::Relocatable;
use crate::link::archive::{self, Archive, Kind};
use crate::link::coffargs;
use crate::link::command::Flavor;
use crate::link::fingerprint::Print;
use crate::link::ldargs::{self, Word};
use crate::report::Fail;
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;

/// One word (or group of words) of lld's command line, as the flow rewrites it.
#[derive(Debug)]
pub(super) enum Item {
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
pub(super) struct Members {
    /// The archive as the link named it (`libx.a`, `-lx`).
    pub(super) named: String,
    /// Where the archive is.
    pub(super) archive: String,
    /// Each member's path (extracted, or where a thin archive keeps it), and whether bitcode.
    pub(super) members: Vec<(String, bool, String)>,
    /// In a `--whole-archive` region: every member is linked, so no `--start-lib`.
    pub(super) whole: bool,
    /// Already inside the user's `--start-lib` group.
    pub(super) in_lib: bool,
}

/// Reads lld's arguments into items: bitcode inputs become modules; archives (named or `-l`)
/// with bitcode members are extracted into the private directory.
pub(super) fn read_inputs(
    flavor: Flavor,
    args: &[String],
    cwd: &Utf8Path,
    private: &Utf8Path,
    rel: &str,
    mut prints: Option<&mut BTreeMap<String, Print>>,
) -> Result<Vec<Item>, Fail> {
    let (search, words) = match flavor {
        Flavor::Elf => (search_paths(args), ldargs::classify(args)),
        Flavor::Coff => {
            let lib = std::env::var("LIB").ok();
            (
                coffargs::search_paths(args, lib.as_deref()),
                coffargs::classify(args),
            )
        }
    };
    let mut reader = Reader {
        flavor,
        args,
        cwd,
        private,
        rel,
        search,
        in_lib: false,
        // lld-link's `/wholearchive` covers every archive, wherever it stands.
        state: State {
            whole: flavor == Flavor::Coff && coffargs::flag(args, "wholearchive"),
            statik: false,
        },
        saved: Vec::new(),
        archives: 0,
    };
    let mut items = Vec::new();
    for word in words {
        if let Word::Option(o) = &word {
            reader.option(o)?;
            items.push(Item::Word(o.clone()));
            continue;
        }
        let (named, path, whole) = reader.find(&word);
        let as_given = || match &word {
            Word::Input(p) if archive::kind(&cwd.join(p)) != Kind::Missing => Item::File(p.clone()),
            Word::Input(p) => Item::Word(p.clone()),
            _ => Item::Word(named.clone()),
        };
        let Some(path) = path else {
            items.push(as_given());
            continue;
        };
        let item = match archive::kind(&cwd.join(&path)) {
            Kind::Bitcode => Some(Item::Module {
                path: path.to_string(),
                lazy: reader.in_lib,
            }),
            Kind::Archive | Kind::ThinArchive => {
                reader.archive(&named, &path, whole, prints.as_deref_mut())?
            }
            Kind::Other | Kind::Missing => None,
        };
        items.push(item.unwrap_or_else(as_given));
    }
    Ok(items)
}

/// What reading lld's inputs goes by: the link, and the state its options set so far.
struct Reader<'a> {
    flavor: Flavor,
    args: &'a [String],
    cwd: &'a Utf8Path,
    private: &'a Utf8Path,
    rel: &'a str,
    /// The library search path, in lld's order.
    search: Vec<String>,
    /// Inside a `--start-lib` group.
    in_lib: bool,
    state: State,
    /// What `--push-state` saved.
    saved: Vec<State>,
    /// Archives extracted so far (each into its own directory).
    archives: usize,
}

impl Reader<'_> {
    /// Follows an option that changes how later inputs are read: what --push-state saves and
    /// --pop-state restores, as lld does: --whole-archive and -static (and --as-needed, which
    /// does not change what is read here); `--start-lib` groups.
    fn option(&mut self, o: &str) -> Result<(), Fail> {
        let bare = match self.flavor {
            Flavor::Elf => o.trim_start_matches('-').to_string(),
            Flavor::Coff => coffargs::option(o).map(|(n, _)| n).unwrap_or_default(),
        };
        match bare.as_str() {
            "whole-archive" if self.flavor == Flavor::Elf => self.state.whole = true,
            "no-whole-archive" => self.state.whole = false,
            "start-lib" => self.in_lib = true,
            "end-lib" => self.in_lib = false,
            "Bstatic" | "static" | "dn" | "non_shared" => self.state.statik = true,
            "Bdynamic" | "dy" | "call_shared" => self.state.statik = false,
            "push-state" => self.saved.push(self.state),
            "pop-state" => {
                self.state = self.saved.pop().ok_or_else(|| {
                    Fail::bad_input(
                        "link: --pop-state without a --push-state (lld: unbalanced \
                         --push-state/--pop-state)",
                    )
                })?
            }
            _ => {}
        }
        Ok(())
    }

    /// An input word as the link named it, the file lld reads for it (None: not found), and
    /// whether it is linked whole.
    fn find(&self, word: &Word) -> (String, Option<Utf8PathBuf>, bool) {
        let (flavor, search, cwd) = (self.flavor, &self.search, self.cwd);
        match word {
            Word::Input(p) if flavor == Flavor::Coff => (
                p.clone(),
                coffargs::find_file(p, search, false, cwd).or(Some(p.into())),
                self.state.whole,
            ),
            Word::Input(p) => (p.clone(), Some(Utf8PathBuf::from(p)), self.state.whole),
            Word::WholeInput { path, word } => (
                word.clone(),
                coffargs::find_file(path, search, false, cwd),
                true,
            ),
            // A default library is never whole, and `/nodefaultlib` leaves it to lld-link.
            Word::Library(name) if flavor == Flavor::Coff => {
                let found = (!coffargs::no_default(self.args, name))
                    .then(|| coffargs::find_file(name, search, true, cwd))
                    .flatten();
                (format!("/defaultlib:{name}"), found, false)
            }
            Word::Library(name) => (
                format!("-l{name}"),
                find_library(name, search, self.state.statik, cwd),
                self.state.whole,
            ),
            Word::Option(o) => (o.clone(), None, false),
        }
    }

    /// The archive at `path` (named `named`), its members extracted when it holds bitcode and
    /// its fingerprint taken (None: no bitcode, passed on as it is).
    fn archive(
        &mut self,
        named: &str,
        path: &Utf8Path,
        whole: bool,
        prints: Option<&mut BTreeMap<String, Print>>,
    ) -> Result<Option<Item>, Fail> {
        // Its metadata before its bytes: a change while it is read shows later.
        let stat = crate::link::fingerprint::stat(&self.cwd.join(path));
        let read =
            Archive::read(path, self.cwd).map_err(|e| Fail::bad_input(format!("link: {e}")))?;
        if !read.has_bitcode() {
            return Ok(None);
        }
        if let Some(prints) = prints {
            prints.insert(path.to_string(), Print::new(stat, read.bytes()));
        }
        self.archives += 1;
        let mut members = Vec::new();
        for (i, m) in read.members.iter().enumerate() {
            if !self.linkable(named, m, whole)? {
                continue;
            }
            let at = match &m.path {
                Some(thin) => thin.to_string(),
                None => self.extract(named, &read, i)?,
            };
            members.push((at, m.bitcode, m.name.clone()));
        }
        Ok(Some(Item::Members(Members {
            named: named.to_string(),
            archive: path.to_string(),
            members,
            whole,
            in_lib: self.in_lib,
        })))
    }

    /// Whether this flavor of lld links the member `m` of `named`: bitcode and its own objects;
    /// ld.lld leaves anything else out (warned), lld-link refuses it, as both refuse it in a
    /// whole archive.
    fn linkable(&self, named: &str, m: &archive::Member, whole: bool) -> Result<bool, Fail> {
        let object = match (self.flavor, m.object) {
            (Flavor::Elf, Some(Relocatable::Elf)) => true,
            (Flavor::Coff, Some(Relocatable::Coff)) => true,
            (Flavor::Coff, Some(Relocatable::CoffImport)) => {
                return Err(Fail::bad_input(format!(
                    "link: {named}: member {} is an import object, which lld-link takes only \
                     from an archive, and this archive also holds bitcode, whose members `link` \
                     passes as files; nothing was run (keep import libraries apart from bitcode, \
                     or use integrated DTLTO: /thinlto-distributor:)",
                    m.name
                )))
            }
            _ => false,
        };
        let linkable = m.bitcode || object || m.missing;
        if !linkable && whole {
            return Err(Fail::bad_input(format!(
                "link: {named}: member {} is neither a relocatable object nor bitcode, and a \
                 whole archive links every member (lld refuses it)",
                m.name
            )));
        }
        if !linkable {
            crate::report::warning(&format!(
                "{named}: member {} is neither a relocatable object nor bitcode; left out, as \
                 lld leaves it",
                m.name
            ));
        }
        Ok(linkable)
    }

    /// Writes member `i` of the archive `read` (named `named`) into this archive's directory
    /// of the private directory; its path as the link names it.
    fn extract(&self, named: &str, read: &Archive, i: usize) -> Result<String, Fail> {
        let m = &read.members[i];
        let dir = self.private.join("x").join(self.archives.to_string());
        fs::create_dir_all(&dir).map_err(|e| Fail::environment(format!("create {dir}: {e}")))?;
        let file = format!("{i}-{}", safe_name(&m.name));
        fs::write(dir.join(&file), read.data(m))
            .map_err(|e| Fail::environment(format!("extract {} from {named}: {e}", m.name)))?;
        Ok(format!("{}/x/{}/{file}", self.rel, self.archives))
    }
}

/// The state `--push-state` saves.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct State {
    pub(super) whole: bool,
    pub(super) statik: bool,
}

/// The `-L` directories in command-line order, however each is spelled (`-LDIR`, `-L DIR`,
/// `--library-path DIR`, `--library-path=DIR`): lld searches them in that order, wherever they
/// stand relative to the `-l` options. A directory starting with `=` is under `--sysroot`.
pub(super) fn search_paths(args: &[String]) -> Vec<String> {
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

/// A member's name as a file name: its last component (after `/` or, as lib.exe writes them,
/// `\\`), `/` and NUL never in it.
pub(super) fn safe_name(name: &str) -> String {
    let last = name
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("");
    if last.is_empty() || last == "." || last == ".." {
        "member".to_string()
    } else {
        last.to_string()
    }
}

/// Where lld finds `-lNAME`: `lib NAME .so` then `.a` in each directory (`.a` only when linking
/// statically); `-l:FILE` names the file.
pub(super) fn find_library(
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
    ldargs::first_file(cwd, search, &names)
}

/// lld's arguments for the thin link (`native` None) or the final link (each linked module's
/// native object; modules the thin link dropped are left out).
pub(super) fn render(
    flavor: Flavor,
    items: &[Item],
    native: Option<&BTreeMap<String, String>>,
) -> Vec<String> {
    let unmarked = groups_with_lazy_members(items);
    let (start_lib, end_lib) = flavor.lib_markers();
    let mut out = Vec::new();
    let pick = |path: &str, bitcode: bool| -> Option<String> {
        match (native, bitcode) {
            (Some(map), true) => map.get(path).cloned(),
            _ => Some(path.to_string()),
        }
    };
    for (i, item) in items.iter().enumerate() {
        match item {
            Item::Word(_) if unmarked.contains(&i) => {}
            Item::Word(w) | Item::File(w) => out.push(w.clone()),
            Item::Module { path, .. } => out.extend(pick(path, true)),
            Item::Members(m) => {
                // In the final link, the native objects of the members the thin link linked
                // come first and are not lazy: the thin link decided, from the modules'
                // symbol tables, which members the link takes; a native object may no longer
                // name a symbol its bitcode did (one an asm operand takes), and the final
                // link must not decide again.
                let region = !m.whole && !m.in_lib;
                let (eager, lazy): (Vec<_>, Vec<_>) = m
                    .members
                    .iter()
                    .partition(|(_, bitcode, _)| region && native.is_some() && *bitcode);
                for (path, _, _) in eager {
                    out.extend(pick(path, true));
                }
                let group = region && !lazy.is_empty();
                if group {
                    out.push(start_lib.to_string());
                }
                for (path, bitcode, _) in lazy {
                    out.extend(pick(path, *bitcode));
                }
                if group {
                    out.push(end_lib.to_string());
                }
            }
        }
    }
    out
}

/// The `--start-group` and `--end-group` words around an archive whose members `render` puts
/// between `--start-lib` and `--end-lib`: lld refuses `--start-lib` inside a group, and a group
/// changes nothing of lld's symbol resolution (only what `--warn-backrefs` reports), so such a
/// group is written without its markers.
fn groups_with_lazy_members(items: &[Item]) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut open: Option<(usize, bool)> = None;
    for (i, item) in items.iter().enumerate() {
        match item {
            Item::Word(w) if matches!(w.as_str(), "--start-group" | "-start-group" | "-(") => {
                open = Some((i, false))
            }
            Item::Word(w) if matches!(w.as_str(), "--end-group" | "-end-group" | "-)") => {
                if let Some((start, true)) = open.take() {
                    out.extend([start, i]);
                }
            }
            Item::Members(m) if !m.whole && !m.in_lib => {
                if let Some((_, lazy)) = &mut open {
                    *lazy = true;
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let items = read_inputs(Flavor::Elf, &args, &cwd, &cwd.join("p"), "p", None).unwrap();
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
        let read =
            |w: &[&str]| read_inputs(Flavor::Elf, &words(w), &cwd, &cwd.join("p"), "p", None);
        let err = read(&["--whole-archive", "libx.a"]).err().unwrap().message;
        assert!(err.contains("libx.a: member README is neither"), "{err}");
        assert!(err.contains("a whole archive links every member"), "{err}");
        let err = read(&["--pop-state", "libx.a"]).err().unwrap().message;
        assert!(err.contains("--pop-state without a --push-state"), "{err}");
        assert_eq!(search_paths(&args), ["d2", "d1", "d3"]);
        let rooted: Vec<String> = ["--sysroot=/s", "-L=/usr/lib"].map(String::from).to_vec();
        assert_eq!(search_paths(&rooted), ["/s/usr/lib"]);
        fs::remove_dir_all(&cwd).unwrap();
    }

    #[test]
    fn archives_become_lazy_members_then_linked_native_objects_and_dropped_modules_are_left_out() {
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
        let thin = render(Flavor::Elf, &items, None);
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
            render(Flavor::Elf, &items, Some(&native)),
            [
                "-o",
                "prog",
                "m/main.o",
                "m/x/1/0-a.o",
                "--start-lib",
                "x/1/1-n.o",
                "--end-lib"
            ]
        );
    }

    #[test]
    fn a_group_holding_lazy_members_loses_its_markers_and_no_other_does() {
        let members = |named: &str, whole: bool| {
            Item::Members(Members {
                named: named.into(),
                archive: named.into(),
                members: vec![(format!("x/{named}.o"), true, "m.o".into())],
                whole,
                in_lib: false,
            })
        };
        let word = |w: &str| Item::Word(w.into());
        let file = |w: &str| Item::File(w.into());
        let items = vec![
            word("--start-group"),
            members("liba.a", false),
            file("libn.a"),
            word("--end-group"),
            word("-("),
            file("libc.a"),
            word("-)"),
            word("--start-group"),
            members("libw.a", true),
            word("--end-group"),
        ];
        assert_eq!(
            render(Flavor::Elf, &items, None).join(" "),
            "--start-lib x/liba.a.o --end-lib libn.a -( libc.a -) --start-group x/libw.a.o \
             --end-group"
        );
    }
}
