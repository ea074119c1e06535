//! The one way anything is printed.
//!
//! Standard output whose write errors are told apart from the socket's, so a reader that
//! stops early (`| head -1`) ends a command quietly, and standard error that never panics
//! when nobody reads it (`errln!`).

use std::io::Write;

/// Writing to standard output failed. Rust ignores SIGPIPE, so a reader that closed the
/// pipe shows up here as `BrokenPipe` rather than killing the process.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard output")]
pub struct OutputError(#[source] pub std::io::Error);

impl OutputError {
    /// Whether the reader went away: what was printed was all it wanted, which is no
    /// failure of the command (`mcpd ctl status | head -1`).
    pub fn reader_left(&self) -> bool {
        self.0.kind() == std::io::ErrorKind::BrokenPipe
    }
}

/// Locked standard output whose errors are `OutputError`s. It has the `write_fmt` that
/// `write!` and `writeln!` call, so `writeln!(out, …)?` reads as usual.
pub struct Out(std::io::StdoutLock<'static>);

impl Out {
    pub fn lock() -> Out {
        Out(std::io::stdout().lock())
    }

    /// Writes formatted text with its control, bidi and invisible characters shown as
    /// escapes (`visible.rs`): whatever a server or an agent wrote reaches the terminal
    /// as text, never as a command to it.
    pub fn write_fmt(&mut self, args: std::fmt::Arguments<'_>) -> Result<(), OutputError> {
        match args.as_str() {
            Some(text) => self.write_shown(text),
            None => self.write_shown(&args.to_string()),
        }
    }

    fn write_shown(&mut self, text: &str) -> Result<(), OutputError> {
        let shown = crate::visible::escape(text);
        self.0.write_all(shown.as_bytes()).map_err(OutputError)
    }

    /// Writes `text` in the terminal colour `code` (an SGR number such as "32"): the one
    /// way an escape sequence reaches the terminal, and only mcpd's own.
    pub fn paint(&mut self, code: &str, text: &str) -> Result<(), OutputError> {
        let shown = crate::visible::escape(text);
        write!(self.0, "\x1b[{code}m{shown}\x1b[0m").map_err(OutputError)
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), OutputError> {
        self.0.write_all(bytes).map_err(OutputError)
    }

    /// Line-buffered output keeps a partial line until this (or the next newline).
    pub fn flush(&mut self) -> Result<(), OutputError> {
        self.0.flush().map_err(OutputError)
    }
}

/// Writes one line to standard error. A failed write is dropped: standard error is where
/// failures are told, so when it is closed (`mcpd serve 2>&1 | head -3`) there is nobody
/// left to tell. `eprintln!` would panic there instead (and exit 101), which is why
/// clippy.toml forbids it and the `print!` family: everything goes through this or [`Out`].
pub fn err_line(args: std::fmt::Arguments<'_>) {
    let text = args.to_string();
    let shown = crate::visible::escape(&text);
    let mut err = std::io::stderr().lock();
    // A closed or full standard error: nothing better to do than go on.
    let _ = err
        .write_all(shown.as_bytes())
        .and_then(|()| err.write_all(b"\n"));
}

/// `eprintln!` that never panics: see [`err_line`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stdout::err_line(format_args!($($arg)*))
    };
}
