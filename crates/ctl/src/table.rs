//! Columns for `ctl` output that a person reads.
//!
//! Each as wide as its widest cell, so a long tool name or path moves the next column
//! instead of running into it.

use crate::stdout::{Out, OutputError};

/// Alignment of a column.
#[derive(Clone, Copy, PartialEq)]
pub enum Align {
    Left,
    Right,
}

/// Prints `rows` (the first is the header, if any) as [`layout`] lays them out.
pub fn print(out: &mut Out, align: &[Align], rows: &[Vec<String>]) -> Result<(), OutputError> {
    for line in layout(align, rows) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// `rows` in columns two spaces apart, each as wide as its widest cell (in characters);
/// the last column is not padded and no line ends in spaces.
pub fn layout(align: &[Align], rows: &[Vec<String>]) -> Vec<String> {
    let columns = align.len();
    let mut widths = vec![0usize; columns];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut lines = Vec::with_capacity(rows.len());
    for row in rows {
        let mut line = String::new();
        let cells = row.len().min(columns);
        for (i, cell) in row.iter().enumerate().take(cells) {
            let last = i + 1 == cells;
            let pad = widths
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(cell.chars().count());
            let right = align.get(i) == Some(&Align::Right);
            if right {
                line.extend(std::iter::repeat_n(' ', pad));
            }
            line.push_str(cell);
            if !last {
                if !right {
                    line.extend(std::iter::repeat_n(' ', pad));
                }
                line.push_str("  ");
            }
        }
        lines.push(line.trim_end().to_owned());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn a_long_cell_widens_its_column() {
        let rows = vec![
            row(&["NAME", "N", "DESCRIPTION"]),
            row(&["a_very_long_server__a_very_long_tool_name_indeed", "7", "x"]),
            row(&["s__t", "12", "yé"]),
        ];
        let lines = layout(&[Align::Left, Align::Right, Align::Left], &rows);
        assert_eq!(
            lines,
            [
                "NAME                                               N  DESCRIPTION",
                "a_very_long_server__a_very_long_tool_name_indeed   7  x",
                "s__t                                              12  yé",
            ]
        );
    }
}
