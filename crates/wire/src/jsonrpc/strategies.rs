//! Property-test strategies for JSON-RPC values.
//!
//! They are shared with the daemon's tests (feature `proptest`).

use proptest::prelude::*;
use serde_json::Value;

/// An id as a client may write it: integers across the i64 and u64 ranges, and
/// strings of any characters (written as JSON text, escapes and all).
pub fn id_text() -> impl proptest::strategy::Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<String>().prop_map(|s| Value::String(s).to_string()),
    ]
}
