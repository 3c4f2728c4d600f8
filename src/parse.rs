//! Parse: reads an LLVM DTLTO job file (either schema) into a list of jobs.
//!
//! It knows the JSON shapes lld writes and how the older placeholder schema expands;
//! it does not know whether files exist, how to quote them, or how jobs are run.

use serde_json::{Map, Value};
use std::fmt;

/// Which JSON schema a job file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// LLVM 21+: `common{linker_output,args,inputs}` and `jobs[]{args,inputs,outputs}`.
    Current,
    /// The DTLTO doc's first form: a command-line template with placeholders.
    Placeholder,
}

/// One backend compilation: the full command, every file it reads and every file it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub command: Vec<String>,
    /// The bitcode module, the index shard, the imports, then inputs shared by all jobs.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    /// How many of the inputs are imported modules.
    pub imports: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFile {
    pub schema: Schema,
    pub linker_output: String,
    pub jobs: Vec<Job>,
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

/// The current schema as lld writes it, for the fast path: typed, no intermediate tree.
#[derive(serde::Deserialize)]
struct RawFile {
    common: RawCommon,
    jobs: Vec<RawJob>,
}

#[derive(serde::Deserialize)]
struct RawCommon {
    linker_output: String,
    args: Vec<String>,
    #[serde(default)]
    inputs: Vec<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    args: Vec<String>,
    inputs: Vec<String>,
    outputs: Vec<String>,
}

/// Reads a well-formed current-schema file without building a JSON tree; None when anything is
/// off, so that `parse` reads it again slowly and says exactly where.
fn parse_fast(text: &str) -> Option<JobFile> {
    let raw: RawFile = serde_json::from_str(text).ok()?;
    let empty = |v: &[String]| v.iter().any(String::is_empty);
    if raw.common.args.is_empty() || empty(&raw.common.inputs) {
        return None;
    }
    let mut jobs = Vec::with_capacity(raw.jobs.len());
    for job in raw.jobs {
        if job.outputs.is_empty() || empty(&job.outputs) || empty(&job.inputs) {
            return None;
        }
        let mut command = Vec::with_capacity(raw.common.args.len() + job.args.len());
        command.extend(raw.common.args.iter().cloned());
        command.extend(job.args);
        let imports = job.inputs.len().saturating_sub(2);
        jobs.push(Job {
            command,
            inputs: with_common(job.inputs, &raw.common.inputs),
            outputs: job.outputs,
            imports,
        });
    }
    Some(JobFile {
        schema: Schema::Current,
        linker_output: raw.common.linker_output,
        jobs,
    })
}

/// Parses the text of a job file.
pub fn parse(text: &str) -> Result<JobFile, ParseError> {
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

fn parse_current(common: &Map<String, Value>, jobs: &[Value]) -> Result<Vec<Job>, ParseError> {
    let common_args = strings(field(common, "args", "common")?, "common.args")?;
    if common_args.is_empty() {
        return err("common.args", "is empty: there is no program to run");
    }
    let common_inputs = match common.get("inputs") {
        Some(v) => paths(v, "common.inputs")?,
        None => Vec::new(),
    };
    let mut out = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        let at = format!("jobs[{i}]");
        let job = object(job, &at)?;
        let args = strings(field(job, "args", &at)?, &format!("{at}.args"))?;
        let inputs = paths(field(job, "inputs", &at)?, &format!("{at}.inputs"))?;
        let outputs = outputs(field(job, "outputs", &at)?, &format!("{at}.outputs"))?;
        let mut command = common_args.clone();
        command.extend(args);
        out.push(Job {
            command,
            imports: inputs.len().saturating_sub(2),
            inputs: with_common(inputs, &common_inputs),
            outputs,
        });
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

fn parse_placeholder(common: &Map<String, Value>, jobs: &[Value]) -> Result<Vec<Job>, ParseError> {
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
        let command = template
            .iter()
            .enumerate()
            .map(|(k, arg)| expand(arg, job, &format!("common.args[{k}]"), &at))
            .collect::<Result<_, _>>()?;
        let imports = job
            .get("imports")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        out.push(Job {
            command,
            inputs: with_common(inputs, &[]),
            outputs,
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

/// A job's own inputs followed by the shared ones, each path once, first place kept.
fn with_common(mut inputs: Vec<String>, common: &[String]) -> Vec<String> {
    inputs.extend(common.iter().cloned());
    if inputs.len() <= 16 {
        // Few inputs (the usual case): a linear scan beats hashing.
        let mut i = 0;
        while i < inputs.len() {
            if inputs[..i].contains(&inputs[i]) {
                inputs.remove(i);
            } else {
                i += 1;
            }
        }
    } else {
        let mut seen = std::collections::HashSet::with_capacity(inputs.len());
        let mut keep = Vec::with_capacity(inputs.len());
        for p in &inputs {
            keep.push(seen.insert(p.as_str()));
        }
        let mut i = 0;
        inputs.retain(|_| {
            i += 1;
            keep[i - 1]
        });
    }
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
            j.command,
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
        assert_eq!(j.inputs, ["a.o", "a.1.bc", "b.o", "prof.data"]);
        assert_eq!(j.imports, 1);
        assert_eq!(j.outputs, ["a.1.o"]);
    }

    #[test]
    fn placeholder_schema_expands_as_the_dtlto_doc_says() {
        let f = parse(PLACEHOLDER).unwrap();
        assert_eq!(f.schema, Schema::Placeholder);
        let j = &f.jobs[0];
        assert_eq!(
            j.command.join(" "),
            "/usr/local/clang -O3 -o dtlto.1.51232.native.o -c -x ir dtlto.o \
             -fthinlto-index=dtlto.1.51232.native.o.thinlto.bc -target x86_64-sie-ps5"
        );
        assert_eq!(
            j.inputs,
            [
                "dtlto.o",
                "dtlto.1.51232.native.o.thinlto.bc",
                "my.profdata"
            ]
        );
        assert_eq!(j.outputs, ["dtlto.1.51232.native.o"]);
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
