// Pieces of the self-contained HTML reports (`bench sweep`, `bench sessions`): the page head
// with its inline CSS, line charts as inline SVG, tables; and the aligned plain-text table the
// same reports print on stdout. No scripts, no external resources.
#pragma once

#include <string>
#include <vector>

namespace mx::loadgen {

// &, <, >, " as entities.
std::string Escape(const std::string& s);

// <!DOCTYPE html> ... <body> with the reports' style sheet and `title`.
std::string HtmlHead(const std::string& title);

struct Series {
  std::string name, color;
  std::vector<double> y;
  bool dashed = false;
};

// An SVG line chart of several series over `x` (axes from 0); `hline` > 0 draws a dashed
// horizontal limit labelled `hlabel`; `mark` >= 0 marks x[mark] with a vertical line
// labelled `mark_label`.
std::string LineChart(const std::string& title, const std::string& xlabel,
                      const std::string& ylabel, const std::vector<double>& x,
                      const std::vector<Series>& series, double hline, const std::string& hlabel,
                      int mark, const std::string& mark_label);

// rows[0] is the header; the last column is left-aligned text (a verdict or note), the others
// numbers. Row `highlight` (0-based among the data rows; -1 none) is emphasized.
std::string HtmlTable(const std::vector<std::vector<std::string>>& rows, int highlight);

// Right-aligned columns two spaces apart, the last column as it is; one line per row.
std::string AlignedColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace mx::loadgen
