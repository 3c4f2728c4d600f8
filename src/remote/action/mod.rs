//! Action: one backend job as a Remote Execution API Action — its Command, its input root (a
//! Merkle tree of exactly the job's inputs) and the names its outputs come back under.
//!
//! It knows two ways to name a job's files inside its action. **By content**, the way it takes
//! when it can: every module under `m/` named by its digest, the index shard's module path
//! table rewritten to match (`shard`), the object and shard under fixed names, the working
//! directory the root; the action then depends on what the files hold and not on lld's
//! per-link names (pids, job numbers), on the checkout's path or on absolute paths, so relinks
//! and other checkouts hit the action cache. **By name**, for a job it cannot be sure of (the
//! reason is kept): the files where they are, under the deepest directory holding the linker's
//! directory and every input and output, only the job's own object and shard renamed; absolute
//! paths then cannot run remotely unless the workers mount the input root at `/`. It does not
//! read files (digests and the shard's bytes are given to it) or talk to any server.

use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use super::reapi::digest_of;
use super::tree::{common_ancestor, under, Tree};
use crate::job::outcome::Ingredients;
use crate::report::history::Part;

/// The environment variable that carries the compiler's identity into every Command (and so into
/// the action cache's key), without a platform property that workers would have to match.
pub const IDENTITY_VAR: &str = "DTLTO_BRIDGE_COMPILER";

/// The name a job's own object has inside an action (its shard: this plus `.thinlto.bc`).
const CANONICAL_OUTPUT: &str = "dtlto-job.native.o";

/// The directory of the modules of an action keyed by content, each `DIGEST.EXT`.
const MODULES: &str = "m";

/// What is the same for every action of a link.
#[derive(Clone)]
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
    /// Whether jobs are keyed by content where they can be (else always by names).
    pub by_content: bool,
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
    /// The files here (absolute) whose content the input root holds.
    pub uses: Vec<PathBuf>,
    /// Why the action names its files by where they are rather than by content (None: by
    /// content).
    pub by_name: Option<String>,
    /// Keyed by content, but with the index shard's summaries as lld wrote them: why (such a
    /// job can miss the cache when lld numbers its values otherwise in another link).
    pub summaries_kept: Option<String>,
    /// What went into the action, each by a label that stays from link to link, with a digest:
    /// to say which of them changed when the action misses the cache.
    pub ingredients: std::sync::Arc<Ingredients>,
    /// False for a job remembered from the last link (`memo::jobs`): no blobs and no uses until it
    /// is built again, which it is only to execute.
    pub whole: bool,
    /// Each output's digest in the last link's result, for a job remembered with one.
    pub last: Vec<re::Digest>,
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

/// Why a job keyed by names cannot run remotely, if it cannot: a path written absolute only
/// exists where the workers mount the input root at `/`.
fn unsuitable(inputs: &[&str], outputs: &[&str], root_is_slash: bool) -> Option<String> {
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

/// The names inside the action for the job's own object and shard, when lld's per-link names
/// can be replaced without changing what the command does: one output `O`, its shard
/// `O.thinlto.bc` among the inputs, and `O` in the command only as `-o O` and in
/// `-fthinlto-index=O.thinlto.bc`.
pub(super) fn canonical(
    argv: &[&str],
    inputs: &[&str],
    outputs: &[&str],
) -> Option<(String, String)> {
    let [out] = outputs else { return None };
    let shard = crate::job::files::shard_name(out);
    if !inputs.contains(&shard.as_str()) {
        return None;
    }
    let dir = match out.rfind('/') {
        Some(i) => &out[..=i],
        None => "",
    };
    let new_out = format!("{dir}{CANONICAL_OUTPUT}");
    let new_shard = crate::job::files::shard_name(&new_out);
    if inputs.iter().any(|i| *i == new_out || *i == new_shard) {
        return None;
    }
    let index_flag = format!("-fthinlto-index={shard}");
    let stray = argv
        .iter()
        .any(|w| w.contains(out) && *w != *out && *w != index_flag);
    (!stray).then_some((new_out, new_shard))
}

/// A job inside an action, before the Command and Action around it.
struct Layout {
    arguments: Vec<String>,
    working_directory: String,
    input_root: re::Digest,
    /// The input root's Directory messages, and a rewritten shard if any.
    blobs: Vec<(re::Digest, Vec<u8>)>,
    /// Each output: its path in the ActionResult, and where it goes here (absolute).
    outputs: Vec<(String, PathBuf)>,
    /// The files here (absolute) whose content the input root holds.
    uses: Vec<PathBuf>,
    /// The digest of the index shard the action holds, when it is not the file's (rewritten).
    shard: Option<String>,
}

/// The extension of a module's file name, dot included, when it is a short plain one (`.o`,
/// `.bc`): kept inside the action, since clang chooses how to read an input by it.
fn extension(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rfind('.') {
        Some(i)
            if i > 0
                && name.len() - i <= 8
                && name[i + 1..].bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            &name[i..]
        }
        _ => "",
    }
}

