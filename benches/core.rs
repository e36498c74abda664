//! Criterion benches of the core's hot paths: signal detection, one transition (a message that completes a turn),
//! one durable save of a session (`Store::save` into a temporary folder, so on a real disk with its fsyncs), and a
//! burst of 1,000 saves through the store's writer (on tmpfs when there is one: its CPU, not the disk's).

use chrono::{DateTime, Utc};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use turn_manager::core::config::Config;
use turn_manager::core::ids::{ChannelId, MessageId, PersonaId, UserId};
use turn_manager::core::persona::{Persona, PersonaCatalog};
use turn_manager::core::session::{Command, Context, IncomingMessage, Session};
use turn_manager::store::{Store, Writer};

/// A few hundred characters: an agent's typical answer.
const ANSWER: &str = "Here is my review of the plan. The parser should stay apart from the network, time should be \
    passed in rather than read, and every error should carry the path it is about. I would split the actor from \
    its sender so that a slow REST call delays only its own channel.";

fn personas() -> PersonaCatalog {
    let persona = |i: u64, id: &str| Persona {
        id: PersonaId::parse(id).unwrap(),
        display_name: id.to_uppercase(),
        discord_user_id: UserId(1_312_000_000_000_000_000 + i),
        avatar_url: None,
        timeout_seconds: Some(90),
        order: Some(i as i64),
        source: format!("personas/{id}.json"),
    };
    PersonaCatalog::new(vec![persona(1, "pm"), persona(2, "dev"), persona(3, "critic")])
}

fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap()
}

/// A running session ten turns in, pm's turn just begun; and pm's signal for it.
fn running_session(personas: &PersonaCatalog, config: &Config) -> (Session, IncomingMessage) {
    session_after(personas, config, 10, 5_000)
}

/// A running session `turns` turns in, one every `every_ms`, pm's turn just begun; and pm's signal for it.
fn session_after(
    personas: &PersonaCatalog,
    config: &Config,
    turns: usize,
    every_ms: i64,
) -> (Session, IncomingMessage) {
    let ctx = Context { personas, config };
    let mut ms = 1_795_000_000_000;
    let mut session = Session::new(ChannelId(1_400_000_000_000_000_000));
    session.handle_command(&Command::Start { roster: Vec::new() }, None, at(ms), ctx).unwrap();
    // Each answer differs: the same text in a row is a loop, which pauses the session (seed 003).
    let signal_of = |session: &Session, ms: i64| {
        let holder = session.active_agent.clone().unwrap();
        let id = MessageId::first_at(at(ms));
        IncomingMessage {
            id,
            author: personas.get(&holder).unwrap().discord_user_id,
            text: format!("{ANSWER} (at {ms})\n\nTURN_COMPLETE"),
            edited: false,
            written_at: id.created_at(),
            edited_at: None,
            has_files: false,
            flags: Default::default(),
            mentions: None,
        }
    };
    for _ in 1..turns {
        ms += every_ms;
        let message = signal_of(&session, ms);
        session.handle_message(&message, at(ms), ctx);
    }
    let message = signal_of(&session, ms + every_ms);
    assert_eq!(session.status, turn_manager::core::session::SessionStatus::Running, "not paused as a loop");
    (session, message)
}

fn signal_detection(c: &mut Criterion) {
    let config = Config::default();
    let author = turn_manager::core::ids::PersonaId::parse("pm").unwrap();
    let with = format!("{ANSWER}\n\nTURN_COMPLETE");
    c.bench_function("signal detection, an answer with the signal", |b| {
        b.iter(|| config.signals.detect(black_box(&with), &author).is_some())
    });
    c.bench_function("signal detection, an answer without it", |b| {
        b.iter(|| config.signals.detect(black_box(ANSWER), &author).is_some())
    });
}

fn transition(c: &mut Criterion) {
    let (personas, config) = (personas(), Config::default());
    let (session, signal) = running_session(&personas, &config);
    let now = signal.written_at + chrono::TimeDelta::milliseconds(2);
    c.bench_function("transition, a signal that completes the turn", |b| {
        b.iter_batched_ref(
            || session.clone(),
            |session| {
                let t = session.handle_message(&signal, now, Context { personas: &personas, config: &config });
                assert!(t.events.iter().any(|e| e.kind.name() == "turn_complete"));
                t
            },
            BatchSize::SmallInput,
        )
    });
}

