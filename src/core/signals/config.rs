//! Reading the signal grammar from the configuration (spec 4.2, 10): `signals.rules` and the recovery settings,
//! and the older `signal.turnComplete` / `signal.alternatives`, read as rules so that no configuration breaks.
//! Every problem is reported at once, each with its field and line.

use super::rules::{Action, At, Rule};
use super::{DEFAULT_KEYWORD, DEFAULT_UNKNOWN_PATTERN, Recovery, SignalRules, keyword_rule};
use crate::core::ids::PersonaId;
use crate::core::persona::{PersonaCatalog, TIMEOUT_SECONDS_MAX};
use crate::core::problems::{Checker, Problem};
use serde_json::{Map, Value};

const LEGACY_FIELDS: &[&str] = &["turnComplete", "alternatives"];
const SIGNALS_FIELDS: &[&str] = &[
    "rules",
    "unknownPattern",
    "unknownLimit",
    "benchAfter",
    "loopAfter",
    "maxRounds",
    "graceSeconds",
    "silenceSeconds",
    "completionPhrases",
];
const RULE_FIELDS: &[&str] =
    &["name", "pattern", "at", "strip", "priority", "from", "action", "to", "stage", "maxKeeps", "extendSeconds"];
/// The named groups a pattern may define.
const GROUPS: &[&str] = &["payload", "task"];
pub const PRIORITY_LIMIT: i64 = 1000;
/// Why a signal written with an invisible character is refused.
const INVISIBLE: &str = "holds an invisible character (a zero-width space, a direction mark...), which detection reads \
                         as a space in messages, so it could never match; write it with visible characters only";
pub const MAX_KEEPS_LIMIT: i64 = 100;
pub const DEFAULT_MAX_KEEPS: u32 = 3;

/// Reads `signal` and `signals` from the configuration object. Without either, the default rule alone. Problems
/// go to the checker; the rules that could be read are returned all the same, for checking them against the
/// personas.
pub fn read(c: &mut Checker, object: &Map<String, Value>) -> SignalRules {
    let mut rules = Vec::new();
    let mut keyword = None;
    if let Some(legacy) = c.object(object, &[], "signal") {
        keyword = read_legacy(c, legacy, &mut rules);
    }
    let mut unknown = Some(DEFAULT_UNKNOWN_PATTERN.to_owned());
    let mut recovery = Recovery::default();
    if let Some(signals) = c.object(object, &[], "signals") {
        c.unknown_fields(signals, &["signals"], SIGNALS_FIELDS, true);
        read_rules(c, signals, &mut rules);
        read_recovery(c, signals, &mut recovery, &mut unknown);
    }
    let listed = object.get("signals").is_some_and(|s| s.get("rules").is_some());
    if !object.contains_key("signal") && !listed {
        rules.push(keyword_rule(DEFAULT_KEYWORD));
        keyword = Some(DEFAULT_KEYWORD.to_owned());
    }
    // Judged once every rule listed could be read (one that could not is an error of its own already).
    let listed_all = object.get("signals").and_then(|s| s.get("rules")).and_then(Value::as_array).map(Vec::len);
    let ends_turns = rules.iter().any(|rule| rule.action.ends_the_turn());
    let auto = !recovery.completion_phrases.is_empty() || recovery.silence_seconds.is_some();
    if listed_all == Some(rules.len()) && !ends_turns && !auto {
        let why = "has no rule that ends a turn (action complete, pass, handoff, route, finishTask or end), and \
                   neither completionPhrases nor silenceSeconds ends one: every turn would run to its timeout";
        // None at all is a mistake; rules that only keep, record or escalate may be meant (timeouts pass the floor).
        if rules.is_empty() { c.error(&["signals", "rules"], why) } else { c.warning(&["signals", "rules"], why) }
    }
    SignalRules::new(rules, unknown.as_deref(), recovery)
        .expect("unknownPattern was checked by read_recovery")
        .naming(keyword)
}

