//! `turn-manager sandbox` (spec 11): the local Discord-compatible server on its own, for rehearsing with real
//! agents. A guild, a channel, a human operator, one bot account for the manager and one per persona; their
//! tokens (local fakes, worthless anywhere else) are written to `sandbox.json` and printed, with a copy of the
//! personas that carries the new user ids. Then the channel is printed live, lines typed on standard input are
//! posted as the operator, and Ctrl-C (or SIGTERM) stops it.

use crate::core::ids::PersonaId;
use crate::core::persona::Persona;
use anyhow::Context as _;
use local_discord::LocalDiscord;
use local_discord::messages::Draft;
use local_discord::permissions::Permissions;
use local_discord::world::{Author, World};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The port the sandbox listens on unless told otherwise, so that agents' settings survive a restart.
pub const DEFAULT_PORT: u16 = 3710;

#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// The port of 127.0.0.1 to listen on (0: any free port)
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// The folder of persona files to make agent accounts for
    #[arg(long, value_name = "DIR", default_value = "personas")]
    pub personas: PathBuf,
    /// Where sandbox.json and the sandbox copy of the personas (personas/) are written
    #[arg(long, value_name = "DIR", default_value = "sandbox")]
    pub dir: PathBuf,
}

/// A bot account on the local server.
#[derive(Clone, Debug)]
pub struct Account {
    pub user: u64,
    pub token: String,
}

/// The local server set up for rehearsal.
pub struct Sandbox {
    pub server: LocalDiscord,
    pub guild: u64,
    pub channel: u64,
    pub operator: u64,
    pub manager: Account,
    /// Each persona with its own local account.
    pub agents: Vec<(Persona, Account)>,
}

pub fn run(args: &SandboxArgs) -> ExitCode {
    let Some(personas) = super::personas_of(&args.personas, "the sandbox") else { return ExitCode::FAILURE };
    let (port, dir) = (args.port, args.dir.clone());
    super::run_async(async move { serve(port, personas, &dir).await })
}

impl Sandbox {
    /// Starts the server on `port` and sets up the guild, the channel, the operator and the accounts.
    pub async fn start(port: u16, personas: &[Persona]) -> std::io::Result<Self> {
        let server = LocalDiscord::start_on(port).await?;
        let operator = server.create_user("operator");
        let guild = server.create_guild("Sandbox", operator);
        let channel = server.create_channel(guild, "agents");
        let (user, token) = server.create_bot("turn-manager");
        let role = server.create_role(
            guild,
            "turn-manager",
            Permissions::from_bits(crate::discord::permissions_used().bits()),
        );
        server.add_member(guild, user, &[role]);
        let agents = personas
            .iter()
            .map(|persona| {
                let (user, token) = server.create_bot(&persona.display_name);
                server.add_member(guild, user, &[]);
                (persona.clone(), Account { user, token })
            })
            .collect();
        Ok(Self { server, guild, channel, operator, manager: Account { user, token }, agents })
    }

    /// What `sandbox.json` holds: addresses, ids and every token.
    pub fn description(&self, personas_dir: &Path) -> Value {
        let base = self.server.base_url();
        let agents: serde_json::Map<String, Value> = self
            .agents
            .iter()
            .map(|(persona, account)| {
                let value =
                    json!({"name": persona.display_name, "userId": account.user.to_string(), "token": account.token});
                (persona.id.to_string(), value)
            })
            .collect();
        json!({
            "baseUrl": base,
            "apiUrl": format!("{base}/api/v10"),
            "gatewayUrl": self.server.gateway_url(),
            "guildId": self.guild.to_string(),
            "channelId": self.channel.to_string(),
            "operatorId": self.operator.to_string(),
            "manager": {"userId": self.manager.user.to_string(), "token": self.manager.token},
            "agents": agents,
            "personasDir": personas_dir.display().to_string(),
        })
    }

