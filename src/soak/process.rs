//! The bot under test as a process: `turn-manager run --api-base <local server>` started from this very binary,
//! killed with SIGKILL (no chance to flush anything) or stopped with SIGTERM (graceful), its log appended to a file.

use super::stage::SoakStage;
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

pub struct BotProcess {
    child: Child,
}

impl BotProcess {
    /// Starts `exe run` against the stage's server with its files; the log goes to the end of `log`.
    pub fn spawn(exe: &Path, soak: &SoakStage, log: &Path) -> anyhow::Result<Self> {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening the bot's log {}", log.display()))?;
        let mut command = Command::new(exe);
        for name in crate::cli::RUN_ENVIRONMENT {
            command.env_remove(name);
        }
        let child = command
            .arg("run")
            .arg("--api-base")
            .arg(soak.stage.server.base_url())
            .arg("--config")
            .arg(&soak.config_file)
            .arg("--personas")
            .arg(&soak.personas_dir)
            .arg("--state")
            .arg(&soak.state_dir)
            .env("DISCORD_TOKEN", &soak.stage.bot_token)
            .env("RUST_LOG", "info,serenity=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            // Whatever happens to the soak, the bot does not outlive it.
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} run", exe.display()))?;
        Ok(Self { child })
    }

    /// SIGKILL, then waits for the process to be gone.
    pub async fn kill(mut self) -> anyhow::Result<()> {
        self.child.start_kill().context("sending SIGKILL to the bot")?;
        self.child.wait().await.context("waiting for the killed bot")?;
        Ok(())
    }

    /// SIGTERM, then waits up to `patience` for a graceful exit; false (and SIGKILL) if it did not come.
    pub async fn terminate(mut self, patience: Duration) -> anyhow::Result<bool> {
        let Some(pid) = self.child.id() else { return Ok(true) };
        let sent = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
        anyhow::ensure!(sent.success(), "could not send SIGTERM to the bot ({pid})");
        match tokio::time::timeout(patience, self.child.wait()).await {
            Ok(status) => Ok(status?.success()),
            Err(_) => {
                self.kill().await?;
                Ok(false)
            }
        }
    }

    /// Whether the process has ended by itself (it should not).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// The log file of the bot's runs: one file, every start appended.
pub fn log_path(work: &Path) -> PathBuf {
    work.join("bot.log")
}
