#pragma once
// A one-line progress bar on stderr for long commands (docs/architecture.md §2). In
// `auto` mode it appears only when stderr is a terminal and the work has
// already taken a second; `always` forces it (logs, tests), `never` hides it.
// It is redrawn at most ten times a second and erased by clear(), so the
// tables on stdout stay clean.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "distributed.hpp"
#include "fp4emu/error.hpp"

namespace fp4emu::cli {

// Commands call it before any work, so a typo fails fast.
inline void check_progress_mode(const std::string& mode) {
  if (mode != "auto" && mode != "always" && mode != "never")
    throw InputError(fmt::format("--progress '{}' is unknown; use auto, always or never", mode));
}

class Progress {
 public:
  // `total` is in any work unit (elements, bytes); InputError for an unknown mode.
  Progress(std::string name, const std::string& mode, double total) : name_(std::move(name)), total_(total) {
    check_progress_mode(mode);
    if (mode == "always") {
      enabled_ = true;
      delay_ = 0.0;
    } else if (mode == "auto") {
      enabled_ = ::isatty(STDERR_FILENO) != 0;
    }
    if (!dist::is_root()) enabled_ = false;  // in an MPI job, rank 0 shows its own progress
    start_ = Clock::now();
  }
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(double done, const std::string& label) {
    if (!enabled_) return;
    const double t = seconds();
    if (t < delay_ || (shown_ && t - last_ < 0.1 && done < total_)) return;
    last_ = t;
    const double f = total_ > 0 ? std::clamp(done / total_, 0.0, 1.0) : 1.0;
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(f * kWidth);
    std::string bar(fill, '=');
    if (fill < kWidth) bar += '>' + std::string(kWidth - fill - 1, ' ');
    const std::string eta = f > 0 && f < 1 ? fmt::format(" ETA {:.0f}s", t / f - t) : "";
    std::string line = fmt::format("{} [{}] {:3.0f}%{} {}", name_, bar, 100 * f, eta, label);
    if (line.size() > 110) line = line.substr(0, 107) + "...";
    fmt::print(stderr, "\r{:<{}}", line, width_);
    width_ = std::max(width_, line.size());
    std::fflush(stderr);
    shown_ = true;
  }

  // One line per finished piece (a tensor of a study): how far, what, the
  // elapsed time and an ETA. Lines, not a redrawn bar, because each piece
  // takes seconds and a log should keep them.
  void line(double done, const std::string& label) {
    if (!enabled_) return;
    clear();
    const double t = seconds();
    const double f = total_ > 0 ? std::clamp(done / total_, 0.0, 1.0) : 1.0;
    const std::string eta = f > 0 && f < 1 ? fmt::format(", ETA {:.0f}s", t / f - t) : "";
    fmt::print(stderr, "{}: {:3.0f}% {} ({:.1f}s elapsed{})\n", name_, 100 * f, label, t, eta);
    std::fflush(stderr);
  }

  void clear() {
    if (!shown_) return;
    fmt::print(stderr, "\r{:<{}}\r", "", width_);
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  std::string name_;
  bool enabled_ = false;
  bool shown_ = false;
  double delay_ = 1.0;
  double total_;
  double last_ = 0;
  size_t width_ = 0;
  Clock::time_point start_;
};

}  // namespace fp4emu::cli
