//! Order independence (spec 5.7): every message is judged by when it was written, so a session whose messages are
//! handled late and in another order (a reordered or delayed dispatch, a catch-up) ends where handling them in the
//! order they were written leaves it. Commands keep their own order (poise hands them over as given). `skip` and
//! `give` are left out: one handled before a signal written earlier, which the bot has not seen yet, ends the turn
//! the signal would have ended (one turn end, never two, README "Rules"), where in order both act. And each persona
//! signals once: a later signal of the same holder handled before its earlier one ends the turn first (spec 5.7: a
//! turn already ended and announced is not ended again), which no order-free rule can undo. Messages are late by less
//! than half the reorder window (10 s): what is overtaken by more is beyond what the session keeps to judge again.

use super::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Written {
    /// `author` 0..3 are the personas, 3 is a person.
    Say {
        author: usize,
        signal: bool,
    },
    Command(Command),
}

fn written() -> impl Strategy<Value = Written> {
    let command = prop_oneof![Just(Command::Pause), Just(Command::Resume)];
    prop_oneof![
        4 => (0usize..4, any::<bool>()).prop_map(|(author, signal)| Written::Say { author, signal }),
        1 => command.prop_map(Written::Command),
    ]
}

/// Where a session ended: what a person sees in `status`.
fn outcome(f: &Fixture) -> (SessionStatus, Option<PersonaId>, u32) {
    (f.session.status, f.session.active_agent.clone(), f.session.round)
}

/// Runs the script, each item handled `delays[i]` ms after it was written (commands at once): all within the first
/// turn's 90 s, so no deadline passes.
fn play(script: &[(Written, i64)], delays: &[i64]) -> Fixture {
    let mut f = Fixture::new();
    let users = [PM, DEV, CRITIC, HUMAN];
    let mut at = 0;
    let mut items: Vec<(i64, i64, usize)> = Vec::new(); // (handled, written, index)
    let (mut ids, mut texts) = (Vec::new(), Vec::new());
    let mut signalled = [false; 4];
    for (i, (item, gap)) in script.iter().enumerate() {
        at += gap;
        let text = match item {
            Written::Say { author, signal } if *signal && !std::mem::replace(&mut signalled[*author], true) => {
                format!("part {i} TURN_COMPLETE")
            }
            _ => format!("part {i}"),
        };
        texts.push(text);
        let delay = match item {
            Written::Command(_) => 0,
            Written::Say { .. } => delays[i % delays.len()],
        };
        items.push((at + delay, at, i));
        ids.push(f.mint(at));
    }
    items.sort();
    for (handled, written, i) in items {
        match &script[i].0 {
            Written::Say { author, .. } => {
                let message = IncomingMessage {
                    id: ids[i],
                    author: users[*author],
                    text: texts[i].clone(),
                    edited: false,
                    written_at: Fixture::at(written),
                    edited_at: None,
                    has_files: false,
                    flags: Default::default(),
                    mentions: None,
                };
                f.deliver(&message, handled);
            }
            Written::Command(command) => {
                let _ = f.run(command.clone(), Some(ids[i]), handled);
            }
        }
    }
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn messages_handled_late_and_out_of_order_leave_the_session_where_in_order_would(
        script in prop::collection::vec((written(), 1i64..3_000), 1..14),
        delays in prop::collection::vec(0i64..5_000, 1..14),
    ) {
        let in_order = play(&script, &[0]);
        let reordered = play(&script, &delays);
        prop_assert_eq!(outcome(&reordered), outcome(&in_order));
    }
}
