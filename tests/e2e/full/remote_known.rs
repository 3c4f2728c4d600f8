//! Jobs' actions remembered from one link to the next (remote/known.rs), against a real REAPI
//! server: a relink takes them without building them again, and a job remembered that the
//! action cache no longer holds is built whole and executes.

use super::remote::{history_file, link, misses, ran, Farm};
use crate::space::*;
use std::fs;

/// The action digests of these lines, sorted.
fn actions(lines: &[String]) -> Vec<String> {
    let mut actions: Vec<String> = lines
        .iter()
        .map(|l| {
            let json: serde_json::Value =
                serde_json::from_str(l.split_once(' ').unwrap().1).unwrap();
            json["action"].as_str().unwrap().to_string()
        })
        .collect();
    actions.sort();
    actions
}

/// The lines of the link's remembered actions.
fn remembered(space: &Space) -> Vec<String> {
    let text = fs::read_to_string(history_file(space, "actions")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("dtlto-bridge actions 2"), "{text}");
    lines.map(String::from).collect()
}

#[test]
fn a_remembered_job_comes_from_the_cache_or_when_the_cache_lost_it_is_built_and_executes() {
    let space = Space::new();
    let inputs = space.hello();
    let first = Farm::start(1, &[]);
    let (out, report) = link(&space, &first.args(), &[], &inputs);
    assert_linked(&out);
    assert_eq!(ran(&report), ["remote"; 5], "{}", stderr(&out));
    // Every job, each keyed by content.
    let lines = remembered(&space);
    assert_eq!(lines.len(), 5, "{lines:?}");
    let (out, report) = link(&space, &first.args(), &[], &inputs);
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    assert_eq!(ran(&report), ["remote cache"; 5], "{}", stderr(&out));
    assert_eq!(first.executed().len(), 5);
    // The same actions, under keys that hold no name lld gives per link.
    assert_eq!(actions(&remembered(&space)), actions(&lines));
    let keys = |lines: &[String]| -> Vec<String> {
        let mut k: Vec<String> = lines
            .iter()
            .map(|l| l.split(' ').next().unwrap().into())
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(&remembered(&space)), keys(&lines));

    // add.o's job remembered with another action (a file edited by hand): its lookup misses,
    // and building it whole shows the difference; it runs here, and is not remembered so again.
    let file = history_file(&space, "actions");
    let text = fs::read_to_string(&file).unwrap();
    let line = text.find("the module add.o").unwrap();
    let at = text[..line].rfind("\"action\":\"").unwrap() + 10;
    let wrong = if &text[at..at + 1] == "0" { "1" } else { "0" };
    let tampered = format!("{}{wrong}{}", &text[..at], &text[at + 1..]);
    let bad = tampered[at..at + 64].to_string();
    fs::write(&file, &tampered).unwrap();
    let (out, report) = link(&space, &first.args(), &[], &inputs);
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    let mut ran_where = ran(&report);
    ran_where.sort();
    assert_eq!(
        ran_where,
        [
            "fallback",
            "remote cache",
            "remote cache",
            "remote cache",
            "remote cache"
        ],
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("changed while the link ran"),
        "{}",
        stderr(&out)
    );
    assert!(!fs::read_to_string(&file).unwrap().contains(&bad));
    drop(first);

    // A new server, its action cache empty: the remembered jobs are built whole and execute
    // there, with the same actions as before (so no miss is put down to a change); but
    // greeting.o's, remembered with another action, fails alone and runs here.
    let text = fs::read_to_string(&file).unwrap();
    let line = text.find("the module greeting.o").unwrap();
    let at = text[..line].rfind("\"action\":\"").unwrap() + 10;
    let wrong = if &text[at..at + 1] == "0" { "1" } else { "0" };
    fs::write(&file, format!("{}{wrong}{}", &text[..at], &text[at + 1..])).unwrap();
    let second = Farm::start(1, &[]);
    let (out, report) = link(&space, &second.args(), &[], &inputs);
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    let outputs = report["jobs"].as_array().unwrap().iter();
    let outputs: Vec<&str> = outputs.map(|j| j["outputs"][0].as_str().unwrap()).collect();
    for ((output, ran), miss) in outputs.iter().zip(ran(&report)).zip(misses(&report)) {
        if output.starts_with("greeting.") {
            assert_eq!(ran, "fallback", "{}", stderr(&out));
        } else {
            assert_eq!(ran, "remote", "{output}: {}", stderr(&out));
            assert_eq!(
                miss,
                "the same action as in the last link here, whose result the server no longer has"
            );
        }
    }
    assert_eq!(second.executed().len(), 4);
    let err = stderr(&out);
    assert!(
        err.contains("it is not the action remembered from the last link"),
        "{err}"
    );
}

