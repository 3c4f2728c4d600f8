//! History: remembers how long each module's backend job took in earlier links of the same
//! output, so the next link can start its longest jobs first; and what went into each module's
//! remote action, so that a miss in the action cache can say what changed.
//!
//! It knows what the history file of a link (`store::LinkFiles::history`) holds: one line of
//! JSON, the modules of the last link only; and the labels of what goes into a remote action
//! (`Part`). It does not know where the file is, nor how jobs run. A missing, unreadable or
//! stale file only means fewer estimates and misses explained as "no earlier link".

use crate::job::parse::JobFile;
use crate::job::store::LinkFiles;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::job::outcome::Ingredients;

/// Seconds per module, and what went into each module's remote action, for one linker output
/// in one directory.
pub struct History {
    files: LinkFiles,
    saved: Saved,
}

/// The file's content.
#[derive(Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved {
    #[serde(default)]
    seconds: BTreeMap<String, f64>,
    /// Each module's last action, its imports folded into one `the set of imports` entry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    actions: BTreeMap<String, Ingredients>,
    /// Each imported module's digest in the last link (`an import M` -> digest): once per
    /// module, not once per importing job.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    imports: Ingredients,
}

/// The label of the digest of a job's import names (`Saved::actions`).
const IMPORT_SET: &str = "the set of imports";

/// The digest of the names of `made`'s imports (`IMPORT_SET`'s value).
fn import_set(made: &Ingredients) -> String {
    let names: Vec<&str> = made
        .keys()
        .filter(|l| l.starts_with("an import "))
        .map(String::as_str)
        .collect();
    crate::job::util::digest::sha256_hex(names.join("\n").as_bytes())[..16].to_string()
}

/// `made` without its imports, with the digest of their names; and its imports.
fn fold_imports(made: &Ingredients) -> (Ingredients, Ingredients) {
    let (imported, mut folded): (Ingredients, Ingredients) = made
        .clone()
        .into_iter()
        .partition(|(label, _)| label.starts_with("an import "));
    folded.insert(IMPORT_SET.into(), import_set(made));
    (folded, imported)
}

/// A module's name as it stays from link to link: lld names an archive member it extracts
/// `lib.a(m.o at 80).4.1D36.o`, where `.4.1D36.o` is a counter and lld's pid in hex, and ` at
/// 80` the member's offset, which moves when an earlier member changes size: `lib.a(m.o)`.
pub fn module_key(path: &str) -> String {
    let member = path
        .strip_suffix(".o")
        .and_then(|p| p.rsplit_once('.'))
        .filter(|(_, hex)| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|(p, _)| p.rsplit_once('.'))
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map(|(p, _)| p)
        .filter(|p| p.ends_with(')'));
    let Some(member) = member else {
        return path.to_string();
    };
    match member[..member.len() - 1].rsplit_once(" at ") {
        Some((head, offset))
            if !offset.is_empty() && offset.bytes().all(|b| b.is_ascii_digit()) =>
        {
            format!("{head})")
        }
        _ => member.to_string(),
    }
}

fn module(file: &JobFile<'_>, index: usize) -> Option<String> {
    file.jobs[index].inputs.first().map(|m| module_key(m))
}

/// One part of what goes into a remote action, as `Ingredients` label it.
pub enum Part<'a> {
    Compiler,
    /// The command line without the names of its files.
    Command,
    /// The job's own module, by its input path.
    Module(&'a str),
    /// An imported module, by its input path.
    Import(&'a str),
    Shard,
}

impl Part<'_> {
    /// The label, with module names as `module_key` gives them.
    pub fn label(&self) -> String {
        match self {
            Part::Compiler => "the compiler".into(),
            Part::Command => "the command".into(),
            Part::Module(p) => format!("the module {}", module_key(p)),
            Part::Import(p) => format!("an import {}", module_key(p)),
            Part::Shard => "the index shard".into(),
        }
    }
}

