#pragma once
// A whole input file as bytes, read as the npy and safetensors readers read
// theirs: a FIFO, device or directory is refused at once (it would block or
// never end), and every error is an InputError naming the path.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace fp4emu::io {

std::vector<uint8_t> read_file(const std::filesystem::path& path);

}  // namespace fp4emu::io
