//! The pin setting: `[daemon] pin` and a server's `pin`, validated into a `PinMode`.
//!
//! The values are `"trust-first"`, `"approve"` and `"off"`.

use super::{ConfigError, Validator};

/// How a server's definitions are pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PinMode {
    /// The first definitions a server shows are approved; changes wait for a person.
    #[default]
    TrustFirst,
    /// Every definition waits for a person, the first ones too.
    Approve,
    /// Nothing is pinned.
    Off,
}

impl PinMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PinMode::TrustFirst => "trust-first",
            PinMode::Approve => "approve",
            PinMode::Off => "off",
        }
    }
}

impl Validator<'_> {
    pub(super) fn pin_mode(&self, key: &str, value: &str) -> Result<PinMode, ConfigError> {
        match value {
            "trust-first" => Ok(PinMode::TrustFirst),
            "approve" => Ok(PinMode::Approve),
            "off" => Ok(PinMode::Off),
            other => Err(self.err(
                key,
                format!("{other:?} is not a pin mode; use \"trust-first\", \"approve\" or \"off\""),
            )),
        }
    }
}
