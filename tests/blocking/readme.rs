//! README's "Use it in your project": its `[dependencies]` lines and its smallest
//! `main.rs`, as written there, compile as a project of their own (with `redismutex` taken
//! by path): `cargo check`, which checks every type and borrow and links nothing. The
//! project is written under the target folder and checked `--offline`, from the crates
//! the crate's own build fetched; it is not run (it needs a server on 6379).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The first fenced block of `language` after the heading `heading` in `text`.
fn block_after<'a>(text: &'a str, heading: &str, language: &str) -> &'a str {
    let section = &text[text.find(heading).expect("the heading is in README.md")..];
    let fence = format!("```{language}\n");
    let start = section.find(&fence).expect("the block is in the section") + fence.len();
    let end = section[start..].find("```").expect("the block ends") + start;
    &section[start..end]
}

#[test]
fn the_readme_dependencies_and_main_compile_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    let heading = "## Use it in your project";
    let dependencies = block_after(&readme, heading, "toml");
    let main = block_after(&readme, heading, "rust,no_run");
    let published = dependencies
        .lines()
        .find(|line| line.starts_with("redismutex = "))
        .expect("README names the crate in its dependencies");
    let by_path = format!("redismutex = {{ path = {root:?} }}");
    let manifest = format!(
        "[package]\nname = \"readme-user\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n{}\n[workspace]\n",
        dependencies.replace(published, &by_path)
    );
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let project = target.join("readme-user");
    std::fs::create_dir_all(project.join("src")).expect("make the project");
    std::fs::write(project.join("Cargo.toml"), manifest).expect("write the manifest");
    std::fs::write(project.join("src/main.rs"), main).expect("write main.rs");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["check", "--quiet", "--offline", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", project.join("target"))
        .output()
        .expect("run cargo");
    assert!(
        output.status.success(),
        "README's project does not compile:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
