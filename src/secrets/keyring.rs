//! The desktop keyring through the freedesktop Secret Service on the session bus.
//!
//! The service is GNOME Keyring, KWallet or KeePassXC. There is one item per secret, with
//! the attributes `{"application": "mcpd", "name": NAME}` and the label `mcpd: NAME`,
//! created in the default collection (and the same for a server's OAuth login, keyed
//! `credential`: `logins.rs`); every call is bounded in time.
//!
//! Every call to the Secret Service has a deadline (`DEADLINE`; an unlock prompt, which
//! waits for the person at the desktop, `UNLOCK_DEADLINE`): a bus or a service that stops
//! answering ends the operation at its first unanswered call, so it costs a server's start
//! a few seconds, never a wedged daemon. Secrets cross the bus encrypted (the Secret
//! Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` session), never as plain text.
//! Lookups, listings and removals search every collection, so an item a person moved to
//! another collection is still found; `set` writes to the default collection and leaves
//! one item per name.

use super::SecretError;
use super::value::{SecretName, SecretValue};
use secret_service::{EncryptionType, Item, SearchItemsResult, SecretService};
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;
use zeroize::Zeroizing;

/// How long each call to the Secret Service may take, connecting included.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// How long an unlock prompt may wait to be answered: a person types a password.
pub const UNLOCK_DEADLINE: Duration = Duration::from_secs(30);
/// How long `Secrets::default_store` waits for a Secret Service to answer before it
/// settles on the file store.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(2);

/// The attribute every mcpd item has, and its value: mcpd's items among all of a keyring's.
const APPLICATION: (&str, &str) = ("application", "mcpd");
/// The attribute that holds a secret's name.
const NAME: &str = "name";
/// The attribute that holds the server whose OAuth login an item is (`logins.rs`).
pub(super) const CREDENTIAL: &str = "credential";

/// Which D-Bus bus to look for the Secret Service on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bus {
    /// The session bus, found as D-Bus finds it: `DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`.
    Session,
    /// The bus at this D-Bus address (`unix:path=/run/user/1000/bus`).
    #[cfg(test)]
    Address(String),
}

/// Where the keyring is reached.
#[derive(Debug, Clone)]
pub(super) struct Keyring {
    bus: Bus,
}

/// Why the keyring cannot be used at all: no bus, no Secret Service on it, no answer in
/// time, or (for writing) no default collection. Lookups pass over it to the next store.
#[derive(Debug)]
pub(super) struct Unavailable(pub String);

/// A connection to the Secret Service with its encrypted session open.
pub(super) struct Open {
    service: SecretService<'static>,
}

impl Keyring {
    pub(super) fn new(bus: Bus) -> Keyring {
        Keyring { bus }
    }

    /// Connects to the bus and opens a session with the Secret Service, within `deadline`.
    pub(super) async fn open(&self, deadline: Duration) -> Result<Open, Unavailable> {
        let connect = async {
            let builder = match &self.bus {
                Bus::Session => zbus::connection::Builder::session(),
                #[cfg(test)]
                Bus::Address(a) => zbus::connection::Builder::address(a.as_str()),
            };
            let conn = builder
                .map_err(|e| format!("no session bus: {e}"))?
                .build()
                .await
                .map_err(|e| format!("cannot connect to the session bus: {e}"))?;
            SecretService::connect_with_existing(EncryptionType::Dh, conn)
                .await
                .map_err(|e| format!("no Secret Service on the session bus: {e}"))
        };
        match tokio::time::timeout(deadline, connect).await {
            Ok(Ok(service)) => Ok(Open { service }),
            Ok(Err(why)) => Err(Unavailable(why)),
            Err(_) => Err(Unavailable(format!(
                "no Secret Service answered on the session bus within {} s",
                deadline.as_secs()
            ))),
        }
    }

    /// Whether a Secret Service answers within `deadline` and has a default collection
    /// to write to.
    pub(super) async fn answers(&self, deadline: Duration) -> Result<(), Unavailable> {
        let open = self.open(deadline).await?;
        match tokio::time::timeout(deadline, open.service.get_default_collection()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(Unavailable(no_default_collection(&e))),
            Err(_) => Err(Unavailable(format!(
                "the Secret Service did not answer within {} s",
                deadline.as_secs()
            ))),
        }
    }
}

