//! How deeply a PDF's objects nest, read from its bytes before the reader
//! sees them: pdf_oxide 0.3 parses nested arrays and dictionaries by
//! recursion without a limit, so a file of a million `[` would overflow
//! the stack and abort the process. This scan (not a parser: it only skips
//! comments, strings and stream data, and counts brackets) lets such a
//! file be refused first. Streams' data is skipped (compressed bytes hold
//! brackets at random); objects inside compressed object streams are not
//! seen here, and the reader runs on a thread with a large stack for them.

/// The deepest nesting of arrays (`[`) and dictionaries (`<<`) outside
/// comments, strings and stream data.
pub fn deepest(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => i = line_end(bytes, i),
            b'(' => i = string_end(bytes, i),
            b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
                i += 1;
            }
            b'<' if bytes.get(i + 1) == Some(&b'<') => {
                depth += 1;
                deepest = deepest.max(depth);
                i += 2;
            }
            b'<' => i = hex_end(bytes, i),
            b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'>' if bytes.get(i + 1) == Some(&b'>') => {
                depth = depth.saturating_sub(1);
                i += 2;
            }
            b's' if bytes[i..].starts_with(b"stream")
                && bytes.get(i + 6).is_some_and(|b| matches!(b, b'\r' | b'\n')) =>
            {
                i = stream_end(bytes, i + 6);
            }
            _ => i += 1,
        }
    }
    deepest
}

/// Just past the end of the line at `at`.
fn line_end(bytes: &[u8], at: usize) -> usize {
    (at..bytes.len())
        .find(|&i| matches!(bytes[i], b'\r' | b'\n'))
        .map_or(bytes.len(), |i| i + 1)
}

/// Just past the literal string opening at `at` (balanced parentheses,
/// backslash escapes).
fn string_end(bytes: &[u8], at: usize) -> usize {
    let (mut depth, mut i) = (0usize, at);
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// Just past the hex string opening at `at`.
fn hex_end(bytes: &[u8], at: usize) -> usize {
    (at..bytes.len())
        .find(|&i| bytes[i] == b'>')
        .map_or(bytes.len(), |i| i + 1)
}

/// Just past the `endstream` after stream data starting at `at`.
fn stream_end(bytes: &[u8], at: usize) -> usize {
    const END: &[u8] = b"endstream";
    (at..bytes.len().saturating_sub(END.len() - 1))
        .find(|&i| bytes[i..].starts_with(END))
        .map_or(bytes.len(), |i| i + END.len())
}

#[cfg(test)]
mod tests {
    use super::deepest;

    #[test]
    fn brackets_count_outside_strings_comments_and_streams() {
        assert_eq!(deepest(b"<< /A [1 [2] << /B 3 >>] >>"), 3);
        assert_eq!(deepest(b"(a [[[ string \\) [[) % [[[[ comment\n[1]"), 1);
        assert_eq!(deepest(b"<4142> [ <<>> ]"), 2);
        assert_eq!(deepest(b"stream\n[[[[[[[[ binary \nendstream [x]"), 1);
        let bomb = [vec![b'['; 100_000], vec![b']'; 100_000]].concat();
        assert_eq!(deepest(&bomb), 100_000);
    }
}