/// `--remote-disk-cache`: a relink's remembered jobs take their outputs from the directory,
/// without the server; the others come from the server as before, and a kept file of the
/// wrong size is not used.
#[test]
fn a_relink_takes_the_remembered_jobs_outputs_from_the_disk_cache_not_the_server() {
    use std::os::unix::fs::PermissionsExt;
    let space = Space::new();
    let inputs = space.hello();
    let dir = space.tmp.with_file_name("disk-cache");
    let disk = format!("--remote-disk-cache={}", dir.display());
    let first = Farm::start(1, &[]);
    let (out, report) = link(&space, &first.args(), &[&disk], &inputs);
    assert_linked(&out);
    assert_eq!(ran(&report), ["remote"; 5], "{}", stderr(&out));
    let kept: Vec<std::path::PathBuf> = fs::read_dir(dir.join("cas"))
        .unwrap()
        .flat_map(|shelf| fs::read_dir(shelf.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 5, "every job's object: {kept:?}");
    for file in &kept {
        let mode = fs::metadata(file).unwrap().permissions().mode();
        assert_eq!(mode & 0o222, 0, "{} is read-only", file.display());
    }
    drop(first);

    // A new server, its cache empty: the jobs remembered with their results come from the
    // disk; those whose keys hold lld's per-link member names execute there.
    let second = Farm::start(1, &[]);
    let (out, report) = link(&space, &second.args(), &[&disk], &inputs);
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    let workers = super::remote::each_job(&report, "/remote/worker");
    let from_disk = workers.iter().filter(|w| *w == "disk cache").count();
    let ran_where = ran(&report);
    assert!(from_disk >= 2, "{workers:?} {}", stderr(&out));
    assert_eq!(second.executed().len(), 5 - from_disk, "{workers:?}");
    for (worker, ran) in workers.iter().zip(&ran_where) {
        let want = if worker == "disk cache" {
            "remote cache"
        } else {
            "remote"
        };
        assert_eq!(ran, want, "{workers:?}");
    }

    // Every kept file truncated by hand: no job takes it. The jobs this server never saw
    // execute (no link entry named their outputs), the others come from its cache, and the
    // kept files are whole again.
    for file in &kept {
        fs::set_permissions(file, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(file, b"x").unwrap();
    }
    let (out, report) = link(&space, &second.args(), &[&disk], &inputs);
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    let workers = super::remote::each_job(&report, "/remote/worker");
    assert!(!workers.iter().any(|w| w == "disk cache"), "{workers:?}");
    assert_eq!(second.executed().len(), 5, "{}", stderr(&out));
    for file in &kept {
        assert!(
            fs::metadata(file).unwrap().len() > 100,
            "{}",
            file.display()
        );
    }
    // Without the option, nothing is taken from the disk; with the history off, the option
    // says it is not used.
    let (out, report) = link(&space, &second.args(), &[], &inputs);
    assert_linked(&out);
    assert_eq!(ran(&report), ["remote cache"; 5], "{}", stderr(&out));
    let (out, report) = link(&space, &second.args(), &[&disk, "--no-history"], &inputs);
    assert_linked(&out);
    assert_eq!(ran(&report), ["remote cache"; 5], "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "warning: --remote-disk-cache is not used: it needs the cache directory (--history), which is off or was refused"
        ),
        "{}",
        stderr(&out)
    );
    let (out, _) = link(
        &space,
        &second.args(),
        &[&disk, "--remote-no-cache"],
        &inputs,
    );
    assert_linked(&out);
    assert!(
        stderr(&out).contains(
            "warning: --remote-disk-cache is not used: the action cache is off (--remote-no-cache)"
        ),
        "{}",
        stderr(&out)
    );
}

/// A relink reads the last link's objects while it plans (before the link's entry answers),
/// and takes none the server sends wrong, read ahead or not: those jobs execute.
#[test]
fn a_relink_reads_the_last_links_objects_while_it_plans_and_takes_none_sent_wrong() {
    use crate::fast::reapi::{Method, Seen, Server};
    let server = Server::start();
    // The link's entry answers late: the objects are read meanwhile.
    server.slow(Method::GetActionResult, 500);
    let space = Space::new();
    let inputs = space.hello();
    let (out, report) = link(&space, &server.args(), &[], &inputs);
    assert_linked(&out);
    assert_eq!(ran(&report), ["remote"; 5], "{}", stderr(&out));
    let before = server.seen().len();
    let (out, report) = link(&space, &server.args(), &[], &inputs);
    assert_linked(&out);
    assert_eq!(ran(&report), ["remote cache"; 5], "{}", stderr(&out));
    assert_eq!(space.run_program("prog"), HELLO);
    let seen = server.seen()[before..].to_vec();
    let read = seen
        .iter()
        .position(|e| *e == Seen::Called(Method::BatchReadBlobs));
    let answered = seen
        .iter()
        .position(|e| *e == Seen::Answered(Method::GetActionResult));
    assert!(
        read.is_some() && answered.is_some() && read < answered,
        "the objects were read (at {read:?}) only once the entry answered (at {answered:?})"
    );
    // Every blob read back wrong (its last byte flipped): nothing read is taken, read ahead or
    // not. Every job executes past the cache, its outputs come back wrong too, and it runs here.
    server.set(|f| f.corrupt_reads = true);
    let executed = server.executed().len();
    let (out, report) = link(&space, &server.args(), &[], &inputs);
    assert_linked(&out);
    let err = stderr(&out);
    assert_eq!(ran(&report), ["fallback"; 5], "{err}");
    assert!(err.contains("whose SHA-256 is"), "{err}");
    assert_eq!(space.run_program("prog"), HELLO);
    assert_eq!(server.executed().len(), executed + 5);
}
