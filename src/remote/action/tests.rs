//! Tests of action: the layouts by content and by names, identities, and what changes an action.

use super::*;

/// The action of a job run from `/b`, with `fake` digests.
fn at_b(argv: &[&str], inputs: &[&str], outputs: &[&str], shard: Option<&[u8]>) -> JobAction {
    build(&common("/b"), argv, inputs, outputs, &fake, shard).unwrap()
}

fn common(cwd: &str) -> Common {
    Common {
        cwd: cwd.into(),
        root_is_slash: false,
        identity: "x".into(),
        platform: vec![("OSFamily".into(), "linux".into())],
        by_content: true,
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
        None,
    )
    .unwrap();
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
    let a = at_b(&argv, &inputs, &["main.1.77.native.o"], None);
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
    let b = at_b(&argv2, &inputs2, &["main.3.91.native.o"], None);
    assert_eq!(a.action_digest, b.action_digest);
}

#[test]
fn an_output_named_elsewhere_in_the_command_keeps_its_name() {
    let argv = ["cc", "-c", "m.o", "-o", "o.o", "-Wl,o.o"];
    let a = at_b(&argv, &["m.o", "o.o.thinlto.bc"], &["o.o"], None);
    let (_, command, _) = parts(&a);
    assert_eq!(command.output_paths, ["o.o"]);
}

#[test]
fn the_compiler_identity_and_cache_setting_change_the_action() {
    let argv = ["cc", "-c", "m.o", "-o", "o.o"];
    let one = at_b(&argv, &["m.o"], &["o.o"], None);
    let mut c = common("/b");
    c.identity = "y".into();
    let two = build(&c, &argv, &["m.o"], &["o.o"], &fake, None).unwrap();
    assert_ne!(one.action_digest, two.action_digest);
    c.cache = false;
    let (action, _, _) = parts(&build(&c, &argv, &["m.o"], &["o.o"], &fake, None).unwrap());
    assert!(action.do_not_cache);
}

/// examples/hello's main job as lld-22 wrote it (tests/data/main.thinlto.bc), in `cwd`, with
/// lld's pid `pid` in the archive members' names and `prefix` before every path.
fn hello_main(cwd: &str, pid: &str, prefix: &str, fake: &dyn Fn(&Path) -> re::Digest) -> JobAction {
    let job = HelloMain::new(pid, prefix);
    let (argv, inputs, outputs) = job.words();
    build(
        &common(cwd),
        &argv,
        &inputs,
        &outputs,
        fake,
        Some(&job.shard),
    )
    .unwrap()
}

/// examples/hello's main job's words and shard (see `hello_main`).
struct HelloMain {
    argv: Vec<String>,
    inputs: Vec<String>,
    out: String,
    shard: Vec<u8>,
}

/// examples/hello's main job's shard as lld-22 wrote it, and the modules it names.
const HELLO_SHARD: &[u8] = include_bytes!("../../../tests/data/main.thinlto.bc");
const HELLO_MODULES: [&str; 5] = [
    "main.o",
    "add.o",
    "greeting.o",
    "libmul.a(mul.o at 92).4.2481.o",
    "libmul.a(sq.o at 2812).5.2481.o",
];

impl HelloMain {
    fn new(pid: &str, prefix: &str) -> HelloMain {
        let named = |p: &str| format!("{prefix}{}", p.replace("2481", pid));
        let shard = crate::remote::shard::rename(HELLO_SHARD, &|p| Some(named(p)))
            .unwrap()
            .bytes;
        let out = format!("main.1.{pid}.native.o");
        let shard_name = format!("{out}.thinlto.bc");
        let modules = HELLO_MODULES.map(named);
        let argv = ["/usr/bin/clang", "-c", "-O2", &modules[0]]
            .map(String::from)
            .into_iter()
            .chain([
                format!("-fthinlto-index={shard_name}"),
                "-o".into(),
                out.clone(),
            ])
            .collect();
        let mut inputs: Vec<String> = modules.to_vec();
        inputs.insert(1, shard_name);
        HelloMain {
            argv,
            inputs,
            out,
            shard,
        }
    }

