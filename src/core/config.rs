//! The optional configuration file `turn-manager.json` (spec 10): every setting, its default, and validation.
//!
//! Unknown keys are errors here (unlike persona files, nothing else shares this file), with a suggestion when they
//! look like a typo. Secrets never belong in it: the token comes from `DISCORD_TOKEN`.

use super::ids::{ChannelId, PersonaId, parse_snowflake};
use super::persona::{PersonaCatalog, TIMEOUT_SECONDS_MAX, TIMEOUT_SECONDS_MIN};
use super::problems::{Checker, Problem, Problems};
use super::signals::SignalRules;
use super::signals::rules::Action;
use super::templates::{Template, Templates};
use serde_json::{Map, Value};
use std::path::PathBuf;

pub const DEFAULT_TIMEOUT_SECONDS: u32 = 60;
/// A short tail, read on every load of the session file; the JSON-lines log beside it keeps every event.
pub const DEFAULT_HISTORY_LIMIT: usize = 20;
pub const HISTORY_LIMIT_MAX: i64 = 100_000;
/// The bot's REST calls per second, all routes together: under Discord's global 50/s, so a burst (many turns
/// timing out at once, a restart's replays) waits instead of earning 429s, which count toward Discord's ban for
/// invalid requests.
pub const DEFAULT_REST_REQUESTS_PER_SECOND: u32 = 45;
pub const REST_REQUESTS_PER_SECOND_MAX: i64 = 10_000;

const KNOWN_FIELDS: &[&str] = &[
    "signal",
    "signals",
    "defaultTimeoutSeconds",
    "announceTimeouts",
    "templates",
    "displayMode",
    "outOfTurn",
    "controlRoles",
    "channels",
    "historyLimit",
    "restRequestsPerSecond",
    "personasDir",
    "stateDir",
];
const CHANNEL_FIELDS: &[&str] = &["channelId", "roster"];
const SECRET_FIELDS: &[&str] = &["token", "discordToken", "botToken"];

/// How agents' messages are shown (spec 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisplayModeSetting {
    /// Relay where the bot has the permissions, observe otherwise.
    Auto,
    Relay,
    Observe,
}

/// What happens to a message from a persona that does not hold the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutOfTurnPolicy {
    /// Deleted in relay mode, its text kept in history.
    Remove,
    /// Left alone and recorded.
    Allow,
}

/// A channel put under management at start-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedChannel {
    pub channel_id: ChannelId,
    /// Empty: all personas in default order.
    pub roster: Vec<PersonaId>,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// The signal grammar: its rules (by default `TURN_COMPLETE` at the end of a message) and recovery settings.
    pub signals: SignalRules,
    pub default_timeout_seconds: u32,
    pub announce_timeouts: bool,
    pub templates: Templates,
    pub display_mode: DisplayModeSetting,
    pub out_of_turn: OutOfTurnPolicy,
    /// Role names or ids whose members may manage sessions.
    pub control_roles: Vec<String>,
    pub channels: Vec<ManagedChannel>,
    /// How many history events the session file keeps; the JSON-lines log keeps all.
    pub history_limit: usize,
    /// The most REST calls the bot makes in any second, all together.
    pub rest_requests_per_second: u32,
    pub personas_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            signals: SignalRules::default(),
            default_timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            announce_timeouts: true,
            templates: Templates::default(),
            display_mode: DisplayModeSetting::Auto,
            out_of_turn: OutOfTurnPolicy::Remove,
            control_roles: Vec::new(),
            channels: Vec::new(),
            history_limit: DEFAULT_HISTORY_LIMIT,
            rest_requests_per_second: DEFAULT_REST_REQUESTS_PER_SECOND,
            personas_dir: PathBuf::from("personas"),
            state_dir: PathBuf::from("state"),
        }
    }
}

impl Config {
    /// Parses the configuration file; every problem in it is returned at once.
    pub fn parse(file: &str, text: &str) -> Result<Config, Problems> {
        let (config, problems) = Self::parse_partly(file, text);
        let problems = Problems(problems);
        if problems.has_errors() { Err(problems) } else { Ok(config) }
    }

