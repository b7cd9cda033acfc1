#ifndef HOURGLASS_CMD_HOURGLASS_STDIN_LINES_H_
#define HOURGLASS_CMD_HOURGLASS_STDIN_LINES_H_

#include <functional>
#include <string>
#include <thread>

namespace hourglass::cli {

// Reads standard input line by line on a thread of its own: calls
// `on_line` with each line (without "\n" or "\r\n"), then `on_end` once at
// the end of input. Stops reading when destroyed.
//
// Made and destroyed on one thread; the callbacks run on the reader's.
class StdinLines {
 public:
  StdinLines(std::function<void(std::string line)> on_line,
             std::function<void()> on_end);
  // Stops and joins the reader; on_end is not called if input had not
  // ended.
  ~StdinLines();

  StdinLines(const StdinLines&) = delete;
  StdinLines& operator=(const StdinLines&) = delete;

 private:
  void Run();

  const std::function<void(std::string)> on_line_;
  const std::function<void()> on_end_;
  // Written by the destructor to wake the reader.
  int stop_fd_ = -1;
  std::thread thread_;
};

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_HOURGLASS_STDIN_LINES_H_
