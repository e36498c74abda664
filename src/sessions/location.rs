//! Reading where the sessions are (`--store`, `TM_STORE`, `convert --from/--to`): a folder, or a Postgres URL. The
//! URL may hold a password: it is kept secret, and every message shows it redacted.

use secrecy::{ExposeSecret, SecretString};
use std::fmt;
use std::path::PathBuf;

/// Where sessions are kept.
#[derive(Clone)]
pub enum StoreLocation {
    /// A state folder of session files.
    Folder(PathBuf),
    /// A Postgres database.
    Postgres(PostgresUrl),
}

/// A `postgres://` (or `postgresql://`) URL. Only [`PostgresUrl::expose`] gives the password, to the driver.
#[derive(Clone)]
pub struct PostgresUrl {
    secret: SecretString,
    redacted: String,
}

impl StoreLocation {
    /// A URL with the `postgres` or `postgresql` scheme is a database; another scheme is refused (a typing
    /// mistake should not become a folder named `postgress:`); anything else is a folder.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the store is empty: give a state folder or a postgres:// URL".into());
        }
        match text.split_once("://") {
            Some((scheme, _))
                if scheme.eq_ignore_ascii_case("postgres") || scheme.eq_ignore_ascii_case("postgresql") =>
            {
                Ok(StoreLocation::Postgres(PostgresUrl::new(text)))
            }
            Some((scheme, _))
                if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)) =>
            {
                Err(format!(
                    "`{scheme}://` is not a store this bot knows: give a state folder, or a postgres://user@host/database URL"
                ))
            }
            // `postgres:/user:password@host/db`, a slash short: a folder of that name would be made, and the password
            // shown wherever the folder is named.
            _ if ["postgres:", "postgresql:"].iter().any(|scheme| starts_with_ignoring_case(text, scheme)) => {
                // Not repeated: it may hold a password.
                Err("the store starts with `postgres:` but not `postgres://`, a slash missing: write it as \
                     postgres://user:password@host/database"
                    .into())
            }
            // libpq's other form, `host=db user=tm password=…`: a folder of that name would be made, the password
            // shown wherever the folder is named.
            _ if is_keyword_value_connection(text) => Err("the store looks like a connection string of \
                 keyword=value pairs (`host=… dbname=…`): write it as a URL, postgres://user:password@host/database"
                .into()),
            _ => Ok(StoreLocation::Folder(PathBuf::from(text))),
        }
    }
}

/// Whether `text` has a `keyword=` of libpq's connection strings as one of its words (libpq allows spaces around
/// the `=`).
fn is_keyword_value_connection(text: &str) -> bool {
    const KEYWORDS: [&str; 16] = [
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "sslmode",
        "sslpassword",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "service",
        "options",
        "application_name",
        "connect_timeout",
    ];
    text.split('=').take(text.matches('=').count()).any(|before| {
        let keyword = before.split_whitespace().next_back().unwrap_or_default();
        KEYWORDS.iter().any(|known| keyword.eq_ignore_ascii_case(known))
    })
}

fn starts_with_ignoring_case(text: &str, start: &str) -> bool {
    text.get(..start.len()).is_some_and(|head| head.eq_ignore_ascii_case(start))
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Folder(dir) => write!(f, "the state folder {}", dir.display()),
            StoreLocation::Postgres(url) => write!(f, "the database {url}"),
        }
    }
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl PostgresUrl {
    pub fn new(url: &str) -> Self {
        Self { redacted: redact(url), secret: SecretString::new(url.to_owned()) }
    }

    /// The URL itself, password included: for the database driver only, never for a message.
    pub fn expose(&self) -> &str {
        self.secret.expose_secret()
    }
}

/// Prints the URL with its password replaced by `***`.
impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

/// The URL with the password of its user part (`user:password@`) and of any `...password=` parameter replaced by
/// `***`. The user part runs to the URL's last `@`: a password may hold `/`, `?`, `#` or `@` (the URL is then invalid,
/// and printed in the error saying so), and where that is in doubt more is hidden, never less. A parameter's
/// password runs to the next `&name=` (or `#`): an `&` not starting a parameter is taken for part of it.
pub fn redact(url: &str) -> String {
    static PASSWORD_PARAMETER: std::sync::LazyLock<regex::Regex> =
        // A key written percent-encoded (`pass%77ord`) may be a password too: a doubt hides more, never less.
        std::sync::LazyLock::new(|| {
            regex::Regex::new(r"(?i)[?&](?:[a-z_]*password|[a-z_0-9]*%[a-z_0-9%]*)=").expect("a valid pattern")
        });
    static NEXT_PARAMETER: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)&[a-z_]+=|#").expect("a valid pattern"));
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (mut hidden, mut at) = (String::with_capacity(rest.len()), 0);
    while let Some(key) = PASSWORD_PARAMETER.find_at(rest, at) {
        hidden.push_str(&rest[at..key.end()]);
        hidden.push_str("***");
        at = NEXT_PARAMETER.find_at(rest, key.end()).map_or(rest.len(), |next| next.start());
    }
    hidden.push_str(&rest[at..]);
    let rest = match hidden.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{user_info}@{host}"),
        },
        None => hidden,
    };
    format!("{scheme}://{rest}")
}

