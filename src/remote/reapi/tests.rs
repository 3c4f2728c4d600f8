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

#[test]
fn batches_fill_to_the_limit_and_a_large_blob_goes_alone() {
    let blob = |n: usize| (digest_of(&vec![n as u8; n]), vec![n as u8; n]);
    let sizes = |calls: &[Vec<(re::Digest, Vec<u8>)>]| -> Vec<Vec<usize>> {
        calls
            .iter()
            .map(|c| c.iter().map(|(_, d)| d.len()).collect())
            .collect()
    };
    // A limit of 4,100 bytes: three blobs of about 1 KiB (2 KiB each with framing) make
    // two batches; a 5,000-byte one goes alone, and the blob after it starts a new batch.
    let by_len = |(_, data): &(re::Digest, Vec<u8>)| data.len();
    let calls = super::pack(
        vec![blob(1024), blob(1025), blob(1026), blob(5000), blob(10)],
        4100,
        by_len,
    );
    assert_eq!(
        sizes(&calls),
        [vec![1024, 1025], vec![1026], vec![5000], vec![10]]
    );
    assert!(super::pack(Vec::new(), 4096, by_len).is_empty());
}

#[test]
fn reads_fill_each_batch_largest_first_in_fewer_calls_than_in_order() {
    let d = |n: i64| re::Digest {
        hash: format!("{n:064}"),
        size_bytes: n,
    };
    let sizes = |calls: Vec<Vec<re::Digest>>| -> Vec<Vec<i64>> {
        (calls.into_iter())
            .map(|c| c.into_iter().map(|d| d.size_bytes).collect())
            .collect()
    };
    // A limit of 4,100 bytes (each blob costs 1 KiB more): filled in this order, four calls;
    // the largest first, each in the first batch with room, three (the large one alone).
    let blobs = || vec![d(1076), d(1076), d(976), d(5000), d(976)];
    assert_eq!(
        sizes(super::pack(blobs(), 4100, |d| d.size_bytes as usize)),
        [vec![1076], vec![1076, 976], vec![5000], vec![976]]
    );
    assert_eq!(
        sizes(super::calls::read_calls(blobs(), 4100)),
        [vec![1076, 976], vec![1076, 976], vec![5000]]
    );
    // Batches of at most 1 MiB on a server of large ones; nothing read is no call.
    let big = super::calls::read_calls(vec![d(600 << 10), d(600 << 10)], 4 << 20);
    assert_eq!(big.len(), 2);
    assert!(super::calls::read_calls(Vec::new(), 4100).is_empty());
}
