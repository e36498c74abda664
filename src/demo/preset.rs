//! Presets for the demo (`demo --preset NAME`): `examples/presets/<name>/` holds a `turn-manager.json` and a
//! `personas/` folder. They are read as `run` reads a set-up (the same validation, every problem at once), and the
//! demo then overrides only what a demo must: short turns and its own state folder.

use crate::core::config::Config;
use crate::core::persona::Persona;
use crate::core::problems::Problems;
use crate::files::{self, DEFAULT_CONFIG_FILE, Sources};
use std::path::{Path, PathBuf};

/// Where presets are looked for, relative to the working directory (like `personas/`).
pub const PRESETS_DIR: &str = "examples/presets";
/// A preset's persona folder, inside its own folder.
const PERSONAS_SUBDIR: &str = "personas";

/// A preset, read and validated.
#[derive(Clone, Debug)]
pub struct Preset {
    pub name: String,
    pub dir: PathBuf,
    /// The configuration exactly as the preset's file gives it.
    pub config: Config,
    pub personas: Vec<Persona>,
    /// Warnings found on the way (typos of known fields...); the preset still loads.
    pub warnings: Problems,
}

#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    #[error("there is no preset \"{name}\" in {}; {}", root.display(), found_list(found))]
    Unknown { name: String, root: PathBuf, found: Vec<String> },
    #[error("the preset \"{name}\" has problems:\n{problems}")]
    Invalid { name: String, problems: Problems },
}

fn found_list(found: &[String]) -> String {
    if found.is_empty() {
        format!(
            "no presets were found there (a preset is a folder with a {DEFAULT_CONFIG_FILE}); run the demo from \
                 the project's folder"
        )
    } else {
        format!("the presets found are: {}", found.join(", "))
    }
}

/// The presets in `root`: its folders that hold a `turn-manager.json`, by name.
pub fn available(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join(DEFAULT_CONFIG_FILE).is_file())
        .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// Reads the preset `name` of `root`: its configuration (through `Config::parse`) and its personas, checked
/// against each other.
pub fn load(root: &Path, name: &str) -> Result<Preset, PresetError> {
    let found = available(root);
    // Only a name listed in the folder: never a path that leads out of it.
    if !found.iter().any(|f| f == name) {
        return Err(PresetError::Unknown { name: name.to_owned(), root: root.to_owned(), found });
    }
    let dir = root.join(name);
    let sources = Sources {
        config_file: Some(dir.join(DEFAULT_CONFIG_FILE)),
        personas_dir: Some(dir.join(PERSONAS_SUBDIR)),
        state_dir: None,
    };
    let setup =
        files::load_setup(&sources).map_err(|problems| PresetError::Invalid { name: name.to_owned(), problems })?;
    Ok(Preset {
        name: name.to_owned(),
        dir,
        config: setup.config,
        personas: setup.personas.all().to_vec(),
        warnings: setup.warnings,
    })
}

/// What a demo must change in any configuration: every turn `timeout_seconds` long (the default and every
/// persona's own), and sessions saved in `state_dir`. Everything else (signal rules, templates...) is played as
/// configured.
pub fn for_demo(
    config: Config,
    personas: Vec<Persona>,
    timeout_seconds: u32,
    state_dir: &Path,
) -> (Config, Vec<Persona>) {
    let config = Config { default_timeout_seconds: timeout_seconds, state_dir: state_dir.to_owned(), ..config };
    let personas = personas.into_iter().map(|p| Persona { timeout_seconds: Some(timeout_seconds), ..p }).collect();
    (config, personas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::signals::Action;

    #[test]
    fn an_unknown_preset_is_refused_with_the_presets_found() {
        let root = tempfile::tempdir().unwrap();
        for name in ["chorus", "review-workflow"] {
            std::fs::create_dir(root.path().join(name)).unwrap();
            std::fs::write(root.path().join(name).join(DEFAULT_CONFIG_FILE), "{}").unwrap();
        }
        std::fs::create_dir(root.path().join("notes")).unwrap();
        let message = load(root.path(), "reveiw").unwrap_err().to_string();
        assert!(message.starts_with("there is no preset \"reveiw\" in "), "{message}");
        assert!(message.ends_with("the presets found are: chorus, review-workflow"), "{message}");
    }

    #[test]
    fn a_name_is_never_a_path_out_of_the_presets_folder() {
        let root = tempfile::tempdir().unwrap();
        let presets = root.path().join("presets");
        std::fs::create_dir(&presets).unwrap();
        std::fs::write(root.path().join(DEFAULT_CONFIG_FILE), "{}").unwrap();
        for name in ["..", "../presets", "/"] {
            assert!(matches!(load(&presets, name), Err(PresetError::Unknown { .. })), "{name}");
        }
    }

    #[test]
    fn no_presets_folder_says_where_to_run_from() {
        let root = tempfile::tempdir().unwrap();
        let message = load(&root.path().join("missing"), "review-workflow").unwrap_err().to_string();
        assert!(message.contains("no presets were found there"), "{message}");
    }

    #[test]
    fn a_preset_with_a_bad_persona_reports_its_problems() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("broken");
        std::fs::create_dir_all(dir.join(PERSONAS_SUBDIR)).unwrap();
        std::fs::write(dir.join(DEFAULT_CONFIG_FILE), "{}").unwrap();
        std::fs::write(dir.join(PERSONAS_SUBDIR).join("a.json"), r#"{"id": "A"}"#).unwrap();
        let Err(PresetError::Invalid { name, problems }) = load(root.path(), "broken") else { panic!("invalid") };
        assert_eq!(name, "broken");
        assert!(problems.errors().any(|p| p.file.ends_with("a.json")), "{problems}");
    }

    #[test]
    fn the_review_workflow_preset_loads_with_its_routes() {
        let preset = load(Path::new(PRESETS_DIR), "review-workflow").unwrap();
        let ids: Vec<&str> = preset.personas.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["developer", "critic", "auditor"]);
        let ready = preset.config.signals.rules().iter().find(|r| r.name == "READY_FOR_REVIEW").unwrap();
        assert!(matches!(&ready.action, Action::Route { to, .. } if to.as_str() == "critic"));
    }

    #[test]
    fn the_demo_shortens_every_turn_and_keeps_the_rules() {
        let preset = load(Path::new(PRESETS_DIR), "review-workflow").unwrap();
        let rules = preset.config.signals.rules().len();
        let (config, personas) = for_demo(preset.config, preset.personas, 3, Path::new("/tmp/demo-state"));
        assert_eq!(config.default_timeout_seconds, 3);
        assert_eq!(config.state_dir, Path::new("/tmp/demo-state"));
        assert_eq!(config.signals.rules().len(), rules);
        assert!(personas.iter().all(|p| p.timeout_seconds == Some(3)));
    }
}