fn no_default_collection(e: &secret_service::Error) -> String {
    format!(
        "the Secret Service has no default collection ({e}); make one the default in the keyring's app, or set [daemon] secrets = \"file\""
    )
}

/// `call` with `deadline`, its failure and its timeout as the keyring's errors.
async fn timed<T>(
    what: &str,
    deadline: Duration,
    call: impl Future<Output = Result<T, secret_service::Error>>,
) -> Result<T, SecretError> {
    match tokio::time::timeout(deadline, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(SecretError::Keyring(format!("{what}: {e}"))),
        Err(_) => Err(SecretError::Keyring(format!(
            "{what}: the Secret Service did not answer within {} s",
            deadline.as_secs()
        ))),
    }
}

/// Waits for `unlock`, which may be a prompt a person answers, within `UNLOCK_DEADLINE`;
/// `whose` begins the error, which says why it failed and what to do.
async fn prompted(
    whose: String,
    unlock: impl Future<Output = Result<(), secret_service::Error>>,
) -> Result<(), SecretError> {
    let why = match tokio::time::timeout(UNLOCK_DEADLINE, unlock).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(secret_service::Error::Prompt)) => "its unlock prompt was dismissed".to_owned(),
        Ok(Err(e)) => format!("it could not be unlocked: {e}"),
        Err(_) => format!("it was not unlocked within {} s", UNLOCK_DEADLINE.as_secs()),
    };
    Err(SecretError::Keyring(format!(
        "{whose} and {why}; unlock the keyring (log in to the desktop, or open it in the keyring's app) and try again"
    )))
}

/// The items one operation is about: mcpd's items with this one more attribute (a
/// secret's `name`, a login's `credential`), and how its errors name them.
pub(super) struct Key<'a> {
    pub attribute: (&'a str, &'a str),
    /// `secret "NAME"`, `the login of "SERVER"`: begins an error about a locked item.
    pub what: String,
}

impl<'a> Key<'a> {
    /// The item of the secret `name`.
    pub(super) fn secret(name: &'a SecretName) -> Key<'a> {
        Key {
            attribute: (NAME, name.as_str()),
            what: format!("secret {:?}", name.as_str()),
        }
    }
}

impl Open {
    /// Unlocks `items` if there are any, which may show the person at the desktop a
    /// prompt; the error says what to do when that does not happen.
    async fn unlock(&self, items: &[&Item<'_>], key: Option<&Key<'_>>) -> Result<(), SecretError> {
        if items.is_empty() {
            return Ok(());
        }
        let whose = match key {
            Some(k) => format!("{} is in a locked keyring", k.what),
            None => "some of mcpd's secrets are in a locked keyring".to_owned(),
        };
        prompted(whose, self.service.unlock_all(items)).await
    }

    /// The items of `key` (or, without one, every mcpd item).
    async fn search(
        &self,
        key: Option<&Key<'_>>,
    ) -> Result<SearchItemsResult<Item<'_>>, SecretError> {
        let mut attributes = HashMap::from([APPLICATION]);
        if let Some(k) = key {
            attributes.insert(k.attribute.0, k.attribute.1);
        }
        timed(
            "searching the keyring",
            DEADLINE,
            self.service.search_items(attributes),
        )
        .await
    }

