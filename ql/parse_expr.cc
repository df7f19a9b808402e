// ql/parse_expr.cc: expressions (fenecql.md §3 "expressions", §6.1), values and documents (§4.2),
// with the expression depth and value nesting limits of §14.
//
// Read without recursion: an ExprReader keeps a stack of open constructs (parentheses, calls,
// lists, objects), each with the expression it is reading (a predicate under construction inside
// its `and`/`or` chains), and alternates between two steps: `need` reads tokens until an operand
// is formed or a construct is opened; `have` takes a finished operand into the comparison, the
// chains, and finally the construct around it, closing constructs as their ends come. The stack
// is on the heap, so a statement's nesting costs no machine stack at all.
//
// Depth is counted twice, to the same limit. Going down, every opened construct and every `not`
// holds a level, and opening one whose contents would pass the limit stops the reader (it "stops
// at 513"). Coming back up, each node's exact depth (§14: leaves 1; `(e)`, `not`, a comparison 1
// more than what they hold; calls, lists, objects and flattened chains 1 more than their deepest
// part) is checked again, which catches what the descent cannot see ahead.
#include <algorithm>
#include <unordered_set>

#include "ql/limits.h"
#include "ql/parse_state.h"

namespace fenec::ql::detail {
namespace {

constexpr std::string_view kValue = "a value (a literal, parameter, call, list or object)";

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

std::unique_ptr<Expr> box(Expr e) { return std::make_unique<Expr>(std::move(e)); }

Expr make_expr(uint32_t pos, Expr::Node node) {
    Expr e;
    e.pos = pos;
    e.node = std::move(node);
    return e;
}

std::optional<CompareOp> compare_op(const Token& t) {
    switch (t.kind) {
        case TokenKind::eq: return CompareOp::eq;
        case TokenKind::ne: return CompareOp::ne;
        case TokenKind::lt: return CompareOp::lt;
        case TokenKind::le: return CompareOp::le;
        case TokenKind::gt: return CompareOp::gt;
        case TokenKind::ge: return CompareOp::ge;
        case TokenKind::tilde: return CompareOp::contains;
        default: break;
    }
    if (t.kind == TokenKind::word && keyword_equals(t.raw, "has")) return CompareOp::has;
    return std::nullopt;
}

enum class FrameKind : uint8_t { top, paren, call, list, object };
// What an object literal is: a json value, a document of insert/put, or the changes of a set.
enum class ObjectRole : uint8_t { value, document, changes };
enum class Pending : uint8_t { none, compare, in, not_in };

// One expression being read: a predicate under construction inside its `and`/`or` chains.
struct Slot {
    std::vector<uint32_t> nots;  // the `not`s read before the predicate, outermost first
    Pending pending = Pending::none;
    CompareOp op = CompareOp::eq;
    uint32_t op_pos = 0;
    std::optional<Expr> lhs;
    uint32_t lhs_depth = 0;
    std::vector<Expr> and_terms;
    uint32_t and_pos = 0;
    uint32_t and_depth = 0;
    std::vector<Expr> or_terms;
    uint32_t or_pos = 0;
    uint32_t or_depth = 0;
};

// One open construct. List items and object values are values: no comparisons, chains, `not`,
// parentheses or bare names; the other frames hold full expressions.
struct Frame {
    FrameKind kind = FrameKind::top;
    bool values = false;
    ObjectRole role = ObjectRole::value;
    uint32_t pos = 0;  // the opening token
    Slot slot;
    uint32_t deepest = 0;         // the deepest part closed so far
    std::string name;             // call: the function, lower case
    std::vector<Expr> parts;      // call: arguments; list: items
    std::vector<Member> members;  // object
    Name key;                     // object: the key of the value being read
    std::unordered_set<std::string> keys;
};

class ExprReader {
public:
    struct Options {
        bool values = false;          // the whole is a value (documents, vectors), not an expression
        bool constants_only = false;  // no names that would read a field (documents, `set`)
        ObjectRole top_role = ObjectRole::value;
    };

