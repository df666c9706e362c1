// A tiny document model for the study's report: headings, paragraphs, tables, images, lists and
// a gallery of links, written once and rendered as Markdown and as HTML, so the two files say
// the same thing.
#pragma once
#include <string>
#include <vector>

namespace mixlab::lab {

struct ReportBlock {
  enum Kind { Heading, Paragraph, Table, Image, List, Links } kind;
  std::string text;                            // heading / paragraph / image caption
  std::string path;                            // image path (relative to the report)
  std::vector<std::vector<std::string>> rows;  // table (first row = header), list items, links
};

// Markdown: "## " headings, pipe tables with a header row, "- " lists, ![caption](path) images.
std::string to_markdown(const std::vector<ReportBlock>& blocks);

// One self-contained HTML page titled `title`; Markdown's **bold** becomes <b>, the rest is
// escaped, and the gallery's links show their images in a grid.
std::string to_html(const std::vector<ReportBlock>& blocks, const std::string& title);

}  // namespace mixlab::lab
