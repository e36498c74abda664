//! The shipped presets (`examples/presets/*`) pass `turn-manager check` with their own personas (found by their
//! `personasDir`), and every rule they define is reported; a preset whose rule routes to a persona that does not
//! exist fails, naming the file, the field and the persona.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `check` of `config` run in `dir`, with `--personas` when given (else the configuration's `personasDir`).
fn check(dir: &Path, config: &Path, personas: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turn-manager"));
    command.arg("check").arg("--config").arg(config);
    if let Some(personas) = personas {
        command.arg("--personas").arg(personas);
    }
    command.current_dir(dir).output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn presets_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/presets")
}

/// Every folder under `examples/presets`, sorted.
fn presets() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(presets_dir())
        .expect("examples/presets exists")
        .map(|entry| entry.expect("a readable entry").path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Each rule's name and action, as the preset's configuration lists them.
fn rules_of(config: &Path) -> Vec<(String, String)> {
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(config).unwrap()).unwrap();
    value["signals"]["rules"]
        .as_array()
        .unwrap_or_else(|| panic!("{} lists no signals.rules", config.display()))
        .iter()
        .map(|rule| (rule["name"].as_str().unwrap().to_owned(), rule["action"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn the_four_presets_of_the_spec_are_shipped() {
    let names: Vec<String> = presets().iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for expected in ["chorus", "review-workflow", "round-robin", "xml-signals"] {
        assert!(names.iter().any(|n| n == expected), "no preset {expected} in {names:?}");
    }
    for preset in ["chorus", "round-robin", "xml-signals"] {
        let readme = presets_dir().join(preset).join("README.md");
        let readme = std::fs::read_to_string(&readme).unwrap_or_else(|e| panic!("{}: {e}", readme.display()));
        assert!(readme.contains("## What to tell the agents"), "{preset}'s README says what to tell the agents");
    }
}

#[test]
fn every_preset_passes_check_and_lists_each_of_its_rules() {
    let all = presets();
    assert!(!all.is_empty());
    // Run elsewhere, without `--personas`: a preset names its own personas' folder, so that a copy of it is whole.
    let elsewhere = tempfile::tempdir().unwrap();
    for preset in all {
        let config = preset.join("turn-manager.json");
        let out = check(elsewhere.path(), &config, None);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "check failed for {}:\nstdout: {stdout}\nstderr: {}",
            preset.display(),
            text(&out.stderr)
        );
        assert!(stdout.contains("OK: "), "{stdout}");
        let rules = rules_of(&config);
        assert!(!rules.is_empty(), "{} defines no rule", preset.display());
        for (name, action) in rules {
            let line = format!("{name}: {action}");
            assert!(stdout.contains(&line), "{}: {line:?} missing in:\n{stdout}", preset.display());
        }
    }
}

#[test]
fn a_rule_routing_to_an_unknown_persona_fails_check_naming_the_file_field_and_persona() {
    let source = presets_dir().join("review-workflow");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("personas")).unwrap();
    for entry in std::fs::read_dir(source.join("personas")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join("personas").join(path.file_name().unwrap())).unwrap();
    }
    let original = std::fs::read_to_string(source.join("turn-manager.json")).unwrap();
    // READY_FOR_REVIEW's `to` now names a persona no file defines.
    let rule = original.find(r#""name": "READY_FOR_REVIEW""#).expect("the preset has READY_FOR_REVIEW");
    let at = rule + original[rule..].find(r#""to": "critic""#).expect("READY_FOR_REVIEW routes to the critic");
    let line = original[..at].matches('\n').count() + 1;
    let index =
        rules_of(&source.join("turn-manager.json")).iter().position(|(name, _)| name == "READY_FOR_REVIEW").unwrap();
    let broken =
        format!("{}{}", &original[..at], original[at..].replacen(r#""to": "critic""#, r#""to": "reviewer""#, 1));
    std::fs::write(dir.path().join("turn-manager.json"), broken).unwrap();

    let out = check(dir.path(), Path::new("turn-manager.json"), Some(Path::new("personas")));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stdout: {}\nstderr: {stderr}", text(&out.stdout));
    let expected = format!("turn-manager.json:{line}: field \"signals.rules[{index}].to\" names \"reviewer\"");
    assert!(stderr.contains(&expected), "{expected:?} missing in:\n{stderr}");
    assert!(stderr.contains("known: developer, critic, auditor"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing is reported as fine:\n{}", text(&out.stdout));
}

/// Found by a review: review-workflow's rule named `FILE_CONFLICT` matched only seed 001's `FILE CONFLICT:`, while the
/// unknown-signal reply names the rule: an agent writing `FILE_CONFLICT: src/a.rs`, as every other signal of the preset
/// is written, was told it is no signal, and that `FILE_CONFLICT` is one. Both forms are recorded.
#[test]
fn review_workflows_file_conflict_is_read_with_a_space_or_an_underscore() {
    use turn_manager::core::config::Config;
    use turn_manager::core::ids::PersonaId;
    let path = presets_dir().join("review-workflow").join("turn-manager.json");
    let config = Config::parse("turn-manager.json", &std::fs::read_to_string(path).unwrap()).expect("the preset");
    let developer = PersonaId::parse("developer").unwrap();
    for line in ["FILE CONFLICT: src/a.rs", "FILE_CONFLICT: src/a.rs"] {
        let found = config.signals.detect(&format!("{line}\nBoth of us edit it."), &developer);
        assert_eq!(found.map(|f| f.rule.name.clone()).as_deref(), Some("FILE_CONFLICT"), "{line}");
    }
}
