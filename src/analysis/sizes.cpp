#include "fp4emu/analysis/sizes.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <limits>

#include "fp4emu/error.hpp"

namespace fp4emu::analysis {

uint64_t checked_bytes(std::initializer_list<int64_t> factors, std::string_view what, std::string_view fix) {
  constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
  uint64_t bytes = 1;
  bool overflow = false;
  for (int64_t f : factors) {
    if (f < 0) throw InputError(fmt::format("{}: a size is negative ({}); {}", what, f, fix));
    if (f != 0 && bytes > kMax / uint64_t(f)) overflow = true;
    else bytes *= uint64_t(f);
  }
  const std::string sizes = fmt::format("{}", fmt::join(factors, " x "));
  if (overflow)
    throw InputError(fmt::format("{}: {} bytes is more than 2^63 bytes; {}", what, sizes, fix));
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0 && bytes / uint64_t(page) > uint64_t(pages))
    throw InputError(fmt::format("{}: {} bytes = {:.1f} GiB, more than this machine's {:.1f} GiB of memory; {}",
                                 what, sizes, double(bytes) / (1u << 30),
                                 double(pages) * double(page) / (1u << 30), fix));
  return bytes;
}

}  // namespace fp4emu::analysis
