#ifndef HOURGLASS_TESTS_TESTING_ETCD_TEST_H_
#define HOURGLASS_TESTS_TESTING_ETCD_TEST_H_

#include <memory>

#include "absl/status/statusor.h"
#include "cluster/etcd_client.h"
#include "gtest/gtest.h"
#include "tests/testing/etcd_server.h"

namespace hourglass::testing {

// A fixture with a real etcd of its own (EtcdServer) and a client of it,
// for the tests of what talks to etcd (election, membership, the shard
// count). Link hourglass_testing_etcd and hourglass::cluster.
class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EtcdServer>> server = EtcdServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> client =
        cluster::EtcdClient::Create(
            cluster::EtcdOptions{{server_->endpoint()}});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::unique_ptr<EtcdServer> server_;
  std::unique_ptr<cluster::EtcdClient> client_;
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_ETCD_TEST_H_
