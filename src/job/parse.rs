//! Parse: reads an LLVM DTLTO job file (either schema) into a list of jobs.
//!
//! It knows the JSON shapes lld writes and how the older placeholder schema expands; it does
//! not know whether files exist, how to quote them, or how jobs are run. The strings of a job
//! borrow from the file's text wherever the JSON holds them without escapes, so a 100k-job file
//! costs no allocation per path.

use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// A string of the job file: borrowed from its text, or owned where the JSON escaped it.
pub type Str<'a> = Cow<'a, str>;

/// Which JSON schema a job file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// LLVM 21+: `common{linker_output,args,inputs}` and `jobs[]{args,inputs,outputs}`.
    Current,
    /// The DTLTO doc's first form: a command-line template with placeholders.
    Placeholder,
}

/// A job's command: the words every job of the file shares (lld's `common.args`), then its own.
/// The shared words are held once for all jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command<'a> {
    pub common: Arc<[Str<'a>]>,
    pub own: Vec<Str<'a>>,
}

type Words<'s, 'a> = std::iter::Chain<std::slice::Iter<'s, Str<'a>>, std::slice::Iter<'s, Str<'a>>>;

impl<'a> Command<'a> {
    /// A command of these words, none shared.
    pub fn new(words: Vec<Str<'a>>) -> Command<'a> {
        Command {
            common: Arc::from(Vec::new()),
            own: words,
        }
    }

    /// Every word, the program first.
    pub fn words(&self) -> Words<'_, 'a> {
        self.common.iter().chain(self.own.iter())
    }

    pub fn to_vec(&self) -> Vec<String> {
        self.words().map(|w| w.to_string()).collect()
    }

    pub fn len(&self) -> usize {
        self.common.len() + self.own.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'s, 'a> IntoIterator for &'s Command<'a> {
    type Item = &'s Str<'a>;
    type IntoIter = Words<'s, 'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.words()
    }
}

/// One backend compilation: the full command, every file it reads and every file it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job<'a> {
    pub command: Command<'a>,
    /// The bitcode module, the index shard, the imports, then inputs shared by all jobs.
    pub inputs: Vec<Str<'a>>,
    pub outputs: Vec<Str<'a>>,
    /// How many of the inputs are imported modules.
    pub imports: usize,
}

impl<'a> Job<'a> {
    /// A current-schema job: the file's common words, then its own; its inputs as lld lists them
    /// (module, shard, imports), the common inputs merged in; its imports counted before that.
    fn current(
        common: &Arc<[Str<'a>]>,
        common_inputs: &[Str<'a>],
        args: Vec<Str<'a>>,
        inputs: Vec<Str<'a>>,
        outputs: Vec<Str<'a>>,
    ) -> Job<'a> {
        Job {
            command: Command {
                common: common.clone(),
                own: args,
            },
            imports: inputs.len().saturating_sub(2),
            inputs: with_common(inputs, common_inputs),
            outputs,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFile<'a> {
    pub schema: Schema,
    pub linker_output: String,
    pub jobs: Vec<Job<'a>>,
}

impl JobFile<'_> {
    /// The same jobs, with every string owned: free of the text they were read from.
    pub fn into_owned(self) -> JobFile<'static> {
        let own = |v: Vec<Str>| -> Vec<Str<'static>> {
            v.into_iter().map(|s| Cow::Owned(s.into_owned())).collect()
        };
        let jobs = self
            .jobs
            .into_iter()
            .map(|j| Job {
                command: Command {
                    common: Arc::from(own(j.command.common.to_vec())),
                    own: own(j.command.own),
                },
                inputs: own(j.inputs),
                outputs: own(j.outputs),
                imports: j.imports,
            })
            .collect();
        JobFile {
            schema: self.schema,
            linker_output: self.linker_output,
            jobs,
        }
    }
}

/// Owned strings, as a test or a caller without a job file's text builds them.
pub fn owned<'a>(words: &[&str]) -> Vec<Str<'a>> {
    words.iter().map(|w| Cow::Owned(w.to_string())).collect()
}

/// A rejected job file: where in the JSON, and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// `jobs[3].outputs`, or `line 4, column 7` for syntax errors.
    pub location: String,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

impl std::error::Error for ParseError {}

fn err<T>(location: impl Into<String>, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        location: location.into(),
        message: message.into(),
    })
}

