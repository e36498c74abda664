//! Reads the configuration file and the persona folder from disk and hands their text to the core.
//! I/O failures are reported as problems too, so `check` and start-up show everything wrong in one list.

use crate::core::config::Config;
use crate::core::persona::PersonaCatalog;
use crate::core::problems::{Problem, Problems, Severity};
use std::path::{Path, PathBuf};

/// The configuration file looked for when none is named.
pub const DEFAULT_CONFIG_FILE: &str = "turn-manager.json";

/// Everything the bot is configured with, validated.
#[derive(Clone, Debug)]
pub struct Setup {
    pub config: Config,
    /// The configuration file read, if one was.
    pub config_file: Option<PathBuf>,
    pub personas: PersonaCatalog,
    pub personas_dir: PathBuf,
    /// Warnings found on the way (typos of known fields...).
    pub warnings: Problems,
}

/// Where to read from; `None` fields use the defaults (and the configuration's folders).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub config_file: Option<PathBuf>,
    pub personas_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
}

/// Reads and validates the configuration and every persona file; all problems come back at once.
pub fn load_setup(sources: &Sources) -> Result<Setup, Problems> {
    let mut problems = Vec::new();
    let (config_path, explicit) = match &sources.config_file {
        Some(path) => (path.clone(), true),
        None => (PathBuf::from(DEFAULT_CONFIG_FILE), false),
    };
    let (mut config, config_text, config_file) = match read_text(&config_path) {
        Ok(text) => {
            // What could be read is still checked against the personas below, so that every problem shows at once.
            let (mut config, found) = Config::parse_partly(&display(&config_path), &text);
            problems.extend(found);
            folders_beside(&mut config, &config_path, &text);
            (config, text, Some(config_path.clone()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => (Config::default(), String::new(), None),
        Err(e) => {
            problems.push(file_problem(&config_path, format!("cannot be read: {e}")));
            (Config::default(), String::new(), None)
        }
    };
    if let Some(dir) = &sources.personas_dir {
        config.personas_dir = dir.clone();
    }
    if let Some(dir) = &sources.state_dir {
        config.state_dir = dir.clone();
    }

    let personas_dir = config.personas_dir.clone();
    let (mut catalog, mut partly) = (None, None);
    match read_persona_files(&personas_dir) {
        Err(problem) => problems.push(said_where_looked_for(problem, &personas_dir)),
        Ok((files, unreadable)) if files.is_empty() && !unreadable.is_empty() => problems.extend(unreadable),
        Ok((files, _)) if files.is_empty() => problems.push(file_problem(
            &personas_dir,
            "has no persona files (*.json); add one per agent, see the README".into(),
        )),
        // The files that could be read are checked too, so that every problem shows at once.
        Ok((files, unreadable)) => {
            problems.extend(unreadable);
            match PersonaCatalog::from_files(&files) {
                Ok((found, warnings)) => {
                    problems.extend(warnings.0);
                    catalog = Some(found);
                }
                Err((found, readable)) => {
                    problems.extend(found.0);
                    // The configuration is still checked against what could be read: every problem at once.
                    partly = Some(readable);
                }
            }
        }
    }
    if let (Some(catalog), Some(file)) = (catalog.as_ref().or(partly.as_ref()), &config_file) {
        problems.extend(config.check_against(&display(file), &config_text, catalog));
    }

    let mut problems = Problems(problems);
    problems.sort_by_place();
    match catalog {
        Some(personas) if !problems.has_errors() => {
            Ok(Setup { config, config_file, personas, personas_dir, warnings: problems })
        }
        _ => Err(problems),
    }
}

/// The default persona folder is looked for in the working folder: where it is missing, the command was likely run
/// from elsewhere (found by a newcomer: only "cannot be read as a folder" was said). A folder named by a flag or the
/// configuration is looked for where it says.
fn said_where_looked_for(mut problem: Problem, personas_dir: &Path) -> Problem {
    if personas_dir == Config::default().personas_dir && !personas_dir.exists() {
        let folder = personas_dir.display();
        problem.message.push_str(&format!("; run it from the folder holding {folder}/, or pass --personas DIR"));
    }
    problem
}

/// Folders the configuration file names are relative to the file, as a reader of the file takes them (the
/// defaults, and the command line's, stay relative to the working folder).
fn folders_beside(config: &mut Config, config_path: &Path, text: &str) {
    let Some(base) = config_path.parent().filter(|base| !base.as_os_str().is_empty()) else { return };
    let written = serde_json::from_str::<serde_json::Value>(text).unwrap_or_default();
    for (key, folder) in [("personasDir", &mut config.personas_dir), ("stateDir", &mut config.state_dir)] {
        if written.get(key).is_some() && folder.is_relative() {
            *folder = base.join(&*folder);
        }
    }
}

/// Files as (path, text).
pub type Texts = Vec<(String, String)>;

/// Every `*.json` file of a folder as (path, text), sorted by name, and a problem for each one that cannot be read:
/// a folder, a broken link or anything else named `*.json` too, which would otherwise leave a persona out unsaid.
/// Hidden names are not persona files (an editor's lock, `.#pm.json`, is a broken link). The error is the folder's.
/// The extension is read in any case (`PM.JSON`, as some systems save it): before, such a file was passed over unsaid.
pub fn read_persona_files(dir: &Path) -> Result<(Texts, Vec<Problem>), Problem> {
    let entries = std::fs::read_dir(dir).map_err(|e| file_problem(dir, format!("cannot be read as a folder: {e}")))?;
    let (mut paths, mut unreadable) = (Vec::new(), Vec::new());
    for entry in entries {
        match entry {
            Ok(entry) if is_persona_file_name(&entry.file_name().to_string_lossy()) => paths.push(entry.path()),
            Ok(_) => {}
            Err(e) => unreadable.push(file_problem(dir, format!("an entry of this folder cannot be read: {e}"))),
        }
    }
    paths.sort();
    let mut files = Vec::new();
    for path in paths {
        // Followed if a link; a broken one is said by the read below.
        match std::fs::metadata(&path) {
            Ok(what) if what.is_dir() => {
                unreadable.push(file_problem(&path, "is a folder, not a persona file".into()));
                continue;
            }
            // A pipe or a device would block the read, or never end.
            Ok(what) if !what.is_file() => {
                unreadable.push(file_problem(&path, "is not a regular file".into()));
                continue;
            }
            _ => {}
        }
        match read_text(&path) {
            Ok(text) => files.push((display(&path), text)),
            Err(e) => unreadable.push(file_problem(&path, format!("cannot be read: {e}"))),
        }
    }
    Ok((files, unreadable))
}

/// Whether a file of a persona folder is read as a persona: `*.json` in any case, not hidden.
pub fn is_persona_file_name(name: &str) -> bool {
    Path::new(name).extension().is_some_and(|ext| ext.eq_ignore_ascii_case("json")) && !name.starts_with('.')
}

/// A file's bytes without the UTF-8 byte-order mark some editors (Notepad) put first: JSON has none, and a file a
/// person saved so (a configuration, a persona, a session file edited by hand) is read as they meant it.
pub fn without_byte_order_mark(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// A file's text: UTF-8, with any byte-order mark taken off.
fn read_text(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    let bytes = without_byte_order_mark(&bytes);
    String::from_utf8(bytes.to_vec()).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is not UTF-8 text (line {line}, byte {at}); save it as UTF-8"),
        )
    })
}

fn file_problem(path: &Path, message: String) -> Problem {
    Problem { severity: Severity::Error, file: display(path), line: None, field: String::new(), message }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn missing_default_config_uses_defaults_but_a_named_one_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "pm.json", r#"{"id": "pm", "discordUserId": "1312000000000000001"}"#);
        let mut sources = Sources { personas_dir: Some(dir.path().into()), ..Sources::default() };
        let setup = load_setup(&sources).unwrap();
        assert_eq!(setup.personas.all().len(), 1);
        assert!(setup.config_file.is_none());

        sources.config_file = Some(dir.path().join("nope.json"));
        let problems = load_setup(&sources).unwrap_err();
        assert!(problems.to_string().contains("nope.json: cannot be read"), "{problems}");
    }

    #[test]
    fn config_and_persona_problems_are_reported_together() {
        let dir = tempfile::tempdir().unwrap();
        let personas = dir.path().join("personas");
        std::fs::create_dir(&personas).unwrap();
        write(&personas, "a.json", r#"{"id": "A"}"#);
        write(&personas, "notes.txt", "not a persona");
        write(dir.path(), "c.json", r#"{"announceTimeouts": "yes"}"#);
        let sources = Sources {
            config_file: Some(dir.path().join("c.json")),
            personas_dir: Some(personas),
            ..Sources::default()
        };
        let problems = load_setup(&sources).unwrap_err();
        assert!(problems.errors().any(|p| p.file.ends_with("c.json") && p.field == "announceTimeouts"));
        assert!(problems.errors().any(|p| p.file.ends_with("a.json")));
        assert!(!problems.to_string().contains("notes.txt"));
    }

    /// Found by an input review: they were relative to the working folder, so `run --config /etc/tm/c.json` read
    /// the personas of whatever folder it was started in.
    #[test]
    fn folders_the_configuration_names_are_relative_to_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir_all(etc.join("agents")).unwrap();
        write(&etc.join("agents"), "pm.json", r#"{"id": "pm", "discordUserId": "1312000000000000001"}"#);
        write(&etc, "c.json", r#"{"personasDir": "agents", "stateDir": "sessions"}"#);
        let sources = Sources { config_file: Some(etc.join("c.json")), ..Sources::default() };
        let setup = load_setup(&sources).unwrap_or_else(|p| panic!("{p}"));
        assert_eq!(setup.personas_dir, etc.join("agents"));
        assert_eq!(setup.config.state_dir, etc.join("sessions"));
        assert_eq!(setup.personas.all().len(), 1);
        // Absolute folders stay as written; the command line's win, relative to the working folder.
        let absolute = etc.join("agents").display().to_string();
        write(&etc, "c.json", &serde_json::json!({"personasDir": absolute}).to_string());
        assert_eq!(load_setup(&sources).unwrap().personas_dir, etc.join("agents"));
        let flags = Sources { state_dir: Some("here".into()), ..sources.clone() };
        write(&etc, "c.json", r#"{"personasDir": "agents", "stateDir": "sessions"}"#);
        assert_eq!(load_setup(&flags).unwrap().config.state_dir, PathBuf::from("here"));
        // Not named in the file: the default, relative to the working folder.
        write(&etc, "c.json", r#"{"personasDir": "agents"}"#);
        assert_eq!(load_setup(&sources).unwrap().config.state_dir, PathBuf::from("state"));
    }

    #[test]
    fn empty_or_missing_persona_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let sources = Sources { personas_dir: Some(dir.path().into()), ..Sources::default() };
        assert!(load_setup(&sources).unwrap_err().to_string().contains("has no persona files"));
        let sources = Sources { personas_dir: Some(dir.path().join("missing")), ..Sources::default() };
        assert!(load_setup(&sources).unwrap_err().to_string().contains("cannot be read as a folder"));
    }

    #[test]
    fn a_file_with_a_byte_order_mark_is_read_and_one_not_utf8_is_reported_beside_every_other_problem() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            b"\xEF\xBB\xBF{\"id\": \"pm\", \"discordUserId\": \"1312000000000000001\"}",
        )
        .unwrap();
        std::fs::write(dir.path().join("b.json"), b"{\"id\": \"dev\",\n \"displayName\": \"D\xE9v\"}").unwrap();
        write(dir.path(), "c.json", r#"{"id": "critic"}"#);
        let sources = Sources { personas_dir: Some(dir.path().into()), ..Sources::default() };
        let problems = load_setup(&sources).unwrap_err().to_string();
        assert!(!problems.contains("a.json"), "the mark is taken off: {problems}");
        assert!(problems.contains("b.json: cannot be read: it is not UTF-8 text (line 2"), "{problems}");
        assert!(
            problems.contains("c.json") && problems.contains("discordUserId"),
            "the others are checked too: {problems}"
        );
    }

    #[test]
    fn a_persona_file_named_in_capitals_is_read() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "PM.JSON", r#"{"id": "pm", "discordUserId": "1312000000000000001"}"#);
        write(dir.path(), "dev.Json", r#"{"id": "dev", "discordUserId": "1312000000000000002"}"#);
        write(dir.path(), "notes.txt", "not a persona");
        write(dir.path(), "café.txt", "not a persona either, and a name to cut inside a character");
        write(dir.path(), "日本.md", "");
        let (files, problems) = read_persona_files(dir.path()).unwrap();
        let names: Vec<&str> = files.iter().map(|(path, _)| path.rsplit('/').next().unwrap()).collect();
        assert_eq!(names, ["PM.JSON", "dev.Json"]);
        assert!(problems.is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_broken_link_or_a_folder_named_as_a_persona_file_is_reported_not_left_out_unsaid() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "pm.json", r#"{"id": "pm", "discordUserId": "1312000000000000001"}"#);
        std::os::unix::fs::symlink("/nonexistent/dev.json", dir.path().join("dev.json")).unwrap();
        std::fs::create_dir(dir.path().join("critic.json")).unwrap();
        std::fs::create_dir(dir.path().join("drafts")).unwrap();
        std::os::unix::fs::symlink("someone@host.1234", dir.path().join(".#pm.json")).unwrap(); // Emacs's lock
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("qa.json"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let sources = Sources { personas_dir: Some(dir.path().into()), ..Sources::default() };
        let problems = load_setup(&sources).unwrap_err().to_string();
        assert!(problems.contains("dev.json: cannot be read"), "{problems}");
        assert!(problems.contains("critic.json: is a folder, not a persona file"), "{problems}");
        assert!(problems.contains("qa.json: is not a regular file"), "not read, which would block: {problems}");
        assert!(!problems.contains("drafts") && !problems.contains("pm.json"), "{problems}");
    }

    #[test]
    fn configured_roster_naming_an_unknown_persona_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let personas = dir.path().join("personas");
        std::fs::create_dir(&personas).unwrap();
        write(&personas, "pm.json", r#"{"id": "pm", "discordUserId": "1312000000000000001"}"#);
        write(dir.path(), "c.json", r#"{"channels": [{"channelId": "9", "roster": ["pm", "qa"]}]}"#);
        let sources = Sources {
            config_file: Some(dir.path().join("c.json")),
            personas_dir: Some(personas),
            ..Sources::default()
        };
        let problems = load_setup(&sources).unwrap_err();
        assert!(problems.to_string().contains("\"qa\""), "{problems}");
    }

    /// One persona file with a problem of its own hides nothing else (found by a review: the configuration was no
    /// longer checked against the personas, nor was an id used twice reported): and the broken file's persona, named
    /// by the configuration, is not reported unknown.
    #[test]
    fn a_bad_persona_file_hides_neither_the_configurations_problems_nor_an_id_used_twice() {
        let dir = tempfile::tempdir().unwrap();
        let personas = dir.path().join("personas");
        std::fs::create_dir(&personas).unwrap();
        write(&personas, "pm.json", r#"{"id": "pm", "discordUserId": "1312000000000000001"}"#);
        write(
            &personas,
            "dev.json",
            r#"{"id": "dev", "discordUserId": "1312000000000000002", "turnBehavior": {"timeoutSeconds": 0}}"#,
        );
        write(&personas, "dev2.json", r#"{"id": "dev", "discordUserId": "1312000000000000003"}"#);
        write(dir.path(), "c.json", r#"{"channels": [{"channelId": "9", "roster": ["pm", "dev", "qa"]}]}"#);
        let sources = Sources {
            config_file: Some(dir.path().join("c.json")),
            personas_dir: Some(personas),
            ..Sources::default()
        };
        let problems = load_setup(&sources).unwrap_err().to_string();
        assert!(problems.contains("dev.json") && problems.contains("timeoutSeconds"), "{problems}");
        assert!(problems.contains("c.json") && problems.contains("\"qa\""), "the roster is checked: {problems}");
        assert!(!problems.contains("\"dev\", which"), "dev's file exists, broken: {problems}");
        assert!(problems.contains("already used by"), "the id used twice: {problems}");
        assert!(problems.contains("known: dev, pm"), "each id once: {problems}");
    }
}