/// `signal.turnComplete` and `signal.alternatives`: plain keywords ending the turn at the end of the message.
/// Answers `turnComplete`, if they could be read.
fn read_legacy(c: &mut Checker, legacy: &Map<String, Value>, rules: &mut Vec<Rule>) -> Option<String> {
    c.unknown_fields(legacy, &["signal"], LEGACY_FIELDS, true);
    let keyword = c.string(legacy, &["signal"], "turnComplete").unwrap_or_else(|| DEFAULT_KEYWORD.to_owned());
    let alternatives = c.string_list(legacy, &["signal"], "alternatives").unwrap_or_default();
    let mut keywords: Vec<String> = std::iter::once(keyword.clone()).chain(alternatives).collect();
    if let Some(bad) = keywords.iter().find(|k| k.trim().is_empty() || k.trim() != k.as_str()) {
        c.error(
            &["signal"],
            format!("keyword {bad:?} is empty or has surrounding whitespace; a keyword must be visible text"),
        );
        return None;
    }
    if let Some(bad) = keywords.iter().find(|k| k.chars().any(super::text::is_invisible)) {
        c.error(&["signal"], format!("keyword {bad:?} {INVISIBLE}"));
        return None;
    }
    // Longest first, so that an alternative containing another one (NOT_DONE and DONE) is the one named; each once
    // (found by a review: `dedup` alone kept a repeat the sort had not put next to it).
    keywords.sort_by_key(|k| std::cmp::Reverse(k.chars().count()));
    let mut seen = std::collections::HashSet::new();
    keywords.retain(|k| seen.insert(k.clone()));
    rules.extend(keywords.iter().map(|k| keyword_rule(k)));
    Some(keyword)
}

fn read_rules(c: &mut Checker, signals: &Map<String, Value>, rules: &mut Vec<Rule>) {
    let Some(value) = signals.get("rules") else { return };
    let Value::Array(items) = value else {
        c.error(
            &["signals", "rules"],
            "must be a list of rules, e.g. [{\"name\": \"done\", \"pattern\": \"DONE\", \"action\": \"complete\"}]",
        );
        return;
    };
    // Each read rule with its index in the list, so that problems between rules name the right ones even when
    // rules before them were bad.
    let mut read = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut at = RuleAt { c, index: i };
        let Value::Object(fields) = item else {
            at.error("", "must be an object with \"name\", \"pattern\" and \"action\"");
            continue;
        };
        if let Some(mut rule) = read_rule(&mut at, fields) {
            rule.listed_at = Some(i);
            read.push((i, rule));
        }
    }
    // The rules already there are `signal`'s keywords, listed before: a rule they shadow can never win either.
    check_priorities(c, rules, &read);
    rules.extend(read.into_iter().map(|(_, rule)| rule));
}

/// A checker positioned on one rule, so that every problem names `signals.rules[i].field` and its line.
struct RuleAt<'c, 'a> {
    c: &'c mut Checker<'a>,
    index: usize,
}

impl RuleAt<'_, '_> {
    fn error(&mut self, field: &str, message: impl Into<String>) {
        let (name, line) = self.place(field);
        self.c.error_at(&name, line, message);
    }

    fn warning(&mut self, field: &str, message: impl Into<String>) {
        let (name, line) = self.place(field);
        self.c.warning_at(&name, line, message);
    }

    /// `signals.rules[i].field` and its line.
    fn place(&self, field: &str) -> (String, Option<usize>) {
        let line = self.c.line_in_list(&["signals", "rules"], self.index, field);
        let name = if field.is_empty() {
            format!("signals.rules[{}]", self.index)
        } else {
            format!("signals.rules[{}].{field}", self.index)
        };
        (name, line)
    }

