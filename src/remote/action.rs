//! Action: one backend job as a Remote Execution API Action — its Command, its input root (a
//! Merkle tree of exactly the job's inputs) and the names its outputs come back under.
//!
//! It knows where the input root goes (the deepest directory holding the linker's directory and
//! every input and output), which jobs cannot run remotely (absolute paths), and how lld's
//! per-link names (the pid in a job's own shard and object) become canonical inside the action
//! so that relinks hit the action cache. It does not read files (digests are given to it) or talk
//! to any server.

use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use prost::Message;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// The environment variable that carries the compiler's identity into every Command (and so into
/// the action cache's key), without a platform property that workers would have to match.
pub const IDENTITY_VAR: &str = "DTLTO_BRIDGE_COMPILER";

/// The name a job's own object has inside an action (its shard: this plus `.thinlto.bc`).
const CANONICAL_OUTPUT: &str = "dtlto-job.native.o";

/// A message or file content, with its digest.
pub fn digest_of(bytes: &[u8]) -> re::Digest {
    re::Digest {
        hash: crate::fsutil::sha256_hex(bytes),
        size_bytes: bytes.len() as i64,
    }
}

/// What is the same for every action of a link.
pub struct Common {
    /// The linker's directory, absolute.
    pub cwd: PathBuf,
    /// Whether workers mount the input root at `/` (then absolute paths work, and the root is `/`).
    pub root_is_slash: bool,
    /// The compiler's identity (IDENTITY_VAR's value).
    pub identity: String,
    /// Platform properties, as given.
    pub platform: Vec<(String, String)>,
    /// Whether the action may be cached.
    pub cache: bool,
}

/// One job as an action, with everything that has to be in the CAS before it executes.
#[derive(Debug)]
pub struct JobAction {
    pub action_digest: re::Digest,
    /// The Action, Command and Directory messages, serialised.
    pub blobs: Vec<(re::Digest, Vec<u8>)>,
    /// Each output: its path in the ActionResult (relative to the working directory), and
    /// where it goes here (absolute).
    pub outputs: Vec<(String, PathBuf)>,
}

/// `path` against `cwd`, with `.` and `..` resolved lexically.
pub fn absolute(cwd: &Path, path: &str) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in cwd.join(path).components() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Why job cannot run remotely, if it cannot: a path written absolute only exists where the
/// workers mount the input root at `/`.
pub fn unsuitable(inputs: &[&str], outputs: &[&str], root_is_slash: bool) -> Option<String> {
    if root_is_slash {
        return None;
    }
    inputs
        .iter()
        .chain(outputs)
        .find(|p| p.starts_with('/'))
        .map(|p| {
            format!(
                "its path {p} is absolute, which a worker sees only if it mounts the input root \
                 at / (--remote-absolute-paths)"
            )
        })
}

