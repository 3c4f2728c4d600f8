//! Remote execution over TLS: BuildGrid listening on a loopback port with mutual TLS (it asks
//! every client for a certificate signed by the test authority), certificates made by openssl
//! for each test. The workers use the server's Unix socket; dtlto-bridge uses the TLS port.

use super::remote::{ran, Farm};
use crate::space::*;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A test certificate authority, a server certificate for localhost and 127.0.0.1, and a
/// client certificate, all in `dir`.
fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let out = Command::new(require("openssl"))
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &[
                "req",
                "-x509",
                "-days",
                "2",
                "-subj",
                "/CN=dtlto-bridge test CA",
            ][..],
            &key,
            &["-keyout", "ca.key", "-out", "ca.pem"],
            &["-addext", "basicConstraints=critical,CA:TRUE"],
            &["-addext", "keyUsage=critical,keyCertSign"],
        ]
        .concat(),
    );
    for (name, ext) in [
        (
            "server",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let (csr, pem, keyfile) = (
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.key"),
        );
        let subject = format!("/CN={name}");
        openssl(
            &[
                &["req", "-subj", &subject][..],
                &key,
                &["-keyout", &keyfile, "-out", &csr],
            ]
            .concat(),
        );
        openssl(&[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &pem,
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }
}

/// A free loopback port (free when asked; BuildGrid binds it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A farm whose server also listens on a mutual-TLS port; returns it, the certificates'
/// directory and the grpcs:// URL.
fn tls_farm() -> (Farm, PathBuf, String) {
    let dir = tempfile::Builder::new().prefix("farm").tempdir().unwrap();
    let certs = dir.path().join("certs");
    fs::create_dir(&certs).unwrap();
    make_certificates(&certs);
    let port = free_port();
    let c = |f: &str| certs.join(f).display().to_string();
    let channel = format!(
        "\n  - !channel\n    address: \"127.0.0.1:{port}\"\n    insecure-mode: false\n    \
         credentials:\n      tls-server-key: \"{}\"\n      tls-server-cert: \"{}\"\n      \
         tls-client-certs: \"{}\"\n",
        c("server.key"),
        c("server.pem"),
        c("ca.pem")
    );
    let farm = Farm::start_in(dir, &channel, 1, &[]);
    let until = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < until,
            "BuildGrid did not listen on {port} in 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (farm, certs, format!("grpcs://localhost:{port}"))
}

/// With the authority and a client certificate (named with `~`, which no shell expands inside
/// -Xthinlto-distributor=), every job runs on the worker; without the certificate the server
/// refuses the connection, and the failure says so.
#[test]
fn mutual_tls_runs_jobs_remotely_and_a_missing_client_certificate_is_named() {
    let (farm, certs, url) = tls_farm();
    let s = Space::new();
    let inputs = s.hello();
    let tls = |with_client: bool| {
        let mut v = vec![
            format!("--remote={url}"),
            "--remote-instance=main".to_string(),
            "--remote-ca=~/ca.pem".to_string(),
        ];
        if with_client {
            v.push("--remote-client-cert=~/client.pem".into());
            v.push("--remote-client-key=~/client.key".into());
        }
        v
    };
    // doctor with these options, HOME pointing at the certificates.
    let doctor = |args: Vec<String>| {
        let mut cmd = s.bridge(&["doctor"]);
        cmd.args(args).env("HOME", &certs);
        cmd
    };

    // doctor's round trip.
    let out = s.ok(&mut doctor(tls(true)));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("remote:    "), "{text}");
    assert!(!text.contains("MISSING"), "{text}");
    let probes = farm.executed().len();

    // A real link, every job on the worker.
    let report = s.tmp.with_file_name("report.json");
    let mut link = s.command(
        "clang-22",
        &["-O2", "-flto=thin", "-fuse-ld=lld-22", "-o", "prog"],
    );
    link.arg(format!("-fthinlto-distributor={BRIDGE}"))
        .arg(format!(
            "-Xthinlto-distributor=--report={}",
            report.display()
        ))
        .arg("-Xthinlto-distributor=--no-fallback")
        .args(
            tls(true)
                .iter()
                .map(|a| format!("-Xthinlto-distributor={a}")),
        )
        .args(&inputs)
        .env("HOME", &certs);
    let out = link.output().unwrap();
    assert_linked(&out);
    assert_eq!(s.run_program("prog"), HELLO);
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(ran(&report), ["remote"; 5], "{}", stderr(&out));
    assert_eq!(farm.executed().len(), probes + 5);

    // No client certificate: the server ends the handshake; doctor names the remote as the
    // problem and gives the cause.
    let out = doctor(tls(false)).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("remote:    MISSING: "), "{text}");
    assert!(
        text.contains("give --remote-client-cert and --remote-client-key"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("missing or unusable: remote"),
        "{}",
        stderr(&out)
    );

    // Half an identity, a key that is not PEM, and TLS files on a plain URL are refused
    // before any connection, naming the option.
    let out = run(
        &s,
        &[
            "doctor",
            &format!("--remote={url}"),
            "--remote-client-cert=x.pem",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--remote-client-key"),
        "{}",
        stderr(&out)
    );
    s.write("not.pem", "just text\n");
    let mut bad = tls(false);
    bad.push(format!(
        "--remote-client-cert={}",
        certs.join("client.pem").display()
    ));
    bad.push("--remote-client-key=not.pem".into());
    let out = doctor(bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("read --remote-client-key not.pem: not a PEM file"),
        "{}",
        stderr(&out)
    );
    // A certificate with another's key: named, with rustls's cause.
    let mut mismatch = tls(false);
    mismatch.push("--remote-client-cert=~/client.pem".into());
    mismatch.push("--remote-client-key=~/server.key".into());
    let out = doctor(mismatch).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "use the client certificate and key (--remote-client-cert, --remote-client-key): "
        ),
        "{text}"
    );
    let plain = ["--remote=grpc://127.0.0.1:1", "--remote-ca=~/ca.pem"];
    let out = doctor(plain.map(String::from).to_vec()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!(
            "use --remote-ca {}: --remote grpc://127.0.0.1:1 is not a TLS server",
            certs.join("ca.pem").display()
        )),
        "{}",
        stderr(&out)
    );
}
