#ifndef HOURGLASS_CONSOLE_GUARD_H_
#define HOURGLASS_CONSOLE_GUARD_H_

#include <optional>
#include <string>
#include <vector>

#include "api/http_service.h"

namespace hourglass::console {

struct GuardOptions {
  // The port the console's listener bound (--metrics_listen's).
  int port = 0;
  // Host names the console answers to besides IP addresses and localhost
  // (--console_allowed_hosts): the names operators reach it by.
  std::vector<std::string> allowed_hosts;
};

// Keeps other web pages from driving the console, which answers on a port
// a browser can reach (Console::Serve asks it first). A page from another
// origin can make a browser send "simple" requests (a form's POST, a
// no-cors fetch with a text/plain body) without asking first, and a page
// whose DNS name is made to point at this machine (DNS rebinding) can read
// the answers. So, in order:
//
//   - Host must name an IP address, localhost or one of allowed_hosts
//     (compared without case), with the listener's port: a rebound name
//     is neither. Otherwise 403 `this console answers to its IP addresses,
//     localhost and --console_allowed_hosts, not "evil.example:9464"`.
//   - An API request (`api`) marked Sec-Fetch-Site: cross-site, or with an
//     Origin other than the console's own (http://<Host>), gets 403.
//   - An API request that changes state (POST, PUT, PATCH, DELETE) must
//     say Content-Type: application/json, which no page may send to
//     another origin without the browser asking it first (CORS, which the
//     console never allows): 415 otherwise.
//
// API refusals are JSON errors (api::JsonError); page refusals plain text.
// nullopt: the request may go on. A pure function of its arguments.
std::optional<api::HttpResponse> Guard(const api::HttpRequest& request,
                                       const GuardOptions& options, bool api);

}  // namespace hourglass::console

#endif  // HOURGLASS_CONSOLE_GUARD_H_