    fn string(&mut self, fields: &Map<String, Value>, key: &str) -> Option<String> {
        match fields.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(key, format!("must be a string, found {}", crate::core::problems::kind_of(other)));
                None
            }
        }
    }

    fn integer(&mut self, fields: &Map<String, Value>, key: &str, min: i64, max: i64) -> Option<i64> {
        let value = fields.get(key)?;
        match value.as_i64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.error(key, format!("must be a whole number between {min} and {max}, found {value}"));
                None
            }
        }
    }

    fn persona(&mut self, key: &str, raw: &str) -> Option<PersonaId> {
        PersonaId::parse(raw).map_err(|why| self.error(key, why)).ok()
    }
}

fn read_rule(at: &mut RuleAt, fields: &Map<String, Value>) -> Option<Rule> {
    // A warned rule is kept as written: only errors leave it out (found by a review: a rule naming a persona twice
    // in `from` was dropped, `check` said OK and its signal never ended a turn).
    let before = at.c.errors_found();
    for key in fields.keys().filter(|k| !RULE_FIELDS.contains(&k.as_str())) {
        let hint = crate::core::problems::closest(key, RULE_FIELDS)
            .map_or_else(|| format!("known: {}", RULE_FIELDS.join(", ")), |g| format!("did you mean \"{g}\"?"));
        at.error(key, format!("is not a rule setting; {hint}"));
    }
    let name = at.string(fields, "name");
    match &name {
        None if !fields.contains_key("name") => {
            at.error("", "has no \"name\"; name each rule (it is what history and replies show)")
        }
        Some(n) if n.trim().is_empty() => at.error("name", "is empty"),
        _ => {}
    }
    let pattern = at.string(fields, "pattern");
    match &pattern {
        None if !fields.contains_key("pattern") => at.error("", "has no \"pattern\" (a regular expression)"),
        Some(p) if p.is_empty() => at.error("pattern", "is empty"),
        Some(p) if p.chars().any(super::text::is_invisible) => at.error("pattern", INVISIBLE),
        _ => {}
    }
    let position = match at.string(fields, "at") {
        None => Some(At::End),
        Some(s) => At::parse(&s).or_else(|| {
            at.error("at", format!("is \"{s}\"; use one of \"end\", \"line\", \"anywhere\""));
            None
        }),
    };
    let strip = match fields.get("strip") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            at.error("strip", format!("must be true or false, found {}", crate::core::problems::kind_of(other)));
            true
        }
    };
    let priority = at.integer(fields, "priority", -PRIORITY_LIMIT, PRIORITY_LIMIT).unwrap_or(0);
    let from = match fields.get("from") {
        None => Vec::new(),
        // An empty list would let every persona send it (as no "from" does), the opposite of what it reads as.
        Some(Value::Array(items)) if items.is_empty() => {
            at.error("from", "is empty, which would name no persona; leave \"from\" out to let every persona send it");
            Vec::new()
        }
        Some(Value::Array(items)) => {
            let from: Vec<PersonaId> = items
                .iter()
                .filter_map(|item| match item {
                    Value::String(s) => at.persona("from", s),
                    _ => {
                        at.error("from", "must list persona ids as strings");
                        None
                    }
                })
                .collect();
            if let Some(twice) = from.iter().enumerate().find(|(k, id)| from[..*k].contains(id)).map(|(_, id)| id) {
                at.warning("from", format!("names \"{twice}\" twice"));
            }
            from
        }
        Some(_) => {
            at.error("from", "must be a list of persona ids, e.g. [\"developer\"]");
            Vec::new()
        }
    };
    let action = read_action(at, fields, name.as_deref().unwrap_or_default());
    if at.c.errors_found() != before {
        return None;
    }
    let (name, pattern, position, action) = (name?, pattern?, position?, action?);
    let rule = match Rule::new(name, pattern, position, strip, priority, from, action) {
        Ok(rule) => rule,
        Err(why) => {
            at.error("pattern", why);
            return None;
        }
    };
    check_groups(at, &rule);
    (at.c.errors_found() == before).then_some(rule)
}