/// A string that borrows from the text when the JSON holds it verbatim (no escapes).
struct Word<'a>(Str<'a>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Word<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Word<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Word<'a>, E> {
                Ok(Word(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Word<'a>, E> {
                Ok(Word(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Word<'a>, E> {
                Ok(Word(Cow::Owned(v)))
            }
        }
        d.deserialize_str(Visit(std::marker::PhantomData))
    }
}

fn words(v: Vec<Word<'_>>) -> Vec<Str<'_>> {
    v.into_iter().map(|w| w.0).collect()
}

/// The current schema as lld writes it, for the fast path: typed, no intermediate tree.
#[derive(serde::Deserialize)]
struct RawFile<'a> {
    #[serde(borrow)]
    common: RawCommon<'a>,
    #[serde(borrow)]
    jobs: Vec<RawJob<'a>>,
}

#[derive(serde::Deserialize)]
struct RawCommon<'a> {
    linker_output: String,
    #[serde(borrow)]
    args: Vec<Word<'a>>,
    #[serde(default, borrow)]
    inputs: Vec<Word<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob<'a> {
    #[serde(borrow)]
    args: Vec<Word<'a>>,
    #[serde(borrow)]
    inputs: Vec<Word<'a>>,
    #[serde(borrow)]
    outputs: Vec<Word<'a>>,
}

/// Reads a well-formed current-schema file without building a JSON tree; None when anything is
/// off, so that `parse` reads it again slowly and says exactly where.
fn parse_fast(text: &str) -> Option<JobFile<'_>> {
    let raw: RawFile = serde_json::from_str(text).ok()?;
    let empty = |v: &[Word]| v.iter().any(|w| w.0.is_empty());
    if raw.common.args.is_empty() || empty(&raw.common.inputs) {
        return None;
    }
    let mut jobs = Vec::with_capacity(raw.jobs.len());
    let common: Arc<[Str]> = Arc::from(words(raw.common.args));
    let common_inputs = words(raw.common.inputs);
    for job in raw.jobs {
        if job.outputs.is_empty() || empty(&job.outputs) || empty(&job.inputs) {
            return None;
        }
        jobs.push(Job::current(
            &common,
            &common_inputs,
            words(job.args),
            words(job.inputs),
            words(job.outputs),
        ));
    }
    Some(JobFile {
        schema: Schema::Current,
        linker_output: raw.common.linker_output,
        jobs,
    })
}

/// A current-schema job file built in memory (the classic link's jobs): written out as lld
/// writes one (fields in the order `serde_json` sorts them), or turned into the `JobFile` that
/// `parse` reads from that text, without the round trip.
#[derive(Debug, serde::Serialize)]
pub struct Spec {
    pub common: SpecCommon,
    pub jobs: Vec<SpecJob>,
}

#[derive(Debug, serde::Serialize)]
pub struct SpecCommon {
    pub args: Vec<String>,
    pub inputs: Vec<String>,
    pub linker_output: String,
}

#[derive(Debug, serde::Serialize)]
pub struct SpecJob {
    pub args: Vec<String>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

impl Spec {
    /// The file's text, as lld would write it.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("JSON of strings")
    }

    /// The jobs, as `parse` reads them from `to_json`'s text, which refuses an empty path.
    pub fn into_file(self) -> Result<JobFile<'static>, ParseError> {
        let lists = std::iter::once(("common.inputs".to_string(), &self.common.inputs)).chain(
            self.jobs.iter().enumerate().flat_map(|(i, j)| {
                [
                    (format!("jobs[{i}].inputs"), &j.inputs),
                    (format!("jobs[{i}].outputs"), &j.outputs),
                ]
            }),
        );
        for (at, list) in lists {
            if let Some(k) = list.iter().position(|p| p.is_empty()) {
                return err(format!("{at}[{k}]"), "is an empty path");
            }
        }
        let common: Arc<[Str]> = Arc::from(cows(self.common.args));
        let common_inputs = cows(self.common.inputs);
        let jobs = self
            .jobs
            .into_iter()
            .map(|job| {
                let (args, inputs, outputs) = (cows(job.args), cows(job.inputs), cows(job.outputs));
                Job::current(&common, &common_inputs, args, inputs, outputs)
            })
            .collect();
        Ok(JobFile {
            schema: Schema::Current,
            linker_output: self.common.linker_output,
            jobs,
        })
    }
}

