// test/server/node/subscriptions_test.cc: a subscription resumed from a cursor (node-http.md
// §5.4) against the real binary. The subscriber is modelled as a client keeps its copy: a `seed`
// replaces it, a `change` puts and deletes. After a resume, the copy must equal the shape as it
// stands (a row deleted or gone from the shape after the cursor is named in `dels` or a reseed
// leaves it out), and no `dels` names a row the shape never held.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "test/server/node/node_fixture.h"
#include "test/support/json_value.h"

namespace fenec::test::subscriptions_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

struct SseEvent {
    std::string name, id, data;
};

// The complete SSE events in `c`'s buffer, consumed.
std::vector<SseEvent> take_sse(Client& c) {
    std::vector<SseEvent> out;
    std::string& b = c.buffer();
    size_t end;
    while ((end = b.find("\n\n")) != std::string::npos) {
        const std::string block = b.substr(0, end);
        b.erase(0, end + 2);
        SseEvent e;
        size_t i = 0;
        while (i < block.size()) {
            size_t nl = block.find('\n', i);
            if (nl == std::string::npos) nl = block.size();
            const std::string line = block.substr(i, nl - i);
            if (line.starts_with("event: "))
                e.name = line.substr(7);
            else if (line.starts_with("id: "))
                e.id = line.substr(4);
            else if (line.starts_with("data: "))
                e.data = line.substr(6);
            else if (line.starts_with(":"))
                e.name = line;
            i = nl + 1;
        }
        out.push_back(e);
    }
    return out;
}

// A subscriber's copy of the shape: id to title, kept as a client keeps it.
struct Copy {
    std::map<int64_t, std::string> rows;
    std::vector<int64_t> named;  // every id a `dels` named
    std::string cursor;          // the last event id
    int seeds = 0;

    void apply(const SseEvent& e) {
        if (e.name != "seed" && e.name != "change") return;
        auto v = parse_json(e.data);
        ASSERT_TRUE(v) << e.data;
        cursor = e.id;
        if (e.name == "seed") {
            ++seeds;
            rows.clear();
            put_all(*json_member(*v, "rows"));
            return;
        }
        put_all(*json_member(*v, "puts"));
        for (const engine::Value& id : std::get<engine::List>(json_member(*v, "dels")->rep).items) {
            named.push_back(std::get<int64_t>(id.rep));
            rows.erase(std::get<int64_t>(id.rep));
        }
    }
    void put_all(const engine::Value& list) {
        for (const engine::Value& r : std::get<engine::List>(list.rep).items) {
            const engine::Value* title = json_member(r, "title");
            rows[std::get<int64_t>(json_member(r, "_id")->rep)] =
                title && !title->is_null() ? std::get<std::string>(title->rep) : "";
        }
    }
    bool holds(int64_t id) const { return rows.contains(id); }
    bool was_named(int64_t id) const {
        return std::find(named.begin(), named.end(), id) != named.end();
    }
};

class Subscriptions : public ::testing::Test {
  protected:
    void SetUp() override {
        node_ = std::make_unique<NodeProcess>(
            dir_.path(),
            std::vector<std::string>{"--token", D, "--admin-token", A, "--auth-delay", "0"});
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
        auto r = request("PUT", "/_admin/tenants/acme",
                         R"J({"schema":["create collection notes (title text, year int)"]})J", A);
        ASSERT_EQ(r.status, 201) << r.body;
    }

    Reply request(std::string_view method, std::string_view target, std::string_view body,
                  const std::string& token) {
        auto r = client_->request(method, target, body, bearer(token));
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    // Runs `q`; answers the block's seq.
    uint64_t write(const std::string& q, const std::string& params = "[]") {
        auto r = request("POST", "/t/acme/query",
                         "{\"query\":\"" + q + "\",\"params\":" + params + "}", D);
        EXPECT_EQ(r.status, 200) << q << ": " << r.body;
        return std::stoull(r.header("Fenec-Seq").value_or("0"));
    }
    uint64_t seq() {
        return std::stoull(request("GET", "/t/acme/", {}, D).header("Fenec-Seq").value_or("0"));
    }

    std::unique_ptr<Client> open(const std::string& query,
                                 std::vector<std::pair<std::string, std::string>> extra = {}) {
        auto c = std::make_unique<Client>(node_->port());
        std::string req = "GET /t/acme/c/notes/changes" + query +
                          " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D + "\r\n";
        for (const auto& [k, v] : extra) req += k + ": " + v + "\r\n";
        c->send_raw(req + "\r\n");
        const std::string got = c->read_until("\r\n\r\n", 5000);
        const size_t end = got.find("\r\n\r\n");
        EXPECT_NE(end, std::string::npos) << got;
        EXPECT_NE(got.find(" 200 "), std::string::npos) << got;
        c->drop(end + 4);
        return c;
    }
    // Reads events into `copy` until one with id >= `upto` was applied (the stream then holds
    // every block up to it).
    void follow(Client& c, Copy& copy, uint64_t upto) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < end) {
            for (const SseEvent& e : take_sse(c)) copy.apply(e);
            if (!copy.cursor.empty() && std::stoull(copy.cursor) >= upto) return;
            c.read_until("\n\n", 200);
        }
        ADD_FAILURE() << "no event reached seq " << upto << "; cursor " << copy.cursor;
    }
    // The shape `filter` as the REST list answers it now: the oracle for a copy.
    std::map<int64_t, std::string> shape(const std::string& filter) {
        Copy now;
        now.apply(
            SseEvent{"seed", "0",
                     "{\"rows\":" + request("GET", "/t/acme/c/notes" + filter, {}, D).body + "}"});
        return now.rows;
    }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

