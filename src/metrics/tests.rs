//! The metrics as Prometheus renders them, recorded into a local recorder (the global one is installed only by
//! `serve`, once per process, which unit tests never call).

use super::turns::count_turn_ends;
use super::*;
use crate::core::config::Config;
use crate::core::ids::{ChannelId, MessageId, UserId};
use crate::core::session::effects::Effect;
use crate::core::session::history::{EventKind, HistoryEvent};
use crate::core::session::{Command, Context, IncomingMessage, Session};
use chrono::{DateTime, TimeDelta, Utc};

/// What `/metrics` would show after `record` ran with the bot's exporter configuration.
fn rendered(record: impl FnOnce()) -> String {
    let recorder = exporter::builder().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        describe();
        record();
    });
    recorder.handle().render()
}

/// The value of the sample line that starts with `series` (name and labels), if there is one.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn every_metric_is_named_by_the_conventions_and_described() {
    for (name, kind, help) in DESCRIPTIONS {
        assert!(name.starts_with("turn_manager_"), "{name}");
        match kind {
            Kind::Counter => assert!(name.ends_with("_total"), "{name}"),
            Kind::Histogram => assert!(name.ends_with("_seconds"), "{name}"),
            Kind::Gauge => assert!(!name.ends_with("_total"), "{name}"),
        }
        assert!(help.len() > 20 && help.ends_with('.'), "{name}: {help}");
    }
    let text = rendered(|| {});
    for name in [TIMEOUTS, LEASE_TAKEOVERS, FENCED_SAVES_REJECTED] {
        assert!(text.contains(&format!("# HELP {name} ")), "{text}");
        assert_eq!(sample(&text, name), Some(0.0), "declared before anything happens: {text}");
    }
    assert_eq!(sample(&text, ACTIVE_ACTORS), Some(0.0), "{text}");
}

#[test]
fn turn_ends_timeouts_and_lateness_are_counted_and_bucketed() {
    let text = rendered(|| {
        let event = |kind| HistoryEvent { at: t0(), round: 1, agent_id: None, kind };
        let dev = crate::core::ids::PersonaId::parse("dev").unwrap();
        count_turn_ends(&[
            event(EventKind::TurnTimeout { duration_seconds: 60, next_agent: dev.clone() }),
            event(EventKind::Extended { seconds: 5 }),
        ]);
        count_turn_ends(&[event(EventKind::Skipped { next_agent: dev })]);
        record_lateness(3);
        record_lateness(-2);
    });
    assert_eq!(sample(&text, &format!("{TURNS_ENDED}{{reason=\"timeout\"}}")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &format!("{TURNS_ENDED}{{reason=\"skip\"}}")), Some(1.0), "{text}");
    assert_eq!(sample(&text, TIMEOUTS), Some(1.0), "a skip is no timeout: {text}");
    assert_eq!(sample(&text, &format!("{TIMEOUT_LATENESS}_count")), Some(2.0), "{text}");
    assert_eq!(sample(&text, &format!("{TIMEOUT_LATENESS}_bucket{{le=\"0.001\"}}")), Some(1.0), "early is 0: {text}");
    assert_eq!(sample(&text, &format!("{TIMEOUT_LATENESS}_bucket{{le=\"0.005\"}}")), Some(2.0), "{text}");
    assert_eq!(sample(&text, &format!("{TIMEOUT_LATENESS}_sum")), Some(0.003), "{text}");
}

