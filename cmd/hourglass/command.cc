#include "cmd/hourglass/command.h"

#include <iostream>

namespace hourglass::cli {

void NoteRenamed(absl::string_view old_name, absl::string_view new_name) {
  std::cerr << "hourglass: \"" << old_name << "\" is now \"" << new_name
            << "\"; the old name goes in the next release" << std::endl;
}

}  // namespace hourglass::cli