/// A job keyed by content with every check made, every name chosen and its index shard's
/// summaries read and put in order; `finish` writes the shard and builds the action.
struct ContentPlan<'a> {
    arguments: Vec<String>,
    modules: Modules<'a>,
    shard: crate::remote::shard::Plan<'a>,
    shard_name: String,
    /// The job's object, here (absolute).
    out: PathBuf,
}

/// The job keyed by content, up to its shard's rewrite; or why it cannot be keyed by content:
/// `shard` is the bytes of the job's index shard (None when it could not be read).
fn content_plan<'a>(
    cwd: &Path,
    argv: &[&str],
    inputs: &[&'a str],
    outputs: &[&str],
    digest_of_file: &dyn Fn(&Path) -> re::Digest,
    shard: Option<&'a [u8]>,
) -> Result<ContentPlan<'a>, String> {
    let [out] = outputs else {
        return Err(format!("it has {} outputs, not one", outputs.len()));
    };
    let shard_name = crate::job::files::shard_name(out);
    if !inputs.contains(&shard_name.as_str()) {
        return Err(format!(
            "its index shard {shard_name} is not among its inputs"
        ));
    }
    let shard = shard.ok_or_else(|| format!("its index shard {shard_name} could not be read"))?;
    let modules = Modules::of(cwd, inputs, &shard_name, digest_of_file)?;
    // The shard names each module as lld wrote its path; find each among the inputs.
    let table = crate::remote::shard::ModuleTable::read(shard)
        .map_err(|e| format!("read its index shard {shard_name}: {e}"))?;
    let paths = table.paths();
    let mut named: HashMap<&str, &str> = HashMap::new();
    for p in &paths {
        let input = modules.find(cwd, p).ok_or_else(|| {
            format!("its index shard names the module {p}, which is not among its inputs")
        })?;
        named.insert(p, input);
    }
    let all: std::collections::HashSet<&str> = named.values().copied().collect();
    if let Some(unnamed) = modules.inside.keys().find(|i| !all.contains(*i)) {
        return Err(format!(
            "its input {unnamed} is not in its index shard's module table"
        ));
    }
    let plan = table
        .plan(&|p| named.get(p).map(|i| modules.inside[i].0.clone()))
        .map_err(|e| format!("rewrite its index shard {shard_name}: {e}"))?;
    let new_shard_name = crate::job::files::shard_name(CANONICAL_OUTPUT);
    let arguments = canonical_words(argv, out, inputs, &modules, &shard_name, &new_shard_name)?;
    Ok(ContentPlan {
        arguments,
        modules,
        shard: plan,
        shard_name,
        out: absolute(cwd, out),
    })
}