fn read_action(at: &mut RuleAt, fields: &Map<String, Value>, name: &str) -> Option<Action> {
    let Some(action) = at.string(fields, "action") else {
        if !fields.contains_key("action") {
            at.error("", format!("has no \"action\"; use one of {}", quoted(&Action::NAMES)));
        }
        return None;
    };
    let to = match at.string(fields, "to") {
        Some(raw) => Some(at.persona("to", &raw)?),
        None => None,
    };
    let parsed = match action.as_str() {
        "complete" => Action::Complete,
        "pass" => Action::Pass,
        "handoff" => Action::Handoff { to: to.clone() },
        "route" => match &to {
            Some(to) => {
                let stage = at.string(fields, "stage").unwrap_or_else(|| name.to_lowercase());
                if stage.trim().is_empty() && fields.contains_key("stage") {
                    at.error(
                        "stage",
                        "is empty; name the stage the task reaches, or leave it out to use the rule's name",
                    );
                }
                Action::Route { to: to.clone(), stage }
            }
            None => {
                at.error("", "has action \"route\" but no \"to\": name the persona the task goes to");
                return None;
            }
        },
        "finishTask" => Action::FinishTask { to: to.clone() },
        "keep" => Action::Keep {
            max_keeps: at.integer(fields, "maxKeeps", 1, MAX_KEEPS_LIMIT).map_or(DEFAULT_MAX_KEEPS, |n| n as u32),
        },
        "progress" => Action::Progress {
            extend_seconds: at.integer(fields, "extendSeconds", 0, TIMEOUT_SECONDS_MAX).unwrap_or(0) as u32,
        },
        "escalate" => Action::Escalate,
        "record" => Action::Record,
        "end" => Action::End,
        other => {
            let hint = crate::core::problems::closest(other, &Action::NAMES)
                .map(|g| format!("did you mean \"{g}\"? "))
                .unwrap_or_default();
            at.error("action", format!("is \"{other}\"; {hint}use one of {}", quoted(&Action::NAMES)));
            return None;
        }
    };
    // A parameter the action does not read is a mistake the user would not see otherwise.
    let takes: &[&str] = match parsed {
        Action::Handoff { .. } | Action::FinishTask { .. } => &["to"],
        Action::Route { .. } => &["to", "stage"],
        Action::Keep { .. } => &["maxKeeps"],
        Action::Progress { .. } => &["extendSeconds"],
        _ => &[],
    };
    for key in ["to", "stage", "maxKeeps", "extendSeconds"] {
        if fields.contains_key(key) && !takes.contains(&key) {
            at.error(key, format!("does nothing for action \"{action}\""));
        }
    }
    Some(parsed)
}

/// Named groups must be ones the engine reads, and present where the action needs them.
fn check_groups(at: &mut RuleAt, rule: &Rule) {
    let groups: Vec<&str> = rule.group_names().collect();
    for group in groups.iter().filter(|g| !GROUPS.contains(g)) {
        at.error(
            "pattern",
            format!("has a group named \"{group}\"; the groups read are (?P<payload>...) and (?P<task>...)"),
        );
    }
    let has = |g: &str| groups.contains(&g);
    let needs = match &rule.action {
        Action::Handoff { to: None } if !has("payload") => Some(
            "has action \"handoff\" without \"to\", so its pattern needs a (?P<payload>...) group naming the persona",
        ),
        Action::Progress { .. } if !has("payload") => {
            Some("has action \"progress\", so its pattern needs a (?P<payload>...) group holding the percentage")
        }
        Action::Route { .. } | Action::FinishTask { .. } if !has("task") && !has("payload") => {
            Some("moves a task, so its pattern needs a (?P<task>...) group holding the task id")
        }
        _ => None,
    };
    if let Some(message) = needs {
        at.error("pattern", message);
    }
    if rule.matches_empty() {
        at.error("pattern", "matches an empty message, so every message would carry this signal");
    } else if ORDINARY_MESSAGES.iter().all(|message| rule.find(message).is_some()) {
        // Not refused: a rule may mean to act on everything (a `record` of every message); but it is rarely meant.
        at.warning(
            "pattern",
            format!(
                "matches ordinary messages without any signal, such as \"{}\", so nearly every message would \
                 carry it (action \"{}\"); match the signal's own text",
                ORDINARY_MESSAGES[0],
                rule.action.name()
            ),
        );
    }
}

