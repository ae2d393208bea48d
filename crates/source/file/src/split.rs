//! Splitting a YAML stream into its documents before parsing, so that a syntax error in one
//! document cannot hide the others (a YAML parser stops at the first syntax error).

/// One document's text and the 1-based line of the file it starts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk<'a> {
    pub text: &'a str,
    pub first_line: usize,
}

/// Splits on `---` document markers at the start of a line, as kubectl does. The marker line
/// stays with the document it opens (`--- !tag` or `--- {a: 1}` keep their content). Chunks
/// holding only blank lines and comments are dropped.
pub(crate) fn split_documents(text: &str) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if index > 0 && is_marker(line) {
            push_chunk(&mut chunks, &text[start..offset], start_line);
            start = offset;
            start_line = index + 1;
        }
        offset += line.len();
    }
    push_chunk(&mut chunks, &text[start..], start_line);
    chunks
}

fn push_chunk<'a>(chunks: &mut Vec<Chunk<'a>>, text: &'a str, first_line: usize) {
    if has_content(text) {
        chunks.push(Chunk { text, first_line });
    }
}

fn is_marker(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// True when the text has anything besides blank lines, comments and bare markers.
fn has_content(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim();
        !(line.is_empty() || line.starts_with('#') || line == "---" || line == "...")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<(&str, usize)> {
        split_documents(text)
            .into_iter()
            .map(|c| (c.text, c.first_line))
            .collect()
    }

    #[test]
    fn documents_split_on_markers_and_keep_their_first_line() {
        let text = "a: 1\n---\nb: 2\n--- # note\nc: 3\n";
        assert_eq!(
            texts(text),
            vec![("a: 1\n", 1), ("---\nb: 2\n", 2), ("--- # note\nc: 3\n", 4)]
        );
    }

    #[test]
    fn empty_and_comment_only_documents_are_dropped() {
        let text = "---\n# only a comment\n---\n\n---\nx: 1\n---\n";
        assert_eq!(texts(text), vec![("---\nx: 1\n", 5)]);
    }

    #[test]
    fn dashes_inside_a_value_are_not_markers() {
        let text = "a: |\n  ---x\nb: ----\n";
        assert_eq!(texts(text), vec![(text, 1)]);
    }

    #[test]
    fn a_leading_marker_opens_the_first_document() {
        assert_eq!(texts("---\na: 1\n"), vec![("---\na: 1\n", 1)]);
    }

    #[test]
    fn crlf_line_endings_are_understood() {
        assert_eq!(
            texts("a: 1\r\n---\r\nb: 2\r\n"),
            vec![("a: 1\r\n", 1), ("---\r\nb: 2\r\n", 2)]
        );
    }
}