impl ContentPlan<'_> {
    /// What the action is made of, as a digest (BLAKE3): its command, each module by its name
    /// inside and digest, and the shard's rewrite (`shard::Plan::identity`). No path of this
    /// link is in it, so a relink whose lld named the same modules otherwise (archive members,
    /// by pid) gives the same identity, and the same action.
    fn identity(&self) -> String {
        let mut h = crate::job::util::digest::Words::default();
        h.word("dtlto-bridge content action 1");
        h.list(self.arguments.iter().map(String::as_str));
        // The modules in the order of their names inside, not of lld's names for them.
        let mut modules: Vec<(&str, &re::Digest)> = (self.modules.inside.values())
            .map(|(name, _, digest)| (name.as_str(), digest))
            .collect();
        modules.sort_unstable_by_key(|(name, _)| *name);
        for (name, digest) in modules {
            h.word(name);
            h.word(&format!("{}/{}", digest.hash, digest.size_bytes));
        }
        h.word(&self.shard.identity());
        h.finish()
    }

    /// The layout, and why the shard's summaries are as lld wrote them if they are.
    fn finish(self) -> Result<(Layout, Option<String>), String> {
        let ContentPlan {
            arguments,
            modules,
            shard,
            shard_name,
            out,
        } = self;
        let renamed = shard
            .finish()
            .map_err(|e| format!("rewrite its index shard {shard_name}: {e}"))?;
        let new_shard_name = crate::job::files::shard_name(CANONICAL_OUTPUT);
        let mut blobs = Vec::new();
        let mut tree = Tree::default();
        let mut uses = Vec::new();
        for (name, real, digest) in modules.inside.into_values() {
            tree.add_file(Path::new(&name), digest);
            uses.push(real);
        }
        let shard_digest = digest_of(&renamed.bytes);
        tree.add_file(Path::new(&new_shard_name), shard_digest.clone());
        let shard = Some(shard_digest.hash.clone());
        blobs.push((shard_digest, renamed.bytes));
        let input_root = tree.finish(&mut blobs);
        let layout = Layout {
            arguments,
            working_directory: String::new(),
            input_root,
            blobs,
            outputs: vec![(CANONICAL_OUTPUT.to_string(), out)],
            uses,
            shard,
        };
        Ok((layout, renamed.summaries_kept))
    }
}

/// A job keyed by content as plain files, for a bundle (`bundle::pack`): the same names and
/// command as its action, without the Merkle tree around them.
pub struct ContentFiles {
    /// The command's words after the compiler.
    pub arguments: Vec<String>,
    /// Each module: its name inside, and where it is here.
    pub modules: Vec<(String, PathBuf)>,
    /// The index shard: its name inside and its bytes, rewritten to the names inside.
    pub shard: (String, Vec<u8>),
    /// The object's name inside.
    pub output: String,
}

/// The job as a content-keyed action names its files (`content_plan`), or why it cannot be
/// keyed by content; `hash_of` gives an input's SHA-256 (hex) and size.
pub fn content_files(
    cwd: &Path,
    [argv, inputs, outputs]: JobWords<'_, '_>,
    hash_of: &dyn Fn(&Path) -> (String, i64),
    shard: &[u8],
) -> Result<ContentFiles, String> {
    let digest_of_file = |p: &Path| {
        let (hash, size_bytes) = hash_of(p);
        re::Digest { hash, size_bytes }
    };
    let cwd = absolute(cwd, ".");
    let plan = content_plan(&cwd, argv, inputs, outputs, &digest_of_file, Some(shard))?;
    let renamed = (plan.shard.finish())
        .map_err(|e| format!("rewrite its index shard {}: {e}", plan.shard_name))?;
    let modules = (plan.modules.inside.into_values())
        .map(|(name, real, _)| (name, real))
        .collect();
    Ok(ContentFiles {
        arguments: plan.arguments.into_iter().skip(1).collect(),
        modules,
        shard: (
            crate::job::files::shard_name(CANONICAL_OUTPUT),
            renamed.bytes,
        ),
        output: CANONICAL_OUTPUT.to_string(),
    })
}

