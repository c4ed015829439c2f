// fp4emu: bit-exact emulator for HiF4, MXFP4 and NVFP4. The commands are
// registered in app.cpp (build_app); exit codes are described there.
#include "cli.hpp"

int main(int argc, char** argv) { return fp4emu::cli::run_main(argc, argv); }
