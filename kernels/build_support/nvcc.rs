//! Finding `nvcc` and compiling one `.cu` file to PTX: the one copy of this logic, shared by
//! `build.rs` (feature `cuda`) and the PTX compile test (`tests/nvcc.rs`, via `#[path]`).
//!
//! Search order for nvcc (the first that exists wins):
//! 1. `$NVCC` (a path to the binary);
//! 2. `$CUDA_HOME/bin/nvcc`, then `$CUDA_PATH/bin/nvcc`;
//! 3. the PyPI wheels `scripts/setup-cuda.sh` installs: `$PONDER_CUDA_DIR/nvidia/cu13/bin/nvcc`,
//!    else `kernels/.cuda/nvidia/cu13/bin/nvcc`;
//! 4. `nvcc` on `PATH`, then `/usr/local/cuda/bin/nvcc`.
//!
//! The wheels' nvcc needs no extra flags: its `nvcc.profile` points at `../nvvm/bin/cicc`,
//! `../nvvm/libdevice` and `../include` (with `../include/cccl`), and it preprocesses with the
//! system `gcc`. PTX is generated for virtual architectures (`compute_80`, `compute_90`), which
//! the driver JIT-compiles for the GPU at load time; PTX from nvcc 13.0 (PTX ISA 9.0) loads on
//! drivers >= 580 (CUDA 13.0), so the wheels are pinned to 13.0.x.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Architectures every kernel is compiled for: (suffix of the PTX constant, nvcc `-arch`).
pub(crate) const ARCHS: [(&str, &str); 2] = [("sm80", "compute_80"), ("sm90", "compute_90")];

/// Environment variables that change which nvcc is found.
pub(crate) const ENV_VARS: [&str; 5] =
    ["NVCC", "CUDA_HOME", "CUDA_PATH", "PONDER_CUDA_DIR", "PATH"];

/// Where `scripts/setup-cuda.sh` puts nvcc under its install directory.
const WHEEL_NVCC: &str = "nvidia/cu13/bin/nvcc";

/// The nvcc to use, or `None` with the places that were searched.
pub(crate) fn find_nvcc(kernels_dir: &Path) -> Result<PathBuf, Vec<PathBuf>> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut candidates = Vec::new();
    if let Some(nvcc) = env("NVCC") {
        candidates.push(PathBuf::from(nvcc));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env(var) {
            candidates.push(Path::new(&home).join("bin/nvcc"));
        }
    }
    match env("PONDER_CUDA_DIR") {
        Some(dir) => candidates.push(Path::new(&dir).join(WHEEL_NVCC)),
        None => candidates.push(kernels_dir.join(".cuda").join(WHEEL_NVCC)),
    }
    if let Some(path) = env("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("nvcc")));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    match candidates.iter().find(|c| c.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(candidates),
    }
}

/// Every `.cu` file in `kernels/cuda`, sorted by name.
pub(crate) fn cu_files(kernels_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(kernels_dir.join("cuda"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "cu") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Compiles `src` to PTX for `arch` (e.g. `compute_90`) at `out`. With `strict`, warnings are
/// errors (the CI test); the build script tolerates them. The error carries nvcc's output.
pub(crate) fn compile_ptx(
    nvcc: &Path,
    src: &Path,
    arch: &str,
    out: &Path,
    strict: bool,
) -> Result<(), String> {
    let include = src.parent().unwrap_or(Path::new("."));
    let mut cmd = Command::new(nvcc);
    cmd.arg("--ptx")
        .arg(format!("-arch={arch}"))
        .args(["-std=c++17", "-O3", "--restrict"])
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(out)
        .arg(src);
    if strict {
        cmd.args(["-Werror", "all-warnings"]);
    }
    run(&mut cmd)
}

/// Assembles `ptx` for the real GPU `sm` (e.g. `sm_90`) with `ptxas` next to nvcc, which
/// catches what PTX generation alone does not (invalid PTX, resource limits).
pub(crate) fn assemble(nvcc: &Path, ptx: &Path, sm: &str, out: &Path) -> Result<(), String> {
    let ptxas = nvcc.with_file_name("ptxas");
    let ptxas = if ptxas.is_file() {
        ptxas
    } else {
        PathBuf::from("ptxas")
    };
    run(Command::new(ptxas)
        .arg(format!("-arch={sm}"))
        .arg("-o")
        .arg(out)
        .arg(ptx))
}

fn run(cmd: &mut Command) -> Result<(), String> {
    match cmd.output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(format!("could not run {cmd:?}: {e}")),
    }
}