/// The deepest directory that holds every one of `paths` (absolute, normalised).
fn common_ancestor<'a>(mut paths: impl Iterator<Item = &'a Path>) -> PathBuf {
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

/// The names inside the action for the job's own object and shard, when lld's per-link names
/// can be replaced without changing what the command does: one output `O`, its shard
/// `O.thinlto.bc` among the inputs, and `O` in the command only as `-o O` and in
/// `-fthinlto-index=O.thinlto.bc`.
fn canonical(argv: &[&str], inputs: &[&str], outputs: &[&str]) -> Option<(String, String)> {
    let [out] = outputs else { return None };
    let shard = format!("{out}.thinlto.bc");
    if !inputs.contains(&shard.as_str()) {
        return None;
    }
    let dir = match out.rfind('/') {
        Some(i) => &out[..=i],
        None => "",
    };
    let new_out = format!("{dir}{CANONICAL_OUTPUT}");
    let new_shard = format!("{new_out}.thinlto.bc");
    if inputs.iter().any(|i| *i == new_out || *i == new_shard) {
        return None;
    }
    let index_flag = format!("-fthinlto-index={shard}");
    let stray = argv
        .iter()
        .any(|w| w.contains(out) && *w != *out && *w != index_flag);
    (!stray).then_some((new_out, new_shard))
}

/// A tree being built: directories by path (relative to the root), files in each.
#[derive(Default)]
struct Tree {
    dirs: BTreeMap<PathBuf, (BTreeMap<String, re::Digest>, Vec<String>)>,
}

impl Tree {
    fn add_dir(&mut self, rel: &Path) {
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

    fn add_file(&mut self, rel: &Path, digest: re::Digest) {
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
    fn finish(mut self, blobs: &mut Vec<(re::Digest, Vec<u8>)>) -> re::Digest {
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
fn under(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

/// The action of a job. `digest_of_file` gives the digest of an input (absolute path).
pub fn build(
    common: &Common,
    argv: &[&str],
    inputs: &[&str],
    outputs: &[&str],
    digest_of_file: &dyn Fn(&Path) -> re::Digest,
) -> JobAction {
    let names = canonical(argv, inputs, outputs);
    let rename = |p: &str| -> String {
        match &names {
            Some((new_out, new_shard)) if p == outputs[0] => new_out.clone(),
            Some((_, new_shard)) if p == format!("{}.thinlto.bc", outputs[0]) => new_shard.clone(),
            _ => p.to_string(),
        }
    };
    let cwd = absolute(&common.cwd, ".");
    let abs_inputs: Vec<(PathBuf, PathBuf)> = inputs
        .iter()
        .map(|i| (absolute(&cwd, i), absolute(&cwd, &rename(i))))
        .collect();
    let abs_outputs: Vec<PathBuf> = outputs.iter().map(|o| absolute(&cwd, &rename(o))).collect();
    let root = if common.root_is_slash {
        PathBuf::from("/")
    } else {
        common_ancestor(
            std::iter::once(cwd.as_path())
                .chain(abs_inputs.iter().map(|(_, inside)| inside.as_path()))
                .chain(abs_outputs.iter().map(|p| p.parent().unwrap_or(p))),
        )
    };
    let working = under(&root, &cwd);

    let mut blobs = Vec::new();
    let mut tree = Tree::default();
    tree.add_dir(&working);
    for (real, inside) in &abs_inputs {
        tree.add_file(&under(&root, inside), digest_of_file(real));
    }
    let input_root = tree.finish(&mut blobs);

    let arguments: Vec<String> = argv
        .iter()
        .map(|w| match &names {
            Some((new_out, _)) if *w == outputs[0] => new_out.clone(),
            Some((_, new_shard)) if w.strip_prefix("-fthinlto-index=").is_some() => {
                let shard = format!("{}.thinlto.bc", outputs[0]);
                if *w == format!("-fthinlto-index={shard}") {
                    format!("-fthinlto-index={new_shard}")
                } else {
                    w.to_string()
                }
            }
            _ => w.to_string(),
        })
        .collect();
    let output_names: Vec<String> = outputs.iter().map(|o| rename(o)).collect();
    let mut platform: Vec<re::platform::Property> = common
        .platform
        .iter()
        .map(|(name, value)| re::platform::Property {
            name: name.clone(),
            value: value.clone(),
        })
        .collect();
    platform.sort_by(|a, b| (&a.name, &a.value).cmp(&(&b.name, &b.value)));
    let platform = (!platform.is_empty()).then_some(re::Platform {
        properties: platform,
    });
    #[allow(deprecated)]
    let command = re::Command {
        arguments,
        environment_variables: vec![re::command::EnvironmentVariable {
            name: IDENTITY_VAR.into(),
            value: common.identity.clone(),
        }],
        // Both: servers older than REAPI 2.1 read output_files.
        output_files: output_names.clone(),
        output_paths: output_names.clone(),
        platform: platform.clone(),
        working_directory: working.to_string_lossy().into_owned(),
        ..Default::default()
    };
    let command_bytes = command.encode_to_vec();
    let command_digest = digest_of(&command_bytes);
    blobs.push((command_digest.clone(), command_bytes));
    let action = re::Action {
        command_digest: Some(command_digest),
        input_root_digest: Some(input_root),
        do_not_cache: !common.cache,
        platform,
        ..Default::default()
    };
    let action_bytes = action.encode_to_vec();
    let action_digest = digest_of(&action_bytes);
    blobs.push((action_digest.clone(), action_bytes));
    JobAction {
        action_digest,
        blobs,
        outputs: output_names
            .into_iter()
            .zip(outputs)
            .map(|(inside, here)| (inside, absolute(&cwd, here)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common(cwd: &str) -> Common {
        Common {
            cwd: cwd.into(),
            root_is_slash: false,
            identity: "x".into(),
            platform: vec![("OSFamily".into(), "linux".into())],
            cache: true,
        }
    }

    /// A file's digest from its name; shards of every link have the same content.
    fn fake(p: &Path) -> re::Digest {
        let name = p.file_name().unwrap().to_string_lossy();
        if name.ends_with(".thinlto.bc") {
            digest_of(b"shard")
        } else {
            digest_of(name.as_bytes())
        }
    }

    fn decode<M: Message + Default>(a: &JobAction, d: &re::Digest) -> M {
        let (_, bytes) = a.blobs.iter().find(|(x, _)| x == d).unwrap();
        M::decode(bytes.as_slice()).unwrap()
    }

    fn parts(a: &JobAction) -> (re::Action, re::Command, re::Directory) {
        let action: re::Action = decode(a, &a.action_digest);
        let command: re::Command = decode(a, action.command_digest.as_ref().unwrap());
        let root: re::Directory = decode(a, action.input_root_digest.as_ref().unwrap());
        (action, command, root)
    }

    #[test]
    fn paths_resolve_lexically() {
        let cwd = Path::new("/b/out");
        assert_eq!(absolute(cwd, "../lib/x.o"), PathBuf::from("/b/lib/x.o"));
        assert_eq!(absolute(cwd, "./a.o"), PathBuf::from("/b/out/a.o"));
        assert_eq!(absolute(cwd, "/abs/a.o"), PathBuf::from("/abs/a.o"));
    }

    #[test]
    fn the_root_holds_parent_directory_inputs_and_the_working_directory_is_below_it() {
        let argv = [
            "/usr/bin/clang",
            "-c",
            "../lib/x.o",
            "-o",
            "x.1.77.native.o",
        ];
        let a = build(
            &common("/b/out"),
            &argv,
            &["../lib/x.o", "x.1.77.native.o.thinlto.bc"],
            &["x.1.77.native.o"],
            &fake,
        );
        let (_, command, root) = parts(&a);
        assert_eq!(command.working_directory, "out");
        let names: Vec<&str> = root.directories.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["lib", "out"]);
        assert_eq!(a.outputs[0].1, PathBuf::from("/b/out/x.1.77.native.o"));
    }

    #[test]
    fn lld_names_of_the_job_own_object_and_shard_become_canonical() {
        let argv = [
            "/usr/bin/clang",
            "-c",
            "main.o",
            "-fthinlto-index=main.1.77.native.o.thinlto.bc",
            "-o",
            "main.1.77.native.o",
        ];
        let inputs = ["main.o", "main.1.77.native.o.thinlto.bc", "add.o"];
        let a = build(
            &common("/b"),
            &argv,
            &inputs,
            &["main.1.77.native.o"],
            &fake,
        );
        let (_, command, root) = parts(&a);
        assert_eq!(
            command.arguments[3..],
            [
                "-fthinlto-index=dtlto-job.native.o.thinlto.bc",
                "-o",
                "dtlto-job.native.o"
            ]
        );
        assert_eq!(command.output_paths, ["dtlto-job.native.o"]);
        let files: Vec<&str> = root.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(files, ["add.o", "dtlto-job.native.o.thinlto.bc", "main.o"]);
        assert_eq!(a.outputs[0].0, "dtlto-job.native.o");
        assert_eq!(a.outputs[0].1, PathBuf::from("/b/main.1.77.native.o"));

        // Another link (another pid, another job number): the same action.
        let argv2 = argv.map(|w| w.replace("1.77", "3.91"));
        let argv2: Vec<&str> = argv2.iter().map(String::as_str).collect();
        let inputs2 = ["main.o", "main.3.91.native.o.thinlto.bc", "add.o"];
        let b = build(
            &common("/b"),
            &argv2,
            &inputs2,
            &["main.3.91.native.o"],
            &fake,
        );
        assert_eq!(a.action_digest, b.action_digest);
    }

    #[test]
    fn an_output_named_elsewhere_in_the_command_keeps_its_name() {
        let argv = ["cc", "-c", "m.o", "-o", "o.o", "-Wl,o.o"];
        let a = build(
            &common("/b"),
            &argv,
            &["m.o", "o.o.thinlto.bc"],
            &["o.o"],
            &fake,
        );
        let (_, command, _) = parts(&a);
        assert_eq!(command.output_paths, ["o.o"]);
    }

    #[test]
    fn the_compiler_identity_and_cache_setting_change_the_action() {
        let argv = ["cc", "-c", "m.o", "-o", "o.o"];
        let one = build(&common("/b"), &argv, &["m.o"], &["o.o"], &fake);
        let mut c = common("/b");
        c.identity = "y".into();
        let two = build(&c, &argv, &["m.o"], &["o.o"], &fake);
        assert_ne!(one.action_digest, two.action_digest);
        c.cache = false;
        let (action, _, _) = parts(&build(&c, &argv, &["m.o"], &["o.o"], &fake));
        assert!(action.do_not_cache);
    }

    #[test]
    fn absolute_paths_need_workers_that_mount_the_root_at_slash() {
        assert!(unsuitable(&["/abs/a.o"], &["o.o"], false).is_some());
        assert!(unsuitable(&["/abs/a.o"], &["o.o"], true).is_none());
        assert!(unsuitable(&["../a.o"], &["o.o"], false).is_none());
    }
}