/// The kind of a label (`an import` for `an import x.o`), and its rank in a reason: the module,
/// compiler and command first; the index shard last.
fn kind(label: &str) -> (usize, &'static str) {
    match label {
        l if l.starts_with("the module ") => (0, "the module"),
        "the compiler" => (1, "the compiler"),
        "the command" => (2, "the command"),
        "the index shard" => (4, "the index shard"),
        IMPORT_SET => (3, IMPORT_SET),
        _ => (3, "an import"),
    }
}

/// Why an action missed the cache: the reason shown, and its kind, for counting alike reasons
/// of different modules together (`an import changed`).
#[derive(Debug, PartialEq)]
pub struct Miss {
    pub reason: String,
    pub kind: String,
}

impl History {
    /// The history of the link whose files are `files`; empty when there is none yet.
    pub fn load(files: &LinkFiles) -> History {
        let saved = (files.history.read())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        History {
            files: files.clone(),
            saved,
        }
    }

    /// Why job `index`'s action, made of `now`, was not in the action cache: what differs from
    /// the action of the same module in the last link here.
    pub fn why_missed(&self, file: &JobFile<'_>, index: usize, now: &Ingredients) -> Miss {
        match module(file, index).and_then(|m| self.saved.actions.get(&m)) {
            None => Miss {
                reason: "no earlier link of this module here to compare with".into(),
                kind: "no earlier link".into(),
            },
            Some(before) => {
                // The imports as the last link had them, for those this job imports now.
                let mut before = before.clone();
                for label in now.keys().filter(|l| l.starts_with("an import ")) {
                    if let Some(hash) = self.saved.imports.get(label) {
                        before.insert(label.clone(), hash.clone());
                    }
                }
                let mut now = now.clone();
                now.insert(IMPORT_SET.into(), import_set(&now));
                difference(&before, &now)
            }
        }
    }

    /// Each job's expected cost, in seconds where remembered; others are scaled from `bytes`
    /// (each job's own module's size) at the rate the remembered jobs ran (or left in bytes when
    /// none is remembered).
    pub fn estimate(&self, file: &JobFile<'_>, bytes: &[u64]) -> Vec<f64> {
        let known: Vec<Option<f64>> = (0..file.jobs.len())
            .map(|i| module(file, i).and_then(|m| self.saved.seconds.get(&m).copied()))
            .collect();
        let (sec, byt) = known
            .iter()
            .zip(bytes)
            .filter_map(|(k, b)| k.map(|s| (s, *b as f64)))
            .fold((0.0, 0.0), |(s, b), (s2, b2)| (s + s2, b + b2));
        let rate = if sec > 0.0 && byt > 0.0 {
            sec / byt
        } else {
            1.0
        };
        known
            .iter()
            .zip(bytes)
            .map(|(k, b)| k.unwrap_or(*b as f64 * rate))
            .collect()
    }

    /// Folds in the durations of a successful run (an even mix with what was remembered) and
    /// the ingredients of its remote actions (None: remembered ones stay), keeps only this
    /// link's modules, and saves the file whole, so that concurrent links never see half of it
    /// (only touches it when nothing changed). After a write, trims the cache directory
    /// (`LinkFiles::trim`).
    pub fn record(
        &mut self,
        file: &JobFile<'_>,
        seconds: &[Option<f64>],
        actions: &[Option<&Ingredients>],
    ) -> std::io::Result<()> {
        // The same as the file holds (found without folding in a relink whose jobs all came
        // from the action cache): only marked as used, for the trim.
        let unchanged = self.holds(file, seconds, actions) || {
            let saved = self.next(file, seconds, actions);
            let unchanged = saved == self.saved;
            self.saved = saved;
            unchanged
        };
        let line = || Ok(vec![serde_json::to_string(&self.saved)?]);
        if self.files.history.keep(unchanged, line)? {
            self.files.trim();
        }
        Ok(())
    }

