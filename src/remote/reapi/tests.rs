//! The client's settings and words: endpoints, statuses, headers, what is never shown.

use super::*;

#[test]
fn urls_map_to_endpoints_or_say_what_is_accepted() {
    let t = |url: &str| Target {
        url: url.into(),
        instance: String::new(),
        headers: vec![],
        timeout: Duration::from_secs(20),
        tls: Tls::default(),
    };
    assert_eq!(
        endpoint(&t("grpc://farm:8980")).unwrap().uri().to_string(),
        "http://farm:8980/"
    );
    assert!(endpoint(&t("unix:/run/farm.sock")).is_ok());
    let e = endpoint(&t("farm:8980")).err().unwrap();
    assert!(e.contains("grpc://HOST:PORT"), "{e}");
}

#[test]
fn statuses_read_like_grpc_codes() {
    let s = tonic::Status::resource_exhausted("too many\nsecond line");
    assert_eq!(describe(&s), "RESOURCE_EXHAUSTED: too many");
    assert!(transient(tonic::Code::Unavailable));
    assert!(!transient(tonic::Code::InvalidArgument));
}

#[test]
fn headers_are_checked() {
    let t = Target {
        url: String::new(),
        instance: String::new(),
        headers: vec![("x-api-key".into(), "secret\n".into())],
        timeout: Duration::from_secs(20),
        tls: Tls::default(),
    };
    let e = headers(&t).err().unwrap();
    assert!(!e.contains("secret"), "{e}");
}

#[test]
fn neither_header_values_nor_the_tls_key_show_in_debug_output() {
    let t = Target {
        url: "grpcs://farm:443".into(),
        instance: "main".into(),
        headers: vec![("x-api-key".into(), "s3cr3t".into())],
        timeout: Duration::from_secs(20),
        tls: Tls {
            ca: None,
            identity: Some((b"CERT".to_vec(), b"PRIVATE KEY".to_vec())),
        },
    };
    let shown = format!("{t:?}");
    assert!(
        shown.contains("x-api-key") && shown.contains("farm"),
        "{shown}"
    );
    assert!(
        !shown.contains("s3cr3t") && !shown.contains("PRIVATE"),
        "{shown}"
    );
}

#[test]
fn headers_sent_in_the_clear_beyond_this_machine_are_warned_of() {
    let t = |url: &str, key: bool| Target {
        url: url.into(),
        instance: String::new(),
        headers: if key {
            vec![("x-api-key".into(), "k".into())]
        } else {
            vec![]
        },
        timeout: Duration::from_secs(20),
        tls: Tls::default(),
    };
    for url in [
        "grpc://farm:8980",
        "grpc://10.0.0.7:8980",
        "http://[2001:db8::1]:80",
    ] {
        let w = t(url, true).exposed_headers().expect(url);
        assert!(w.contains("unencrypted") && w.contains(url), "{w}");
        assert_eq!(
            t(url, false).exposed_headers(),
            None,
            "{url} without headers"
        );
    }
    for url in [
        "grpc://127.0.0.1:8980",
        "grpc://localhost:1",
        "grpc://[::1]:2",
        "grpcs://farm:443",
        "unix:/run/farm.sock",
    ] {
        assert_eq!(t(url, true).exposed_headers(), None, "{url}");
    }
}
