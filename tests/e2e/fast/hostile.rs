//! Hostile input: the JSON reader never panics, and for paths of any characters the rendered
//! build files, read back by the real ninja (`-t commands`, and `-t query` for each output's
//! exact inputs) and make (`-n`), give exactly the job commands — or, in a run, exactly the
//! launcher commands — or rendering refuses with a message naming what cannot be expressed.

use crate::space::{require, Space};
use dtlto_bridge::job::{parse, Command, Job, JobFile, Schema};
use dtlto_bridge::render::{render, Format, Options, RunHooks};
use proptest::prelude::*;
use std::borrow::Cow;

/// Characters that break build files and shells, plus ordinary ones and some Unicode.
const NASTY: &[char] = &[
    'a', 'b', 'Z', '0', '.', '-', '_', ' ', ' ', '$', ':', '#', '%', '=', '\'', '"', '(', ')', ';',
    '*', '?', '[', ']', '~', '\\', '|', '&', '!', '{', '}', '<', '>', '`', ',', '@', '^', '+',
    '\t', 'ü', 'ß', '→', '日', '\u{a0}',
];

fn word() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(NASTY), 1..12).prop_map(|c| c.into_iter().collect())
}

/// Jobs `cc ARGS... -o OUT IN`: the hostile arguments are the words every job shares (written
/// once, as a variable of the build file), the paths each job's own.
fn job_file(stems: &[String], args: &[String]) -> JobFile<'static> {
    let mut common = vec![Cow::Borrowed("cc")];
    common.extend(args.iter().map(|a| Cow::Owned(a.clone())));
    let common: std::sync::Arc<[Cow<'static, str>]> = common.into();
    let jobs = stems
        .iter()
        .enumerate()
        .map(|(i, stem)| {
            let input = format!("{stem}.{i}.in");
            let output = format!("{stem}.{i}.out");
            Job {
                command: Command {
                    common: common.clone(),
                    own: vec!["-o".into(), output.clone().into(), input.clone().into()],
                },
                inputs: vec![input.into()],
                outputs: vec![output.into()],
                imports: 0,
            }
        })
        .collect();
    JobFile {
        schema: Schema::Current,
        linker_output: "prog".into(),
        jobs,
    }
}

/// What the tool prints, one command per line, split the way the shell will split it.
fn read_back(s: &Space, format: Format, file: &str) -> Vec<Vec<String>> {
    let args: &[&str] = match format {
        Format::Ninja => &["-f", file, "-t", "commands"],
        Format::Make => &["-f", file, "-n", "-s", "--no-print-directory"],
    };
    let out = s.ok(&mut s.command(format.tool(), args));
    let mut cmds: Vec<Vec<String>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| shell_words::split(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    cmds.sort();
    cmds
}

/// The inputs ninja read for `output`, in order, from `ninja -t query`.
fn query_inputs(s: &Space, file: &str, output: &str) -> Vec<String> {
    let out = s.ok(&mut s.command("ninja", &["-f", file, "-t", "query", output]));
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .skip_while(|l| !l.starts_with("  input: "))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .map(|l| l[4..].to_string())
        .collect()
}

// Cases proptest once shrank to are kept in hostile.proptest-regressions and run first.
proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn rendered_files_read_back_as_exactly_the_job_commands(
        stems in prop::collection::vec(word(), 1..4),
        args in prop::collection::vec(word(), 0..3),
        wrapper in prop::collection::vec(word(), 0..2),
        run in prop::option::of((word(), word())),
    ) {
        require("ninja");
        require("make");
        let s = Space::new();
        let file = job_file(&stems, &args);
        for job in &file.jobs {
            std::fs::write(s.path(&job.inputs[0]), "x").unwrap();
        }
        // In a run, each job's command is its launcher: `EXE __job DIR N` (with hostile EXE
        // and DIR); else the wrapper and the job's command.
        let hooks = run.as_ref().map(|(exe, dir)| RunHooks {
            state_dir: dir.clone(),
            launcher: vec![exe.clone(), "__job".into(), dir.clone()],
        });
        let mut expected: Vec<Vec<String>> = file
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| match &hooks {
                Some(h) => h.launcher.iter().cloned().chain([i.to_string()]).collect(),
                None => wrapper.iter().cloned().chain(j.command.to_vec()).collect(),
            })
            .collect();
        expected.sort();
        let opts = Options { wrapper: &wrapper, source: "fuzz.json", run: hooks, order: None };
        for format in [Format::Ninja, Format::Make] {
            match render(format, &file, &opts) {
                Ok(text) => {
                    let name = format!("fuzz.{}", format.tool());
                    std::fs::write(s.path(&name), text).unwrap();
                    prop_assert_eq!(read_back(&s, format, &name), expected.clone(), "{:?}", format);
                    if format == Format::Ninja {
                        for job in &file.jobs {
                            prop_assert_eq!(
                                query_inputs(&s, &name, &job.outputs[0]),
                                job.inputs.iter().map(|i| i.to_string()).collect::<Vec<_>>()
                            );
                        }
                    }
                }
                Err(e) => {
                    // Only ninja refuses, and only for '|' in a path.
                    prop_assert_eq!(format, Format::Ninja, "{}", e);
                    prop_assert!(e.contains("no escape for '|'"), "{}", e);
                    prop_assert!(stems.iter().any(|p| p.contains('|')), "{}", e);
                }
            }
        }
    }

    #[test]
    fn the_reader_never_panics_on_arbitrary_json(value in json_value()) {
        let text = value.to_string();
        check_parse(&text);
        let wrapped = serde_json::json!({"common": value.clone(), "jobs": [value]}).to_string();
        check_parse(&wrapped);
    }

    #[test]
    fn the_reader_never_panics_on_a_damaged_job_file(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/placeholder.json"),
        )
        .unwrap();
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        check_parse(&String::from_utf8_lossy(&bytes));
    }
}

/// Parsing returns; what it accepts is runnable.
fn check_parse(text: &str) {
    if let Ok(file) = parse(text) {
        for job in &file.jobs {
            assert!(!job.command.is_empty() && !job.outputs.is_empty(), "{text}");
            assert!(
                job.outputs.iter().chain(&job.inputs).all(|p| !p.is_empty()),
                "{text}"
            );
        }
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let key = prop::sample::select(vec![
        "common",
        "jobs",
        "args",
        "inputs",
        "outputs",
        "linker_output",
        "linker_version",
        "primary_input",
        "primary_output",
        "summary_index",
        "imports",
        "additional_inputs",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u64..4).prop_map(Value::from),
        word().prop_map(Value::String),
        Just(Value::String(String::new())),
        prop::sample::select(vec!["primary_input", "summary_index", "primary_output"])
            .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}
