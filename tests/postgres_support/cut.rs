//! A TCP relay between the store and Postgres that can break a connection at a transaction's `COMMIT`: after the
//! server has carried it out (its answer lost: the client cannot know whether it committed), before the server sees
//! it (rolled back), or with the client's connection closed at once and the COMMIT sent on later (the transaction
//! still open on the server while the client already tries again). It reads the client's side of the protocol message by message, so it needs a
//! connection without TLS (`sslmode=disable`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What happens to the next `COMMIT` any connection sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NextCommit {
    Relayed = 0,
    /// The server carries it out; its answer never reaches the client, whose connection is closed.
    AnswerLost = 1,
    /// The server never sees it; both connections are closed.
    Lost = 2,
    /// The client's connection is closed at once; the server gets the COMMIT [`DELAY`] later.
    Delayed = 3,
    /// The server carries it out; from then on the client hears nothing, its connection left open (the database's
    /// host gone without a word: no reset ever comes).
    Silent = 4,
}

/// How long a [`NextCommit::Delayed`] COMMIT waits.
pub const DELAY: std::time::Duration = std::time::Duration::from_millis(1500);

pub struct CommitCutter {
    /// Where to connect: `host:port` of the relay.
    pub addr: std::net::SocketAddr,
    next: Arc<AtomicU8>,
    /// Nothing is relayed either way any more, and no connection closed (the database's host gone without a word).
    frozen: Arc<std::sync::atomic::AtomicBool>,
    /// See [`CommitCutter::hold_next_containing`].
    hold: Arc<Hold>,
    /// How many of the next connections are answered as a Postgres still starting up would answer them.
    starting: Arc<std::sync::atomic::AtomicUsize>,
}

/// A statement to hold: the text to look for in a client's message, whether one was held, and its release.
#[derive(Default)]
struct Hold {
    wanted: std::sync::Mutex<Option<Vec<u8>>>,
    held: std::sync::atomic::AtomicBool,
    released: tokio::sync::Notify,
}

impl CommitCutter {
    /// A relay to `upstream` (`host:port`), relaying everything until told otherwise.
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a local port for the relay");
        let addr = listener.local_addr().unwrap();
        let next = Arc::new(AtomicU8::new(NextCommit::Relayed as u8));
        let frozen = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hold = Arc::new(Hold::default());
        let starting = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (shared, cold, holding, still_starting) = (next.clone(), frozen.clone(), hold.clone(), starting.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let one_less = |n: usize| n.checked_sub(1);
                if still_starting.fetch_update(Ordering::SeqCst, Ordering::SeqCst, one_less).is_ok() {
                    tokio::spawn(answer_starting_up(client));
                    continue;
                }
                let server = TcpStream::connect(&upstream).await.expect("the relay reaches Postgres");
                tokio::spawn(relay(client, server, shared.clone(), cold.clone(), holding.clone()));
            }
        });
        CommitCutter { addr, next, frozen, hold, starting }
    }

    /// The next `n` connections are refused as a Postgres still starting up refuses them (its error 57P03 in answer to
    /// the start-up message); the ones after are relayed.
    pub fn starting_up_for(&self, n: usize) {
        self.starting.store(n, Ordering::SeqCst);
    }

    /// How many connections are still to be refused as starting up.
    pub fn still_starting(&self) -> usize {
        self.starting.load(Ordering::SeqCst)
    }

    /// The next client message holding `text` (a statement's SQL, sent when it is first prepared on a connection)
    /// is held, the server never seeing it, until [`CommitCutter::release_held`]; then its connection is closed: the
    /// statement fails, after whatever the other connections did meanwhile.
    pub fn hold_next_containing(&self, text: &str) {
        *self.hold.wanted.lock().unwrap() = Some(text.as_bytes().to_vec());
    }

    /// Whether a statement is held now.
    pub fn holding(&self) -> bool {
        self.hold.held.load(Ordering::SeqCst)
    }

    pub fn release_held(&self) {
        self.hold.released.notify_one();
    }

    /// From now on nothing passes either way on any connection, and none is closed.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    pub fn cut_next_commit(&self, how: NextCommit) {
        self.next.store(how as u8, Ordering::SeqCst);
    }

    /// Whether the cut asked for has happened.
    pub fn cut_done(&self) -> bool {
        self.next.load(Ordering::SeqCst) == NextCommit::Relayed as u8
    }
}

