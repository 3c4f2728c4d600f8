//! The link's scheduler with the rest of the toolchain: a checked host pool as `doctor` (which
//! asks clang-22 and ld.lld-22) reports it, and the order under make 4.4.1 and ninja 1.13.

use crate::space::{
    assert_costliest_first, ordered_jobs, pytool, require, sh_jobs, stderr, Space, BRIDGE,
};

/// A pool directory that others may use, or a symbolic link planted in its place, is not
/// used: one warning names it and why, and the link runs on its own.
#[test]
fn a_foreign_or_open_pool_directory_is_refused_by_name() {
    let s = Space::new();
    s.write(
        "j.json",
        &sh_jobs(&[(concat!(obj!(), " > o.o"), &[], &["o.o"])]),
    );
    let base = s.tmp.with_file_name("pool");
    std::fs::create_dir_all(&base).unwrap();
    let uid = unsafe { libc::getuid() };
    let dir = base.join(format!("dtlto-bridge-pool-{uid}"));
    let elsewhere = s.tmp.with_file_name("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    for (setup, why) in [("open", "mode 777"), ("link", "symbolic link")] {
        let _ = std::fs::remove_dir(&dir);
        let _ = std::fs::remove_file(&dir);
        if setup == "open" {
            std::fs::create_dir(&dir).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        } else {
            std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        }
        let out = s.ok(&mut s.bridge(&["j.json"]));
        let err = stderr(&out);
        assert_eq!(err.matches("warning").count(), 1, "{err}");
        assert!(
            err.contains(&format!("use the host pool at {}: ", dir.display())) && err.contains(why),
            "{err}"
        );
        assert!(s.exists("o.o"));
        let doctor = s.ok(&mut s.bridge(&["doctor"]));
        let text = String::from_utf8_lossy(&doctor.stdout);
        assert!(text.contains("host pool:") && text.contains(why), "{text}");
    }
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written there"
    );
}

/// doctor checks the pool the environment configures.
#[test]
fn doctor_reports_the_configured_pool() {
    let s = Space::new();
    let out = s.ok(s.bridge(&["doctor"]).env("DTLTO_BRIDGE_HOST_SLOTS", "7"));
    let text = String::from_utf8_lossy(&out.stdout);
    let pool = s.tmp.with_file_name("pool");
    assert!(
        text.contains(&format!("host pool: 7 slots at {}", pool.display())),
        "{text}"
    );
    let out = s.ok(s.bridge(&["doctor"]).env("DTLTO_BRIDGE_HOST_SLOTS", "0"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("host pool: off"));
}

/// make 4.4.1's fifo jobserver and ninja 1.13 (which joins jobservers) keep the order too.
#[test]
fn jobs_start_costliest_first_under_make_4_4_with_ninja_1_13() {
    let make = pytool("make");
    let ninja = pytool("ninja");
    require("sh");
    let s = Space::new();
    ordered_jobs(&s);
    s.write(
        "outer.mk",
        &format!(
            "all:\n\t'{BRIDGE}' --no-history --backend=ninja --ninja='{}' j.json\n",
            ninja.display()
        ),
    );
    let out = s.ok(&mut s.program(&make, &["-j2", "-f", "outer.mk"]));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert_costliest_first(&s, "ninja 1.13 under make 4.4.1");
}