/// Plain answers an agent writes, without any signal, that a rule matching all of them would act on.
const ORDINARY_MESSAGES: &[&str] =
    &["Here is my first draft of the plan.", "I agree, let's go with option B", "Still working on it: more soon!"];

/// Two rules with the same name, or a rule that can never win: an earlier one with the same pattern and position, a
/// priority at least as high, and senders that include all of its own always takes the message first. `keywords`
/// are `signal`'s (`turnComplete`, `alternatives`), matched before every listed rule: one of them that shadows a
/// listed rule, or has its name, is a warning (the older form beside the newer was harmless when the rule did what the
/// keyword does, as a preset's `TURN_COMPLETE` rule does, and a configuration that ran must still start); `rules` holds
/// each rule read with its index in the list.
fn check_priorities(c: &mut Checker, keywords: &[Rule], rules: &[(usize, Rule)]) {
    let shadows = |r: &Rule, rule: &Rule| {
        let senders = r.from.is_empty() || (!rule.from.is_empty() && rule.from.iter().all(|p| r.from.contains(p)));
        r.pattern == rule.pattern && r.at == rule.at && r.priority >= rule.priority && senders
    };
    for (k, (i, rule)) in rules.iter().enumerate() {
        let (i, earlier) = (*i, &rules[..k]);
        if let Some((j, _)) = earlier.iter().find(|(_, r)| r.name == rule.name) {
            let line = c.line_in_list(&["signals", "rules"], i, "name");
            c.error_at(
                &format!("signals.rules[{i}].name"),
                line,
                format!("\"{}\" is also the name of rule {j}; names must be unique", rule.name),
            );
        }
        if let Some((j, shadowing)) = earlier.iter().find(|(_, r)| shadows(r, rule)) {
            let line = c.line_in_list(&["signals", "rules"], i, "priority");
            c.error_at(
                &format!("signals.rules[{i}].priority"),
                line,
                format!(
                    "rule \"{}\" can never win: rule {j} (\"{}\") has the same pattern, a priority at least as high \
                     and every sender this rule has; give it a higher priority or remove one of them",
                    rule.name, shadowing.name
                ),
            );
            continue;
        }
        // A rule that does what the keyword does (ends the turn, the keyword stripped) is the same signal twice.
        let same_signal = |keyword: &Rule| shadows(keyword, rule) && rule.action == Action::Complete && rule.strip;
        if let Some(keyword) = keywords.iter().find(|k| shadows(k, rule) && !same_signal(k)) {
            let line = c.line_in_list(&["signals", "rules"], i, "priority");
            c.warning_at(
                &format!("signals.rules[{i}].priority"),
                line,
                format!(
                    "rule \"{}\" can never win: the keyword \"{}\" of `signal` (turnComplete or alternatives), a \
                     `complete` rule matched before signals.rules, has the same pattern; take it out of `signal`, or \
                     give this rule a higher priority",
                    rule.name, keyword.name
                ),
            );
        } else if keywords.iter().any(|k| k.name == rule.name && !same_signal(k)) {
            let line = c.line_in_list(&["signals", "rules"], i, "name");
            c.warning_at(
                &format!("signals.rules[{i}].name"),
                line,
                format!(
                    "\"{}\" is also a keyword of `signal` (turnComplete or alternatives), which does something else; \
                     give the rule another name",
                    rule.name
                ),
            );
        }
    }
}