    ExprReader(Parser& parser, Options options) : p_(parser), opt_(options) {}

    QlResult<Expr> read() {
        Frame top;
        top.values = opt_.values;
        frames_.push_back(std::move(top));
        while (state_ != State::done) QL_TRY(state_ == State::need ? step_need() : step_have());
        return std::move(result_);
    }

private:
    enum class State : uint8_t { need, have, done };

    Failure step_need();
    Failure step_have();
    Failure read_nots(Slot& slot);
    Failure leaf();
    Failure name_operand();
    Failure open(FrameKind kind, uint32_t pos, bool json);
    Failure start_call();
    Failure start_list();
    Failure start_object();
    Failure read_key();
    Failure take_comparison();
    Failure complete_comparison();
    Failure complete_predicate(Expr e, uint32_t depth);
    Failure finish_slot(Expr e, uint32_t depth);
    Failure close_call();
    Failure close_list();
    Failure close_object();
    Frame pop();

    Failure have(Expr e, uint32_t depth) {
        operand_ = std::move(e);
        depth_ = depth;
        state_ = State::have;
        return std::nullopt;
    }

    Parser& p_;
    Options opt_;
    std::vector<Frame> frames_;  // frames_[0] is the whole expression
    State state_ = State::need;
    Expr operand_;               // the operand just finished (State::have)
    uint32_t depth_ = 0;         // its depth
    uint32_t levels_ = 0;        // levels held open: frames past the first, and pending `not`s
    uint32_t json_ = 0;          // lists and objects (json values) open
    Expr result_;
};

// Reads what may open an operand: `not`s, then a leaf, a name, or the start of a construct.
Failure ExprReader::step_need() {
    Frame& f = frames_.back();
    if (!f.values) QL_TRY(read_nots(f.slot));
    const Token& t = p_.peek();
    if (f.slot.pending == Pending::in || f.slot.pending == Pending::not_in) {
        if (t.kind == TokenKind::param) return leaf();
        if (t.kind == TokenKind::lbracket) return start_list();
        return p_.unexpected("a list `[...]` or a parameter after `in`");
    }
    switch (t.kind) {
        case TokenKind::integer:
        case TokenKind::real:
        case TokenKind::string:
        case TokenKind::bytes:
        case TokenKind::param: return leaf();
        case TokenKind::lbracket: return start_list();
        case TokenKind::lbrace: return start_object();
        case TokenKind::lparen:
            if (f.values) return p_.unexpected(kValue);
            QL_TRY(open(FrameKind::paren, t.pos, false));
            p_.take();
            return std::nullopt;
        case TokenKind::duration:
            return Parser::error_at(t.pos, "a duration such as " + t.describe() +
                                               " is valid only inside @ttl(...)");
        default: break;
    }
    if (p_.at_word("true") || p_.at_word("false") || p_.at_word("null")) return leaf();
    if (!p_.at_name()) return p_.unexpected_name(f.values ? kValue : "a value");
    if (p_.at(TokenKind::lparen, 1)) return start_call();
    return name_operand();
}

Failure ExprReader::read_nots(Slot& slot) {
    while (p_.at_word("not")) {
        uint32_t pos = p_.take().pos;
        QL_TRY(Parser::check_depth(levels_ + 2, pos));
        ++levels_;
        slot.nots.push_back(pos);
    }
    return std::nullopt;
}

// A literal or a parameter.
Failure ExprReader::leaf() {
    Token t = p_.take();
    switch (t.kind) {
        case TokenKind::integer: return have(make_expr(t.pos, Literal{t.integer}), 1);
        case TokenKind::real: return have(make_expr(t.pos, Literal{t.real}), 1);
        case TokenKind::string: return have(make_expr(t.pos, Literal{std::move(t.text)}), 1);
        case TokenKind::bytes:
            return have(make_expr(t.pos, Literal{engine::Bytes{std::move(t.text)}}), 1);
        case TokenKind::param: {
            auto index = static_cast<uint32_t>(t.integer);
            p_.note_param(index);
            return have(make_expr(t.pos, Param{index}), 1);
        }
        default: break;
    }
    if (keyword_equals(t.raw, "null")) return have(make_expr(t.pos, Literal{engine::Null{}}), 1);
    return have(make_expr(t.pos, Literal{keyword_equals(t.raw, "true")}), 1);
}

// A name with no `(` after it: a column, where columns may stand.
Failure ExprReader::name_operand() {
    const Token& t = p_.peek();
    if (opt_.constants_only) {
        return Parser::error_at(t.pos, "a document's values are constants; found the name " +
                                           t.describe() + ", which would read a field");
    }
    if (frames_.back().values) {
        return Parser::error_at(t.pos, "expected " + std::string(kValue) + ", found the name " +
                                           t.describe());
    }
    uint32_t pos = t.pos;
    QL_ASSIGN(Column column, p_.parse_column());
    return have(make_expr(pos, std::move(column)), 1);
}

// Pushes a construct, holding one level (and one json level for lists and objects).
Failure ExprReader::open(FrameKind kind, uint32_t pos, bool json) {
    if (json && json_ == limits::json_depth_max) {
        return Parser::limit_error(pos, Limit::json_depth, limits::json_depth_max,
                                   "lists and objects nest deeper than " +
                                       std::to_string(limits::json_depth_max) + " levels");
    }
    QL_TRY(Parser::check_depth(levels_ + 2, pos));
    ++levels_;
    json_ += json ? 1 : 0;
    Frame f;
    f.kind = kind;
    f.values = kind == FrameKind::list || kind == FrameKind::object;
    f.pos = pos;
    frames_.push_back(std::move(f));
    return std::nullopt;
}

Frame ExprReader::pop() {
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    --levels_;
    bool json = f.kind == FrameKind::list ||
                (f.kind == FrameKind::object && f.role == ObjectRole::value);
    json_ -= json ? 1 : 0;
    return f;
}

// call = NAME "(" [ expr { "," expr } ] ")" [ shift ].
Failure ExprReader::start_call() {
    Token name = p_.take();
    p_.take();  // (
    QL_TRY(open(FrameKind::call, name.pos, false));
    frames_.back().name = lower(name.text);
    if (p_.accept(TokenKind::rparen)) return close_call();
    return std::nullopt;
}

Failure ExprReader::start_list() {
    uint32_t pos = p_.take().pos;
    QL_TRY(open(FrameKind::list, pos, true));
    if (p_.accept(TokenKind::rbracket)) return close_list();
    return std::nullopt;
}

// A document (the first construct of a document read) opens no json level.
Failure ExprReader::start_object() {
    uint32_t pos = p_.take().pos;
    ObjectRole role = frames_.size() == 1 ? opt_.top_role : ObjectRole::value;
    QL_TRY(open(FrameKind::object, pos, role == ObjectRole::value));
    frames_.back().role = role;
    if (p_.accept(TokenKind::rbrace)) return close_object();
    return read_key();
}

// ( NAME | STRING ) ":", distinct within the object; a `set` never names `_id`.
Failure ExprReader::read_key() {
    Frame& f = frames_.back();
    if (!p_.at_name() && !p_.at(TokenKind::string)) return p_.unexpected("a key (a name or a string)");
    Token key = p_.take();
    f.key = Name{std::move(key.text), key.pos};
    if (f.role == ObjectRole::changes && f.key.text == "_id") {
        return Parser::error_at(f.key.pos, "`_id` cannot be set: it names the row");
    }
    if (!f.keys.insert(f.key.text).second) {
        return Parser::error_at(f.key.pos,
                                "the key `" + f.key.text + "` is given twice in one object");
    }
    return p_.expect(TokenKind::colon, "`:` after the key `" + f.key.text + "`");
}

// An operand is finished: it is a value of its frame, the right side of a pending comparison,
// the left side of one, or a whole predicate.
Failure ExprReader::step_have() {
    Frame& f = frames_.back();
    if (f.values) return finish_slot(std::move(operand_), depth_);
    if (f.slot.pending != Pending::none) return complete_comparison();
    if (p_.at(TokenKind::plus) || p_.at(TokenKind::minus)) {
        return Parser::error_at(p_.peek().pos,
                                "a shift (`+ n`, `- n`) follows a call only, and once: "
                                "`now() + 1000`");
    }
    if (p_.at_word("not") && !p_.at_word("in", 1)) {
        p_.take();
        return p_.unexpected("`in` after `not` (a `not` before an operand goes first: `not a = 1`)");
    }
    if (!p_.at_comparison()) return complete_predicate(std::move(operand_), depth_);
    return take_comparison();
}

// The operator after a left operand: `is [not] null` completes at once; the others wait for
// their right side.
Failure ExprReader::take_comparison() {
    Slot& s = frames_.back().slot;
    Token op = p_.take();
    if (keyword_equals(op.raw, "is")) {
        bool negated = p_.accept_word("not");
        QL_TRY(p_.expect_word("null", negated ? "`null` after `is not`" : "`null` or `not` after `is`"));
        uint32_t depth = depth_ + 1;
        QL_TRY(Parser::check_depth(depth, op.pos));
        Expr e = make_expr(op.pos, IsNull{negated, box(std::move(operand_))});
        if (p_.at_comparison()) {
            return Parser::error_at(p_.peek().pos, "comparisons do not chain: join them with "
                                                   "`and`, found " + p_.peek().describe());
        }
        return complete_predicate(std::move(e), depth);
    }
    s.lhs = std::move(operand_);
    s.lhs_depth = depth_;
    s.op_pos = op.pos;
    if (keyword_equals(op.raw, "in") || keyword_equals(op.raw, "not")) {
        s.pending = keyword_equals(op.raw, "not") ? Pending::not_in : Pending::in;
        if (s.pending == Pending::not_in) p_.take();  // the `in`
    } else {
        s.pending = Pending::compare;
        s.op = *compare_op(op);
    }
    state_ = State::need;
    return std::nullopt;
}

// The right side of a comparison is in: build it; comparisons do not chain (§3 rule 3).
Failure ExprReader::complete_comparison() {
    Slot& s = frames_.back().slot;
    uint32_t depth = std::max(s.lhs_depth, depth_) + 1;
    QL_TRY(Parser::check_depth(depth, s.op_pos));
    Expr e;
    e.pos = s.op_pos;
    if (s.pending == Pending::compare) {
        e.node = Compare{s.op, box(std::move(*s.lhs)), box(std::move(operand_))};
    } else {
        e.node = In{s.pending == Pending::not_in, box(std::move(*s.lhs)), box(std::move(operand_))};
    }
    s.lhs.reset();
    s.pending = Pending::none;
    if (p_.at_comparison()) {
        return Parser::error_at(p_.peek().pos, "comparisons do not chain: join them with `and`, "
                                               "found " + p_.peek().describe());
    }
    return complete_predicate(std::move(e), depth);
}

// A predicate is whole: wrap its `not`s, then add it to the chains; `and` binds tighter than `or`.
Failure ExprReader::complete_predicate(Expr e, uint32_t depth) {
    Slot& s = frames_.back().slot;
    levels_ -= static_cast<uint32_t>(s.nots.size());
    for (auto it = s.nots.rbegin(); it != s.nots.rend(); ++it) {
        QL_TRY(Parser::check_depth(++depth, *it));
        e = make_expr(*it, Not{box(std::move(e))});
    }
    s.nots.clear();
    if (p_.at_word("and")) {
        if (s.and_terms.empty()) s.and_pos = p_.peek().pos;
        s.and_depth = std::max(s.and_depth, depth);
        s.and_terms.push_back(std::move(e));
        p_.take();
        state_ = State::need;
        return std::nullopt;
    }
    if (!s.and_terms.empty()) {
        s.and_terms.push_back(std::move(e));
        depth = std::max(s.and_depth, depth) + 1;
        QL_TRY(Parser::check_depth(depth, s.and_pos));
        e = make_expr(s.and_pos, And{std::move(s.and_terms)});
        s.and_terms.clear();
        s.and_depth = 0;
    }
    if (p_.at_word("or")) {
        if (s.or_terms.empty()) s.or_pos = p_.peek().pos;
        s.or_depth = std::max(s.or_depth, depth);
        s.or_terms.push_back(std::move(e));
        p_.take();
        state_ = State::need;
        return std::nullopt;
    }
    if (!s.or_terms.empty()) {
        s.or_terms.push_back(std::move(e));
        depth = std::max(s.or_depth, depth) + 1;
        QL_TRY(Parser::check_depth(depth, s.or_pos));
        e = make_expr(s.or_pos, Or{std::move(s.or_terms)});
        s.or_terms.clear();
    }
    return finish_slot(std::move(e), depth);
}

// A whole expression or value is read inside its frame: the frame goes on or closes.
Failure ExprReader::finish_slot(Expr e, uint32_t depth) {
    Frame& f = frames_.back();
    std::string at = std::to_string(f.pos);
    switch (f.kind) {
        case FrameKind::top:
            result_ = std::move(e);
            state_ = State::done;
            return std::nullopt;
        case FrameKind::paren: {
            if (!p_.accept(TokenKind::rparen)) return p_.unexpected("`)` to close the `(` at " + at);
            uint32_t pos = pop().pos;
            QL_TRY(Parser::check_depth(depth + 1, pos));
            return have(std::move(e), depth + 1);  // parentheses leave no node
        }
        case FrameKind::call:
        case FrameKind::list:
            f.deepest = std::max(f.deepest, depth);
            f.parts.push_back(std::move(e));
            break;
        case FrameKind::object:
            f.deepest = std::max(f.deepest, depth);
            f.members.push_back(Member{std::move(f.key), std::move(e)});
            break;
    }
    state_ = State::need;
    if (p_.accept(TokenKind::comma)) {
        f.slot = Slot{};
        return f.kind == FrameKind::object ? read_key() : std::nullopt;
    }
    if (f.kind == FrameKind::call && p_.accept(TokenKind::rparen)) return close_call();
    if (f.kind == FrameKind::list && p_.accept(TokenKind::rbracket)) return close_list();
    if (f.kind == FrameKind::object && p_.accept(TokenKind::rbrace)) return close_object();
    if (f.kind == FrameKind::call) return p_.unexpected("`,` or `)` in the call of `" + f.name + "`");
    if (f.kind == FrameKind::list) return p_.unexpected("`,` or `]` in the list opened at " + at);
    return p_.unexpected("`,` or `}` in the object opened at " + at);
}

Failure ExprReader::close_call() {
    Frame f = pop();
    uint32_t depth = f.deepest + 1;
    QL_TRY(Parser::check_depth(depth, f.pos));
    Call call{std::move(f.name), std::move(f.parts), std::nullopt};
    QL_ASSIGN(call.shift, p_.parse_shift());
    return have(make_expr(f.pos, std::move(call)), depth);
}

Failure ExprReader::close_list() {
    Frame f = pop();
    uint32_t depth = f.deepest + 1;
    QL_TRY(Parser::check_depth(depth, f.pos));
    return have(make_expr(f.pos, ListExpr{std::move(f.parts)}), depth);
}

Failure ExprReader::close_object() {
    Frame f = pop();
    uint32_t depth = f.deepest + 1;
    QL_TRY(Parser::check_depth(depth, f.pos));
    return have(make_expr(f.pos, ObjectExpr{std::move(f.members)}), depth);
}

}  // namespace

Failure Parser::check_depth(uint32_t depth, uint32_t pos) {
    if (depth <= limits::expression_depth_max) return std::nullopt;
    return limit_error(pos, Limit::expression_depth, limits::expression_depth_max,
                       "the expression nests deeper than " +
                           std::to_string(limits::expression_depth_max) + " levels");
}

bool Parser::at_comparison() {
    if (compare_op(peek())) return true;
    if (at_word("in") || at_word("is")) return true;
    return at_word("not") && at_word("in", 1);
}

QlResult<Expr> Parser::parse_top_expr() {
    ExprReader reader(*this, {});
    return reader.read();
}

QlResult<Expr> Parser::parse_value() {
    ExprReader reader(*this, {.values = true});
    return reader.read();
}

// One document (insert, put) or the changes of a `set`: an object of constants. The cursor is
// on its `{`.
QlResult<Expr> Parser::parse_document(bool for_set) {
    ExprReader reader(*this, {.values = true,
                              .constants_only = true,
                              .top_role = for_set ? ObjectRole::changes : ObjectRole::document});
    return reader.read();
}

// documents = object | "[" [ object { "," object } ] "]" | PARAM.
QlResult<Documents> Parser::parse_documents() {
    Documents docs;
    docs.pos = peek().pos;
    if (at(TokenKind::param)) {
        auto index = static_cast<uint32_t>(take().integer);
        note_param(index);
        docs.param = Param{index};
        return docs;
    }
    if (at(TokenKind::lbrace)) {
        QL_ASSIGN(Expr doc, parse_document(false));
        docs.objects.push_back(std::move(doc));
        return docs;
    }
    if (!accept(TokenKind::lbracket)) {
        return unexpected("documents: an object `{...}`, a list of objects or a parameter");
    }
    docs.listed = true;
    if (accept(TokenKind::rbracket)) return docs;
    do {
        if (!at(TokenKind::lbrace)) return unexpected("a document `{...}`");
        QL_ASSIGN(Expr doc, parse_document(false));
        docs.objects.push_back(std::move(doc));
    } while (accept(TokenKind::comma));
    QL_TRY(expect(TokenKind::rbracket, "`,` or `]` after a document"));
    return docs;
}

// column = NAME | PATH: names joined by `.` with no spaces, at most 64 keys past the field. The
// cursor is on the first name.
QlResult<Column> Parser::parse_column() {
    Column column;
    column.field = take().text;
    while (at(TokenKind::dot)) {
        const Token& dot = peek();
        if (dot.spaced) return error_at(dot.pos, "a path joins names with `.` and no spaces");
        take();
        if (!at_name() || peek().spaced) {
            return unexpected_name("a key after `.` in the path `" + column.text() + ".`");
        }
        if (column.keys.size() == limits::path_keys_max) {
            return limit_error(peek().pos, Limit::path_keys, limits::path_keys_max,
                               "the path `" + column.field + "...` has more than " +
                                   std::to_string(limits::path_keys_max) + " keys");
        }
        column.keys.push_back(take().text);
    }
    return column;
}

// shift = ( "+" | "-" ) ( INT | PARAM ), after a call.
QlResult<std::optional<Shift>> Parser::parse_shift() {
    if (!at(TokenKind::plus) && !at(TokenKind::minus)) return std::optional<Shift>();
    Token sign = take();
    Shift shift;
    shift.pos = sign.pos;
    shift.negative = sign.kind == TokenKind::minus;
    if (at(TokenKind::integer)) {
        shift.by = take().integer;
    } else if (at(TokenKind::param)) {
        auto index = static_cast<uint32_t>(take().integer);
        note_param(index);
        shift.by = Param{index};
    } else {
        return unexpected("an integer or a parameter after `" + std::string(sign.raw) + "`");
    }
    return std::optional<Shift>(std::move(shift));
}

}  // namespace fenec::ql::detail