/// A `..` after a directory name is resolved by the kernel through a symlink there, not by
/// erasing the name: such a path cannot be matched to another one with certainty.
fn uncertain(p: &str) -> bool {
    let parts: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    parts.iter().skip_while(|c| **c == "..").any(|c| *c == "..")
}

/// A job's modules (every input but the shard), each by its digest.
struct Modules<'a> {
    /// Each input: its name inside the action, where it is, its digest.
    inside: BTreeMap<&'a str, (String, PathBuf, re::Digest)>,
    /// Each input by where it is.
    by_place: HashMap<PathBuf, &'a str>,
}

impl<'a> Modules<'a> {
    fn of(
        cwd: &Path,
        inputs: &[&'a str],
        shard_name: &str,
        digest_of_file: &dyn Fn(&Path) -> re::Digest,
    ) -> Result<Modules<'a>, String> {
        let mut inside = BTreeMap::new();
        let mut by_digest: BTreeMap<String, &str> = BTreeMap::new();
        let mut by_place = HashMap::new();
        for &input in inputs.iter().filter(|i| **i != shard_name) {
            if uncertain(input) {
                return Err(format!("its input {input} has a .. after a directory name"));
            }
            let real = absolute(cwd, input);
            let digest = digest_of_file(&real);
            if let Some(other) = by_digest.insert(digest.hash.clone(), input) {
                if other != input {
                    return Err(format!(
                        "its inputs {other} and {input} hold the same bytes"
                    ));
                }
            }
            let name = format!(
                "{MODULES}/{}{}",
                &digest.hash[..32.min(digest.hash.len())],
                extension(input)
            );
            by_place.insert(real.clone(), input);
            inside.insert(input, (name, real, digest));
        }
        Ok(Modules { inside, by_place })
    }

    /// The input a shard's module path names: the same words, or the same place (`/b/add.o`
    /// and `add.o` run from `/b`).
    fn find(&self, cwd: &Path, p: &str) -> Option<&'a str> {
        if let Some((input, _)) = self.inside.get_key_value(p) {
            return Some(*input);
        }
        if uncertain(p) {
            return None;
        }
        self.by_place.get(&absolute(cwd, p)).copied()
    }
}

/// The command with the modules, the shard and the object renamed; no other word may name a
/// file.
fn canonical_words(
    argv: &[&str],
    out: &str,
    inputs: &[&str],
    modules: &Modules<'_>,
    shard_name: &str,
    new_shard_name: &str,
) -> Result<Vec<String>, String> {
    let index_flag = format!("-fthinlto-index={shard_name}");
    let mut arguments = Vec::with_capacity(argv.len());
    for (k, w) in argv.iter().enumerate() {
        let word = if let Some((name, _, _)) = modules.inside.get(w) {
            name.clone()
        } else if *w == index_flag {
            format!("-fthinlto-index={new_shard_name}")
        } else if *w == out && k > 0 && argv[k - 1] == "-o" {
            CANONICAL_OUTPUT.to_string()
        } else if k > 0 && (w.contains(out) || inputs.iter().any(|i| w.contains(i))) {
            return Err(format!("its argument {w} names one of its files"));
        } else {
            w.to_string()
        };
        arguments.push(word);
    }
    Ok(arguments)
}

/// The action of a job, or why it cannot run remotely (a path keyed by name that the workers
/// cannot see). `digest_of_file` gives the digest of an input (absolute path), and `shard` the
/// bytes of the job's index shard (`OUTPUT.thinlto.bc`) when it was read.
pub fn build(
    common: &Common,
    argv: &[&str],
    inputs: &[&str],
    outputs: &[&str],
    digest_of_file: &dyn Fn(&Path) -> re::Digest,
    shard: Option<&[u8]>,
) -> Result<JobAction, String> {
    let words = [argv, inputs, outputs];
    prepare(common, words, digest_of_file, shard).build(common, words, digest_of_file)
}