fn read_recovery(c: &mut Checker, signals: &Map<String, Value>, recovery: &mut Recovery, unknown: &mut Option<String>) {
    match signals.get("unknownPattern") {
        None => {}
        Some(Value::Null) => *unknown = None,
        Some(Value::String(s)) if s.is_empty() => *unknown = None,
        Some(Value::String(s)) => match SignalRules::unknown_regex(s) {
            Ok(regex) if regex.is_match("") => c.error(
                &["signals", "unknownPattern"],
                "matches an empty line, so every message would count as an unknown signal; make it match what \
                 looks like a signal only (the default: \"[A-Z][A-Z0-9_]+:\"), or null to turn it off",
            ),
            Ok(_) => *unknown = Some(s.clone()),
            Err(e) => c.error(&["signals", "unknownPattern"], e),
        },
        Some(other) => c.error(
            &["signals", "unknownPattern"],
            format!("must be a regular expression or null (off), found {}", crate::core::problems::kind_of(other)),
        ),
    }
    let p = &["signals"];
    if let Some(n) = c.integer(signals, p, "unknownLimit", 0, 100) {
        recovery.unknown_limit = n as u32;
    }
    if let Some(n) = c.integer(signals, p, "benchAfter", 0, 100) {
        recovery.bench_after = n as u32;
    }
    if let Some(n) = c.integer(signals, p, "loopAfter", 0, 100) {
        recovery.loop_after = n as u32;
    }
    if let Some(n) = c.integer(signals, p, "maxRounds", 1, 1_000_000) {
        recovery.max_rounds = Some(n as u32);
    }
    if let Some(n) = c.integer(signals, p, "graceSeconds", 0, 3600) {
        recovery.grace_seconds = n as u32;
    }
    if let Some(n) = c.integer(signals, p, "silenceSeconds", 1, TIMEOUT_SECONDS_MAX) {
        recovery.silence_seconds = Some(n as u32);
    }
    if let Some(phrases) = c.string_list(signals, p, "completionPhrases") {
        if phrases.iter().any(|s| s.trim().is_empty()) {
            c.error(&["signals", "completionPhrases"], "has an empty phrase, which every message contains");
        }
        recovery.completion_phrases = phrases;
    }
}

/// Problems between the rules and the personas: `to` and `from` naming personas no file defines.
pub fn check_against(c: &mut Checker, rules: &SignalRules, personas: &PersonaCatalog) {
    for rule in rules.rules() {
        let Some(i) = rule.listed_at else { continue }; // The older keywords name no persona.
        let named = rule.action.target().map(|p| ("to", p)).into_iter().chain(rule.from.iter().map(|p| ("from", p)));
        for (field, persona) in named {
            if personas.get(persona).is_none() {
                let line = c.line_in_list(&["signals", "rules"], i, field);
                c.error_at(
                    &format!("signals.rules[{i}].{field}"),
                    line,
                    format!("names \"{persona}\", which no persona file defines; known: {}", personas.ids_joined()),
                );
            }
        }
        // A rule sending the floor back to whoever may send it: a route or a finished task gives the sender a fresh
        // turn each time, as often as it likes (a `keep` is bounded by `maxKeeps`); a handoff is refused then.
        let (to, outcome) = match &rule.action {
            Action::Route { to, .. } | Action::FinishTask { to: Some(to) } => {
                (Some(to), "it is given a fresh turn with a fresh deadline, without limit")
            }
            Action::Handoff { to: Some(to) } => (Some(to), "the handoff is refused, as one to itself"),
            _ => (None, ""),
        };
        if let Some(to) = to.filter(|to| rule.allows(to) && personas.get(to).is_some()) {
            let line = c.line_in_list(&["signals", "rules"], i, "to");
            c.warning_at(
                &format!("signals.rules[{i}].to"),
                line,
                format!(
                    "\"{to}\" may send {} itself: each time it does, {outcome}; name the personas that may send it \
                     in \"from\" (a \"keep\" rule, bounded by \"maxKeeps\", gives more time)",
                    rule.name
                ),
            );
        }
    }
}

fn quoted(names: &[&str]) -> String {
    names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
}

/// Problems of a configuration text's signal rules against personas, for `check`.
pub fn problems_against(file: &str, text: &str, rules: &SignalRules, personas: &PersonaCatalog) -> Vec<Problem> {
    let mut c = Checker::new(file, text);
    check_against(&mut c, rules, personas);
    c.problems
}