#[test]
fn rest_calls_are_timed_and_counted_by_route_and_status_class_with_429s_apart() {
    let route = route::template("POST", "/channels/123/messages");
    let text = rendered(|| {
        record_rest(route.clone().into(), Answer::Status(200), Duration::from_millis(20));
        record_rest(route.clone().into(), Answer::Status(429), Duration::from_millis(5));
        record_rest(route.clone().into(), Answer::Timeout, Duration::from_secs(10));
        record_rest("GET /channels/{id}".into(), Answer::Status(403), Duration::from_millis(5));
    });
    let posts = "route=\"POST /channels/{id}/messages\"";
    assert_eq!(sample(&text, &format!("{REST_RESPONSES}{{{posts},status=\"2xx\"}}")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &format!("{REST_RESPONSES}{{{posts},status=\"4xx\"}}")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &format!("{REST_RESPONSES}{{{posts},status=\"timeout\"}}")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &format!("{REST_RATE_LIMITED}{{{posts}}}")), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, &format!("{REST_RATE_LIMITED}{{route=\"GET /channels/{{id}}\"}}")),
        None,
        "a 403 is no 429"
    );
    assert_eq!(sample(&text, &format!("{REST_DURATION}_count{{{posts}}}")), Some(3.0), "{text}");
    assert!(!text.contains("123"), "no id in any label: {text}");
}

#[test]
fn a_rest_answer_has_its_class() {
    use crate::discord::rest::RestError;
    assert_eq!(Answer::of(&Ok::<(), RestError>(())).class(), "2xx");
    let status = |status| Err::<(), _>(RestError::Status { status, message: String::new(), retry_after: None });
    assert_eq!(Answer::of(&status(404)).class(), "4xx");
    assert_eq!(Answer::of(&status(502)).class(), "5xx");
    assert_eq!(Answer::of(&Err::<(), _>(RestError::Timeout(Duration::from_secs(10)))).class(), "timeout");
    assert_eq!(Answer::of(&Err::<(), _>(RestError::Transport("reset".into()))).class(), "failed");
    // Discord answered these, a 403 and a 401: counted as the answers they were, not as failed calls.
    assert_eq!(Answer::of(&Err::<(), _>(RestError::NetworkRefused("blocked".into()))).class(), "4xx");
    assert_eq!(Answer::of(&Err::<(), _>(RestError::WebhookTokenRefused("bad".into()))).class(), "4xx");
}

fn t0() -> DateTime<Utc> {
    "2026-03-01T10:00:00Z".parse().unwrap()
}

fn at(ms: i64) -> DateTime<Utc> {
    t0() + TimeDelta::milliseconds(ms)
}

/// pm's message, written and handled `ms` after the start.
fn from_pm(text: &str, ms: i64) -> IncomingMessage {
    let id = MessageId(MessageId::first_at(at(ms)).0 + 1);
    IncomingMessage {
        id,
        author: UserId(1),
        text: text.into(),
        edited: false,
        written_at: id.created_at(),
        edited_at: None,
        has_files: false,
        flags: Default::default(),
        mentions: None,
    }
}

/// The id of the queued effect that is the current turn's floor announcement.
fn floor_of(session: &Session) -> u64 {
    let floor = session.turn_announcement.clone().expect("a floor announcement on its way");
    session.outbox.iter().find(|q| matches!(&q.effect, Effect::Announce(a) if *a.nonce == *floor)).unwrap().id
}

/// Effect `id` is accepted by Discord `ms` after the start, reported to the handoff first, as the actor does.
fn accepted(session: &mut Session, handoff: &mut Handoff, id: u64, ms: i64) {
    handoff.reported(session, id, Some(at(ms)));
    session.effect_done(id, at(ms), None);
}

/// A session of pm and dev started at the start, its effects queued (pm's floor not accepted yet).
fn started(ctx: Context) -> Session {
    let mut session = Session::new(ChannelId(9));
    let t = session.handle_command(&Command::Start { roster: vec![] }, None, t0(), ctx).unwrap();
    session.enqueue(t.effects);
    session
}