// The issue's case: a row seen at seq 4, deleted at seq 5 while the subscriber was away; the
// resumed stream must take it out of the subscriber's copy (before: no event at all).
TEST_F(Subscriptions, ResumedStreamNamesADeleteAfterItsCursor) {
    Copy copy;
    write("put notes {title: $1, year: 2020}", "[\"keep\"]");
    const uint64_t put = write("put notes {title: $1, year: 2021}", "[\"gone\"]");
    {
        auto s = open("");
        follow(*s, copy, put);
    }
    ASSERT_TRUE(copy.holds(2));
    const uint64_t del = write("del notes where _id = 2");
    auto s = open("?since=" + copy.cursor);
    // A marker after the delete: once the copy has it, every event before it was applied.
    const uint64_t mark = write("put notes {title: $1, year: 2022}", "[\"mark\"]");
    follow(*s, copy, mark);
    EXPECT_GT(mark, del);
    EXPECT_FALSE(copy.holds(2)) << "the deleted row is still in the copy";
    EXPECT_EQ(copy.rows, shape(""));
}

TEST_F(Subscriptions, ResumedStreamNamesADeleteAfterItsLastEventId) {
    Copy copy;
    const uint64_t put = write("put notes {title: $1, year: 2021}", "[\"gone\"]");
    {
        auto s = open("");
        follow(*s, copy, put);
    }
    ASSERT_TRUE(copy.holds(1));
    write("del notes where _id = 1");
    auto s = open("", {{"Last-Event-ID", copy.cursor}});
    const uint64_t mark = write("put notes {title: $1, year: 2022}", "[\"mark\"]");
    follow(*s, copy, mark);
    EXPECT_FALSE(copy.holds(1)) << "the deleted row is still in the copy";
    EXPECT_EQ(copy.rows, shape(""));
}

TEST_F(Subscriptions, ResumedStreamNamesARowThatLeftTheShape) {
    Copy copy;
    write("put notes {title: $1, year: 2023}", "[\"in\"]");
    const uint64_t put = write("put notes {title: $1, year: 2024}", "[\"leaves\"]");
    {
        auto s = open("?year=ge.2022");
        follow(*s, copy, put);
    }
    ASSERT_TRUE(copy.holds(2));
    write("set notes {year: 2000} where _id = 2");
    auto s = open("?year=ge.2022&since=" + copy.cursor);
    const uint64_t mark = write("put notes {title: $1, year: 2030}", "[\"mark\"]");
    follow(*s, copy, mark);
    EXPECT_FALSE(copy.holds(2)) << "the row that left the shape is still in the copy";
    EXPECT_EQ(copy.rows, shape("?year=ge.2022"));
}

// Rows outside the shape, deleted or changed after the cursor, are never named: a `dels` names
// only rows the subscriber may hold.
TEST_F(Subscriptions, ResumedStreamDoesNotNameRowsNeverInTheShape) {
    Copy copy;
    write("put notes {title: $1, year: 2000}", "[\"old\"]");
    write("put notes {title: $1, year: 2001}", "[\"older\"]");
    const uint64_t put = write("put notes {title: $1, year: 2024}", "[\"in\"]");
    {
        auto s = open("?year=ge.2022");
        follow(*s, copy, put);
    }
    ASSERT_FALSE(copy.holds(1));
    write("del notes where _id = 1");
    write("set notes {title: $1} where _id = 2", "[\"still old\"]");
    auto s = open("?year=ge.2022&since=" + copy.cursor);
    const uint64_t mark = write("put notes {title: $1, year: 2030}", "[\"mark\"]");
    follow(*s, copy, mark);
    EXPECT_FALSE(copy.was_named(1));
    EXPECT_FALSE(copy.was_named(2));
    EXPECT_EQ(copy.rows, shape("?year=ge.2022"));
}

// Changes after the cursor that only touched rows in the shape now resume without a reseed.
TEST_F(Subscriptions, ResumedStreamWithoutRemovalsIsNotReseeded) {
    Copy copy;
    const uint64_t put = write("put notes {title: $1, year: 2024}", "[\"in\"]");
    {
        auto s = open("");
        follow(*s, copy, put);
    }
    ASSERT_EQ(copy.seeds, 1);
    write("set notes {title: $1} where _id = 1", "[\"renamed\"]");
    auto s = open("?since=" + copy.cursor);
    const uint64_t mark = write("put notes {title: $1, year: 2030}", "[\"mark\"]");
    follow(*s, copy, mark);
    EXPECT_EQ(copy.seeds, 1);
    EXPECT_EQ(copy.rows, shape(""));
    EXPECT_EQ(copy.rows[1], "renamed");
}

}  // namespace
}  // namespace fenec::test::subscriptions_test
