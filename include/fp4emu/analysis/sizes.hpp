#pragma once
// Sizes that come from options (--n) or from files multiply into allocations;
// a product that wraps around, or that no machine here could hold, must be an
// error message before the allocation, not a crash or a bad_alloc after it.
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace fp4emu::analysis {

// The product of `factors` (element counts and, last, the bytes per element),
// checked: InputError naming `what` and `fix` when a factor is negative, the
// product passes 2^63, or it exceeds this machine's physical memory.
uint64_t checked_bytes(std::initializer_list<int64_t> factors, std::string_view what, std::string_view fix);

}  // namespace fp4emu::analysis
