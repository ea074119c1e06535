//! A server's result kept as the text it came in, passed on to the agent in the same buffer.

use super::UpstreamError;
use mcpd_wire::json::scan::Known;
use mcpd_wire::protocol::results::RawMembers;
use serde_json::Value;

/// A server's result kept as the text it sent: the line it came in and where the result
/// lies in it. An agent call's result is passed on from this without being turned into
/// values and written out again, unless mcpd has to change it.
#[derive(Debug)]
pub struct RawResult {
    line: String,
    range: std::ops::Range<usize>,
    /// The line's long strings, found when it was checked (`json::check::Checked`).
    long_strings: Vec<(usize, usize)>,
}

impl RawResult {
    /// `range` must lie within `line` on character boundaries; otherwise the result reads
    /// as empty text, which is not JSON and is reported as a protocol error.
    pub fn new(line: String, range: std::ops::Range<usize>) -> RawResult {
        RawResult {
            line,
            range,
            long_strings: Vec::new(),
        }
    }

    /// With the long strings of the line (offsets in it) that checking it found, so that
    /// reading the result's members jumps over them instead of searching them again.
    pub fn with_long_strings(mut self, long_strings: Vec<(usize, usize)>) -> RawResult {
        self.long_strings = long_strings;
        self
    }

    /// A result that only exists as a value, written out once.
    pub fn from_value(v: &Value) -> RawResult {
        let line = v.to_string();
        let range = 0..line.len();
        RawResult::new(line, range)
    }

    /// The result's JSON text.
    pub fn get(&self) -> &str {
        self.line.get(self.range.clone()).unwrap_or_default()
    }

    /// The result's top-level members (see [`RawMembers::of_known`]), read without searching
    /// its long strings again.
    pub fn members(&self) -> Option<RawMembers<'_>> {
        RawMembers::of_known(self.get(), Known::new(&self.line, &self.long_strings))
    }

    /// The agent's response line carrying this result as written: mcpd's envelope with the
    /// agent's `id` around the server's text. The server's line is rewritten in place (its
    /// envelope before and after the result replaced), so a large result is moved within
    /// its own buffer at most, never copied into a new one.
    pub fn into_response_line(self, id: &mcpd_wire::jsonrpc::Id) -> String {
        let RawResult {
            mut line, range, ..
        } = self;
        let whole = range.end <= line.len()
            && line.is_char_boundary(range.start)
            && line.is_char_boundary(range.end);
        if !whole {
            // Not a result range (see `new`): the empty text, as `get` reads it.
            return mcpd_wire::jsonrpc::raw_result_line(id, "");
        }
        line.truncate(range.end);
        line.push('}');
        // mcpd's envelope up to the result: that of an empty result, less its `}`. When it
        // is shorter than the server's, spaces before the result make up the difference
        // (JSON allows them), so the result stays where it is instead of being moved.
        let mut head = mcpd_wire::jsonrpc::raw_result_line(id, "");
        head.pop();
        if head.len() < range.start {
            head.extend(std::iter::repeat_n(' ', range.start - head.len()));
        }
        line.replace_range(..range.start, &head);
        line
    }

    pub fn to_value(&self) -> Result<Value, UpstreamError> {
        serde_json::from_str(self.get())
            .map_err(|e| UpstreamError::Protocol(format!("the result is not JSON: {e}")))
    }
}