/// A job's action before its costly part: keyed by content with every name chosen but the
/// index shard's summaries not yet rewritten, or why it is not keyed by content.
pub struct Prepared<'a> {
    cwd: PathBuf,
    content: Result<ContentPlan<'a>, String>,
}

/// The job's command, inputs and outputs, word by word.
pub type JobWords<'w, 'a> = [&'w [&'a str]; 3];

/// A job's action up to its costly part (as `build`).
pub fn prepare<'a>(
    common: &Common,
    [argv, inputs, outputs]: JobWords<'_, 'a>,
    digest_of_file: &dyn Fn(&Path) -> re::Digest,
    shard: Option<&'a [u8]>,
) -> Prepared<'a> {
    let cwd = absolute(&common.cwd, ".");
    let content = match common.by_content {
        true => content_plan(&cwd, argv, inputs, outputs, digest_of_file, shard),
        false => Err("--remote-key names".to_string()),
    };
    Prepared { cwd, content }
}

impl Prepared<'_> {
    /// What the action of a job keyed by content is made of (`ContentPlan::identity`): the same
    /// identity is the same action, whatever names lld gave the job's files in this link.
    pub fn identity(&self) -> Option<String> {
        self.content.as_ref().ok().map(ContentPlan::identity)
    }

    /// The job's action, or why it cannot run remotely (`words` as given to `prepare`).
    pub fn build(
        self,
        common: &Common,
        words: JobWords<'_, '_>,
        digest_of_file: &dyn Fn(&Path) -> re::Digest,
    ) -> Result<JobAction, String> {
        let [_, inputs, outputs] = words;
        let cwd = self.cwd;
        let (layout, by_name, summaries_kept) = match self.content.and_then(ContentPlan::finish) {
            Ok((layout, kept)) => (layout, None, kept),
            Err(why) => {
                if let Some(reason) = unsuitable(inputs, outputs, common.root_is_slash) {
                    return Err(reason);
                }
                (
                    by_names(common, &cwd, words, digest_of_file),
                    Some(why),
                    None,
                )
            }
        };
        let ingredients = ingredients(common, &cwd, words, digest_of_file, &layout);
        let mut job = finish(common, layout, by_name);
        job.ingredients = std::sync::Arc::new(ingredients);
        job.summaries_kept = summaries_kept;
        Ok(job)
    }
}

/// What went into a job's action (see `Ingredients`).
fn ingredients(
    common: &Common,
    cwd: &Path,
    [argv, inputs, outputs]: JobWords<'_, '_>,
    digest_of_file: &dyn Fn(&Path) -> re::Digest,
    layout: &Layout,
) -> Ingredients {
    let short = |hash: &str| hash[..16.min(hash.len())].to_string();
    let words = |list: &[String]| {
        short(&crate::job::util::digest::sha256_hex(
            list.join("\0").as_bytes(),
        ))
    };
    let shard = outputs.first().map(|o| crate::job::files::shard_name(o));
    // The command without the names of its files, which have their own ingredients.
    let index_flag = shard.as_ref().map(|s| format!("-fthinlto-index={s}"));
    let mut command: Vec<String> = argv
        .iter()
        .map(|w| match w {
            w if inputs.contains(w) || outputs.contains(w) => "<file>".to_string(),
            w if Some(*w) == index_flag.as_deref() => "-fthinlto-index=<file>".to_string(),
            w => w.to_string(),
        })
        .collect();
    command.push(layout.working_directory.clone());
    command.extend(common.platform.iter().map(|(k, v)| format!("{k}={v}")));
    let identity = words(std::slice::from_ref(&common.identity));
    let mut made = Ingredients::from([(Part::Compiler.label(), identity)]);
    made.insert(Part::Command.label(), words(&command));
    for (k, input) in inputs.iter().enumerate() {
        let part = part(k, input, shard.as_deref());
        let hash = match (&layout.shard, &part) {
            (Some(rewritten), Part::Shard) => rewritten.clone(),
            _ => digest_of_file(&absolute(cwd, input)).hash,
        };
        made.insert(part.label(), short(&hash));
    }
    made
}

