#include "lab/report_document.h"

#include "lab/svg.h"

namespace mixlab::lab {
namespace {

// Markdown's **bold** as <b> (the only markup the blocks use), the rest escaped.
std::string inline_html(const std::string& s) {
  std::string e = xml_escape(s), out;
  bool open = false;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e.compare(i, 2, "**") == 0) {
      out += open ? "</b>" : "<b>";
      open = !open;
      ++i;
    } else {
      out += e[i];
    }
  }
  return out + (open ? "</b>" : "");
}

}  // namespace

std::string to_markdown(const std::vector<ReportBlock>& blocks) {
  std::string md;
  for (const auto& b : blocks) {
    switch (b.kind) {
      case ReportBlock::Heading:
        md += "\n## " + b.text + "\n\n";
        break;
      case ReportBlock::Paragraph:
        md += b.text + "\n\n";
        break;
      case ReportBlock::Table:
        for (size_t r = 0; r < b.rows.size(); ++r) {
          md += "|";
          for (const auto& c : b.rows[r]) md += " " + c + " |";
          md += "\n";
          if (r == 0) {
            md += "|";
            for (size_t c = 0; c < b.rows[0].size(); ++c) md += "---|";
            md += "\n";
          }
        }
        md += "\n";
        break;
      case ReportBlock::Image:
        md += "![" + b.text + "](" + b.path + ")\n\n";
        break;
      case ReportBlock::List:
        for (const auto& item : b.rows) md += "- " + item[0] + "\n";
        md += "\n";
        break;
      case ReportBlock::Links:
        for (const auto& l : b.rows) md += "- [" + l[0] + "](" + l[1] + ")\n";
        md += "\n";
        break;
    }
  }
  return md;
}

std::string to_html(const std::vector<ReportBlock>& blocks, const std::string& title) {
  std::string h = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" +
                  xml_escape(title) +
                  "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:1400px}"
                  "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;"
                  "padding:3px 8px;font-size:13px}th{background:#f2f2f2}img{max-width:100%}"
                  ".gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,"
                  "1fr));gap:12px}</style></head><body>\n<h1>" +
                  xml_escape(title) + "</h1>\n";
  for (const auto& b : blocks) {
    switch (b.kind) {
      case ReportBlock::Heading:
        h += "<h2>" + xml_escape(b.text) + "</h2>\n";
        break;
      case ReportBlock::Paragraph:
        h += "<p>" + inline_html(b.text) + "</p>\n";
        break;
      case ReportBlock::Table:
        h += "<table>\n";
        for (size_t r = 0; r < b.rows.size(); ++r) {
          h += "<tr>";
          for (const auto& c : b.rows[r])
            h += (r == 0 ? "<th>" : "<td>") + inline_html(c) + (r == 0 ? "</th>" : "</td>");
          h += "</tr>\n";
        }
        h += "</table>\n";
        break;
      case ReportBlock::Image:
        h += "<p><img src=\"" + b.path + "\" alt=\"" + xml_escape(b.text) + "\"></p>\n";
        break;
      case ReportBlock::List:
        h += "<ul>\n";
        for (const auto& item : b.rows) h += "<li>" + inline_html(item[0]) + "</li>\n";
        h += "</ul>\n";
        break;
      case ReportBlock::Links:
        h += "<div class=\"gallery\">\n";
        for (const auto& l : b.rows)
          h += "<figure><a href=\"" + l[1] + "\">" +
               (l.size() > 2 ? "<img src=\"" + l[2] + "\">" : "") + "</a><figcaption>" +
               xml_escape(l[0]) + "</figcaption></figure>\n";
        h += "</div>\n";
        break;
    }
  }
  return h + "</body></html>\n";
}

}  // namespace mixlab::lab