/// Parses the text of a job file.
pub fn parse(text: &str) -> Result<JobFile<'_>, ParseError> {
    if let Some(file) = parse_fast(text) {
        return Ok(file);
    }
    let root: Value = serde_json::from_str(text).map_err(|e| ParseError {
        location: format!("line {}, column {}", e.line(), e.column()),
        message: format!("invalid JSON: {}", syntax_message(&e)),
    })?;
    let root = object(&root, "the top level")?;
    let common = object(field(root, "common", "the top level")?, "common")?;
    let jobs = array(field(root, "jobs", "the top level")?, "jobs")?;
    let linker_output = string(
        field(common, "linker_output", "common")?,
        "common.linker_output",
    )?;

    let schema = detect(common, jobs);
    let jobs = match schema {
        Schema::Current => parse_current(common, jobs)?,
        Schema::Placeholder => parse_placeholder(common, jobs)?,
    };
    Ok(JobFile {
        schema,
        linker_output,
        jobs,
    })
}

/// serde_json's message without its own " at line L column C" tail.
fn syntax_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(i) => full[..i].to_string(),
        None => full,
    }
}

/// The placeholder schema is recognised by a placeholder in `common.args`
/// or by its per-job field names; everything else is read as the current schema.
fn detect(common: &Map<String, Value>, jobs: &[Value]) -> Schema {
    let has_placeholder = common
        .get("args")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(Value::is_array));
    let old_fields = jobs.iter().any(|j| {
        j.as_object()
            .is_some_and(|o| o.contains_key("primary_input") || o.contains_key("primary_output"))
    });
    if has_placeholder || old_fields {
        Schema::Placeholder
    } else {
        Schema::Current
    }
}

fn parse_current(
    common: &Map<String, Value>,
    jobs: &[Value],
) -> Result<Vec<Job<'static>>, ParseError> {
    let common_args = strings(field(common, "args", "common")?, "common.args")?;
    if common_args.is_empty() {
        return err("common.args", "is empty: there is no program to run");
    }
    let common_inputs = match common.get("inputs") {
        Some(v) => paths(v, "common.inputs")?,
        None => Vec::new(),
    };
    let mut out = Vec::with_capacity(jobs.len());
    let common: Arc<[Str]> = Arc::from(cows(common_args));
    let common_inputs = cows(common_inputs);
    for (i, job) in jobs.iter().enumerate() {
        let at = format!("jobs[{i}]");
        let job = object(job, &at)?;
        let args = strings(field(job, "args", &at)?, &format!("{at}.args"))?;
        let inputs = paths(field(job, "inputs", &at)?, &format!("{at}.inputs"))?;
        let outputs = outputs(field(job, "outputs", &at)?, &format!("{at}.outputs"))?;
        out.push(Job::current(
            &common,
            &common_inputs,
            cows(args),
            cows(inputs),
            cows(outputs),
        ));
    }
    Ok(out)
}

/// The per-job array fields of the placeholder schema that hold inputs, in order.
const PLACEHOLDER_INPUTS: [&str; 4] = [
    "primary_input",
    "summary_index",
    "imports",
    "additional_inputs",
];

fn parse_placeholder(
    common: &Map<String, Value>,
    jobs: &[Value],
) -> Result<Vec<Job<'static>>, ParseError> {
    if let Some(v) = common.get("linker_version") {
        string(v, "common.linker_version")?;
    }
    let template = array(field(common, "args", "common")?, "common.args")?;
    if template.is_empty() {
        return err("common.args", "is empty: there is no program to run");
    }
    check_template(template)?;
    let mut out = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        let at = format!("jobs[{i}]");
        let job = object(job, &at)?;
        let mut inputs = Vec::new();
        for name in PLACEHOLDER_INPUTS {
            let loc = format!("{at}.{name}");
            match job.get(name) {
                Some(v) => inputs.extend(paths(v, &loc)?),
                None if name == "imports" || name == "additional_inputs" => {}
                None => return err(at, format!("missing field `{name}`")),
            }
        }
        let outputs = outputs(
            field(job, "primary_output", &at)?,
            &format!("{at}.primary_output"),
        )?;
        let command = Command::new(cows(
            template
                .iter()
                .enumerate()
                .map(|(k, arg)| expand(arg, job, &format!("common.args[{k}]"), &at))
                .collect::<Result<_, _>>()?,
        ));
        let imports = job
            .get("imports")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        out.push(Job {
            command,
            inputs: with_common(cows(inputs), &[]),
            outputs: cows(outputs),
            imports,
        });
    }
    Ok(out)
}

