//! Build script. It writes bpe-openai's o200k_base tables in postcard's
//! encoding to `$OUT_DIR/o200k_base.postcard` (`src/model/tokens.rs`
//! includes them: every process that counts tokens loads them, and
//! postcard decodes them in about two thirds of the time). With the
//! `kernel-emulation` feature it also compiles
//! `kernels/emulation/emulate.cpp` (the CUDA kernel sources through the
//! HIP CPU Runtime) into a static library the crate links.
//!
//! Environment: `HIP_CPU_ROOT` (default `../shared/vendor/hip-cpu` beside
//! the repository), `EDUDB_EMULATION_SANITIZE=address` to instrument the
//! kernels with AddressSanitizer (run the tests with the runtime
//! preloaded; see `.ci/kernel-emulation`).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    write_tokenizer_tables();
    #[cfg(feature = "kernel-emulation")]
    emulation::build();
}

/// The o200k_base byte-pair encoding as bpe-openai builds it, re-encoded
/// with postcard (the same version of bpe decodes it: Cargo.lock resolves
/// one for both).
fn write_tokenizer_tables() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let tables = postcard::to_allocvec(&bpe_openai::o200k_base().bpe)
        .expect("postcard encodes the o200k_base tables");
    std::fs::write(out.join("o200k_base.postcard"), tables).expect("OUT_DIR is writable");
}

#[cfg(feature = "kernel-emulation")]
mod emulation {
    use std::path::PathBuf;

    pub fn build() {
        for path in [
            "kernels/attention_aggregate.cu",
            "kernels/propagate.cu",
            "kernels/emulation",
        ] {
            println!("cargo::rerun-if-changed={path}");
        }
        println!("cargo::rerun-if-env-changed=HIP_CPU_ROOT");
        println!("cargo::rerun-if-env-changed=EDUDB_EMULATION_SANITIZE");
        let manifest =
            PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
        let root = std::env::var_os("HIP_CPU_ROOT")
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest.join("../shared/vendor/hip-cpu"));
        let include = root.join("include");
        if !include.join("hip/hip_runtime.h").is_file() {
            panic!(
                "kernel-emulation: the HIP CPU Runtime's headers are not at {} (set HIP_CPU_ROOT)",
                include.display()
            );
        }
        let mut build = cc::Build::new();
        build
            .cpp(true)
            .std("c++17")
            .file(manifest.join("kernels/emulation/emulate.cpp"))
            .include(&include)
            // HIP-CPU unoptimised runs the tests many times slower.
            .opt_level(2)
            .warnings(false);
        let sanitize = std::env::var("EDUDB_EMULATION_SANITIZE").unwrap_or_default();
        match sanitize.as_str() {
            "" => {}
            "address" => {
                build
                    .flag("-fsanitize=address")
                    .flag("-fno-omit-frame-pointer");
                println!("cargo::rustc-link-lib=dylib=asan");
            }
            other => panic!("EDUDB_EMULATION_SANITIZE={other}: only `address` is supported"),
        }
        build.compile("edudb_kernel_emulation");
        println!("cargo::rustc-link-lib=dylib=tbb");
    }
}
