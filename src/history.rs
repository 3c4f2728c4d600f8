//! History: remembers how long each module's backend job took in earlier links of the same
//! output, so the next link can start its longest jobs first.
//!
//! It knows one small JSON file per (directory, linker output) in a cache directory; it does not
//! know how jobs run. A missing, unreadable or stale file only means fewer estimates.

use crate::parse::JobFile;
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// Seconds per module (the job's first input), for one linker output in one directory.
pub struct History {
    path: Utf8PathBuf,
    seconds: BTreeMap<String, f64>,
}

/// The default cache directory: `$XDG_CACHE_HOME/dtlto-bridge`, else `~/.cache/dtlto-bridge`.
pub fn default_dir() -> Option<Utf8PathBuf> {
    let nonempty = |v: &str| std::env::var(v).ok().filter(|s| !s.is_empty());
    nonempty("XDG_CACHE_HOME")
        .map(Utf8PathBuf::from)
        .or_else(|| nonempty("HOME").map(|h| Utf8PathBuf::from(h).join(".cache")))
        .map(|d| d.join("dtlto-bridge"))
}

fn module(file: &JobFile, index: usize) -> Option<&str> {
    file.jobs[index].inputs.first().map(String::as_str)
}

impl History {
    /// The history of `linker_output` linked in `cwd`; empty when there is none yet.
    pub fn load(dir: &Utf8Path, cwd: &std::path::Path, linker_output: &str) -> History {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (cwd, linker_output).hash(&mut h);
        let path = dir.join(format!("{:016x}.json", h.finish()));
        let seconds = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        History { path, seconds }
    }

    /// Each job's expected cost, in seconds where remembered; others are scaled from their input
    /// bytes at the rate the remembered jobs ran (or left in bytes when none is remembered).
    pub fn estimate(&self, file: &JobFile, bytes: &[u64]) -> Vec<f64> {
        let known: Vec<Option<f64>> = (0..file.jobs.len())
            .map(|i| module(file, i).and_then(|m| self.seconds.get(m).copied()))
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
    /// saves the file, replacing it whole so that concurrent links never see half of it.
    pub fn record(&mut self, file: &JobFile, seconds: &[Option<f64>]) -> std::io::Result<()> {
        for (i, s) in seconds.iter().enumerate() {
            let (Some(m), Some(s)) = (module(file, i), s) else {
                continue;
            };
            let mixed = match self.seconds.get(m) {
                Some(old) => (old + s) / 2.0,
                None => *s,
            };
            self.seconds.insert(m.to_string(), mixed);
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let partial = self
            .path
            .with_extension(format!("{}.partial", std::process::id()));
        std::fs::write(&partial, serde_json::to_vec(&self.seconds)?)?;
        std::fs::rename(&partial, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    fn file() -> JobFile {
        parse(
            r#"{"common":{"linker_output":"p","args":["cc"]},"jobs":[
                {"args":[],"inputs":["a.o"],"outputs":["a"]},
                {"args":[],"inputs":["b.o"],"outputs":["b"]},
                {"args":[],"inputs":["c.o"],"outputs":["c"]}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn remembered_durations_win_and_the_rest_scale_from_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let dir = Utf8Path::from_path(dir.path()).unwrap();
        let f = file();
        let mut h = History::load(dir, std::path::Path::new("/x"), "p");
        assert_eq!(h.estimate(&f, &[10, 20, 30]), [10.0, 20.0, 30.0]);
        h.record(&f, &[Some(4.0), None, Some(1.0)]).unwrap();

        let mut again = History::load(dir, std::path::Path::new("/x"), "p");
        // a: 4 s, c: 1 s, remembered; b: 20 bytes at the rate of (4 + 1) s / (10 + 30) bytes.
        assert_eq!(again.estimate(&f, &[10, 20, 30]), [4.0, 2.5, 1.0]);
        again.record(&f, &[Some(2.0), None, None]).unwrap();
        let third = History::load(dir, std::path::Path::new("/x"), "p");
        assert_eq!(third.estimate(&f, &[10, 20, 30])[0], 3.0);

        let other = History::load(dir, std::path::Path::new("/y"), "p");
        assert_eq!(other.estimate(&f, &[10, 20, 30]), [10.0, 20.0, 30.0]);
    }
}