    fn words(&self) -> (Vec<&str>, Vec<&str>, [&str; 1]) {
        fn list(l: &[String]) -> Vec<&str> {
            l.iter().map(String::as_str).collect()
        }
        (list(&self.argv), list(&self.inputs), [self.out.as_str()])
    }

    /// The identity of the job's action (`Prepared::identity`).
    fn identity(&self, common: &Common, fake: &dyn Fn(&Path) -> re::Digest) -> Option<String> {
        let (argv, inputs, outputs) = self.words();
        prepare(common, [&argv, &inputs, &outputs], fake, Some(&self.shard)).identity()
    }
}

#[test]
fn an_action_s_identity_holds_no_name_lld_gives_per_link_but_every_content() {
    let (a, b) = (HelloMain::new("2481", ""), HelloMain::new("77aa", ""));
    let id = a.identity(&common("/b"), &content).unwrap();
    assert_eq!(b.identity(&common("/b"), &content), Some(id.clone()));
    // The same identity is the same action.
    assert_eq!(
        hello_main("/b", "2481", "", &content).action_digest,
        hello_main("/b", "77aa", "", &content).action_digest
    );
    // Another module's content: another identity.
    let changed = |p: &Path| match p.ends_with("add.o") {
        true => digest_of(b"another add.o"),
        false => content(p),
    };
    assert_ne!(a.identity(&common("/b"), &changed), Some(id));
    // A job keyed by names has none.
    let names = Common {
        by_content: false,
        ..common("/b")
    };
    assert_eq!(a.identity(&names, &content), None);
}

/// A file's digest from its name with lld's pid and any directory taken out: the same
/// module in every link and checkout.
fn content(p: &Path) -> re::Digest {
    let name = p.file_name().unwrap().to_string_lossy();
    digest_of(name.replace("2481", "").replace("77aa", "").as_bytes())
}

#[test]
fn an_action_keyed_by_content_is_the_same_in_every_link_and_checkout() {
    let a = hello_main("/b", "2481", "", &content);
    assert_eq!(a.by_name, None);
    let (_, command, root) = parts(&a);
    assert_eq!(command.working_directory, "");
    assert!(command.arguments[3].starts_with("m/") && command.arguments[3].ends_with(".o"));
    assert_eq!(
        command.arguments[4..],
        [
            "-fthinlto-index=dtlto-job.native.o.thinlto.bc",
            "-o",
            "dtlto-job.native.o"
        ]
    );
    let files: Vec<&str> = root.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(files, ["dtlto-job.native.o.thinlto.bc"]);
    assert_eq!(root.directories[0].name, "m");
    // The rewritten shard goes up with the action; the original is not used.
    assert_eq!(a.uses.len(), 5);
    assert!(a
        .uses
        .iter()
        .all(|u| !u.to_string_lossy().ends_with(".thinlto.bc")));
    assert_eq!(a.outputs[0].1, PathBuf::from("/b/main.1.2481.native.o"));

    // Another pid, another checkout, absolute paths: the same action.
    for b in [
        hello_main("/b", "77aa", "", &content),
        hello_main("/elsewhere/checkout", "2481", "", &content),
        hello_main("/b", "2481", "/abs/dir/", &content),
        hello_main("/b", "2481", "../lib/", &content),
    ] {
        assert_eq!(b.by_name, None);
        assert_eq!(a.action_digest, b.action_digest);
        // The same digests, labelled by the paths as lld gave them.
        let digests = |j: &JobAction| j.ingredients.values().cloned().collect::<Vec<_>>();
        assert_eq!(digests(&a), digests(&b));
    }
    // What went in, by names that stay from link to link.
    let labels: Vec<&str> = a.ingredients.keys().map(String::as_str).collect();
    assert_eq!(
        labels,
        [
            "an import add.o",
            "an import greeting.o",
            "an import libmul.a(mul.o)",
            "an import libmul.a(sq.o)",
            "the command",
            "the compiler",
            "the index shard",
            "the module main.o"
        ]
    );
    // A module with other bytes: another action.
    let changed = |p: &Path| {
        if p.ends_with("add.o") {
            digest_of(b"changed")
        } else {
            content(p)
        }
    };
    assert_ne!(
        a.action_digest,
        hello_main("/b", "2481", "", &changed).action_digest
    );
}