/// What the `k`th of a job's inputs is to the report: the job's module, an import, or its shard.
fn part<'a>(k: usize, input: &'a str, shard: Option<&str>) -> Part<'a> {
    match (Some(input) == shard, k) {
        (true, _) => Part::Shard,
        (false, 0) => Part::Module(input),
        (false, _) => Part::Import(input),
    }
}

/// The labels of a job's inputs in the report (`Part::label`), in order.
pub fn labels(inputs: &[&str], outputs: &[&str]) -> Vec<String> {
    let shard = outputs.first().map(|o| crate::job::files::shard_name(o));
    (inputs.iter().enumerate())
        .map(|(k, input)| part(k, input, shard.as_deref()).label())
        .collect()
}

/// The layout of a job whose files keep their places and names (but for its own object and
/// shard).
fn by_names(
    common: &Common,
    cwd: &Path,
    [argv, inputs, outputs]: JobWords<'_, '_>,
    digest_of_file: &dyn Fn(&Path) -> re::Digest,
) -> Layout {
    let names = canonical(argv, inputs, outputs);
    let rename = |p: &str| -> String {
        match &names {
            Some((new_out, new_shard)) if p == outputs[0] => new_out.clone(),
            Some((_, new_shard)) if p == crate::job::files::shard_name(outputs[0]) => {
                new_shard.clone()
            }
            _ => p.to_string(),
        }
    };
    let abs_inputs: Vec<(PathBuf, PathBuf)> = inputs
        .iter()
        .map(|i| (absolute(cwd, i), absolute(cwd, &rename(i))))
        .collect();
    let abs_outputs: Vec<PathBuf> = outputs.iter().map(|o| absolute(cwd, &rename(o))).collect();
    let root = if common.root_is_slash {
        PathBuf::from("/")
    } else {
        common_ancestor(
            std::iter::once(cwd)
                .chain(abs_inputs.iter().map(|(_, inside)| inside.as_path()))
                .chain(abs_outputs.iter().map(|p| p.parent().unwrap_or(p))),
        )
    };
    let working = under(&root, cwd);

    let mut blobs = Vec::new();
    let mut tree = Tree::default();
    tree.add_dir(&working);
    for (real, inside) in &abs_inputs {
        tree.add_file(&under(&root, inside), digest_of_file(real));
    }
    let input_root = tree.finish(&mut blobs);
    let uses = abs_inputs.iter().map(|(real, _)| real.clone()).collect();

    let arguments: Vec<String> = argv
        .iter()
        .map(|w| match &names {
            Some((new_out, _)) if *w == outputs[0] => new_out.clone(),
            Some((_, new_shard)) if w.strip_prefix("-fthinlto-index=").is_some() => {
                let shard = crate::job::files::shard_name(outputs[0]);
                if *w == format!("-fthinlto-index={shard}") {
                    format!("-fthinlto-index={new_shard}")
                } else {
                    w.to_string()
                }
            }
            _ => w.to_string(),
        })
        .collect();
    Layout {
        arguments,
        working_directory: working.to_string_lossy().into_owned(),
        input_root,
        blobs,
        outputs: outputs
            .iter()
            .map(|o| (rename(o), absolute(cwd, o)))
            .collect(),
        uses,
        shard: None,
    }
}

/// The Command and Action around a layout.
fn finish(common: &Common, layout: Layout, by_name: Option<String>) -> JobAction {
    let Layout {
        arguments,
        working_directory,
        input_root,
        mut blobs,
        outputs,
        uses,
        shard: _,
    } = layout;
    let output_names: Vec<String> = outputs.iter().map(|(inside, _)| inside.clone()).collect();
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
        working_directory,
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
        outputs,
        uses,
        by_name,
        summaries_kept: None,
        ingredients: Default::default(),
        whole: true,
        last: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
