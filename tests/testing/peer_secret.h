#ifndef HOURGLASS_TESTS_TESTING_PEER_SECRET_H_
#define HOURGLASS_TESTS_TESTING_PEER_SECRET_H_

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace hourglass::testing {

// The secret a test cluster's nodes share (hourglassd's --peer_token_file).
inline constexpr char kTestPeerSecret[] =
    "test-cluster-peer-secret-0123456789abcdef";

// --peer_token_file=<dir>/peer-secret, the file written (mode 0600) the
// first time: every node of a test cluster given the same `dir` shares it.
inline std::string PeerSecretFlag(const std::string& dir) {
  const std::string path = dir + "/peer-secret";
  if (!std::filesystem::exists(path)) {
    std::filesystem::create_directories(dir);
    std::ofstream(path, std::ios::trunc) << kTestPeerSecret << "\n";
    chmod(path.c_str(), 0600);
  }
  return "--peer_token_file=" + path;
}

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_PEER_SECRET_H_
