# Sourced by bench/remote.sh --openssl: builds OpenSSL 3 (the openssl-src crate from crates.io,
# fetched into cargo's registry cache, never committed) as ThinLTO bitcode with clang-22 into
# target/bench/openssl (static libraries, the `openssl` program linked once in-process), and sets
# $openssl to that directory. A second run reuses the build.
fetch="$root/target/bench/fetch-openssl"
mkdir -p "$fetch/src"
printf '[package]\nname = "fetch-openssl"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nopenssl-src = "=300.6.1"\n' \
  > "$fetch/Cargo.toml"
: > "$fetch/src/lib.rs"
cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
src=$(cargo metadata --quiet --format-version 1 --manifest-path "$fetch/Cargo.toml" |
  python3 -c 'import json,sys,os; m=json.load(sys.stdin); p=[p for p in m["packages"] if p["name"]=="openssl-src"][0]; print(os.path.join(os.path.dirname(p["manifest_path"]), "openssl"))')
openssl="$root/target/bench/openssl"
if [ ! -x "$openssl/apps/openssl" ]; then
  rm -rf "$openssl"
  cp -r "$src" "$openssl"
  (cd "$openssl" &&
    ./Configure linux-x86_64 no-shared no-module no-legacy no-tests no-docs CC=clang-22 AR=llvm-ar-22 \
      RANLIB=llvm-ranlib-22 CFLAGS="-O2 -flto=thin" LDFLAGS="-fuse-ld=lld-22 -flto=thin" >/dev/null &&
    make -j"$(nproc)" build_sw >/dev/null)
fi
