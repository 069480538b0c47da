//! The CI gate for the CUDA sources, which needs no GPU: every `cuda/*.cu` compiles to PTX for
//! `compute_80` and `compute_90` with warnings as errors, and `ptxas` assembles each PTX for the
//! matching real GPU (sm_80, sm_90), which catches invalid PTX and resource overflows too.
//!
//! With `PONDER_REQUIRE_NVCC=1` (CI, after `scripts/setup-cuda.sh`) a missing nvcc fails the
//! test; otherwise it is skipped with a message. nvcc is found as `build_support/nvcc.rs` says.

#[path = "../build_support/nvcc.rs"]
mod support;

use std::path::{Path, PathBuf};

#[test]
fn every_kernel_compiles_to_ptx_for_sm80_and_sm90() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let required = std::env::var("PONDER_REQUIRE_NVCC").is_ok_and(|v| v == "1");
    let nvcc = match support::find_nvcc(dir) {
        Ok(nvcc) => nvcc,
        Err(searched) if required => {
            panic!("PONDER_REQUIRE_NVCC=1 but nvcc was not found (run scripts/setup-cuda.sh); searched {searched:?}")
        }
        Err(_) => {
            eprintln!("nvcc not found: PTX compile test skipped (run scripts/setup-cuda.sh, or set PONDER_REQUIRE_NVCC=1 to make this an error)");
            return;
        }
    };
    let sources = match support::cu_files(dir) {
        Ok(s) => s,
        Err(e) => panic!("reading cuda/: {e}"),
    };
    assert!(!sources.is_empty(), "no .cu files in kernels/cuda");
    let out = std::env::temp_dir().join(format!("ponder-ptx-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&out) {
        panic!("creating {}: {e}", out.display());
    }
    let jobs: Vec<(PathBuf, &str, &str)> = sources
        .iter()
        .flat_map(|src| {
            support::ARCHS
                .iter()
                .map(move |(sm, arch)| (src.clone(), *sm, *arch))
        })
        .collect();
    let results: Vec<Result<String, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(src, sm, arch)| {
                let (nvcc, out) = (&nvcc, &out);
                scope.spawn(move || compile_and_assemble(nvcc, src, sm, arch, out))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("compile thread panicked".into()))
            })
            .collect()
    });
    let _ = std::fs::remove_dir_all(&out);
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    for ok in results.iter().flatten() {
        eprintln!("{ok}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} kernel builds failed:\n{}",
        failures.len(),
        jobs.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// nvcc to PTX, then ptxas to a cubin; returns a one-line summary.
fn compile_and_assemble(
    nvcc: &Path,
    src: &Path,
    sm: &str,
    arch: &str,
    out: &Path,
) -> Result<String, String> {
    let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("kernel");
    let ptx = out.join(format!("{stem}.{sm}.ptx"));
    support::compile_ptx(nvcc, src, arch, &ptx, true)?;
    let text = std::fs::read_to_string(&ptx).map_err(|e| format!("{}: {e}", ptx.display()))?;
    let entries = text.matches(".entry ").count();
    if entries == 0 {
        return Err(format!(
            "{}: no kernel entry points in the PTX",
            src.display()
        ));
    }
    let real = arch.replace("compute_", "sm_");
    support::assemble(nvcc, &ptx, &real, &out.join(format!("{stem}.{sm}.cubin")))?;
    Ok(format!(
        "{stem}.cu -> {arch} PTX ({entries} kernels) -> {real} cubin: ok"
    ))
}
