// shard/log_line.h: the router's own lines on stderr.
#pragma once

#include <string>

namespace fenec::shard {

// One line on stderr, "fenec-shard: <line>": what the router's moves, copies, quotas, repairs and
// standbys say to an operator. While a router runs it goes through the router's LineLog on
// stderr and never blocks the thread that logs (a full queue drops it, counted in
// fenec_router_log_lines_dropped_total); before a router starts and after it stops it is written
// straight to stderr.
void log_line(const std::string& line);

}  // namespace fenec::shard