    /// Everything the file sets that could be read (the defaults elsewhere), with every problem found: so that
    /// `check` can also check what was read against the personas, and report all at once.
    pub fn parse_partly(file: &str, text: &str) -> (Config, Vec<Problem>) {
        let mut c = Checker::new(file, text);
        let Some(object) = c.parse_object() else {
            return (Config::default(), c.problems);
        };
        c.repeated_keys(|_| true); // an unknown key is an error here too
        let mut config = Config::default();
        for secret in SECRET_FIELDS.iter().filter(|k| object.contains_key(**k)) {
            c.error(&[secret], "must not be here: put the bot token in the DISCORD_TOKEN environment variable");
        }
        // Refused above, so neither unknown nor a key to offer.
        c.unknown_fields_except(&object, &[], KNOWN_FIELDS, SECRET_FIELDS, true);

        config.signals = super::signals::config::read(&mut c, &object);
        if let Some(n) = c.integer(&object, &[], "defaultTimeoutSeconds", TIMEOUT_SECONDS_MIN, TIMEOUT_SECONDS_MAX) {
            config.default_timeout_seconds = n as u32;
        }
        if let Some(b) = c.boolean(&object, &[], "announceTimeouts") {
            config.announce_timeouts = b;
        }
        read_templates(&mut c, &object, &mut config);
        if let Some(mode) = choice(&mut c, &object, "displayMode", &["auto", "relay", "observe"]) {
            config.display_mode = match mode.as_str() {
                "relay" => DisplayModeSetting::Relay,
                "observe" => DisplayModeSetting::Observe,
                _ => DisplayModeSetting::Auto,
            };
        }
        if let Some(policy) = choice(&mut c, &object, "outOfTurn", &["remove", "allow"]) {
            config.out_of_turn = if policy == "allow" { OutOfTurnPolicy::Allow } else { OutOfTurnPolicy::Remove };
        }
        if let Some(roles) = c.string_list(&object, &[], "controlRoles") {
            let roles: Vec<String> =
                roles.into_iter().map(|r| role_mention_id(&r).map(str::to_owned).unwrap_or(r)).collect();
            if roles.iter().any(|r| r.trim().is_empty()) {
                c.error(&["controlRoles"], "has an empty role name; give role names or role ids");
            }
            // Discord lists @everyone on no member, so it would let nobody steer, yet an escalation calling it would
            // ping the whole server.
            if roles.iter().any(|r| r.trim().eq_ignore_ascii_case("@everyone")) {
                c.error(
                    &["controlRoles"],
                    "names @everyone, which Discord lists on no member (so it would let nobody steer) and which an \
                     escalation would ping the whole server with; name a role you give the people who steer",
                );
            }
            if let Some(twice) = roles.iter().enumerate().find(|(k, r)| roles[..*k].contains(r)).map(|(_, r)| r) {
                c.warning(&["controlRoles"], format!("names \"{twice}\" twice"));
            }
            config.control_roles = roles;
        }
        read_channels(&mut c, &object, &mut config);
        if let Some(n) = c.integer(&object, &[], "historyLimit", 1, HISTORY_LIMIT_MAX) {
            config.history_limit = n as usize;
        }
        if let Some(n) = c.integer(&object, &[], "restRequestsPerSecond", 0, REST_REQUESTS_PER_SECOND_MAX) {
            config.rest_requests_per_second = n as u32;
        }
        for (key, slot) in [("personasDir", &mut config.personas_dir), ("stateDir", &mut config.state_dir)] {
            match c.string(&object, &[], key) {
                Some(dir) if dir.trim().is_empty() => c.error(&[key], "is empty; give a folder path"),
                Some(dir) => *slot = PathBuf::from(dir),
                None => {}
            }
        }
        (config, c.problems)
    }

