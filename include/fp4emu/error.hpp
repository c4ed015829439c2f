#pragma once
// Errors that reach the user. Every message names what was wrong (file,
// tensor, field, value) and what would be accepted, so the input can be fixed
// without reading the source. The CLI maps InputError to exit code 2.
#include <stdexcept>
#include <string>

namespace fp4emu {

// Bad input or bad options: malformed file, wrong dtype, shape that does not
// fit the recipe, unknown recipe, axis out of range, ...
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace fp4emu
