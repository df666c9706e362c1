// Plain-text tables and number formatting for the end-of-run summary and `mixlab mixers`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab {

// Aligned columns separated by two spaces, a line of '-' under the header, one '\n' after every
// line, no trailing spaces. Cells that look like numbers ("1,234", "-0.5", "3.0e-04", "12%",
// "nan") are right-aligned so that digits line up; everything else is left-aligned. Widths count
// UTF-8 code points, not bytes. A row shorter than the header is padded with empty cells; a
// longer one throws Error.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

// `precision` digits after the point ("1.235" for 1.23456 and 3). Magnitudes that fixed notation
// would show as zero or as a very long number (0 < |v| < 10^-precision, |v| >= 1e9) use
// scientific notation with the same precision ("3.000e-04"). Never prints "-0.000"; NaN and
// infinities print as "nan", "inf" and "-inf". precision is clamped to [0, 17].
std::string format_number(double value, int precision);

// Thousands separators: 1234567 -> "1,234,567", -1234 -> "-1,234".
std::string format_count(int64_t value);

}  // namespace mixlab