    /// Problems between the configuration and the personas: rosters and signal rules naming personas that do not
    /// exist.
    pub fn check_against(&self, file: &str, text: &str, personas: &PersonaCatalog) -> Vec<Problem> {
        let mut c = Checker::new(file, text);
        super::signals::config::check_against(&mut c, &self.signals, personas);
        // Where each channel is listed in the file (entries refused at parse are not in `self.channels`).
        // A channel listed twice (refused, but kept) is found at its own entry each time: the k-th of its copies
        // here is the k-th in the file.
        let listed: Vec<Option<ChannelId>> = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|file| file.get("channels").and_then(Value::as_array).cloned())
            .unwrap_or_default()
            .iter()
            .map(|entry| entry.get("channelId").and_then(Value::as_str).and_then(|id| parse_snowflake(id).ok()))
            .map(|id| id.map(ChannelId))
            .collect();
        for (n, channel) in self.channels.iter().enumerate() {
            let copy = self.channels[..n].iter().filter(|c| c.channel_id == channel.channel_id).count();
            let mut places = listed.iter().enumerate().filter(|(_, id)| **id == Some(channel.channel_id));
            let i = places.nth(copy).map_or(n, |(i, _)| i);
            for id in channel.roster.iter().filter(|id| personas.get(id).is_none()) {
                let line = c.line_in_list(&["channels"], i, "roster");
                c.error_at(
                    &format!("channels[{i}].roster"),
                    line,
                    format!(
                        "channel {} names \"{id}\", which no persona file defines; known: {}",
                        channel.channel_id,
                        personas.ids_joined()
                    ),
                );
            }
            // A rule sending the floor to a persona this channel's roster leaves out cannot do so there.
            for rule in self.signals.rules() {
                let Some(to) = rule.action.target().filter(|to| personas.get(to).is_some()) else { continue };
                // Nor where none of those who may send it is in the roster: it never runs there.
                let sent_there = rule.from.is_empty() || rule.from.iter().any(|p| channel.roster.contains(p));
                if channel.roster.is_empty() || channel.roster.contains(to) || !sent_there {
                    continue;
                }
                let outcome = match rule.action {
                    Action::FinishTask { .. } => "the floor goes to the next in the roster instead",
                    _ => "the rule is refused, and the sender keeps the floor",
                };
                let line = c.line_in_list(&["channels"], i, "roster");
                c.warning_at(
                    &format!("channels[{i}].roster"),
                    line,
                    format!(
                        "channel {} leaves out \"{to}\", to whom rule {} sends the floor: there {outcome} (unless \
                         \"{to}\" is added to the session)",
                        channel.channel_id, rule.name
                    ),
                );
            }
        }
        c.problems
    }

    /// The turn length of a persona: its own, or the default.
    pub fn timeout_of(&self, persona_timeout: Option<u32>) -> u32 {
        persona_timeout.unwrap_or(self.default_timeout_seconds)
    }
}

fn choice(c: &mut Checker, object: &Map<String, Value>, key: &str, allowed: &[&str]) -> Option<String> {
    let value = c.string(object, &[], key)?;
    if allowed.contains(&value.as_str()) {
        Some(value)
    } else {
        let quoted: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
        c.error(&[key], format!("is {}; use one of {}", crate::core::ids::quoted(&value), quoted.join(", ")));
        None
    }
}

fn read_templates(c: &mut Checker, object: &Map<String, Value>, config: &mut Config) {
    let Some(templates) = c.object(object, &[], "templates") else { return };
    let keys: Vec<&str> = Template::ALL.iter().map(|t| t.key()).collect();
    c.unknown_fields(templates, &["templates"], &keys, true);
    for template in Template::ALL {
        let Some(text) = c.string(templates, &["templates"], template.key()) else { continue };
        if text.is_empty() && template.may_be_silent() {
            config.templates.set(template, text);
        } else if text.trim().is_empty() {
            let hint = if template.may_be_silent() { " (use \"\" to say nothing)" } else { "" };
            c.error(&["templates", template.key()], format!("is blank; Discord cannot post an empty message{hint}"));
        } else if let Err(why) = template.check(&text) {
            c.error(&["templates", template.key()], why);
        } else {
            if matches!(template, Template::TurnStart | Template::Kept) && !text.contains("<@{userId}>") {
                // The mention is what makes most agents answer: without it in the text, Discord pings nobody.
                let why = "has no <@{userId}>: the persona whose turn it is is not mentioned, and most agents only \
                           answer a mention";
                c.warning(&["templates", template.key()], why);
            }
            if let Some(unclosed) = crate::core::templates::unclosed_brace(&text) {
                // Found by a review: a placeholder mistyped so was posted as written, with no word of it at start-up.
                let why = format!("has a `{{` never closed (`{unclosed}`): it is shown as written, not filled in");
                c.warning(&["templates", template.key()], why);
            }
            config.templates.set(template, text);
        }
    }
}

/// The role id of a role mention pasted from Discord (`<@&123>`, what its client copies): it was taken for a role
/// name, which no role has, so nobody could steer (found by a newcomer).
fn role_mention_id(role: &str) -> Option<&str> {
    let id = role.trim().strip_prefix("<@&")?.strip_suffix('>')?;
    super::ids::parse_snowflake(id).is_ok().then_some(id)
}

