// Reading a figure back: the tick labels, legend entries and point labels of an SVG written by
// lab/plot.h, so tests check what a reader of the picture sees.
#pragma once
#include <regex>
#include <string>
#include <vector>

namespace mixlab::testing {

struct SvgText {
  double x = 0, y = 0;
  std::string text;
};

// Every <text> element with class="<cls>", in document order.
inline std::vector<SvgText> svg_texts(const std::string& svg, const std::string& cls) {
  std::vector<SvgText> out;
  const std::regex element("<text x=\"([-0-9.]+)\" y=\"([-0-9.]+)\"[^>]*class=\"" + cls +
                           "\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), element);
       it != std::sregex_iterator(); ++it)
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2]), (*it)[3]});
  return out;
}

// The numbers of one axis's tick labels ("x" or "y").
inline std::vector<double> svg_tick_values(const std::string& svg, const std::string& axis) {
  std::vector<double> out;
  for (const SvgText& t : svg_texts(svg, "tick-" + axis)) out.push_back(std::stod(t.text));
  return out;
}

}  // namespace mixlab::testing
