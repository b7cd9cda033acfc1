#ifndef HOURGLASS_TESTS_TESTING_LOG_CAPTURE_H_
#define HOURGLASS_TESTS_TESTING_LOG_CAPTURE_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"

namespace hourglass::testing {

// Keeps what spdlog's default logger logs while it lives, as "<level>
// <message>" lines (the last 1,024), for tests of what the broker logs.
// Create it before the code under test starts threads that log: the
// default logger's sink list is not synchronised.
class LogCapture {
 public:
  LogCapture()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1024)) {
    sink_->set_pattern("%l %v");
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    std::vector<spdlog::sink_ptr>& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The lines logged so far, oldest first, without line ends.
  std::vector<std::string> Lines() const {
    std::vector<std::string> lines = sink_->last_formatted();
    for (std::string& line : lines) {
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
        line.pop_back();
      }
    }
    return lines;
  }

 private:
  const std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_LOG_CAPTURE_H_