fn read_channels(c: &mut Checker, object: &Map<String, Value>, config: &mut Config) {
    let Some(value) = object.get("channels") else { return };
    let Value::Array(items) = value else {
        c.error(&["channels"], "must be a list of {\"channelId\": \"...\", \"roster\": [...]}");
        return;
    };
    // Each problem names `channels[i].field` and the line of that entry's field, not the list's first.
    let error = |c: &mut Checker, i: usize, field: &str, message: String| {
        let line = c.line_in_list(&["channels"], i, if field.is_empty() { "channelId" } else { field });
        let name = if field.is_empty() { format!("channels[{i}]") } else { format!("channels[{i}].{field}") };
        c.error_at(&name, line, message);
    };
    for (i, item) in items.iter().enumerate() {
        let Value::Object(entry) = item else {
            error(c, i, "", "must be an object with \"channelId\"".into());
            continue;
        };
        // Named by its entry (`channels[1].rooster`) and found on its own line (found by a review: every entry's
        // was `channels.rooster` at the first entry's line).
        for key in entry.keys().filter(|key| !CHANNEL_FIELDS.contains(&key.as_str())) {
            error(c, i, key, crate::core::problems::not_a_setting(key, CHANNEL_FIELDS));
        }
        let channel_id = match entry.get("channelId") {
            Some(Value::String(raw)) => {
                parse_snowflake(raw).map(ChannelId).map_err(|why| error(c, i, "channelId", why)).ok()
            }
            Some(other) => {
                let found = crate::core::problems::kind_of(other);
                error(c, i, "channelId", format!("must be a string (the id in quotes), found {found}"));
                None
            }
            None => {
                error(c, i, "", "has no \"channelId\"".into());
                None
            }
        };
        let mut roster = Vec::new();
        let names = match entry.get("roster") {
            None => Vec::new(),
            Some(Value::Array(names)) => names.clone(),
            Some(other) => {
                let found = crate::core::problems::kind_of(other);
                error(c, i, "roster", format!("must be a list of persona ids, found {found}"));
                Vec::new()
            }
        };
        for name in names {
            let Value::String(raw) = name else {
                error(
                    c,
                    i,
                    "roster",
                    format!("must hold persona ids (strings), found {}", crate::core::problems::kind_of(&name)),
                );
                continue;
            };
            match PersonaId::parse(&raw) {
                Ok(id) if roster.contains(&id) => error(c, i, "roster", format!("names \"{id}\" twice")),
                Ok(id) => roster.push(id),
                Err(why) => error(c, i, "roster", why),
            }
        }
        if let Some(channel_id) = channel_id {
            if config.channels.iter().any(|m| m.channel_id == channel_id) {
                error(c, i, "channelId", format!("channel {channel_id} is listed twice"));
            }
            config.channels.push(ManagedChannel { channel_id, roster });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::problems::Severity;

    #[test]
    fn empty_object_gives_every_default() {
        let config = Config::parse("turn-manager.json", "{}").unwrap();
        assert_eq!(config.default_timeout_seconds, 60);
        assert!(config.announce_timeouts);
        assert_eq!(config.display_mode, DisplayModeSetting::Auto);
        assert_eq!(config.out_of_turn, OutOfTurnPolicy::Remove);
        assert_eq!(config.history_limit, 20);
        assert_eq!(config.personas_dir, PathBuf::from("personas"));
        assert!(config.signals.has_any_signal("x TURN_COMPLETE"));
    }

    #[test]
    fn every_setting_is_read() {
        let text = r#"{
          "signal": {"turnComplete": "OVER", "alternatives": ["PASS"]},
          "defaultTimeoutSeconds": 30, "announceTimeouts": false,
          "templates": {"timeout": "{agent} ran out after {duration}s"},
          "displayMode": "observe", "outOfTurn": "allow", "controlRoles": ["Moderators", "123"],
          "channels": [{"channelId": "555", "roster": ["pm", "dev"]}],
          "historyLimit": 50, "personasDir": "agents", "stateDir": "/var/lib/tm"
        }"#;
        let config = Config::parse("c.json", text).unwrap();
        assert!(config.signals.has_any_signal("ok PASS") && config.signals.has_any_signal("ok OVER"));
        assert!(!config.signals.has_any_signal("ok TURN_COMPLETE"));
        assert_eq!((config.default_timeout_seconds, config.announce_timeouts), (30, false));
        assert_eq!(config.templates.text(Template::Timeout), "{agent} ran out after {duration}s");
        assert_eq!((config.display_mode, config.out_of_turn), (DisplayModeSetting::Observe, OutOfTurnPolicy::Allow));
        assert_eq!(config.control_roles, ["Moderators", "123"]);
        assert_eq!(config.channels[0].channel_id, ChannelId(555));
        assert_eq!(config.channels[0].roster.len(), 2);
        assert_eq!(config.history_limit, 50);
        assert_eq!(config.state_dir, PathBuf::from("/var/lib/tm"));
    }

    #[test]
    fn a_template_longer_than_a_discord_message_is_refused_before_it_is_cut_at_run_time() {
        let at_the_limit = format!("<@{{userId}}> {}", "x".repeat(2000 - "<@> ".len()));
        let text = format!(r#"{{"templates": {{"turnStart": "{at_the_limit}"}}}}"#);
        assert!(Config::parse("c.json", &text).is_ok(), "2,000 characters without its placeholders fit");
        let over = format!("{}, <@{{userId}}>", "x".repeat(2000));
        let text = format!("{{\n\"templates\": {{\"turnStart\": \"{over}\"}}\n}}");
        let problems = Config::parse("c.json", &text).unwrap_err().to_string();
        assert!(problems.contains("c.json:2") && problems.contains("templates.turnStart"), "{problems}");
        assert!(problems.contains("is 2005 characters without its placeholders"), "{problems}");
    }

    #[test]
    fn a_template_with_a_brace_never_closed_is_warned_about_and_kept() {
        let text = "{\n\"templates\": {\"turnStart\": \"<@{userId}> ({agent) has the floor: {timeout}s.\"}\n}";
        let (config, problems) = Config::parse_partly("c.json", text);
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "warning: c.json:2: field \"templates.turnStart\" has a `{` never closed (`{agent) has the floor…`): it is shown as \
              written, not filled in"
            ]
        );
        assert_eq!(config.templates.text(Template::TurnStart), "<@{userId}> ({agent) has the floor: {timeout}s.");
    }

    #[test]
    fn a_setting_given_twice_is_an_error_at_its_second_line() {
        let text = "{\n  \"defaultTimeoutSeconds\": 30,\n  \"defaultTimeoutSeconds\": 90\n}";
        let problems = Config::parse("c.json", text).unwrap_err().to_string();
        let said = "c.json:3: field \"defaultTimeoutSeconds\" is given again (first on line 2)";
        assert!(problems.contains(said), "{problems}");
    }

    #[test]
    fn every_bad_setting_is_reported_with_its_line() {
        let text = "{\n  \"defaultTimeoutSecond\": 30,\n  \"displayMode\": \"fancy\",\n  \"historyLimit\": 0,\n  \"templates\": {\"timeout\": \"{who}\"}\n}";
        let problems = Config::parse("turn-manager.json", text).unwrap_err();
        let lines: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(lines[0].starts_with("error: turn-manager.json:2: field \"defaultTimeoutSecond\""));
        assert!(lines[0].contains("did you mean \"defaultTimeoutSeconds\""));
        assert!(lines.iter().any(|l| l.contains(":3:") && l.contains("use one of \"auto\", \"relay\", \"observe\"")));
        assert!(lines.iter().any(|l| l.contains(":4:") && l.contains("between 1 and 100000")));
        assert!(lines.iter().any(|l| l.contains(":5:") && l.contains("{who}")));
    }

    /// Found by a newcomer: `defaultTimeout` got no suggestion, and the known keys offered were listed with the
    /// token keys the file refuses.
    #[test]
    fn a_setting_written_short_is_completed_and_refused_keys_are_not_offered() {
        let problems = Config::parse("c.json", "{\n  \"defaultTimeout\": 60\n}").unwrap_err().to_string();
        let said =
            "error: c.json:2: field \"defaultTimeout\" is not a known setting; did you mean \"defaultTimeoutSeconds\"?";
        assert_eq!(problems, said);
        for unknown in ["colour", "discordTokn"] {
            let problems = Config::parse("c.json", &format!(r#"{{"{unknown}": "x"}}"#)).unwrap_err().to_string();
            assert!(problems.contains("known: signal, signals, defaultTimeoutSeconds"), "{problems}");
            assert!(!problems.to_lowercase().contains("token\""), "{unknown}: {problems}");
            assert!(!problems.to_lowercase().contains("token,"), "{unknown}: {problems}");
        }
    }

    #[test]
    fn a_role_mention_pasted_from_discord_is_taken_as_its_role_id() {
        let config = Config::parse("c.json", r#"{"controlRoles": ["<@&1400000000000000005>", "Moderators", "<@&x>"]}"#)
            .unwrap_or_else(|p| panic!("{p}"));
        assert_eq!(config.control_roles, ["1400000000000000005", "Moderators", "<@&x>"]);
        let (_, problems) =
            Config::parse_partly("c.json", r#"{"controlRoles": ["<@&1400000000000000005>", "1400000000000000005"]}"#);
        assert!(problems.iter().any(|p| p.to_string().contains("twice")), "the same role twice: {problems:?}");
    }

    #[test]
    fn a_token_in_the_file_is_refused_without_echoing_it() {
        let problems = Config::parse("c.json", r#"{"token": "secret-value"}"#).unwrap_err();
        let text = problems.to_string();
        assert!(text.contains("DISCORD_TOKEN"));
        assert!(!text.contains("secret-value"));
    }

    #[test]
    fn each_problem_of_a_channel_names_its_entry_and_line() {
        let text = r#"{"channels": [
  {"channelId": "111"},
  {"channelId": "222"},
  {"channelId": "333", "roster": ["pm", 7]},
  {"channelId": 444},
  {"channelId": "222"},
  {"channelId": "44x"}
]}"#;
        let problems = Config::parse("c6.json", text).unwrap_err();
        let said: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
        let expected = [
            "c6.json:4: field \"channels[2].roster\" must hold persona ids (strings), found a number",
            "c6.json:5: field \"channels[3].channelId\" must be a string (the id in quotes), found a number",
            "c6.json:6: field \"channels[4].channelId\" channel 222 is listed twice",
            "c6.json:7: field \"channels[5].channelId\" \"44x\" is not a Discord id",
        ];
        assert_eq!(said.len(), expected.len(), "{said:#?}");
        for (said, expected) in said.iter().zip(expected) {
            assert!(said.contains(expected), "{said}\n  expected: {expected}");
        }
    }

    #[test]
    fn channels_are_checked_for_ids_duplicates_and_unknown_personas() {
        let text = r#"{"channels": [{"channelId": "abc"}, {"channelId": "7", "roster": ["pm", "pm"]},
                                    {"channelId": "7"}]}"#;
        let problems = Config::parse("c.json", text).unwrap_err();
        assert_eq!(problems.0.len(), 3, "{problems}");

        let config = Config::parse("c.json", r#"{"channels": [{"channelId": "7", "roster": ["ghost"]}]}"#).unwrap();
        let catalog = PersonaCatalog::default();
        let problems = config.check_against("c.json", "", &catalog);
        assert!(problems[0].message.contains("\"ghost\""));

        // An entry refused at parse comes before it: the unknown persona is still placed at its own entry.
        let text =
            "{\"channels\": [\n  {\"channelId\": \"abc\"},\n  {\"channelId\": \"7\", \"roster\": [\"ghost\"]}\n]}";
        let (config, _) = Config::parse_partly("c.json", text);
        let problems = config.check_against("c.json", text, &catalog);
        assert_eq!((problems[0].field.as_str(), problems[0].line), ("channels[1].roster", Some(3)), "{problems:?}");
        // Written with a leading zero, or listed twice: still its own entry.
        let text = "{\"channels\": [\n  {\"channelId\": \"x\"},\n  {\"channelId\": \"07\"},\n  {\"channelId\": \"7\", \"roster\": [\"ghost\"]}\n]}";
        let (config, _) = Config::parse_partly("c.json", text);
        let problems = config.check_against("c.json", text, &catalog);
        assert_eq!((problems[0].field.as_str(), problems[0].line), ("channels[2].roster", Some(4)), "{problems:?}");
        // Found by a review: an unknown key was named `channels.rooster`, at the first entry's line, for every entry.
        let text = "{\"channels\": [\n  {\"channelId\": \"7\", \"rooster\": []},\n  {\"channelId\": \"8\", \"rooster\": []}\n]}";
        let problems = Config::parse("c.json", text).unwrap_err().0;
        let named: Vec<(&str, Option<usize>)> = problems.iter().map(|p| (p.field.as_str(), p.line)).collect();
        assert_eq!(named, [("channels[0].rooster", Some(2)), ("channels[1].rooster", Some(3))], "{problems:?}");
        assert!(problems[0].message.contains("did you mean \"roster\""), "{problems:?}");
    }

    #[test]
    fn the_rest_budget_defaults_to_45_a_second_and_must_be_a_whole_number_from_0() {
        assert_eq!(Config::default().rest_requests_per_second, 45);
        let config = Config::parse("c.json", r#"{"restRequestsPerSecond": 20}"#).unwrap();
        assert_eq!(config.rest_requests_per_second, 20);
        let off = Config::parse("c.json", r#"{"restRequestsPerSecond": 0}"#).unwrap();
        assert_eq!(off.rest_requests_per_second, 0, "0: no budget (a rate-limiting proxy in front)");
        for bad in ["-5", "2.5", "\"fast\"", "20000"] {
            let problems = Config::parse("c.json", &format!(r#"{{"restRequestsPerSecond": {bad}}}"#)).unwrap_err();
            assert_eq!(problems.0.len(), 1, "{bad}: {problems}");
            assert_eq!(problems.0[0].field, "restRequestsPerSecond", "{bad}");
            assert!(problems.to_string().contains("between 0 and 10000"), "{bad}: {problems}");
        }
    }

    #[test]
    fn a_blank_signal_keyword_is_refused() {
        let problems = Config::parse("c.json", r#"{"signal": {"turnComplete": ""}}"#).unwrap_err();
        assert_eq!(problems.0[0].field, "signal");
    }

    #[test]
    fn a_turn_announcement_without_the_mention_is_warned_about() {
        let (_, problems) = Config::parse_partly("c.json", r#"{"templates": {"turnStart": "{name}: {timeout}s."}}"#);
        assert!(problems.iter().any(|p| p.severity == Severity::Warning && p.field == "templates.turnStart"));
        let (_, problems) = Config::parse_partly("c.json", r#"{"templates": {"turnStart": "<@{userId}>, go."}}"#);
        assert!(problems.is_empty(), "{problems:?}");
    }

    /// Signal configurations that could never work are refused, each naming its field (found by a review: each was
    /// accepted, and every turn then ran to its timeout, or every message counted as an unknown signal).
    #[test]
    fn signals_that_could_never_work_are_refused() {
        let refused = |text: &str, field: &str, says: &str| {
            let problems = Config::parse("c.json", text).unwrap_err();
            let found = problems.0.iter().find(|p| p.field == field);
            assert!(found.is_some_and(|p| p.message.contains(says)), "{text}: {problems}");
        };
        refused(r#"{"signals": {"rules": []}}"#, "signals.rules", "no rule that ends a turn");
        let recording = r#"{"name": "NOTE", "pattern": "NOTE", "action": "record"}"#;
        // Rules that only record: said (`check` shows it; `run` logs it), as it may be meant.
        let (_, problems) = Config::parse_partly("c.json", &format!(r#"{{"signals": {{"rules": [{recording}]}}}}"#));
        assert!(problems.iter().any(|p| p.severity == Severity::Warning && p.message.contains("every turn would run")));
        refused(r#"{"signal": {"turnComplete": "DONE\u200b"}}"#, "signal", "invisible character");
        let hidden = r#"{"name": "DONE", "pattern": "DO\u2060NE", "action": "complete"}"#;
        refused(&format!(r#"{{"signals": {{"rules": [{hidden}]}}}}"#), "signals.rules[0].pattern", "invisible");
        refused(r#"{"signals": {"unknownPattern": ".*"}}"#, "signals.unknownPattern", "matches an empty line");
        // Still fine: no rule ending a turn, but completion phrases or silence do; and the default unknown pattern.
        let phrases = format!(r#"{{"signals": {{"rules": [{recording}], "completionPhrases": ["over to you"]}}}}"#);
        let config = Config::parse("c.json", &phrases).unwrap_or_else(|p| panic!("{p}"));
        assert_eq!(
            config.signals.turn_end_hint(&crate::core::ids::PersonaId::parse("pm").unwrap()),
            "over to you",
            "the announcement names what ends a turn"
        );
        let silence = format!(r#"{{"signals": {{"rules": [{recording}], "silenceSeconds": 60}}}}"#);
        assert!(Config::parse("c.json", &silence).is_ok());
        assert!(Config::parse("c.json", r#"{"signals": {"unknownPattern": "[A-Z]+:"}}"#).is_ok());
    }

    /// Rule settings that read one way and act another (found by an input review: each was accepted in silence).
    #[test]
    fn rule_settings_that_mislead_are_refused_or_warned_about() {
        let rules = |rule: &str| format!(r#"{{"signals": {{"rules": [{rule}]}}}}"#);
        let problem = |rule: &str, field: &str| {
            let (_, problems) = Config::parse_partly("c.json", &rules(rule));
            problems.into_iter().find(|p| p.field == field).unwrap_or_else(|| panic!("{rule}: nothing on {field}"))
        };
        // `"from": []` would let every persona send it, as no "from" does.
        let empty = problem(
            r#"{"name": "DONE", "pattern": "DONE", "action": "complete", "from": []}"#,
            "signals.rules[0].from",
        );
        assert!(empty.severity == Severity::Error && empty.message.contains("leave \"from\" out"), "{empty:?}");
        let twice = problem(
            r#"{"name": "DONE", "pattern": "DONE", "action": "complete", "from": ["dev", "dev"]}"#,
            "signals.rules[0].from",
        );
        assert!(twice.severity == Severity::Warning && twice.message.contains("\"dev\" twice"), "{twice:?}");
        let route = r#"{"name": "R", "pattern": "R (?P<task>\\w+)", "action": "route", "to": "dev", "stage": " "}"#;
        assert_eq!(problem(route, "signals.rules[0].stage").severity, Severity::Error);
        // A pattern any plain answer matches: warned about, naming the action it would take on every message.
        // (`\s` alone is no signal at all: whitespace is never one.)
        for (pattern, at) in [(r"\\S", "anywhere"), (r"\\w+", "line"), (".", "end")] {
            let rule = format!(r#"{{"name": "X", "pattern": "{pattern}", "at": "{at}", "action": "complete"}}"#);
            let said = problem(&rule, "signals.rules[0].pattern");
            assert!(said.severity == Severity::Warning && said.message.contains("\"complete\""), "{pattern}: {said:?}");
        }
        // A signal's own text, and a word an answer may well hold but not every answer: said nothing about.
        for rule in [
            r#"{"name": "DONE", "pattern": "DONE", "action": "complete"}"#,
            r#"{"name": "P", "pattern": "(?i)plan", "at": "anywhere", "action": "record"}"#,
        ] {
            let (_, problems) = Config::parse_partly("c.json", &rules(rule));
            assert!(!problems.iter().any(|p| p.field.starts_with("signals.rules[0]")), "{rule}: {problems:?}");
        }
    }

    #[test]
    fn control_roles_naming_everyone_are_refused_and_a_repeated_one_is_warned_about() {
        let problems = Config::parse("c.json", r#"{"controlRoles": ["Moderators", "@everyone"]}"#).unwrap_err();
        assert!(problems.0.iter().any(|p| p.field == "controlRoles" && p.message.contains("@everyone")), "{problems}");
        let (_, problems) = Config::parse_partly("c.json", r#"{"controlRoles": ["Moderators", "Moderators"]}"#);
        assert!(
            problems.iter().any(|p| p.severity == Severity::Warning && p.message.contains("\"Moderators\" twice")),
            "{problems:?}"
        );
        // A role merely named like it is another role.
        assert!(Config::parse("c.json", r#"{"controlRoles": ["everyone"]}"#).is_ok());
    }

    /// Found by an input review: a rule sending the floor to a persona a configured channel leaves out was accepted
    /// in silence, and refused there at every use.
    #[test]
    fn a_rule_sending_the_floor_to_a_persona_a_channel_leaves_out_is_warned_about() {
        let catalog = crate::core::persona::two_personas(60);
        let text = r#"{"channels": [{"channelId": "7", "roster": ["pm"]}, {"channelId": "8", "roster": ["pm", "dev"]},
                       {"channelId": "9"}],
                       "signals": {"rules": [
                         {"name": "DONE", "pattern": "DONE", "action": "complete"},
                         {"name": "REVIEW", "pattern": "REVIEW (?P<task>\\w+)", "action": "route", "to": "dev",
                          "from": ["pm"]}]}}"#;
        let config = Config::parse("c.json", text).unwrap_or_else(|p| panic!("{p}"));
        let problems = config.check_against("c.json", text, &catalog);
        assert_eq!(problems.len(), 1, "only channel 7 leaves dev out: {problems:?}");
        let said = &problems[0];
        assert_eq!((said.severity, said.field.as_str()), (Severity::Warning, "channels[0].roster"));
        assert!(said.message.contains("\"dev\"") && said.message.contains("REVIEW"), "{said:?}");
        // A rule none of the channel's members may send never runs there: nothing to say.
        let personas = PersonaCatalog::new(
            ["pm", "dev", "critic"]
                .into_iter()
                .enumerate()
                .map(|(n, id)| crate::core::persona::Persona {
                    id: PersonaId::parse(id).unwrap(),
                    display_name: id.into(),
                    discord_user_id: crate::core::ids::UserId(n as u64 + 1),
                    avatar_url: None,
                    timeout_seconds: None,
                    order: None,
                    source: format!("{id}.json"),
                })
                .collect(),
        );
        let text = r#"{"channels": [{"channelId": "7", "roster": ["pm"]}],
                       "signals": {"rules": [
                         {"name": "DONE", "pattern": "DONE", "action": "complete"},
                         {"name": "REVIEW", "pattern": "REVIEW (?P<task>\\w+)", "action": "route", "to": "dev",
                          "from": ["critic"]}]}}"#;
        let config = Config::parse("c.json", text).unwrap_or_else(|p| panic!("{p}"));
        assert!(config.check_against("c.json", text, &personas).is_empty());
    }
}
