#pragma once
// Number and text formatting shared by the commands that write CSV/JSON reports.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "fp4emu/io/atomic_file.hpp"

namespace fp4emu::cli {

// JSON numbers; NaN and infinities (no JSON literal) become null.
inline nlohmann::ordered_json json_number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

// CSV numbers: 17 significant digits (round-trips a double); NaN empty, infinities "inf".
inline std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.17g}", v);
}

// A CSV field, quoted when it holds a comma, quote or newline.
inline std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// Writes a text file atomically (a failed run leaves nothing half-written).
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  io::write_file_atomic(path, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace fp4emu::cli
