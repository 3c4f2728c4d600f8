//! icecream shops: examples/hello linked with `--wrapper icecc` through a stock icecc-scheduler
//! and two iceccd, each in a network namespace of its own (tests/hosts/icecc.sh), the
//! environment made by `dtlto-bridge host setup --icecc`.

use crate::space::{assert_linked, require, stderr, Space, BRIDGE};
use std::fs;
use std::path::{Path, PathBuf};

/// The cluster, stopped and its namespaces deleted when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    prefix: String,
    socket: String,
}

impl Cluster {
    fn up() -> Cluster {
        for tool in ["icecc", "iceccd", "icecc-scheduler", "ip", "unshare"] {
            require(tool);
        }
        let dir = tempfile::Builder::new()
            .prefix("dtlto-bridge-icecc-")
            .tempdir()
            .unwrap();
        let prefix = format!("dtb{}", std::process::id());
        let out = std::process::Command::new(script())
            .args(["up", dir.path().to_str().unwrap(), &prefix])
            .output()
            .unwrap();
        let mut cluster = Cluster {
            dir,
            prefix,
            socket: String::new(),
        };
        assert!(out.status.success(), "icecc.sh up: {}", stderr(&out));
        cluster.socket = String::from_utf8(out.stdout).unwrap().trim().to_string();
        cluster
    }

    /// How many jobs host `h` compiled, as its iceccd logged them.
    fn compiled(&self, h: &str) -> usize {
        let log = self.dir.path().join(format!("logs/{h}.log"));
        fs::read_to_string(log)
            .unwrap_or_default()
            .matches("final arguments")
            .count()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script())
            .args(["down", self.dir.path().to_str().unwrap(), &self.prefix])
            .status();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hosts/icecc.sh")
}

#[test]
fn hello_links_through_two_iceccd_hosts_byte_for_byte() {
    require("icecc-create-env");
    let s = Space::new();
    let inputs = s.hello();
    assert_linked(&s.link(Path::new(BRIDGE), &[], &inputs, "hello.local"));
    let want = fs::read(s.path("hello.local")).unwrap();

    let envs = s.tmp.with_file_name("envs");
    fs::create_dir(&envs).unwrap();
    let dir = format!("--dir={}", envs.display());
    let out = s.ok(&mut s.bridge(&["host", "setup", &dir, "--icecc=clang-22"]));
    let said = String::from_utf8(out.stdout).unwrap();
    let version = said
        .lines()
        .find_map(|l| l.strip_prefix("on the linking machine: ICECC_VERSION="))
        .unwrap_or_else(|| panic!("{said}"))
        .to_string();

    let cluster = Cluster::up();
    let mut link = s.command(
        "ip",
        &["netns", "exec", &format!("{}-link", cluster.prefix)],
    );
    link.args([
        "clang-22",
        "-O2",
        "-flto=thin",
        "-fuse-ld=lld-22",
        "-o",
        "hello",
    ])
    .arg(format!("-fthinlto-distributor={BRIDGE}"))
    .args([
        "-Xthinlto-distributor=--wrapper=icecc",
        "-Xthinlto-distributor=--summary",
    ])
    .args(&inputs)
    .env("ICECC_TEST_SOCKET", &cluster.socket)
    .env("ICECC_VERSION", &version);
    let out = link.output().unwrap();
    let err = super::hosts::linked_on_hosts(&s, &out, &want);
    let (h1, h2) = (cluster.compiled("h1"), cluster.compiled("h2"));
    assert_eq!(h1 + h2, 5, "every job compiled on a host: {err}");
    let on = format!("on hosts: h1 {h1}, h2 {h2};");
    assert!(h1 > 0 && h2 > 0 && err.contains(&on), "{on}: {err}");
}