    /// The items of `key`, every one unlocked.
    async fn unlocked(&self, key: &Key<'_>) -> Result<Vec<Item<'_>>, SecretError> {
        let found = self.search(Some(key)).await?;
        let locked: Vec<&Item<'_>> = found.locked.iter().collect();
        self.unlock(&locked, Some(key)).await?;
        let mut items = found.unlocked;
        items.extend(found.locked);
        Ok(items)
    }

    /// The bytes stored under `key`, None when the keyring has no such item. An unlocked
    /// item is read as it is; only when every item of the key is locked is one unlocked.
    pub(super) async fn get_item(
        &self,
        key: &Key<'_>,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, SecretError> {
        let found = self.search(Some(key)).await?;
        let item = match (found.unlocked.first(), found.locked.first()) {
            (Some(item), _) => item,
            (None, Some(item)) => {
                self.unlock(&[item], Some(key)).await?;
                item
            }
            (None, None) => return Ok(None),
        };
        let bytes = timed("reading from the keyring", DEADLINE, item.get_secret()).await?;
        Ok(Some(Zeroizing::new(bytes)))
    }

    /// Stores `bytes` under `key` in the default collection as one item, replacing the
    /// one there in the same call (`CreateItem` with `replace`), and then removes any
    /// other item of the key (from another collection), so a lookup finds this one.
    pub(super) async fn set_item(
        &self,
        key: &Key<'_>,
        label: &str,
        bytes: &[u8],
        content_type: &str,
    ) -> Result<(), SecretError> {
        let collection =
            match tokio::time::timeout(DEADLINE, self.service.get_default_collection()).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => return Err(SecretError::Keyring(no_default_collection(&e))),
                Err(_) => {
                    return Err(SecretError::Keyring(format!(
                        "the Secret Service did not answer within {} s",
                        DEADLINE.as_secs()
                    )));
                }
            };
        if timed(
            "reading the keyring's state",
            DEADLINE,
            collection.is_locked(),
        )
        .await?
        {
            let whose = "the keyring's default collection is locked".to_owned();
            prompted(whose, collection.unlock()).await?;
        }
        let attributes = HashMap::from([APPLICATION, key.attribute]);
        let created = timed(
            "writing to the keyring",
            DEADLINE,
            collection.create_item(label, attributes, bytes, true, content_type),
        )
        .await?;
        for item in self.unlocked(key).await? {
            if item.item_path != created.item_path {
                timed(
                    "removing an older copy from the keyring",
                    DEADLINE,
                    item.delete(),
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Removes every item of `key`; whether there was one.
    pub(super) async fn remove_item(&self, key: &Key<'_>) -> Result<bool, SecretError> {
        let items = self.unlocked(key).await?;
        for item in &items {
            timed("removing from the keyring", DEADLINE, item.delete()).await?;
        }
        Ok(!items.is_empty())
    }

    /// The value stored under `name`, None when the keyring has none.
    pub(super) async fn get(&self, name: &SecretName) -> Result<Option<SecretValue>, SecretError> {
        let Some(bytes) = self.get_item(&Key::secret(name)).await? else {
            return Ok(None);
        };
        match std::str::from_utf8(&bytes) {
            Ok(text) => Ok(Some(SecretValue::new(text.to_owned()))),
            Err(_) => Err(SecretError::Invalid(format!(
                "secret {:?} in the keyring is not UTF-8 text (a secret mcpd passes on must be)",
                name.as_str()
            ))),
        }
    }

    /// Stores `value` under `name`, replacing what was there: one item of that name.
    pub(super) async fn set(
        &self,
        name: &SecretName,
        value: &SecretValue,
    ) -> Result<(), SecretError> {
        let label = format!("mcpd: {name}");
        let bytes = value.expose().as_bytes();
        self.set_item(&Key::secret(name), &label, bytes, "text/plain")
            .await
    }

    /// Removes every item of `name`; whether there was one.
    pub(super) async fn remove(&self, name: &SecretName) -> Result<bool, SecretError> {
        self.remove_item(&Key::secret(name)).await
    }

    /// The names of every mcpd secret (never a login's item). A locked item's attributes
    /// are read without unlocking it where the Secret Service allows (GNOME Keyring
    /// does); the others are unlocked.
    pub(super) async fn list(&self) -> Result<Vec<String>, SecretError> {
        let found = self.search(None).await?;
        let mut names = Vec::new();
        let mut unreadable = Vec::new();
        for item in &found.unlocked {
            names.extend(self.name_of(item).await?);
        }
        for item in &found.locked {
            match timed("reading the keyring", DEADLINE, async {
                Ok(item.get_attributes().await)
            })
            .await?
            {
                Ok(attributes) => names.extend(valid_name(&attributes)),
                Err(_) => unreadable.push(item),
            }
        }
        self.unlock(&unreadable, None).await?;
        for item in unreadable {
            names.extend(self.name_of(item).await?);
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    async fn name_of(&self, item: &Item<'_>) -> Result<Option<String>, SecretError> {
        let attributes = timed("reading the keyring", DEADLINE, item.get_attributes()).await?;
        Ok(valid_name(&attributes))
    }
}

/// The secret name an item's attributes hold, if it is one. A login's item (it has a
/// `credential` attribute, and never a `name`) is no secret, whatever else it carries.
fn valid_name(attributes: &HashMap<String, String>) -> Option<String> {
    if attributes.contains_key(CREDENTIAL) {
        return None;
    }
    attributes
        .get(NAME)
        .filter(|n| SecretName::new(n).is_ok())
        .cloned()
}