    /// Writes each persona file again into `dir`, as it was but for `discordUserId`, now its local account. The
    /// copies an earlier sandbox wrote there of personas not in this one (`earlier`, their ids, from its
    /// `sandbox.json`) are removed: their accounts are gone with its server, and a bot given the folder would wait
    /// for them. A file there that no sandbox wrote (a person's persona file) is never removed nor overwritten: the
    /// whole copy is refused first.
    pub fn write_personas(&self, dir: &Path, earlier: &[PersonaId]) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        if self.is_persona_folder(dir) {
            anyhow::bail!(
                "the sandbox's copy of the personas would go to {}, the persona folder itself, and overwrite its \
                 files: give another --dir",
                dir.display()
            );
        }
        let earlier_copy = |id: &PersonaId| earlier.contains(id);
        // In any case: a person's `CRITIC.JSON` is read as a persona too (found by a review: only `critic.json` was
        // looked for, and the bot then found critic twice).
        let there: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| entries.filter_map(|entry| entry.ok()?.file_name().into_string().ok()).collect())
            .unwrap_or_default();
        let file_of = |id: &PersonaId| there.iter().find(|name| name.eq_ignore_ascii_case(&format!("{id}.json")));
        if let Some(name) = self.agents.iter().filter(|(p, _)| !earlier_copy(&p.id)).find_map(|(p, _)| file_of(&p.id)) {
            anyhow::bail!(
                "{} is there already and no earlier sandbox wrote it (its sandbox.json does not list it): the \
                 sandbox's copy would overwrite it; give another --dir, or remove that folder if it is an old copy",
                dir.join(name).display()
            );
        }
        let ids: Vec<&PersonaId> = self.agents.iter().map(|(persona, _)| &persona.id).collect();
        for gone in earlier.iter().filter(|id| !ids.contains(id)) {
            let path = dir.join(format!("{gone}.json"));
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("cannot remove the earlier sandbox's {}", path.display()));
                }
                _ => {}
            }
        }
        for (persona, account) in &self.agents {
            let original = std::fs::read(&persona.source).ok();
            let parsed = |bytes: Vec<u8>| serde_json::from_slice(crate::files::without_byte_order_mark(&bytes)).ok();
            let mut value: Value = original.and_then(parsed).unwrap_or_else(|| {
                json!({"id": persona.id.as_str(), "displayName": persona.display_name, "order": persona.order,
                    "turnBehavior": {"timeoutSeconds": persona.timeout_seconds}})
            });
            value["discordUserId"] = json!(account.user.to_string());
            let path = dir.join(format!("{}.json", persona.id));
            let text = serde_json::to_string_pretty(&value)? + "\n";
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(())
    }

    /// Whether `dir` is a folder the personas were read from.
    fn is_persona_folder(&self, dir: &Path) -> bool {
        let canonical = |path: &Path| std::fs::canonicalize(path).ok();
        let Some(dir) = canonical(dir) else { return false };
        let source_folders = self.agents.iter().filter_map(|(persona, _)| Path::new(&persona.source).parent());
        source_folders.filter_map(canonical).any(|folder| folder == dir)
    }

    /// The persona files in the copy folder `dir` that this sandbox did not write: a bot given the folder would
    /// count them among its personas, without an account here.
    fn strangers_in(&self, dir: &Path) -> Vec<String> {
        let ours: Vec<String> = self.agents.iter().map(|(persona, _)| format!("{}.json", persona.id)).collect();
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut names: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| crate::files::is_persona_file_name(name) && !ours.contains(name))
            .collect();
        names.sort();
        names
    }

    /// Posts a line as the operator, with Discord's checks (an over-long line is refused, not cut).
    pub fn operator_says(&self, text: &str) -> Result<u64, String> {
        let author = Author::User(self.operator);
        self.server.with(|w| w.create_message(self.channel, author, Draft::text(text))).map_err(|e| e.message)
    }
}

/// The personas an earlier sandbox's `sandbox.json` lists, if there is one (only ids a persona may have: a key
/// edited into a path names no file of the folder).
fn earlier_agents(file: &Path) -> Vec<PersonaId> {
    let Ok(bytes) = std::fs::read(file) else { return Vec::new() };
    let description: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let agents = description["agents"].as_object().into_iter().flat_map(|agents| agents.keys());
    agents.filter_map(|id| PersonaId::parse(id).ok()).collect()
}