    /// What the file holds after this run: the durations mixed, the actions folded, only
    /// this link's modules and their imports.
    fn next(
        &self,
        file: &JobFile<'_>,
        seconds: &[Option<f64>],
        actions: &[Option<&Ingredients>],
    ) -> Saved {
        let mut next = BTreeMap::new();
        let mut next_actions = BTreeMap::new();
        let mut imports = self.saved.imports.clone();
        // Each job's module and its action folded, on every core.
        let folded: Vec<Option<(String, Option<_>)>> = (0..seconds.len())
            .into_par_iter()
            .map(|i| {
                let m = module(file, i)?;
                Some((m, actions.get(i).copied().flatten().map(fold_imports)))
            })
            .collect();
        for (s, folded) in seconds.iter().zip(folded) {
            let Some((m, folded)) = folded else { continue };
            match folded {
                Some((folded, imported)) => {
                    next_actions.insert(m.clone(), folded);
                    imports.extend(imported);
                }
                None => {
                    if let Some(a) = self.saved.actions.get(&m) {
                        next_actions.insert(m.clone(), a.clone());
                    }
                }
            }
            let old = self.saved.seconds.get(&m).copied();
            let mixed = match (old, s) {
                (Some(old), Some(s)) => (old + s) / 2.0,
                (None, Some(s)) => *s,
                (Some(old), None) => old,
                (None, None) => continue,
            };
            next.insert(m.to_string(), mixed);
        }
        // Only imports of this link stay: the ones its actions have, and its modules.
        let mut modules: std::collections::BTreeSet<String> = (0..file.jobs.len())
            .filter_map(|i| module(file, i))
            .map(|m| format!("an import {m}"))
            .collect();
        modules.extend(actions.iter().flatten().flat_map(|a| a.keys().cloned()));
        imports.retain(|label, _| modules.contains(label));
        Saved {
            seconds: next,
            actions: next_actions,
            imports,
        }
    }

    /// Whether recording this run would give what the file holds, found without folding a
    /// job's action (a cached relink of thousands of jobs made 6 ms of maps to compare): no
    /// new duration; each action folds to its module's saved one, with the saved imports; no
    /// saved module is missing from this link; every saved import is still one of its.
    fn holds(
        &self,
        file: &JobFile<'_>,
        seconds: &[Option<f64>],
        actions: &[Option<&Ingredients>],
    ) -> bool {
        if seconds.len() != file.jobs.len() || seconds.iter().any(Option::is_some) {
            return false;
        }
        let modules: Vec<Option<String>> = (0..file.jobs.len()).map(|i| module(file, i)).collect();
        let folds = |(i, made): (usize, &Option<&Ingredients>)| match (made, modules.get(i)) {
            (Some(_), None) => false,
            (Some(made), Some(Some(m))) => self
                .saved
                .actions
                .get(m)
                .is_some_and(|before| folds_to(made, before, &self.saved.imports)),
            _ => true,
        };
        if !actions.par_iter().enumerate().all(folds) {
            return false;
        }
        let here: std::collections::HashSet<&str> =
            modules.iter().flatten().map(String::as_str).collect();
        let saved = &self.saved;
        if !(saved.seconds.keys().chain(saved.actions.keys())).all(|m| here.contains(m.as_str())) {
            return false;
        }
        let mut labels: Option<std::collections::HashSet<&str>> = None;
        saved.imports.keys().all(|label| {
            let module = label.strip_prefix("an import ");
            module.is_some_and(|m| here.contains(m))
                || labels
                    .get_or_insert_with(|| {
                        actions
                            .iter()
                            .flatten()
                            .flat_map(|a| a.keys().map(String::as_str))
                            .collect()
                    })
                    .contains(label.as_str())
        })
    }
}

/// Whether `made` folds (`fold_imports`) to `before`, its imports as `imports` holds them.
fn folds_to(made: &Ingredients, before: &Ingredients, imports: &Ingredients) -> bool {
    let mut own = 0;
    for (label, hash) in made {
        let kept = match label.starts_with("an import ") {
            true => imports.get(label),
            false if label == IMPORT_SET => return false,
            false => {
                own += 1;
                before.get(label)
            }
        };
        if kept != Some(hash) {
            return false;
        }
    }
    before.len() == own + 1 && before.get(IMPORT_SET) == Some(&import_set(made))
}

