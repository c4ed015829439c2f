// Case selection shared by `golden generate` and `golden verify` (suite.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "fp4emu/error.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/tensor_file.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "manifest.hpp"

namespace fp4emu::golden {
namespace {

bool any_glob(const std::vector<std::string>& patterns, const std::string& s) {
  return patterns.empty() ||
         std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return io::glob_match(p, s); });
}

}  // namespace

bool CaseFilter::selects(const std::string& family, const std::string& id, const std::string& recipe) const {
  return any_glob(families, family) && any_glob(cases, id) &&
         (recipes.empty() || std::find(recipes.begin(), recipes.end(), recipe) != recipes.end());
}

std::string CaseFilter::text() const {
  std::string s;
  for (const std::string& f : families) s += fmt::format(" --family '{}'", f);
  for (const std::string& c : cases) s += fmt::format(" --case '{}'", c);
  if (!recipes.empty()) {
    s += " --recipe ";
    for (size_t i = 0; i < recipes.size(); ++i) s += (i ? "," : "") + recipes[i];
  }
  return s.empty() ? s : s.substr(1);
}

void CaseFilter::check_matches(const std::vector<Key>& all) const {
  for (const std::string& r : recipes) {
    const Recipe* rec = find_recipe(r);
    if (!rec || rec->fake_quant_only)
      throw InputError(fmt::format("--recipe {}: not a packed recipe of this fp4emu (fp4emu formats lists them)",
                                   quote_untrusted(r)));
    if (std::none_of(all.begin(), all.end(), [&](const Key& k) { return k.recipe == r; }))
      throw InputError(fmt::format("--recipe {}: the suite has no case of this recipe", r));
  }
  for (const std::string& f : families)
    if (std::none_of(all.begin(), all.end(), [&](const Key& k) { return io::glob_match(f, k.family); }))
      throw InputError(fmt::format("--family {}: matches no family of the suite (codes, scale_steps, hif4_bits, "
                                   "special, tail, tail_error, random, layout, exhaustive, gemm)",
                                   quote_untrusted(f)));
  for (const std::string& c : cases)
    if (std::none_of(all.begin(), all.end(), [&](const Key& k) { return io::glob_match(c, k.id); }))
      throw InputError(fmt::format("--case {}: matches no case id of the suite (ids are <recipe>/<case>, e.g. "
                                   "{}; `*` also matches '/')",
                                   quote_untrusted(c), all.empty() ? "mxfp4.ocp/codes" : all.front().id));
  if (std::none_of(all.begin(), all.end(), [&](const Key& k) { return selects(k.family, k.id, k.recipe); }))
    throw InputError(fmt::format("{}: together these select no case", text()));
}

}  // namespace fp4emu::golden