/// Reads the client's start-up message and answers it with Postgres's "the database system is starting up".
async fn answer_starting_up(client: TcpStream) {
    let (mut from_client, mut to_client) = client.into_split();
    if read_message(&mut from_client, false).await.is_err() {
        return;
    }
    let mut fields = Vec::new();
    for (kind, value) in
        [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', "57P03"), (b'M', "the database system is starting up")]
    {
        fields.push(kind);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    message.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    message.extend_from_slice(&fields);
    let _ = to_client.write_all(&message).await;
    let _ = to_client.shutdown().await;
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    next: Arc<AtomicU8>,
    frozen: Arc<std::sync::atomic::AtomicBool>,
    hold: Arc<Hold>,
) {
    let cold = frozen.clone();
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    // What the server sends on: 0 relayed, 1 dropped (the client's connection closed at the next answer), 2 the
    // client's connection closed now.
    let (cut_tx, mut cut) = tokio::sync::watch::channel(0u8);
    let down = tokio::spawn(async move {
        let mut buf = vec![0; 64 * 1024];
        loop {
            tokio::select! {
                read = from_server.read(&mut buf) => match read {
                    Ok(n) if n > 0 && cold.load(Ordering::SeqCst) => {}
                    Ok(n) if n > 0 && *cut.borrow() == 0 => {
                        if to_client.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                    // Silent: swallowed, the client's connection kept open.
                    Ok(n) if n > 0 && *cut.borrow() == 3 => {}
                    // The COMMIT's answer (or the end): the client's connection is closed with `to_client`.
                    _ => return,
                },
                _ = cut.changed() => if *cut.borrow() == 2 {
                    return;
                },
            }
        }
    });
    // The start-up message has no type byte: its length, then the rest.
    let Ok(startup) = read_message(&mut from_client, false).await else { return };
    if to_server.write_all(&startup).await.is_err() {
        return;
    }
    while let Ok(message) = read_message(&mut from_client, true).await {
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        let wanted = {
            let mut wanted = hold.wanted.lock().unwrap();
            let found = wanted.as_ref().is_some_and(|text| message.windows(text.len()).any(|w| w == text.as_slice()));
            if found { wanted.take() } else { None }
        };
        if wanted.is_some() {
            hold.held.store(true, Ordering::SeqCst);
            hold.released.notified().await;
            hold.held.store(false, Ordering::SeqCst);
            down.abort();
            return;
        }
        let commit = message[0] == b'Q' && &message[5..] == b"COMMIT\0";
        if commit {
            let how = next.swap(NextCommit::Relayed as u8, Ordering::SeqCst);
            if how == NextCommit::Lost as u8 {
                down.abort();
                return;
            }
            if how == NextCommit::Delayed as u8 {
                let _ = cut_tx.send(2);
                let _ = down.await;
                tokio::time::sleep(DELAY).await;
                let _ = to_server.write_all(&message).await;
                // Kept open until the server has surely read it (it then commits, and ends at the close).
                tokio::time::sleep(DELAY).await;
                return;
            }
            if how == NextCommit::Silent as u8 {
                let _ = cut_tx.send(3);
                let _ = to_server.write_all(&message).await;
                // Neither side is closed (both halves held here for ever): the client waits on an answer that
                // never comes.
                std::future::pending::<()>().await;
            }
            if how == NextCommit::AnswerLost as u8 {
                let _ = cut_tx.send(1);
                let _ = to_server.write_all(&message).await;
                // Whatever the server sends from now on is dropped, and the client's connection closes once the
                // server has answered, that is once the COMMIT is carried out.
                let _ = down.await;
                return;
            }
        }
        if to_server.write_all(&message).await.is_err() {
            return;
        }
    }
    down.abort();
}

/// One protocol message from the client, whole: its type byte (unless the start-up message), length and body.
async fn read_message(from: &mut tokio::net::tcp::OwnedReadHalf, typed: bool) -> std::io::Result<Vec<u8>> {
    let head = if typed { 5 } else { 4 };
    let mut message = vec![0; head];
    from.read_exact(&mut message).await?;
    let len = u32::from_be_bytes(message[head - 4..head].try_into().unwrap()) as usize;
    message.resize(head - 4 + len, 0);
    from.read_exact(&mut message[head..]).await?;
    Ok(message)
}