/// Checks the shape of every placeholder once, before any job is expanded.
fn check_template(template: &[Value]) -> Result<(), ParseError> {
    for (k, arg) in template.iter().enumerate() {
        let loc = format!("common.args[{k}]");
        match arg {
            Value::String(_) => {}
            Value::Array(parts) => {
                let Some(first) = parts.first() else {
                    return err(loc, "is an empty placeholder: it must name a job field");
                };
                if !first.is_string() {
                    return err(
                        format!("{loc}[0]"),
                        "must be the name of a job field (a string)",
                    );
                }
                for (p, part) in parts.iter().enumerate().skip(1) {
                    if !(part.is_string() || part.as_u64().is_some()) {
                        return err(
                            format!("{loc}[{p}]"),
                            "must be a string or a non-negative integer index",
                        );
                    }
                }
            }
            _ => return err(loc, "must be a string or a placeholder array"),
        }
    }
    Ok(())
}

/// Expands one template element for one job: strings stay, a placeholder
/// `[field, parts...]` concatenates its string parts and the entries its integers index.
fn expand(
    arg: &Value,
    job: &Map<String, Value>,
    loc: &str,
    job_at: &str,
) -> Result<String, ParseError> {
    let parts = match arg {
        Value::String(s) => return Ok(s.clone()),
        Value::Array(parts) => parts,
        _ => unreachable!("check_template accepts only strings and arrays"),
    };
    let name = parts[0].as_str().unwrap_or_default();
    let Some(values) = job.get(name) else {
        return err(
            format!("{loc}[0]"),
            format!("names the field `{name}`, which {job_at} does not have"),
        );
    };
    let values = strings(values, &format!("{job_at}.{name}"))?;
    let mut expanded = String::new();
    for (p, part) in parts.iter().enumerate().skip(1) {
        match part {
            Value::String(s) => expanded.push_str(s),
            _ => {
                let index = part.as_u64().unwrap_or(u64::MAX);
                let Some(v) = usize::try_from(index).ok().and_then(|i| values.get(i)) else {
                    return err(
                        format!("{loc}[{p}]"),
                        format!(
                            "index {index} is out of range: {job_at}.{name} has {} entries",
                            values.len()
                        ),
                    );
                };
                expanded.push_str(v);
            }
        }
    }
    Ok(expanded)
}

fn cows(v: Vec<String>) -> Vec<Str<'static>> {
    v.into_iter().map(Cow::Owned).collect()
}

/// A job's own inputs followed by the shared ones, each path once, first place kept.
fn with_common<'a>(mut inputs: Vec<Str<'a>>, common: &[Str<'a>]) -> Vec<Str<'a>> {
    if common.is_empty() && inputs.len() <= 16 {
        // The usual case: a linear scan beats hashing.
        let mut i = 0;
        while i < inputs.len() {
            if inputs[..i].contains(&inputs[i]) {
                inputs.remove(i);
            } else {
                i += 1;
            }
        }
        return inputs;
    }
    inputs.extend(common.iter().cloned());
    let mut seen = rustc_hash::FxHashSet::default();
    inputs.retain(|p| seen.insert(p.clone()));
    inputs
}

fn field<'a>(obj: &'a Map<String, Value>, name: &str, at: &str) -> Result<&'a Value, ParseError> {
    match obj.get(name) {
        Some(v) => Ok(v),
        None => err(at, format!("missing field `{name}`")),
    }
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, ParseError> {
    match v {
        Value::Object(o) => Ok(o),
        other => err(at, format!("expected an object, found {}", kind(other))),
    }
}

fn array<'a>(v: &'a Value, at: &str) -> Result<&'a [Value], ParseError> {
    match v {
        Value::Array(a) => Ok(a),
        other => err(at, format!("expected an array, found {}", kind(other))),
    }
}

fn string(v: &Value, at: &str) -> Result<String, ParseError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => err(at, format!("expected a string, found {}", kind(other))),
    }
}

fn strings(v: &Value, at: &str) -> Result<Vec<String>, ParseError> {
    array(v, at)?
        .iter()
        .enumerate()
        .map(|(i, s)| string(s, &format!("{at}[{i}]")))
        .collect()
}

