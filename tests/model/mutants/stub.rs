//! TEMPORARY: the signatures of `differential` until it lands (deleted then).
#![allow(dead_code)]

#[derive(Clone, Debug)]
pub struct Scripts;

impl Scripts {
    pub fn from_dir() -> Scripts {
        Scripts
    }
    pub fn mutated(&self, _file: &str, _from: &str, _to: &str) -> Result<Scripts, String> {
        Ok(Scripts)
    }
}

pub fn check_on(
    _conn: &mut redis::Connection,
    _scripts: &Scripts,
    _cases: u32,
    _seed: u64,
) -> Result<u64, String> {
    Err("stub; shrunk to 3 steps:".to_owned())
}
