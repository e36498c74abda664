//! What the scripted agents say in a preset's demo: per persona, its replies by turn (its n-th call gets its n-th
//! reply), written in the preset's own protocol. A preset without a script plays the default behaviours.

/// A preset's script: the task its replies move through the workflow, and who says what.
#[derive(Debug)]
pub struct Script {
    pub task: &'static str,
    /// Each persona's replies by turn; a persona not listed, or past its last reply, stays silent.
    pub replies: &'static [(&'static str, &'static [&'static str])],
    /// Who must hold the floor, turn by turn, for the task to be done: the path the demo is meant to show.
    pub path: &'static [&'static str],
}

impl Script {
    /// The replies of `persona`, in order.
    pub fn replies_of(&self, persona: &str) -> Vec<String> {
        self.replies
            .iter()
            .filter(|(id, _)| *id == persona)
            .flat_map(|(_, replies)| replies.iter().map(|r| (*r).to_owned()))
            .collect()
    }

    /// The personas the script speaks for.
    pub fn speakers(&self) -> impl Iterator<Item = &'static str> {
        self.replies.iter().map(|(id, _)| *id)
    }
}

/// The presets that have a script.
pub const SCRIPTED: &[&str] = &["review-workflow"];

/// The script of a preset, if it has one.
pub fn for_preset(name: &str) -> Option<&'static Script> {
    match name {
        "review-workflow" => Some(&REVIEW_WORKFLOW),
        _ => None,
    }
}

/// Seed 001's workflow: the critic sends the first submission back, passes the second, and the auditor passes it.
/// The developer puts its signal last (seed 001's placement rule); the critic and auditor put it first (their
/// formats).
static REVIEW_WORKFLOW: Script = Script {
    task: "task-1",
    replies: &[
        ("developer", &[DEVELOPER_FIRST, DEVELOPER_REWORK]),
        ("critic", &[CRITIC_FAILS, CRITIC_PASSES]),
        ("auditor", &[AUDITOR_PASSES]),
    ],
    path: &["developer", "critic", "developer", "critic", "auditor"],
};

const DEVELOPER_FIRST: &str = "\
Implemented task-1: `!turn order` now refuses unknown persona ids instead of dropping them.

Files Modified:
- src/core/session/commands.rs: parse every id first; reply with the unknown ones and change nothing
- src/core/persona.rs: `PersonaCatalog::resolve_all` returns every unknown id at once

Tests Written:
- src/core/session/tests/commands.rs: order_with_an_unknown_persona_changes_nothing

Verification Results (self-verified):
- cargo test: PASS (local)
- cargo clippy -- -D warnings: PASS (local)

Summary: unknown ids are named in one reply; the roster stays as it was.

READY_FOR_REVIEW: task-1";

const CRITIC_FAILS: &str = "\
REVIEW_FAILED: task-1

Files Reviewed:
- src/core/session/commands.rs
- src/core/persona.rs

Issues Found:
- src/core/session/commands.rs:142: the reply lists the unknown ids in hash order, not as the manager typed them
- src/core/persona.rs:171: `resolve_all` clones the whole catalog on every call

Required Fixes:
- keep the unknown ids in the order they were typed
- borrow the catalog instead of cloning it

Priority: MEDIUM

Developer: Please address all issues above and signal READY_FOR_REVIEW when complete.";

const DEVELOPER_REWORK: &str = "\
Fixed both review findings on task-1.

Files Modified:
- src/core/session/commands.rs: unknown ids listed in the order typed
- src/core/persona.rs: `resolve_all` borrows the catalog

Tests Written:
- src/core/session/tests/commands.rs: unknown_ids_are_listed_in_the_order_typed

Verification Results (self-verified):
- cargo test: PASS (local)

Summary: the critic's two issues are fixed; nothing else changed.

READY_FOR_REVIEW: task-1";

const CRITIC_PASSES: &str = "\
REVIEW_PASSED: task-1

Files Reviewed:
- src/core/session/commands.rs
- src/core/persona.rs

Quality Assessment:
- Code style: COMPLIANT
- Error handling: ADEQUATE
- Naming: CONSISTENT
- Architecture: ALIGNED

Summary: one pass over the ids, no clone, and the reply reads as the manager typed it.";

const AUDITOR_PASSES: &str = "\
AUDIT_PASSED: task-1

Verification Results:
- unknown ids are refused: VERIFIED - order_with_an_unknown_persona_changes_nothing
- the reply names every unknown id, as typed: VERIFIED - unknown_ids_are_listed_in_the_order_typed

Commands Executed:
- cargo test (local): PASS
- cargo clippy -- -D warnings (local): PASS

Summary: both acceptance criteria hold; task-1 is complete.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::PersonaId;
    use crate::core::signals::Action;
    use crate::demo::preset::{self, PRESETS_DIR};
    use std::path::Path;

    /// Plays the script through the preset's own rules, without a bot: each reply's signal must send the floor to
    /// the next persona of the path, and the last one must finish the task.
    #[test]
    fn the_review_workflow_script_follows_its_path_under_the_presets_rules() {
        let script = for_preset("review-workflow").unwrap();
        let preset = preset::load(Path::new(PRESETS_DIR), "review-workflow").unwrap();
        let mut said: std::collections::BTreeMap<&str, usize> = Default::default();
        for (i, speaker) in script.path.iter().enumerate() {
            let turn = said.entry(speaker).or_default();
            let reply = &script.replies_of(speaker)[*turn];
            *turn += 1;
            let found = preset.config.signals.detect(reply, &PersonaId::parse(speaker).unwrap()).expect("a signal");
            assert_eq!(found.task.as_deref(), Some(script.task), "{}", found.rule.name);
            let shown = found.display.unwrap_or_default();
            assert!(!shown.contains(&format!("{}:", found.rule.name)), "the signal line is stripped: {shown}");
            match (&found.rule.action, script.path.get(i + 1)) {
                (Action::Route { to, .. }, Some(next)) => assert_eq!(to.as_str(), *next),
                (Action::FinishTask { .. }, None) => {}
                (action, next) => panic!("{} by {speaker}: {action:?}, then {next:?}", found.rule.name),
            }
        }
    }

    #[test]
    fn every_scripted_preset_has_its_script() {
        assert!(SCRIPTED.iter().all(|name| for_preset(name).is_some()));
    }

    #[test]
    fn every_reply_fits_in_one_discord_message() {
        let script = for_preset("review-workflow").unwrap();
        for speaker in script.speakers() {
            assert!(script.replies_of(speaker).iter().all(|r| r.chars().count() <= 2000), "{speaker}");
        }
    }
}
