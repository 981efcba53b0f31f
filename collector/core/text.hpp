// Text the collector writes where a rule holds: a folded frame, a JSON
// string. VM-neutral (core).
#pragma once

#include <string>
#include <string_view>

namespace lfc {

/// Makes text safe as a folded frame: no ';', no line breaks or other
/// control bytes, valid UTF-8 (bad bytes become '?').
void sanitize_frame(std::string& s);

/// `s` as valid UTF-8 for JSON: each byte that is not part of a valid UTF-8
/// sequence is written as the four visible characters \xNN; the rest (control
/// bytes and NUL included: JSON escapes those) is kept as it is.
std::string visible_utf8(std::string_view s);

}  // namespace lfc