async fn serve(port: u16, personas: Vec<Persona>, dir: &Path) -> anyhow::Result<()> {
    let sandbox = Sandbox::start(port, &personas).await.with_context(|| {
        format!("cannot listen on 127.0.0.1:{port}; is another sandbox running? Pick another port with --port")
    })?;
    let personas_dir = dir.join("personas");
    let file = dir.join("sandbox.json");
    // Found by a review: `--dir personas` wrote sandbox.json among the persona files, which `check` then refused.
    anyhow::ensure!(
        !sandbox.is_persona_folder(dir),
        "sandbox.json would go to {}, a persona folder, where it would be read as a persona file: give another --dir",
        dir.display()
    );
    sandbox.write_personas(&personas_dir, &earlier_agents(&file))?;
    let strangers = sandbox.strangers_in(&personas_dir);
    if !strangers.is_empty() {
        eprintln!(
            "note: {} also holds {}, which this sandbox did not write: `run --personas {}` would count them among its \
             personas, with no account here",
            personas_dir.display(),
            strangers.join(", "),
            personas_dir.display()
        );
    }
    let description = sandbox.description(&personas_dir);
    std::fs::write(&file, serde_json::to_string_pretty(&description)? + "\n")
        .with_context(|| format!("cannot write {}", file.display()))?;
    println!("{}", serde_json::to_string_pretty(&description)?);
    print_instructions(&sandbox, &personas_dir, dir);
    println!("sandbox ready: {}", file.display());

    let printer = tokio::spawn(crate::demo::printer::print_channel(sandbox.server.clone(), sandbox.channel));
    let watcher = tokio::spawn(watch_connections(sandbox.server.clone()));
    // At the end of standard input (none in CI, or a closed pipe) the sandbox goes on until it is stopped.
    let typing = async {
        read_operator_lines(&sandbox).await;
        std::future::pending::<()>().await
    };
    tokio::select! {
        signal = shutdown_signal() => println!("{signal}: the sandbox stops."),
        () = typing => {}
    }
    printer.abort();
    watcher.abort();
    Ok(())
}

fn print_instructions(sandbox: &Sandbox, personas_dir: &Path, dir: &Path) {
    let base = sandbox.server.base_url();
    println!("\nThe manager, against this sandbox:");
    println!(
        "  DISCORD_TOKEN={} turn-manager run --api-base {base} --personas {} --state {}",
        sandbox.manager.token,
        personas_dir.display(),
        dir.join("state").display()
    );
    println!("Each agent, with its own token (examples/agents/ reads these variables):");
    for (persona, account) in &sandbox.agents {
        println!(
            "  {:<10} DISCORD_API_BASE={base} DISCORD_TOKEN={} AGENT_MANAGER_ID={}",
            persona.id.as_str(),
            account.token,
            sandbox.manager.user
        );
    }
    println!("Type a line to post it in #agents as the operator (e.g. !turn start). Ctrl-C stops the sandbox.\n");
}

/// Posts every line of standard input as the operator; returns at its end.
async fn read_operator_lines(sandbox: &Sandbox) {
    // A plain thread, not tokio's blocking pool: a read that never returns must not hold up the shutdown.
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = lines.recv().await {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if let Err(refused) = sandbox.operator_says(line) {
            println!("(not posted: {refused})");
        }
    }
}

/// Says when a bot connects or disconnects, and when one registers its slash commands (the manager does once it
/// is ready for commands).
async fn watch_connections(server: LocalDiscord) {
    let mut known: BTreeMap<u64, (bool, bool)> = BTreeMap::new();
    loop {
        let changed = server.wait_for("a connection change", Duration::from_secs(3600), |w| {
            let now = bots(w);
            (now != known).then_some(now)
        });
        let Ok(now) = changed.await else { continue };
        for (bot, (connected, commands)) in &now {
            let (was_connected, had_commands) = known.get(bot).copied().unwrap_or_default();
            let name = server.with(|w| w.users.get(bot).map(|u| u.name.clone())).unwrap_or_default();
            if *connected != was_connected {
                println!(
                    "{} {name} {}",
                    if *connected { "●" } else { "○" },
                    if *connected { "connected" } else { "disconnected" }
                );
            }
            if *commands && !had_commands {
                println!("● {name} registered its slash commands");
            }
        }
        known = now;
    }
}