#[test]
fn remote_key_names_keeps_lld_names_in_the_action() {
    let argv = |pid: &str| {
        [
            "cc".to_string(),
            "-c".into(),
            "m.o".into(),
            format!("-fthinlto-index=o.{pid}.o.thinlto.bc"),
            "-o".into(),
            format!("o.{pid}.o"),
            format!("-Dx={pid}"),
        ]
    };
    let mut c = common("/b");
    c.by_content = false;
    let build_for = |pid: &str| {
        let argv = argv(pid);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let shard = format!("o.{pid}.o.thinlto.bc");
        let out = format!("o.{pid}.o");
        build(&c, &argv, &["m.o", &shard], &[&out], &fake, Some(b"BC")).unwrap()
    };
    let (one, two) = (build_for("1"), build_for("2"));
    assert_eq!(one.by_name.as_deref(), Some("--remote-key names"));
    assert_ne!(one.action_digest, two.action_digest);
    assert_ne!(
        one.ingredients["the command"],
        two.ingredients["the command"]
    );
}

#[test]
fn a_job_the_content_key_cannot_be_sure_of_keeps_its_names_and_says_why() {
    // No shard bytes.
    let argv = [
        "cc",
        "-c",
        "m.o",
        "-fthinlto-index=o.o.thinlto.bc",
        "-o",
        "o.o",
    ];
    let a = at_b(&argv, &["m.o", "o.o.thinlto.bc"], &["o.o"], None);
    assert!(a.by_name.unwrap().contains("could not be read"));
    // Two modules with the same bytes would share a name.
    let same = |_: &Path| digest_of(b"same");
    let b = hello_main("/b", "2481", "", &same);
    assert!(b.by_name.unwrap().contains("hold the same bytes"),);
    // An argument that names one of its files, with a shard that matches its inputs.
    let mut inputs = HELLO_MODULES.to_vec();
    inputs.push("o.o.thinlto.bc");
    let argv = [
        "cc",
        "-c",
        "main.o",
        "-fthinlto-index=o.o.thinlto.bc",
        "-o",
        "o.o",
        "-fprofile-use=add.o",
    ];
    let c = at_b(&argv, &inputs, &["o.o"], Some(HELLO_SHARD));
    assert!(c.by_name.unwrap().contains("names one of its files"));
    // The same job without that argument is keyed by content.
    let c = at_b(&argv[..6], &inputs, &["o.o"], Some(HELLO_SHARD));
    assert_eq!(c.by_name, None);
    // A `..` after a directory name: the kernel resolves it through a symlink, if any.
    let mut odd = inputs.clone();
    odd[1] = "sym/../add.o";
    let c = at_b(&argv[..6], &odd, &["o.o"], Some(HELLO_SHARD));
    assert!(c
        .by_name
        .unwrap()
        .contains("has a .. after a directory name"));
    // Not a shard at all.
    let d = at_b(&argv, &["m.o", "o.o.thinlto.bc"], &["o.o"], Some(b"text"));
    assert!(d.by_name.unwrap().contains("magic"));
}

#[test]
fn absolute_paths_need_workers_that_mount_the_root_at_slash() {
    assert!(unsuitable(&["/abs/a.o"], &["o.o"], false).is_some());
    assert!(unsuitable(&["/abs/a.o"], &["o.o"], true).is_none());
    assert!(unsuitable(&["../a.o"], &["o.o"], false).is_none());
}
