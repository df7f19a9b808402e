// tools/shell_file.cc: the file backend of tools/shell_file.h. It holds the database and its
// indexes for the shell's life; the executor is made per statement, as the node makes one per
// request.
#include "tools/shell_file.h"

#include "engine/database.h"
#include "index/index_set.h"
#include "ql/describe.h"
#include "ql/error_json.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "tools/open_failure.h"

namespace fenec::tools {

namespace {

class FileBackend final : public Backend {
  public:
    // `indexes` is the hook `db` was opened with, so it outlives it (members end in reverse).
    FileBackend(std::unique_ptr<index::IndexSet> indexes, std::unique_ptr<engine::Database> db)
        : indexes_(std::move(indexes)), db_(std::move(db)) {}

    Outcome run(const std::string& statement) override {
        ql::QlResult<ql::ParsedStatement> parsed = ql::parse(statement);
        if (!parsed) return {false, ql::error_json(parsed.error()), {}};
        ql::Executor ex(*db_, *indexes_);
        ql::QlResult<ql::Answer> answer = ex.run(parsed.value(), {});
        if (!answer) return {false, ql::error_json(answer.error()), {}};
        return {true, ql::to_json(answer.value()), {}};
    }

    bool collections(std::vector<CollectionText>& out, std::string&) override {
        engine::ReadView view = db_->read();
        for (const engine::CollectionInfo& c : view.collections()) {
            CollectionText text{c.name, c.rows, {}};
            for (const engine::FieldDesc& f : view.schema(c.id)->fields) {
                if (!f.dropped) text.definitions.push_back(ql::describe_field(f).definition);
            }
            out.push_back(std::move(text));
        }
        return true;
    }

  private:
    std::unique_ptr<index::IndexSet> indexes_;
    std::unique_ptr<engine::Database> db_;
};

}  // namespace

std::unique_ptr<Backend> open_file_backend(const std::string& path, std::string& failure) {
    auto indexes = std::make_unique<index::IndexSet>();
    engine::OpenOptions options;
    options.tenant = "shell";
    options.hook = indexes.get();
    engine::Result<bool> there = engine::posix_fs().exists(path);
    auto db = there.is_ok() && *there ? engine::Database::open(path, options)
                                      : engine::Database::create(path, options);
    if (!db.is_ok()) {
        failure = open_failure(path, db.status());
        return nullptr;
    }
    return std::make_unique<FileBackend>(std::move(indexes), std::move(*db));
}

}  // namespace fenec::tools
