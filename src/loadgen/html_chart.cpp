#include "loadgen/html_chart.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace mx::loadgen {

std::string Escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

namespace {

// 1, 2 or 5 times a power of ten, about a fifth of `span`.
double NiceStep(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

}  // namespace

std::string LineChart(const std::string& title, const std::string& xlabel,
                      const std::string& ylabel, const std::vector<double>& x,
                      const std::vector<Series>& series, double hline, const std::string& hlabel,
                      int mark, const std::string& mark_label) {
  const double W = 560, H = 340, L = 84, R = 20, T = 36, B = 50;
  double xmax = 0, ymax = 0;
  for (double v : x) xmax = std::max(xmax, v);
  for (const Series& s : series) {
    for (double v : s.y) ymax = std::max(ymax, v);
  }
  ymax = std::max(ymax, hline) * 1.05;
  const double ystep = NiceStep(ymax), xstep = NiceStep(xmax * 1.05);
  ymax = std::max(1, static_cast<int>(std::ceil(ymax / ystep))) * ystep;
  xmax = std::max(1, static_cast<int>(std::ceil(xmax * 1.05 / xstep))) * xstep;
  auto px = [&](double v) { return L + v / xmax * (W - L - R); };
  auto py = [&](double v) { return H - B - v / ymax * (H - T - B); };
  std::string s = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' viewBox='0 0 {0} {1}' "
      "font-family='sans-serif' font-size='12'>\n"
      "<rect width='{0}' height='{1}' fill='white'/>\n"
      "<text x='{2}' y='20' font-size='15' font-weight='bold'>{3}</text>\n",
      W, H, L, Escape(title));
  for (double yv = 0; yv <= ymax + ystep / 2; yv += ystep) {
    s += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#e5e5e5'/>\n", L,
                     py(yv), W - R, py(yv));
    s += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{:g}</text>\n", L - 6, py(yv) + 4,
                     yv);
  }
  for (double xv = 0; xv <= xmax + xstep / 2; xv += xstep) {
    s += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{:g}</text>\n", px(xv),
                     H - B + 16, xv);
  }
  s += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>\n", L, H - B, W - R);
  s += fmt::format("<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='black'/>\n", L, T, H - B);
  s += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>\n", (L + W - R) / 2,
                   H - 12, Escape(xlabel));
  s += fmt::format(
      "<text x='14' y='{:.1f}' text-anchor='middle' transform='rotate(-90 14 {:.1f})'>{}</text>\n",
      (T + H - B) / 2, (T + H - B) / 2, Escape(ylabel));
  if (hline > 0) {
    s += fmt::format(
        "<line x1='{0}' y1='{1:.1f}' x2='{2}' y2='{1:.1f}' stroke='#c00' stroke-dasharray='6 4'/>\n"
        "<text x='{2}' y='{3:.1f}' text-anchor='end' fill='#c00'>{4}</text>\n",
        L, py(hline), W - R, py(hline) - 5, Escape(hlabel));
  }
  if (mark >= 0) {
    const double kx = px(x[static_cast<size_t>(mark)]);
    s += fmt::format(
        "<line x1='{0:.1f}' y1='{1}' x2='{0:.1f}' y2='{2}' stroke='#2a2' stroke-width='2'/>\n"
        "<text x='{3:.1f}' y='{4}' fill='#2a2' font-weight='bold'>{5}</text>\n",
        kx, T, H - B, kx + 4, T + 12, Escape(mark_label));
  }
  double ly = T + 4;
  for (const Series& se : series) {
    std::string pts;
    for (size_t i = 0; i < x.size() && i < se.y.size(); ++i) {
      pts += fmt::format("{:.1f},{:.1f} ", px(x[i]), py(se.y[i]));
    }
    s += fmt::format("<polyline fill='none' stroke='{}' stroke-width='2'{} points='{}'/>\n",
                     se.color, se.dashed ? " stroke-dasharray='5 3'" : "", pts);
    for (size_t i = 0; i < x.size() && i < se.y.size(); ++i) {
      s += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3.5' fill='{}'/>\n", px(x[i]),
                       py(se.y[i]), se.color);
    }
    ly += 16;
    s += fmt::format(
        "<line x1='{0}' y1='{1:.1f}' x2='{2}' y2='{1:.1f}' stroke='{3}' stroke-width='2'/>"
        "<text x='{4}' y='{5:.1f}'>{6}</text>\n",
        L + 12, ly, L + 32, se.color, L + 38, ly + 4, Escape(se.name));
  }
  s += "</svg>\n";
  return s;
}

std::string HtmlHead(const std::string& title) {
  return "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>" + Escape(title) +
         "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
         "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
         "padding:4px 8px;text-align:right}th{background:#f3f3f3}tr.knee td{background:#e6f6e6;"
         "font-weight:bold}td.v{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:16px;"
         "margin:16px 0}code{background:#f5f5f5;padding:2px 4px}</style></head><body>\n";
}

std::string HtmlTable(const std::vector<std::vector<std::string>>& rows, int highlight) {
  if (rows.empty()) return "";
  std::string h = "<table>\n<tr>";
  for (const std::string& c : rows[0]) h += "<th>" + Escape(c) + "</th>";
  h += "</tr>\n";
  for (size_t i = 1; i < rows.size(); ++i) {
    h += static_cast<int>(i) - 1 == highlight ? "<tr class='knee'>" : "<tr>";
    const auto& cells = rows[i];
    for (size_t c = 0; c < cells.size(); ++c) {
      h += (c + 1 == cells.size() ? "<td class='v'>" : "<td>") + Escape(cells[c]) + "</td>";
    }
    h += "</tr>\n";
  }
  return h + "</table>\n";
}

std::string AlignedColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& row : rows) {
    if (w.size() < row.size()) w.resize(row.size(), 0);
    for (size_t i = 0; i + 1 < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  std::string s;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      s += i + 1 < row.size() ? fmt::format("{:>{}}  ", row[i], w[i]) : row[i];
    }
    s += "\n";
  }
  return s;
}

}  // namespace mx::loadgen
