// The safetensors reader on arbitrary bytes, through both entry points the
// tools use (the streaming SafetensorsReader and read_safetensors).
// Rejections must be InputError; an accepted file must agree with itself:
// each entry's byte range matches its shape, pread and mmap give the same
// bytes, and write + read gives the same tensors and metadata back.
#include <cstdint>
#include <cstring>

#include "fp4emu/error.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fp4emu;
  const auto path = fuzz::scratch_file("input.safetensors", {data, size});
  io::SafetensorsFile file;
  try {
    const io::SafetensorsReader reader(path);
    for (const io::SafetensorsEntry& e : reader.tensors()) {
      const auto nbytes = io::checked_byte_size(e.shape, e.dtype);
      FUZZ_CHECK(nbytes && static_cast<uint64_t>(*nbytes) == e.nbytes());
      FUZZ_CHECK(e.begin <= e.end && e.end <= reader.file_size());
      const io::Array copy = reader.read(e);
      const io::MappedBytes mapped = reader.map(e);
      FUZZ_CHECK(copy.bytes.size() == mapped.bytes().size());
      FUZZ_CHECK(copy.bytes.empty() || std::memcmp(copy.bytes.data(), mapped.bytes().data(), copy.bytes.size()) == 0);
    }
    file = io::read_safetensors(path);
    FUZZ_CHECK(file.tensors.size() == reader.tensors().size());
    FUZZ_CHECK(file.metadata == reader.metadata());
  } catch (const InputError& e) {
    fuzz::rejected("read_safetensors", e);
    return 0;
  }
  fuzz::accepted("read_safetensors");
  std::vector<uint8_t> encoded;
  try {
    encoded = io::encode_safetensors(file.tensors, file.metadata);
  } catch (const InputError& e) {
    fuzz::rejected("encode_safetensors", e);  // names or metadata the writer refuses (e.g. not UTF-8)
    return 0;
  }
  const io::SafetensorsFile again = io::read_safetensors(fuzz::scratch_file("again.safetensors", encoded));
  FUZZ_CHECK(again.metadata == file.metadata && again.tensors.size() == file.tensors.size());
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const io::SafetensorsTensor& t = file.tensors[i];
    const io::SafetensorsTensor* u = again.find(t.name);
    FUZZ_CHECK(u && u->array.dtype == t.array.dtype && u->array.shape == t.array.shape &&
               u->array.bytes == t.array.bytes);
  }
  return 0;
}
