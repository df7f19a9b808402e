// test/docs/runner.h: runs a documentation page's examples against real processes and says
// where its answers differ from the page's.
//
// The page's set-up (page.h) is started first: each `runner: node` a fenec-node on a fresh data
// directory, each `runner: router` a fenec-shard on a fresh directory file, on loopback ports
// they pick (the port a page writes for a process is rewritten to the real one in every block
// and answer); `runner: tenant` is created empty. Then the blocks run top to bottom, each seeing
// what the ones before it wrote:
//
//   ```fenecql [admin]   one statement, to POST /t/<tenant>/query (admin: POST
//                        /_admin/tenants/<tenant>/query with the node's --admin-token); a line
//                        `-- params: <JSON array>` gives "params". Then ```json [status=NNN].
//   ```http [process]    one request to the page's http process (or the one named). Then
//                        ```json [status=NNN], ```http-response, or ```text events for a
//                        subscription stream (read until that many events came, 5 s at most).
//   ```sh                run in one bash (set -e) in a folder holding build/server/fenec-node,
//                        build/shard/fenec-shard and build/tools/fenec; `runner: ports` and
//                        `runner: dir` rewritten to free ports and a fresh folder. Then
//                        optionally ```json or ```text: its stdout.
//
// Every example runs even after one has failed, so one run names every difference. A page with
// no example that runs is itself a failure: a page cannot stop being checked unseen.
#pragma once

#include <string>
#include <vector>

#include "test/docs/page.h"

namespace fenec::test::docs {

struct Failure {
    int line = 0;  // the example's opening fence; 1 for the page's set-up
    std::string what;
};

struct Report {
    std::vector<Failure> failures;
    // Examples run, by kind.
    int fenecql = 0;
    int http = 0;  // subscription streams included
    int events = 0;
    int sh = 0;

    int examples() const { return fenecql + http + sh; }
};

// Runs `page` with the binaries this suite was built with (FENEC_NODE_BIN, FENEC_SHARD_BIN,
// FENEC_CLI_BIN). Every process it started is gone when it returns.
Report run_page(const Page& page);

}  // namespace fenec::test::docs