#[test]
fn a_handoff_runs_from_the_ending_message_to_the_next_floor_being_accepted_and_is_timed_once() {
    let (personas, config) = (crate::core::persona::two_personas(60), Config::default());
    let ctx = Context { personas: &personas, config: &config };
    let mut handoff = Handoff::default();
    let text = rendered(|| {
        let mut session = started(ctx);
        let pm_floor = floor_of(&session);
        accepted(&mut session, &mut handoff, pm_floor, 40); // a start ends no turn: no handoff

        let t = session.handle_message(&from_pm("Done. TURN_COMPLETE", 10_000), at(10_000), ctx);
        handoff.begin(&t.events, &session);
        let queued = session.enqueue(t.effects);
        let dev_floor = floor_of(&session);
        for other in queued.iter().filter(|q| q.id != dev_floor) {
            accepted(&mut session, &mut handoff, other.id, 10_100); // the relay: not the floor
        }
        accepted(&mut session, &mut handoff, dev_floor, 10_250);
        handoff.reported(&session, dev_floor, Some(at(10_300))); // reported twice: timed once
    });
    assert_eq!(sample(&text, &format!("{HANDOFF}_count")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &format!("{HANDOFF}_sum")), Some(0.25), "{text}");
}

#[test]
fn a_turn_ended_by_a_manager_before_the_floor_is_accepted_is_no_handoff() {
    let (personas, config) = (crate::core::persona::two_personas(60), Config::default());
    let ctx = Context { personas: &personas, config: &config };
    let mut handoff = Handoff::default();
    let text = rendered(|| {
        let mut session = started(ctx);
        let t = session.handle_message(&from_pm("TURN_COMPLETE", 1_000), at(1_000), ctx);
        handoff.begin(&t.events, &session);
        session.enqueue(t.effects);
        let dev_floor = floor_of(&session);
        // dev's turn is skipped while its floor is still on its way: pm's floor after it is no handoff either.
        let t = session.handle_command(&Command::Skip, None, at(1_500), ctx).unwrap();
        session.enqueue(t.effects);
        let pm_floor = floor_of(&session);
        accepted(&mut session, &mut handoff, dev_floor, 2_000);
        accepted(&mut session, &mut handoff, pm_floor, 2_100);
    });
    assert_eq!(sample(&text, &format!("{HANDOFF}_count")), None, "{text}");
}

#[test]
fn shards_are_connected_or_not_and_their_latency_is_read_every_few_seconds() {
    let mut shards = Shards::default();
    let start = tokio::time::Instant::now();
    let recorder = exporter::builder().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        shards.record([(0, true, Some(Duration::from_millis(42)))], start);
        shards.record([(0, true, Some(Duration::from_millis(900)))], start + Duration::from_secs(1));
    });
    let text = recorder.handle().render();
    assert_eq!(sample(&text, &format!("{SHARD_CONNECTED}{{shard=\"0\"}}")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &format!("{SHARD_LATENCY}{{shard=\"0\"}}")), Some(0.042), "read once in 5 s: {text}");
    shards.record([], start + gateway::LATENCY_EVERY); // the shard's gauges are kept: no recorder needed
    let text = recorder.handle().render();
    assert_eq!(sample(&text, &format!("{SHARD_CONNECTED}{{shard=\"0\"}}")), Some(0.0), "gone: {text}");
    let latency = sample(&text, &format!("{SHARD_LATENCY}{{shard=\"0\"}}"));
    assert!(latency.is_some_and(f64::is_nan), "no latency for a connection that is gone: {text}");
}

/// Found by a review: the latency gauge read 0 before the first heartbeat (a perfect connection, on a dashboard) and
/// kept its last value while the shard was disconnected.
#[test]
fn a_shard_latency_not_known_is_no_value_rather_than_zero_or_the_last_one() {
    let mut shards = Shards::default();
    let start = tokio::time::Instant::now();
    let recorder = exporter::builder().build_recorder();
    let latency = |text: &str| sample(text, &format!("{SHARD_LATENCY}{{shard=\"1\"}}"));
    metrics::with_local_recorder(&recorder, || shards.record([(1, true, None)], start));
    assert!(latency(&recorder.handle().render()).is_some_and(f64::is_nan), "before the first heartbeat");
    shards.record([(1, true, Some(Duration::from_millis(40)))], start + gateway::LATENCY_EVERY);
    assert_eq!(latency(&recorder.handle().render()), Some(0.040));
    shards.record([(1, false, Some(Duration::from_millis(40)))], start + gateway::LATENCY_EVERY * 2);
    assert!(latency(&recorder.handle().render()).is_some_and(f64::is_nan), "disconnected");
}
