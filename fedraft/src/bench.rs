//! `fedraft bench put`: the API load tool (fedraft vs etcd's JSON gateway, A/B interleaved).
//! Not built yet: the verb exists so scripts can call it, and says so with exit code 2.

use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum BenchCmd {
    /// PUT small objects at 1/16/64 concurrent clients against fedraft and etcd (not built yet).
    Put,
}

pub async fn run(cmd: BenchCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCmd::Put => {
            eprintln!("fedraft bench put: not built yet");
            Ok(ExitCode::from(2))
        }
    }
}