#[cfg(test)]
mod tests {
    use super::{StoreLocation, redact};

    #[test]
    fn a_password_never_shows_in_the_url_as_printed() {
        assert_eq!(redact("postgres://tm:s3cr@t@db.example:5432/tm"), "postgres://tm:***@db.example:5432/tm");
        assert_eq!(redact("postgres://tm@db/tm?sslmode=require"), "postgres://tm@db/tm?sslmode=require");
        assert_eq!(redact("postgresql://db/tm?user=tm&password=hunter2"), "postgresql://db/tm?user=tm&password=***");
        assert_eq!(redact("postgres://"), "postgres://");
        // Found by a review: a key written percent-encoded escaped the redaction.
        assert_eq!(redact("postgres://db/tm?pass%77ord=hunter2&user=tm"), "postgres://db/tm?pass%77ord=***&user=tm");
        // An `&` inside a password left unencoded: what follows it up to the next parameter is hidden too.
        assert_eq!(
            redact("postgres://db/tm?password=hun&ter2&user=tm&sslpassword=a&b"),
            "postgres://db/tm?password=***&user=tm&sslpassword=***"
        );
        // Generated passwords hold characters a URL reserves; the URL is then invalid and printed in its error.
        for password in ["pa/ss", "pa?ss", "pa#ss", "pa@ss", "p/a@s?s#"] {
            let url = format!("postgres://tm:{password}@db:5432/tm");
            assert_eq!(redact(&url), "postgres://tm:***@db:5432/tm", "{url}");
        }
        assert_eq!(redact("postgres://tm:5432/x@db/tm"), "postgres://tm:***@db/tm");
        assert_eq!(
            redact("postgres://db/tm?user=a@b&password=hunter2&sslpassword=k3y#x"),
            "postgres://db/tm?user=a@b&password=***&sslpassword=***#x"
        );
        assert_eq!(
            redact("postgres://tm:p@db/tm?options=a@b"),
            "postgres://tm:***@b",
            "a doubt hides more, never less"
        );
        let StoreLocation::Postgres(url) = StoreLocation::parse("postgres://u:pw@h/d").unwrap() else { panic!() };
        assert_eq!(format!("{url} {url:?}"), "postgres://u:***@h/d postgres://u:***@h/d");
        assert_eq!(url.expose(), "postgres://u:pw@h/d");
    }

    #[test]
    fn a_store_is_a_postgres_url_or_a_folder_and_another_scheme_is_refused() {
        assert!(matches!(StoreLocation::parse("POSTGRESQL://h/d").unwrap(), StoreLocation::Postgres(_)));
        assert!(matches!(StoreLocation::parse("state").unwrap(), StoreLocation::Folder(p) if p.ends_with("state")));
        assert!(matches!(StoreLocation::parse("/var/lib/tm/state").unwrap(), StoreLocation::Folder(_)));
        let error = StoreLocation::parse("mysql://h/d").unwrap_err();
        assert!(error.contains("`mysql://` is not a store"), "{error}");
        assert!(StoreLocation::parse("  ").unwrap_err().contains("empty"));
        // A slash short, it would have been a folder named with the password.
        for text in ["postgres:/tm:hunter2@db/tm", "PostgreSQL:tm:hunter2@db/tm"] {
            let error = StoreLocation::parse(text).unwrap_err();
            assert!(error.contains("a slash missing") && !error.contains("hunter2"), "{error}");
        }
        // libpq's keyword=value form would have been a folder named with the password, too.
        let written = ["host=db user=tm password=hunter2", "dbname=tm password=hunter2", "password=hunter2"];
        for text in written.into_iter().chain(["host = db password = hunter2", "sslpassword=hunter2"]) {
            let error = StoreLocation::parse(text).unwrap_err();
            assert!(error.contains("keyword=value") && !error.contains("hunter2"), "{error}");
        }
        assert!(matches!(StoreLocation::parse("state/a=b").unwrap(), StoreLocation::Folder(_)), "a folder with '='");
    }
}
