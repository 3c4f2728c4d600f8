//! What a user sees of a run: the summary line, `--report` and `--trace` of a real link, the
//! progress line on a terminal (a pseudo-terminal from `script`).

use crate::space::{assert_linked, require, stderr, Space, BRIDGE};
use serde_json::Value;
use std::path::Path;

fn json(s: &Space, name: &str) -> Value {
    serde_json::from_str(&s.read(name)).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

#[test]
fn a_real_link_writes_a_consistent_report_trace_and_summary() {
    let s = Space::new();
    let inputs = s.hello();
    s.script("fails.sh", "echo 'no remote host' >&2\nexit 1\n");
    let wrapper = format!(
        "--wrapper={}",
        shell_words::quote(s.path("fails.sh").to_str().unwrap())
    );
    for (extra, ran) in [(None, "local"), (Some(wrapper.as_str()), "fallback")] {
        let mut args = vec!["--report=report.json", "--trace=trace.json", "--summary"];
        args.extend(extra);
        let out = s.link(Path::new(BRIDGE), &args, &inputs, "hello");
        assert_linked(&out);
        let err = stderr(&out);
        let (local, fell_back) = if ran == "fallback" { (0, 5) } else { (5, 0) };
        assert!(
            err.contains(&format!(
                "dtlto-bridge: 5 jobs ({local} local, 0 via wrapper, {fell_back} fell back) in "
            )),
            "{err}"
        );
        assert!(
            err.contains("; slowest: job ") && err.contains("; imports per job: avg "),
            "{err}"
        );

        let report = json(&s, "report.json");
        assert_eq!(report["version"], 1);
        assert_eq!(report["linker_output"], "hello");
        let (start, end) = (
            report["start"].as_f64().unwrap(),
            report["end"].as_f64().unwrap(),
        );
        assert!(start <= end);
        let jobs = report["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 5);
        let mut job_seconds = 0.0;
        for (i, j) in jobs.iter().enumerate() {
            assert_eq!(j["index"], i);
            assert_eq!(j["ok"], true);
            assert_eq!(j["exit_code"], 0);
            assert_eq!(j["ran"], ran, "{j}");
            let (js, je) = (j["start"].as_f64().unwrap(), j["end"].as_f64().unwrap());
            assert!(
                start <= js && js <= je && je <= end,
                "job {i} outside the run: {j}"
            );
            assert!((j["seconds"].as_f64().unwrap() - (je - js)).abs() < 1e-6);
            job_seconds += je - js;
            assert!(j["input_bytes"].as_u64().unwrap() > 0);
            assert!(j["outputs"][0].as_str().unwrap().ends_with(".native.o"));
            assert!(j["command"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a == "-fthinlto-index"
                    || a.as_str().unwrap().starts_with("-fthinlto-index=")));
            if ran == "fallback" {
                assert_eq!(j["fallback_reason"], "exit status 1");
            }
        }
        assert_eq!(
            jobs[0]["imports"], 4,
            "main.o imports add, greeting, mul and square"
        );
        let totals = &report["totals"];
        assert_eq!(totals["jobs"], 5);
        assert_eq!(totals["succeeded"], 5);
        assert_eq!(totals["fell_back"], fell_back);
        assert!((totals["job_seconds"].as_f64().unwrap() - job_seconds).abs() < 1e-6);

        // The trace: one complete event per job, and jobs on one lane never overlap.
        let trace = json(&s, "trace.json");
        let events: Vec<&Value> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .collect();
        assert_eq!(events.len(), 5);
        let mut by_lane: std::collections::BTreeMap<u64, Vec<(i64, i64)>> = Default::default();
        for e in &events {
            let ts = e["ts"].as_i64().unwrap();
            let dur = e["dur"].as_i64().unwrap();
            assert!(ts >= 0 && dur >= 0, "{e}");
            assert!(ts + dur <= ((end - start) * 1e6).round() as i64 + 1, "{e}");
            by_lane
                .entry(e["tid"].as_u64().unwrap())
                .or_default()
                .push((ts, ts + dur));
        }
        for spans in by_lane.values_mut() {
            spans.sort();
            for w in spans.windows(2) {
                assert!(w[0].1 <= w[1].0, "overlap on a lane: {w:?}");
            }
        }
        let parallelism = std::thread::available_parallelism().unwrap().get();
        assert!(
            by_lane.len() <= parallelism,
            "{} lanes on {parallelism} slots",
            by_lane.len()
        );
        let names = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "thread_name");
        assert_eq!(names.count(), by_lane.len());
        std::fs::remove_file(s.path("hello")).unwrap();
    }
}

/// On a terminal (here a pseudo-terminal from `script`), a progress line is drawn and cleared.
#[test]
fn a_terminal_gets_a_progress_line() {
    let script = require("script");
    let s = Space::new();
    let jobs: Vec<Value> = (0..3)
        .map(|i| {
            serde_json::json!({"args": ["-c", concat!("sleep 0.6; ", obj!(), " > \"$0\""), format!("o{i}")],
                                    "inputs": [], "outputs": [format!("o{i}")]})
        })
        .collect();
    s.write(
        "j.json",
        &serde_json::json!({"common": {"linker_output": "p", "args": ["sh"], "inputs": []}, "jobs": jobs})
            .to_string(),
    );
    let out = s.ok(&mut s.program(
        &script,
        &["-qec", &format!("'{BRIDGE}' --jobs=1 j.json"), "/dev/null"],
    ));
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        screen.contains("dtlto-bridge: [0/3] running 1, ETA --"),
        "{screen:?}"
    );
    assert!(screen.contains("dtlto-bridge: [1/3] running"), "{screen:?}");
    assert!(
        screen.contains("\r\x1b[2Kdtlto-bridge: 3 jobs"),
        "the line is cleared before the summary: {screen:?}"
    );
}
