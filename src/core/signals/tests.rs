//! Signal grammar tests: a configuration with many mistakes reported at once.

use crate::core::config::Config;

// Configuration errors: every mistake at once, each at its rule, field and line.

#[test]
fn every_mistake_in_the_rules_is_reported_at_once_with_its_field_and_line() {
    let text = r#"{
  "signals": {
    "rules": [
      { "name": "ok", "pattern": "OK", "action": "complete" },
      { "name": "bad_regex", "pattern": "READY(", "action": "complete" },
      { "name": "typo", "pattern": "DONE",
        "action": "compelte" },
      { "name": "route", "pattern": "GO: (?P<task>\\S+)", "at": "line", "action": "route" },
      { "name": "group", "pattern": "P: (?P<paylod>\\d+)", "action": "record" },
      { "name": "hand", "pattern": "HANDOFF", "action": "handoff" },
      { "name": "ok_again", "pattern": "OK", "action": "pass" },
      { "name": "ok", "pattern": "OK!", "action": "complete" }
    ]
  }
}"#;
    let problems = Config::parse("c.json", text).unwrap_err();
    let lines: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
    let expected = [
        "error: c.json:5: field \"signals.rules[1].pattern\" does not compile: unclosed group",
        "error: c.json:7: field \"signals.rules[2].action\" is \"compelte\"; did you mean \"complete\"? use one of \
         \"complete\", \"pass\", \"handoff\", \"route\", \"finishTask\", \"keep\", \"progress\", \"escalate\", \
         \"record\", \"end\"",
        "error: c.json:8: field \"signals.rules[3]\" has action \"route\" but no \"to\": name the persona the task \
         goes to",
        "error: c.json:9: field \"signals.rules[4].pattern\" has a group named \"paylod\"; the groups read are \
         (?P<payload>...) and (?P<task>...)",
        "error: c.json:10: field \"signals.rules[5].pattern\" has action \"handoff\" without \"to\", so its pattern \
         needs a (?P<payload>...) group naming the persona",
        "error: c.json:11: field \"signals.rules[6].priority\" rule \"ok_again\" can never win: rule 0 (\"ok\") has \
         the same pattern and a priority at least as high; give it a higher priority or remove it",
        "error: c.json:12: field \"signals.rules[7].name\" \"ok\" is also the name of rule 0; names must be unique",
    ];
    assert_eq!(lines, expected, "\n{}", lines.join("\n"));
}