/// Every bot: whether it is connected, and whether it has registered commands.
fn bots(w: &World) -> BTreeMap<u64, (bool, bool)> {
    w.users
        .values()
        .filter(|u| u.bot)
        .map(|u| (u.id, (w.is_connected(u.id), w.commands.iter().any(|c| c.application_id == u.id))))
        .collect()
}

/// Waits for Ctrl-C or SIGTERM and says which came.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => "Ctrl-C",
                _ = term.recv() => "SIGTERM",
            };
        }
    }
    match tokio::signal::ctrl_c().await {
        Ok(()) => "Ctrl-C",
        Err(_) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_sandbox_copy_holds_only_this_sandboxs_personas_each_file_as_it_was_but_for_its_account() {
        let (sources, copies) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let write = |name: &str, bytes: &[u8]| std::fs::write(sources.path().join(name), bytes).unwrap();
        write("pm.json", br#"{"id": "pm", "discordUserId": "1"}"#);
        write("dev.json", br#"{"id": "dev", "discordUserId": "2"}"#);
        let first = super::super::personas_of(sources.path(), "the sandbox").unwrap();
        Sandbox::start(0, &first).await.unwrap().write_personas(copies.path(), &[]).unwrap();
        std::fs::write(copies.path().join("notes.json"), "{}").unwrap(); // a person's own file, kept

        // Another sandbox, of other personas, into the same folder; one file saved with a byte-order mark.
        std::fs::remove_dir_all(sources.path()).unwrap();
        std::fs::create_dir(sources.path()).unwrap();
        write(
            "critic.json",
            b"\xEF\xBB\xBF{\"id\": \"critic\", \"discordUserId\": \"3\", \"avatarUrl\": \"https://a/c.png\"}",
        );
        let second = super::super::personas_of(sources.path(), "the sandbox").unwrap();
        let sandbox = Sandbox::start(0, &second).await.unwrap();
        let earlier = [PersonaId::parse("pm").unwrap(), PersonaId::parse("dev").unwrap()];
        sandbox.write_personas(copies.path(), &earlier).unwrap();

        let mut names: Vec<String> =
            std::fs::read_dir(copies.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["critic.json", "notes.json"], "the earlier sandbox's personas are gone with its accounts");
        let copy: Value = serde_json::from_slice(&std::fs::read(copies.path().join("critic.json")).unwrap()).unwrap();
        assert_eq!(copy["avatarUrl"], "https://a/c.png", "the file as it was");
        assert_eq!(copy["discordUserId"], sandbox.agents[0].1.user.to_string(), "with its sandbox account");
        assert_eq!(sandbox.strangers_in(copies.path()), ["notes.json"], "a file no sandbox wrote is pointed out");
        assert!(sandbox.is_persona_folder(sources.path()) && !sandbox.is_persona_folder(copies.path()));

        let refused = sandbox.write_personas(sources.path(), &[]).unwrap_err().to_string();
        assert!(refused.contains("the persona folder itself"), "{refused}");
        let source = std::fs::read(sources.path().join("critic.json")).unwrap();
        assert!(source.starts_with(b"\xEF\xBB\xBF"), "the source left as it was");

        // A persona folder of a person's own, not the source: its critic.json no sandbox wrote is kept as it is.
        let theirs = tempfile::tempdir().unwrap();
        std::fs::write(theirs.path().join("critic.json"), "{\"id\": \"critic\", \"discordUserId\": \"77\"}").unwrap();
        let refused = sandbox.write_personas(theirs.path(), &[]).unwrap_err().to_string();
        assert!(refused.contains("no earlier sandbox wrote it"), "{refused}");
        assert!(std::fs::read_to_string(theirs.path().join("critic.json")).unwrap().contains("\"77\""));

        // Named in capitals, which the bot reads as a persona file too (found by a review).
        let shouting = tempfile::tempdir().unwrap();
        std::fs::write(shouting.path().join("CRITIC.JSON"), "{\"id\": \"critic\", \"discordUserId\": \"77\"}").unwrap();
        let refused = sandbox.write_personas(shouting.path(), &[]).unwrap_err().to_string();
        assert!(refused.contains("CRITIC.JSON is there already"), "{refused}");
        std::fs::write(copies.path().join("QA.JSON"), "{}").unwrap();
        assert_eq!(sandbox.strangers_in(copies.path()), ["QA.JSON", "notes.json"]);
    }
}
