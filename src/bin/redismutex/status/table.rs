//! A text table with one column per node and one row per field, each cell one or more
//! lines (a row is as tall as its tallest cell): how `status` shows a quorum side by side.

/// The gap between two columns.
const GAP: &str = "  ";

/// One row: its label and a cell per column, each cell a list of lines.
#[derive(Debug)]
pub(super) struct Row {
    /// The field the row shows, in the first column.
    pub(super) label: &'static str,
    /// A cell per column, each one line or more (an empty cell shows nothing).
    pub(super) cells: Vec<Vec<String>>,
}

/// The table with `header` above the columns (the label column has none), each column as
/// wide as its widest line, columns two spaces apart, no trailing spaces.
pub(super) fn render(header: &[String], rows: &[Row]) -> String {
    let label_width = rows.iter().map(|row| width(row.label)).max().unwrap_or(0);
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            rows.iter()
                .filter_map(|row| row.cells.get(column))
                .flatten()
                .map(|line| width(line))
                .chain([width(&header[column])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = line(label_width, "", header.iter().map(String::as_str), &widths);
    for row in rows {
        let height = row.cells.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for at in 0..height {
            let label = if at == 0 { row.label } else { "" };
            let cells = (0..widths.len()).map(|column| {
                row.cells
                    .get(column)
                    .and_then(|cell| cell.get(at))
                    .map_or("", String::as_str)
            });
            out.push_str(&line(label_width, label, cells, &widths));
        }
    }
    out
}

/// One line of the table: `label` and `cells`, each padded to its width.
fn line<'a>(
    label_width: usize,
    label: &str,
    cells: impl Iterator<Item = &'a str>,
    widths: &[usize],
) -> String {
    let mut out = pad(label, label_width);
    for (cell, &cell_width) in cells.zip(widths) {
        out.push_str(GAP);
        out.push_str(&pad(cell, cell_width));
    }
    let mut out = out.trim_end().to_owned();
    out.push('\n');
    out
}

/// `text` followed by spaces up to `width` characters.
fn pad(text: &str, width: usize) -> String {
    format!(
        "{text}{}",
        " ".repeat(width.saturating_sub(self::width(text)))
    )
}

/// How many characters `text` shows (one per `char`).
fn width(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|line| line.to_string()).collect()
    }

    #[test]
    fn columns_line_up_and_tall_cells_make_tall_rows() {
        let header = ["node 1 a".to_owned(), "node 2 bb".to_owned()];
        let rows = [
            Row {
                label: "state",
                cells: vec![cell(&["read"]), cell(&["free"])],
            },
            Row {
                label: "readers",
                cells: vec![cell(&["r1", "r2-long-id"]), cell(&["-"])],
            },
        ];
        assert_eq!(
            render(&header, &rows),
            "         node 1 a    node 2 bb\n\
             state    read        free\n\
             readers  r1          -\n\
             \x20        r2-long-id\n"
        );
    }
}
