//! Fuzz target: the SSE decoder fed arbitrary bytes; splitting the input into chunks never changes the events, and no event holds more data than the limit.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mcpd::fuzzing::{Event, SseDecoder};
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the limit, the second where the input is split.
    let [max, cuts, input @ ..] = data else {
        return;
    };
    let max = usize::from(*max % 128) + 1;
    let whole = decode(input, max, 0);
    let split = decode(input, max, *cuts);
    assert_eq!(whole, split, "input {input:?}, max {max}, cuts {cuts}");
    let bytewise = decode(input, max, 1);
    assert_eq!(
        whole, bytewise,
        "input {input:?} one byte at a time, max {max}"
    );
    for e in &whole {
        assert!(
            e.data.len() <= max,
            "{} bytes of data under a limit of {max}",
            e.data.len()
        );
        assert!(
            !e.too_long || e.data.is_empty(),
            "an over-long event kept its data"
        );
    }
});

/// Decodes `input` fed in chunks: all at once for seed 0, a byte at a time for seed 1,
/// otherwise chunks of 1 to 16 bytes drawn from the seed.
fn decode(input: &[u8], max: usize, seed: u8) -> Vec<Event> {
    let mut d = SseDecoder::new(max);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = input;
    let mut state = u32::from(seed);
    while !rest.is_empty() {
        let n = match seed {
            0 => rest.len(),
            1 => 1,
            _ => {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                ((state >> 16) as usize % 16 + 1).min(rest.len())
            }
        };
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        buf.extend_from_slice(chunk);
        while let Some(e) = d.decode(&mut buf).expect("decode never fails") {
            out.push(e);
        }
    }
    while let Some(e) = d.decode_eof(&mut buf).expect("decode_eof never fails") {
        out.push(e);
    }
    out
}
