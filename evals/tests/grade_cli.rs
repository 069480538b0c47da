//! `ponder-eval grade` end to end: the real binary, on a file and on stdin.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_ponder-eval");

const PAIRS: &str = concat!(
    r#"{"gold": "\\frac{1}{2}", "pred": "<think>0.4?</think> The answer is $\\boxed{0.5}$."}"#,
    "\n",
    r#"{"gold": "(1, 2)", "pred": "\\boxed{(2, 1)}"}"#,
    "\n",
);

fn check_output(stdout: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
    let lines: Vec<serde_json::Value> = std::str::from_utf8(stdout)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["equivalent"], true);
    assert_eq!(lines[0]["extracted"], "0.5");
    assert_eq!(lines[0]["normalized_gold"], "\\frac{1}{2}");
    assert_eq!(lines[1]["equivalent"], false);
    assert_eq!(lines[1]["normalized_pred"], "(2,1)");
    Ok(())
}

#[test]
fn grades_a_file() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("pairs.jsonl");
    std::fs::write(&path, PAIRS)?;
    let out = Command::new(BIN).arg("grade").arg(&path).output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_output(&out.stdout)?;
    assert!(String::from_utf8_lossy(&out.stderr).contains("graded 2 pairs: 1 equivalent"));
    Ok(())
}

#[test]
fn grades_stdin() -> Result<(), Box<dyn std::error::Error>> {
    let mut child = Command::new(BIN)
        .args(["grade", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(PAIRS.as_bytes())?;
    let out = child.wait_with_output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_output(&out.stdout)
}

#[test]
fn bad_input_fails_with_the_line_number() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"gold\": \"1\", \"pred\": \"1\"}\n{\"gold\": \"1\"}\n",
    )?;
    let out = Command::new(BIN).arg("grade").arg(&path).output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2: missing `pred`"));
    let missing = Command::new(BIN)
        .args(["grade", "/nonexistent/pairs.jsonl"])
        .output()?;
    assert!(!missing.status.success());
    Ok(())
}
