// The .npy reader on arbitrary bytes. Rejections must be InputError (any
// other exception escapes and aborts: a finding); an accepted file must hold
// exactly its shape's bytes and survive write + read unchanged.
#include <cstdint>

#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fp4emu;
  io::Array a;
  try {
    a = io::read_npy(fuzz::scratch_file("input.npy", {data, size}));
  } catch (const InputError& e) {
    fuzz::rejected("read_npy", e);
    return 0;
  }
  fuzz::accepted("read_npy");
  const auto nbytes = io::checked_byte_size(a.shape, a.dtype);
  FUZZ_CHECK(nbytes && static_cast<uint64_t>(*nbytes) == a.bytes.size());
  const io::Array again = io::read_npy(fuzz::scratch_file("again.npy", io::encode_npy(a)));
  FUZZ_CHECK(again.dtype == a.dtype && again.shape == a.shape && again.bytes == a.bytes);
  return 0;
}