/// Like `strings`, but every entry names a file, so none may be empty.
fn paths(v: &Value, at: &str) -> Result<Vec<String>, ParseError> {
    let list = strings(v, at)?;
    if let Some(i) = list.iter().position(String::is_empty) {
        return err(format!("{at}[{i}]"), "is an empty path");
    }
    Ok(list)
}

fn outputs(v: &Value, at: &str) -> Result<Vec<String>, ParseError> {
    let list = paths(v, at)?;
    if list.is_empty() {
        return err(at, "is empty: every job must produce an output");
    }
    Ok(list)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_is_the_file_its_text_parses_to() {
        let spec = Spec {
            common: SpecCommon {
                args: vec!["clang".into(), "-c".into()],
                inputs: vec!["prof.data".into()],
                linker_output: "prog".into(),
            },
            jobs: vec![SpecJob {
                args: vec!["a.o".into(), "-o".into(), "a.native.o".into()],
                inputs: vec![
                    "a.o".into(),
                    "a.thinlto.bc".into(),
                    "b.o".into(),
                    "a.o".into(),
                ],
                outputs: vec!["a.native.o".into()],
            }],
        };
        let text = spec.to_json();
        assert!(text.find("\"args\"").unwrap() < text.find("\"linker_output\"").unwrap());
        let parsed = parse(&text).unwrap();
        let built = spec.into_file().unwrap();
        assert_eq!(built.linker_output, parsed.linker_output);
        assert_eq!(built.schema, parsed.schema);
        assert_eq!(built.jobs.len(), 1);
        let (b, p) = (&built.jobs[0], &parsed.jobs[0]);
        assert_eq!(b.command.to_vec(), p.command.to_vec());
        assert_eq!(
            (&b.inputs, &b.outputs, b.imports),
            (&p.inputs, &p.outputs, p.imports)
        );
    }

    #[test]
    fn a_spec_with_an_empty_path_is_refused_as_parse_refuses_its_text() {
        let spec = Spec {
            common: SpecCommon {
                args: vec!["clang".into()],
                inputs: vec!["".into()],
                linker_output: "prog".into(),
            },
            jobs: vec![],
        };
        let text = spec.to_json();
        let parsed = parse(&text).unwrap_err().to_string();
        let built = spec.into_file().unwrap_err().to_string();
        assert_eq!(built, parsed);
        assert!(built.contains("common.inputs[0]"), "{built}");
    }

    const CURRENT: &str = r#"{
      "common": {"linker_output": "prog", "args": ["clang", "-c", "-O2"], "inputs": ["prof.data"]},
      "jobs": [{"args": ["a.o", "-fthinlto-index=a.1.bc", "-o", "a.1.o"],
                "inputs": ["a.o", "a.1.bc", "b.o"], "outputs": ["a.1.o"]}]
    }"#;

    const PLACEHOLDER: &str = r#"{
      "common": {"linker_output": "dtlto.elf", "linker_version": "LLD 20.0.0",
        "args": ["/usr/local/clang", "-O3", "-o", ["primary_output", 0], "-c", "-x", "ir",
                 ["primary_input", 0], ["summary_index", "-fthinlto-index=", 0], "-target", "x86_64-sie-ps5"]},
      "jobs": [{"primary_input": ["dtlto.o"], "summary_index": ["dtlto.1.51232.native.o.thinlto.bc"],
                "primary_output": ["dtlto.1.51232.native.o"], "imports": [], "additional_inputs": ["my.profdata"]}]
    }"#;

    #[test]
    fn current_schema_joins_common_and_job_args_and_inputs() {
        let f = parse(CURRENT).unwrap();
        assert_eq!(f.schema, Schema::Current);
        assert_eq!(f.linker_output, "prog");
        let j = &f.jobs[0];
        assert_eq!(
            j.command.to_vec(),
            [
                "clang",
                "-c",
                "-O2",
                "a.o",
                "-fthinlto-index=a.1.bc",
                "-o",
                "a.1.o"
            ]
        );
        assert_eq!(j.inputs, owned(&["a.o", "a.1.bc", "b.o", "prof.data"]));
        assert_eq!(j.imports, 1);
        assert_eq!(j.outputs, owned(&["a.1.o"]));
    }

    #[test]
    fn placeholder_schema_expands_as_the_dtlto_doc_says() {
        let f = parse(PLACEHOLDER).unwrap();
        assert_eq!(f.schema, Schema::Placeholder);
        let j = &f.jobs[0];
        assert_eq!(
            j.command.to_vec().join(" "),
            "/usr/local/clang -O3 -o dtlto.1.51232.native.o -c -x ir dtlto.o \
             -fthinlto-index=dtlto.1.51232.native.o.thinlto.bc -target x86_64-sie-ps5"
        );
        assert_eq!(
            j.inputs,
            owned(&[
                "dtlto.o",
                "dtlto.1.51232.native.o.thinlto.bc",
                "my.profdata"
            ])
        );
        assert_eq!(j.outputs, owned(&["dtlto.1.51232.native.o"]));
    }

    #[test]
    fn strings_borrow_from_the_text_unless_escaped() {
        let text = r#"{"common":{"linker_output":"p","args":["cc"]},
            "jobs":[{"args":["a"],"inputs":["a.o","b\"q.o"],"outputs":["o"]}]}"#;
        let f = parse(text).unwrap();
        let job = &f.jobs[0];
        assert!(matches!(job.inputs[0], Cow::Borrowed("a.o")));
        assert_eq!(job.inputs[1], "b\"q.o");
        assert!(matches!(job.inputs[1], Cow::Owned(_)));
        assert!(matches!(job.command.common[0], Cow::Borrowed("cc")));
    }

    #[test]
    fn empty_job_list_is_valid() {
        let f = parse(r#"{"common":{"linker_output":"p","args":["clang"],"inputs":[]},"jobs":[]}"#)
            .unwrap();
        assert!(f.jobs.is_empty());
    }

    /// Each malformed file is rejected with this location and a message containing this text.
    #[test]
    fn malformed_files_are_rejected_with_their_location() {
        let cases: &[(&str, &str, &str)] = &[
            ("{", "line 1, column 1", "invalid JSON"),
            ("[]", "the top level", "expected an object"),
            (r#"{"jobs":[]}"#, "the top level", "missing field `common`"),
            (
                r#"{"common":{"linker_output":"p","args":["c"]}}"#,
                "the top level",
                "`jobs`",
            ),
            (
                r#"{"common":{"args":["c"]},"jobs":[]}"#,
                "common",
                "`linker_output`",
            ),
            (
                r#"{"common":{"linker_output":"p","args":[]},"jobs":[]}"#,
                "common.args",
                "is empty",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c",1]},"jobs":[]}"#,
                "common.args[1]",
                "expected a string",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c"],"inputs":""},"jobs":[]}"#,
                "common.inputs",
                "expected an array",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c"]},"jobs":[{"args":[],"inputs":[],"outputs":[]}]}"#,
                "jobs[0].outputs",
                "every job must produce",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c"]},"jobs":[{"args":[],"inputs":[]}]}"#,
                "jobs[0]",
                "`outputs`",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c"]},"jobs":[{"args":[],"inputs":[""],"outputs":["o"]}]}"#,
                "jobs[0].inputs[0]",
                "empty path",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c"]},"jobs":[7]}"#,
                "jobs[0]",
                "found a number",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c",["nope",0]]},"jobs":[{"primary_input":["a"],"summary_index":["s"],"primary_output":["o"]}]}"#,
                "common.args[1][0]",
                "`nope`",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c",["primary_output",3]]},"jobs":[{"primary_input":["a"],"summary_index":["s"],"primary_output":["o"]}]}"#,
                "common.args[1][1]",
                "index 3 is out of range",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c",[]]},"jobs":[]}"#,
                "common.args[1]",
                "empty placeholder",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c",["primary_input",-1]]},"jobs":[]}"#,
                "common.args[1][1]",
                "non-negative integer",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c",["primary_input",0]]},"jobs":[{"primary_input":["a"],"primary_output":["o"]}]}"#,
                "jobs[0]",
                "`summary_index`",
            ),
            (
                r#"{"common":{"linker_output":"p","args":["c",["primary_input",0]]},"jobs":[{"primary_input":["a"],"summary_index":["s"],"primary_output":[]}]}"#,
                "jobs[0].primary_output",
                "every job must produce",
            ),
        ];
        for (text, location, message) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(&e.location, location, "{text}: {e}");
            assert!(e.message.contains(message), "{text}: {e}");
        }
    }
}