/// What differs between two actions' ingredients, the module, compiler and command first; the
/// index shard only when nothing else did (it holds the hashes of the imports, so it changes
/// with them).
fn difference(before: &Ingredients, now: &Ingredients) -> Miss {
    let mut changes: Vec<(usize, &str, String)> = now
        .iter()
        .filter_map(|(label, hash)| {
            let (rank, kind) = kind(label);
            match before.get(label) {
                Some(old) if old == hash => None,
                Some(_) => Some((rank, kind, format!("{label} changed"))),
                None => Some((rank, kind, format!("{label} is new"))),
            }
        })
        .chain(before.keys().filter(|l| !now.contains_key(*l)).map(|l| {
            let (rank, kind) = kind(l);
            (rank, kind, format!("{l} is gone"))
        }))
        .collect();
    if changes.iter().any(|(r, _, _)| *r < 4) {
        changes.retain(|(r, _, _)| *r < 4);
    }
    changes.sort();
    let mut kinds: Vec<&str> = changes.iter().map(|(_, k, _)| *k).collect();
    kinds.dedup();
    let reason = match changes.len() {
        0 => {
            "the same action as in the last link here, whose result the server no longer has".into()
        }
        1..=3 => join(changes.into_iter().map(|(_, _, c)| c)),
        n => format!(
            "{} and {} more",
            join(changes.into_iter().take(2).map(|(_, _, c)| c)),
            n - 2
        ),
    };
    let kind = match kinds.is_empty() {
        true => "no longer on the server".into(),
        false => format!("{} changed", kinds.join(", ")),
    };
    Miss { reason, kind }
}

