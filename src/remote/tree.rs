//! Tree: the input root of an action as REAPI Directory messages — directories and files
//! added by relative path, serialised deepest first — and the path arithmetic around it.
//!
//! It knows paths and digests only; it reads no file and does not know jobs.

use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use prost::Message;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::reapi::digest_of;

/// The deepest directory that holds every one of `paths` (absolute, normalised).
pub(super) fn common_ancestor<'a>(mut paths: impl Iterator<Item = &'a Path>) -> PathBuf {
    let Some(first) = paths.next() else {
        return PathBuf::from("/");
    };
    let mut root = first.to_path_buf();
    for p in paths {
        while !p.starts_with(&root) {
            if !root.pop() {
                break;
            }
        }
    }
    root
}

/// A tree being built: directories by path (relative to the root), files in each.
#[derive(Default)]
pub(super) struct Tree {
    dirs: BTreeMap<PathBuf, (BTreeMap<String, re::Digest>, Vec<String>)>,
}

impl Tree {
    pub(super) fn add_dir(&mut self, rel: &Path) {
        let mut at = PathBuf::new();
        self.dirs.entry(at.clone()).or_default();
        for c in rel.components() {
            let name = c.as_os_str().to_string_lossy().into_owned();
            let parent = at.clone();
            at.push(&name);
            if !self.dirs.contains_key(&at) {
                self.dirs.insert(at.clone(), Default::default());
                self.dirs
                    .get_mut(&parent)
                    .expect("parent added")
                    .1
                    .push(name);
            }
        }
    }

    pub(super) fn add_file(&mut self, rel: &Path, digest: re::Digest) {
        let parent = rel.parent().unwrap_or(Path::new(""));
        self.add_dir(parent);
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.dirs
            .get_mut(parent)
            .expect("added")
            .0
            .insert(name, digest);
    }

    /// Serialises every directory, deepest first; returns the root's digest.
    pub(super) fn finish(mut self, blobs: &mut Vec<(re::Digest, Vec<u8>)>) -> re::Digest {
        let mut digests: BTreeMap<PathBuf, re::Digest> = BTreeMap::new();
        let mut paths: Vec<PathBuf> = self.dirs.keys().cloned().collect();
        paths.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for path in paths {
            let (files, mut subdirs) = self.dirs.remove(&path).expect("listed");
            subdirs.sort();
            let dir = re::Directory {
                files: files
                    .into_iter()
                    .map(|(name, digest)| re::FileNode {
                        name,
                        digest: Some(digest),
                        ..Default::default()
                    })
                    .collect(),
                directories: subdirs
                    .into_iter()
                    .map(|name| re::DirectoryNode {
                        digest: digests.get(&path.join(&name)).cloned(),
                        name,
                    })
                    .collect(),
                ..Default::default()
            };
            let bytes = dir.encode_to_vec();
            let digest = digest_of(&bytes);
            blobs.push((digest.clone(), bytes));
            digests.insert(path, digest);
        }
        digests.remove(Path::new("")).expect("the root")
    }
}

/// Relative path of `path` under `root` (both absolute and normalised).
pub(super) fn under(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}
