//! Fuzz target: the `BoundedLines` codec fed arbitrary bytes in arbitrary chunks; no frame exceeds the limit and the frames account for every line of the input.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mcpd_runtime::framing::{BoundedLines, Frame};
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the limit, the next few where the input is split.
    let Some((&max, rest)) = data.split_first() else {
        return;
    };
    let max = usize::from(max % 64) + 1;
    let Some((&cuts, input)) = rest.split_first() else {
        return;
    };
    let frames = decode(input, max, cuts);
    for f in &frames {
        if let Frame::Line(l) = f {
            assert!(
                l.len() <= max,
                "a {}-byte line passed a limit of {max}",
                l.len()
            );
            assert!(!l.contains('\n'), "{l:?}");
        }
    }
    // Lines, over-long lines and non-UTF-8 lines account for the whole input, whatever
    // the chunks: the same frames as a reading of the whole input at once, and as a
    // line-by-line model of the codec.
    let expected = expected_frames(input, max);
    assert_eq!(frames, expected, "input {input:?}, max {max}, cuts {cuts}");
    assert_eq!(decode(input, max, 0), expected, "whole input {input:?}");
});

/// Decodes `input` fed in chunks whose lengths come from `seed`.
fn decode(input: &[u8], max: usize, seed: u8) -> Vec<Frame> {
    let mut codec = BoundedLines::new(max);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = input;
    let mut state = u32::from(seed);
    while !rest.is_empty() {
        let n = if seed == 0 {
            rest.len()
        } else {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            ((state >> 16) as usize % 8 + 1).min(rest.len())
        };
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        buf.extend_from_slice(chunk);
        while let Some(f) = codec.decode(&mut buf).expect("decode never fails") {
            out.push(f);
        }
    }
    while let Some(f) = codec.decode_eof(&mut buf).expect("decode_eof never fails") {
        out.push(f);
    }
    out
}

/// The frames of `input` read one line at a time: each newline ends one frame, and an
/// unterminated last piece is one more (except a lone '\r'). A piece longer than `max`
/// bytes (a '\r' before the newline counts) is `TooLong`, however many chunks it spans;
/// otherwise it is `NotUtf8` or a line without its one trailing '\r' (a second stays).
fn expected_frames(input: &[u8], max: usize) -> Vec<Frame> {
    let mut pieces: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    // The piece after the last newline: empty is no frame, and neither is a lone '\r'.
    if pieces.last().is_some_and(|p| p.is_empty() || *p == b"\r") {
        pieces.pop();
    }
    pieces
        .into_iter()
        .map(|piece| {
            if piece.len() > max {
                return Frame::TooLong;
            }
            let piece = piece.strip_suffix(b"\r").unwrap_or(piece);
            match std::str::from_utf8(piece) {
                Ok(s) => Frame::Line(s.to_owned()),
                Err(_) => Frame::NotUtf8,
            }
        })
        .collect()
}