fn join(parts: impl Iterator<Item = String>) -> String {
    parts.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::parse::parse;

    fn load(dir: &std::path::Path, cwd: &str, output: &str) -> History {
        let dir = camino::Utf8PathBuf::from_path_buf(dir.to_path_buf()).unwrap();
        let files = crate::job::store::CacheDir::open(dir)
            .unwrap()
            .link(cwd.as_ref(), output);
        History::load(&files)
    }

    fn file(modules: &[&str]) -> JobFile<'static> {
        let jobs: Vec<serde_json::Value> = modules
            .iter()
            .enumerate()
            .map(|(i, m)| serde_json::json!({"args": [], "inputs": [m], "outputs": [format!("o{i}")]}))
            .collect();
        parse(
            &serde_json::json!({"common": {"linker_output": "p", "args": ["cc"]}, "jobs": jobs})
                .to_string(),
        )
        .unwrap()
        .into_owned()
    }

    #[test]
    fn remembered_durations_win_and_the_rest_scale_from_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let f = file(&["a.o", "b.o", "c.o"]);
        let mut h = load(dir, "/x", "p");
        assert_eq!(h.estimate(&f, &[10, 20, 30]), [10.0, 20.0, 30.0]);
        h.record(&f, &[Some(4.0), None, Some(1.0)], &[]).unwrap();

        let mut again = load(dir, "/x", "p");
        // a: 4 s, c: 1 s, remembered; b: 20 bytes at the rate of (4 + 1) s / (10 + 30) bytes.
        assert_eq!(again.estimate(&f, &[10, 20, 30]), [4.0, 2.5, 1.0]);
        again.record(&f, &[Some(2.0), None, None], &[]).unwrap();
        let third = load(dir, "/x", "p");
        assert_eq!(third.estimate(&f, &[10, 20, 30])[0], 3.0);

        let other = load(dir, "/y", "p");
        assert_eq!(other.estimate(&f, &[10, 20, 30]), [10.0, 20.0, 30.0]);
    }

    #[test]
    fn archive_members_are_known_again_whatever_lld_pid_named_them() {
        let table = [
            ("libx.a(m.o at 80).4.1D36.o", "libx.a(m.o)"),
            ("libx.a(m.o at 96).12.AF0.o", "libx.a(m.o)"),
            ("libx.a(m at x.o).4.1D36.o", "libx.a(m at x.o)"),
            ("main.o", "main.o"),
            ("a.1.2.o", "a.1.2.o"),
            ("x).1.2G.o", "x).1.2G.o"),
        ];
        for (path, key) in table {
            assert_eq!(module_key(path), key, "{path}");
        }
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let first = file(&["libx.a(m.o at 80).4.1D36.o"]);
        let mut h = load(dir, "/x", "p");
        h.record(&first, &[Some(7.0)], &[]).unwrap();
        let second = file(&["libx.a(m.o at 80).4.2A01.o"]);
        let h = load(dir, "/x", "p");
        assert_eq!(h.estimate(&second, &[1]), [7.0]);
    }

    #[test]
    fn only_the_last_links_modules_are_kept_and_an_earlier_versions_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let mut h = load(dir, "/x", "p");
        h.record(&file(&["a.o", "b.o"]), &[Some(1.0), Some(2.0)], &[])
            .unwrap();
        h.record(&file(&["b.o"]), &[Some(4.0)], &[]).unwrap();
        let path = h.files.history.path().to_path_buf();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "dtlto-bridge history 1\n{\"seconds\":{\"b.o\":3.0}}\n"
        );
        // A file of an earlier version (JSON without the first line) reads as no history.
        std::fs::write(&path, r#"{"seconds":{"b.o":6.0}}"#).unwrap();
        let old = load(dir, "/x", "p");
        assert_eq!(old.estimate(&file(&["b.o"]), &[1]), [1.0]);
    }

    fn made(pairs: &[(&str, &str)]) -> Ingredients {
        pairs
            .iter()
            .map(|(l, h)| (l.to_string(), h.to_string()))
            .collect()
    }

    /// `holds` says "nothing to write" only when folding the run gives what the file holds,
    /// and says it for a relink whose every job came from the action cache unchanged.
    #[test]
    fn a_run_that_changes_nothing_is_found_without_folding() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        // z.o is no job's module (lld's cache had it): its import stays while an action has it.
        let a = made(&[
            ("the module a.o", "1"),
            ("the command", "c"),
            ("an import b.o", "2"),
            ("an import z.o", "9"),
        ]);
        let b = made(&[("the module b.o", "2"), ("the command", "c")]);
        let abc = file(&["a.o", "b.o", "c.o"]);
        let mut h = load(dir, "/x", "p");
        h.record(&abc, &[None, None, Some(1.0)], &[Some(&a), Some(&b), None])
            .unwrap();
        let h = load(dir, "/x", "p");
        let other_import = made(&[
            ("the module a.o", "1"),
            ("the command", "c"),
            ("an import b.o", "3"),
            ("an import z.o", "9"),
        ]);
        let more_imports = made(&[
            ("the module a.o", "1"),
            ("the command", "c"),
            ("an import b.o", "2"),
            ("an import c.o", "4"),
            ("an import z.o", "9"),
        ]);
        let other_command = made(&[("the module b.o", "2"), ("the command", "d")]);
        let ab = file(&["a.o", "b.o"]);
        let aabc = file(&["a.o", "a.o", "b.o", "c.o"]);
        let none = [None, None, None];
        /// (what, the job file, its durations, its actions, whether the file holds it)
        type Case<'a> = (
            &'a str,
            &'a JobFile<'a>,
            &'a [Option<f64>],
            &'a [Option<&'a Ingredients>],
            bool,
        );
        let cases: [Case; 9] = [
            (
                "all from the cache",
                &abc,
                &none,
                &[Some(&a), Some(&b), None],
                true,
            ),
            // z.o's import goes: no action has it any more.
            ("no actions", &abc, &none, &[None, None, None], false),
            (
                "two jobs of one module",
                &aabc,
                &[None, None, None, None],
                &[Some(&a), Some(&a), Some(&b), None],
                true,
            ),
            (
                "a duration",
                &abc,
                &[Some(1.0), None, None],
                &[Some(&a), None, None],
                false,
            ),
            (
                "an import changed",
                &abc,
                &none,
                &[Some(&other_import), Some(&b), None],
                false,
            ),
            (
                "an import more",
                &abc,
                &none,
                &[Some(&more_imports), Some(&b), None],
                false,
            ),
            (
                "a command changed",
                &abc,
                &none,
                &[Some(&a), Some(&other_command), None],
                false,
            ),
            (
                "a module gone",
                &ab,
                &[None, None],
                &[Some(&a), Some(&b)],
                false,
            ),
            (
                "a new module's action",
                &abc,
                &none,
                &[Some(&a), Some(&b), Some(&b)],
                false,
            ),
        ];
        for (name, f, seconds, actions, holds) in cases {
            assert_eq!(h.holds(f, seconds, actions), holds, "{name}");
            let same = h.next(f, seconds, actions) == h.saved;
            assert!(
                !holds || same,
                "{name}: said to hold, but folding changes the file"
            );
            assert_eq!(same, holds, "{name}");
        }
    }

    #[test]
    fn a_miss_names_what_changed_since_the_last_link_of_the_module() {
        let base = [
            ("the compiler", "c1"),
            ("the command", "a1"),
            ("the module m.o", "m1"),
            ("an import x.o", "x1"),
            ("the index shard", "s1"),
        ];
        let with = |changes: &[(&str, &str)]| {
            let mut m = made(&base);
            for (l, h) in changes {
                if h.is_empty() {
                    m.remove(*l);
                } else {
                    m.insert(l.to_string(), h.to_string());
                }
            }
            m
        };
        let table: [(&[(&str, &str)], &str); 7] = [
            (
                &[],
                "the same action as in the last link here, whose result the server no longer has",
            ),
            (&[("the index shard", "s2")], "the index shard changed"),
            (
                &[("an import x.o", "x2"), ("the index shard", "s2")],
                "an import x.o changed",
            ),
            (
                &[("the compiler", "c2"), ("the module m.o", "m2")],
                "the module m.o changed, the compiler changed",
            ),
            (&[("the command", "a2")], "the command changed"),
            (
                &[("an import y.o", "y1"), ("an import x.o", "")],
                "an import x.o is gone, an import y.o is new",
            ),
            (
                &[
                    ("the compiler", "c2"),
                    ("the command", "a2"),
                    ("the module m.o", "m2"),
                    ("an import x.o", "x2"),
                ],
                "the module m.o changed, the compiler changed and 2 more",
            ),
        ];
        for (changes, said) in table {
            assert_eq!(
                difference(&made(&base), &with(changes)).reason,
                said,
                "{changes:?}"
            );
        }
        // Alike reasons of different modules are one kind.
        for import in ["an import x.o", "an import y.o"] {
            let mut other = made(&base);
            other.insert(import.into(), "changed".into());
            assert_eq!(difference(&made(&base), &other).kind, "an import changed");
        }
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let f = file(&["libx.a(m.o at 80).4.1D36.o"]);
        let mut h = load(dir, "/x", "p");
        let now = made(&base);
        assert_eq!(
            h.why_missed(&f, 0, &now).reason,
            "no earlier link of this module here to compare with"
        );
        h.record(&f, &[None], &[Some(&now)]).unwrap();
        let again = load(dir, "/x", "p");
        // Another pid, and the member moved in its archive: the same module.
        let next = file(&["libx.a(m.o at 96).4.2A01.o"]);
        assert_eq!(
            again.why_missed(&next, 0, &with(&[("the command", "a2")])),
            Miss {
                reason: "the command changed".into(),
                kind: "the command changed".into()
            }
        );
    }
}