/// What a channel's actor does at its deadline before it waits for the save: the transition, and the copy of the
/// session it hands the store's writer. 1,000 deadlines at one instant queue up this much work on the workers.
fn timeout(c: &mut Criterion) {
    let (personas, config) = (personas(), Config::default());
    let (mut session, _) = running_session(&personas, &config);
    session.forget_delivered_announcement(); // Discord accepted pm's floor: its deadline runs.
    let deadline = session.wake_at(Context { personas: &personas, config: &config }).unwrap();
    c.bench_function("transition, a deadline that times the turn out", |b| {
        b.iter_batched_ref(
            || session.clone(),
            |session| {
                let t = session.tick(deadline, Context { personas: &personas, config: &config });
                assert!(t.events.iter().any(|e| e.kind.name() == "turn_timeout"));
                t
            },
            BatchSize::SmallInput,
        )
    });
    c.bench_function("a session copied for the store's writer", |b| b.iter(|| black_box(&session).clone()));
}

/// A channel whose agents answer at once (the bench's turns phase): its last 256 messages, all within the last ten
/// seconds, are the ids the session keeps and saves (a full ring), and its history tail is full. What each durable save costs before the disk: the copy
/// the actor hands the store's writer, that copy dropped, and its JSON line.
fn busy_session(c: &mut Criterion) {
    let (personas, config) = (personas(), Config::default());
    let (session, _) = session_after(&personas, &config, 400, 20);
    assert_eq!(session.recent_ids.len(), turn_manager::core::session::RecentIds::CAPACITY);
    c.bench_function("a busy session copied for the store's writer", |b| b.iter(|| black_box(&session).clone()));
    c.bench_function("a busy session's copy dropped", |b| {
        b.iter_batched(|| session.clone(), drop, BatchSize::SmallInput)
    });
    c.bench_function("a busy session encoded (the journal's line)", |b| {
        b.iter(|| serde_json::to_vec(black_box(&session)).unwrap())
    });
}

fn durable_save(c: &mut Criterion) {
    let (personas, config) = (personas(), Config::default());
    let (mut session, signal) = running_session(&personas, &config);
    let now = signal.written_at;
    let events = session.handle_message(&signal, now, Context { personas: &personas, config: &config }).events;
    let folder = tempfile::tempdir().unwrap();
    let store = Store::open(folder.path()).unwrap();
    c.bench_function("durable save of a session (Store::save)", |b| b.iter(|| store.save(&session, &events).unwrap()));
}

/// 1,000 busy sessions saved at once, as when 1,000 deadlines fall together: the sessions handed to the writer
/// (each a copy, as an actor's), encoded, journaled in group commits and answered. On tmpfs the fdatasync costs next to
/// nothing, so this is the writer's CPU.
fn burst_of_saves(c: &mut Criterion) {
    let (personas, config) = (personas(), Config::default());
    let (mut busy, signal) = session_after(&personas, &config, 400, 20);
    let ctx = Context { personas: &personas, config: &config };
    let events = busy.handle_message(&signal, signal.written_at, ctx).events;
    let sessions: Vec<Session> =
        (0..1_000).map(|i| Session { channel_id: ChannelId(busy.channel_id.0 + i), ..busy.clone() }).collect();
    let folder = tempfile::Builder::new().tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let writer = Writer::spawn(Store::open(folder.path()).unwrap());
    let mut group = c.benchmark_group("store");
    group.sample_size(20);
    group.bench_function("1,000 busy sessions saved at once (Writer::save_durable)", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let saves: Vec<_> = sessions
                    .iter()
                    .map(|session| {
                        let (writer, session, events) = (writer.clone(), session.clone(), events.clone());
                        runtime.spawn(async move { writer.save_durable(session, events).await })
                    })
                    .collect();
                for save in saves {
                    save.await.unwrap().unwrap();
                }
            })
        })
    });
    group.finish();
}

/// A timeout recorded once the lateness samples are at their bound (every later timeout drops the oldest sample under
/// the shared lock): constant time, not a shift of every kept sample.
fn timeout_at_the_sample_bound(c: &mut Criterion) {
    let stats = turn_manager::discord::stats::Stats::default();
    for sample in 0..200_000 {
        stats.timeout(sample);
    }
    c.bench_function("a timeout recorded with the lateness samples full (Stats::timeout)", |b| {
        b.iter(|| stats.timeout(7))
    });
}

criterion_group!(
    benches,
    signal_detection,
    transition,
    timeout,
    busy_session,
    durable_save,
    burst_of_saves,
    timeout_at_the_sample_bound
);
criterion_main!(benches);
