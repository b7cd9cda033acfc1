#ifndef HOURGLASS_CONSOLE_CONSOLE_H_
#define HOURGLASS_CONSOLE_CONSOLE_H_

#include "api/admin_calls.h"
#include "api/admin_http.h"
#include "api/auth.h"
#include "api/http_service.h"
#include "console/guard.h"

namespace hourglass::console {

// The web console, mounted on hourglassd's metrics listener
// (MetricsServer::Mount): its pages at "/" (index.html, whose script reads
// everything else from the JSON API) and the JSON API under /api/v1/
// (api/admin_http.h).
//
// The pages themselves are served to anyone who can connect: they hold no
// data. With tokens on, every API call needs a token with the admin role,
// which the page asks for once and keeps for the browser tab
// (sessionStorage).
//
// Other web pages cannot drive it (Guard): the API answers the console's
// own pages only, on the names it knows.
//
// Every answer forbids framing and inline scripts
// (Content-Security-Policy: default-src 'self') and content sniffing, and
// asks not to be cached (a new hourglassd brings new pages).
//
// Thread-safe.
class Console final : public api::HttpService {
 public:
  // REQUIRES: `calls` and `authorizer` outlive the console.
  Console(api::AdminCalls* calls, const api::Authorizer* authorizer,
          api::AdminHttp::Options options, GuardOptions guard);

  // First Guard's refusal, if any. Then: GET or HEAD of "/" or an asset's
  // path: the asset; of another path: 404. Other methods on those paths:
  // 405. Paths under /api/: AdminHttp.
  api::HttpResponse Serve(const api::HttpRequest& request) override;

 private:
  const api::AdminHttp api_;
  const GuardOptions guard_;
};

}  // namespace hourglass::console

#endif  // HOURGLASS_CONSOLE_CONSOLE_H_
