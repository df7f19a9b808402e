// test/support/wait.h: how a test waits for something another thread or process does. It asks
// the observable state (a file's content, an answer, a counter) until it holds or a deadline
// passes, instead of sleeping a guessed time: a fixed sleep is too short on a loaded machine (the
// test fails for no fault of the code) and too long everywhere else (the suite is slow), and it
// never says what it waited for. A sleep that remains in a test is the behaviour under test (a
// client that is slow on purpose, a window in which nothing may happen) and says so.
#pragma once

#include <chrono>
#include <thread>

namespace fenec::test {

// How long a condition is waited for unless the test says otherwise: far past what any of them
// takes on a loaded machine, so a timeout means the condition never came.
inline constexpr std::chrono::milliseconds wait_default{10'000};
// How often it is asked: soon enough that a test waits little past the moment, seldom enough
// that asking (an HTTP request, a file read) does not load the machine it waits on.
inline constexpr std::chrono::milliseconds wait_poll{5};

// True as soon as `pred()` is; false if it still is not once `timeout` has passed (asked one
// last time then). `pred` is called from this thread only.
template <class Pred>
bool wait_until(Pred&& pred, std::chrono::milliseconds timeout = wait_default,
                std::chrono::milliseconds poll = wait_poll) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (pred()) return true;
        std::this_thread::sleep_for(poll);
    }
    return pred();
}

}  // namespace fenec::test
