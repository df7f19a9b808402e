// ql/eval.cc: compiling and evaluating `where` expressions (ql/eval.h).
#include "ql/eval.h"

#include "index/index_set.h"
#include "index/key.h"
#include "ql/compare.h"
#include "ql/limits.h"

namespace fenec::ql {

using engine::BaseType;
using engine::Value;

bool FieldRef::is_text() const {
    if (!field || !keys.empty()) return false;
    const engine::TypeDesc& t = field->type;
    return t.base == BaseType::Text ||
           (t.base == BaseType::List && t.item && t.item->base == BaseType::Text);
}

QlResult<FieldRef> resolve_column(const engine::Schema& schema, const Column& column, uint32_t pos,
                                  const std::string& collection) {
    FieldRef ref;
    ref.name = column.text();
    if (column.field == "_id" && column.keys.empty()) {
        ref.is_id = true;
        return ref;
    }
    if (column.field == "_score" && column.keys.empty()) {
        // A ranked read resolves its `_score` before it gets here (ql/exec_ranked.cc).
        return error_at(pos,
                        "`_score` is a ranked row's score: it exists only in a read with "
                        "`match` or `near`");
    }
    const std::optional<uint16_t> slot = schema.slot_of(column.field);
    if (!slot) {
        return error_at(pos, "collection `" + collection + "` has no field `" + column.field + "`");
    }
    ref.slot = *slot;
    ref.field = &schema.fields[*slot];
    ref.keys = column.keys;
    if (!column.keys.empty() && ref.field->type.base != BaseType::Json) {
        return error_at(pos, "`" + column.text() + "`: only a json field has paths");
    }
    if (column.keys.empty()) ref.rule = index::field_rule(*ref.field);
    return ref;
}

Value read_column(const FieldRef& ref, engine::DocId id, const engine::DocView& doc) {
    if (ref.is_id) return Value(static_cast<int64_t>(id.v));
    Value v = doc.get(ref.slot);
    for (const std::string& key : ref.keys) {
        const auto* o = std::get_if<engine::Object>(&v.rep);
        if (!o) return Value();
        Value next;
        for (size_t i = 0; i < o->keys.size(); ++i) {
            if (o->keys[i] == key) {
                next = o->values[i];
                break;
            }
        }
        v = std::move(next);
    }
    return v;
}

namespace {

struct Compiler {
    const engine::Schema& schema;
    const std::string& collection;
    const Context& ctx;

    QlResult<CNode> node(const Expr& e);
    QlResult<CNode> compare(const Expr& e, const Compare& c);
    QlResult<CNode> in(const Expr& e, const In& in);
    Failure convert_for(const CNode& column, CNode& other, bool element = false);
    QlResult<index::TextRule> rule_of(const CNode& a, const CNode& b, uint32_t pos);
};

bool is_constant(const Expr& e) {
    if (e.is<Literal>() || e.is<Param>()) return true;
    if (const auto* l = std::get_if<ListExpr>(&e.node)) {
        for (const Expr& i : l->items) {
            if (!is_constant(i)) return false;
        }
        return true;
    }
    if (const auto* o = std::get_if<ObjectExpr>(&e.node)) {
        for (const Member& m : o->members) {
            if (!is_constant(m.value)) return false;
        }
        return true;
    }
    if (const auto* c = std::get_if<Call>(&e.node)) {
        for (const Expr& a : c->args) {
            if (!is_constant(a)) return false;
        }
        return true;
    }
    return false;
}

// §6.2, one rule for comparisons and writes: a constant compared with a field (or `_id`) is read
// as a write to that field reads it (§5.2: ISO text or epoch ms for a timestamp, base64 for bytes,
// a list of numbers for a vector), and a constant the write would refuse is refused here, a 400
// naming the field and both kinds, so `where year > "abc"` is the mistake `insert` calls it rather
// than a filter that keeps nothing. `element` reads the constant as one element of the list
// (`has`). Left as they are: null (a value every field takes), a number against an int or float
// field (it compares by its exact value, so `year > 2020.5` asks what it says), and anything
// against a json field or a path into one, which holds every kind.
Failure Compiler::convert_for(const CNode& column, CNode& other, bool element) {
    if (column.kind != CNode::Kind::column || other.kind != CNode::Kind::constant) return std::nullopt;
    const FieldRef& ref = column.column;
    if (!ref.keys.empty() || other.constant.is_null()) return std::nullopt;
    engine::FieldDesc as;
    if (ref.field) {
        as = *ref.field;
    } else {  // `_id`, an int that is never written
        as.name = "_id";
        as.type = engine::make_type(BaseType::Int);
    }
    if (element) {
        if (as.type.base == BaseType::List && as.type.item) {
            as.type = engine::TypeDesc(*as.type.item);
        } else if (as.type.base == BaseType::Vector) {
            as.type = engine::make_type(BaseType::Float);
        } else {
            return std::nullopt;  // `has` on what is not a list is false (§6.1); json holds any
        }
    }
    const BaseType base = as.type.base;
    if (base == BaseType::Json) return std::nullopt;
    const bool number = std::holds_alternative<int64_t>(other.constant.rep) ||
                        std::holds_alternative<double>(other.constant.rep);
    if ((base == BaseType::Int || base == BaseType::Float) && number) return std::nullopt;
    QlResult<Value> v = convert_to(other.constant, as, other.pos);
    if (!v) return v.take_error();
    other.constant = std::move(v.value());
    return std::nullopt;
}

QlResult<index::TextRule> Compiler::rule_of(const CNode& a, const CNode& b, uint32_t pos) {
    const bool at = a.kind == CNode::Kind::column && a.column.is_text();
    const bool bt = b.kind == CNode::Kind::column && b.column.is_text();
    if (at && bt && !(a.column.rule == b.column.rule)) {
        return error_at(pos, "`" + a.column.name + "` and `" + b.column.name +
                                 "` compare text by different rules");
    }
    if (at) return a.column.rule;
    if (bt) return b.column.rule;
    return index::TextRule{};
}

QlResult<CNode> Compiler::compare(const Expr& e, const Compare& c) {
    QlResult<CNode> l = node(*c.lhs);
    if (!l) return l;
    QlResult<CNode> r = node(*c.rhs);
    if (!r) return r;
    if (c.op == CompareOp::has) {
        if (auto f = convert_for(l.value(), r.value(), true)) return *f;
    } else if (c.op != CompareOp::contains) {  // `~` is text's alone, false on any other (§6.1)
        if (auto f = convert_for(l.value(), r.value())) return *f;
        if (auto f = convert_for(r.value(), l.value())) return *f;
    }
    QlResult<index::TextRule> rule = rule_of(l.value(), r.value(), e.pos);
    if (!rule) return rule.take_error();
    CNode n;
    n.kind = CNode::Kind::compare;
    n.pos = e.pos;
    n.op = c.op;
    n.rule = rule.value();
    for (const CNode* side : {&l.value(), &r.value()}) {
        if (side->kind == CNode::Kind::column && side->column.field &&
            side->column.field->collation == engine::Collation::tr) {
            n.turkish = true;
        }
    }
    n.kids.reserve(2);  // one allocation, not two
    n.kids.push_back(std::move(l.value()));
    n.kids.push_back(std::move(r.value()));
    return n;
}

QlResult<CNode> Compiler::in(const Expr& e, const In& in) {
    QlResult<CNode> l = node(*in.lhs);
    if (!l) return l;
    QlResult<Value> set = eval_constant(*in.set, ctx);
    if (!set) return set.take_error();
    const auto* list = std::get_if<engine::List>(&set.value().rep);
    if (!list) return error_at(in.set->pos, "`in` takes a list, found " + kind_of(set.value()));
    CNode n;
    n.kind = CNode::Kind::in;
    n.pos = e.pos;
    n.negated = in.negated;
    if (l.value().kind == CNode::Kind::column && l.value().column.is_text()) n.rule = l.value().column.rule;
    for (const Value& item : list->items) {
        CNode constant;
        constant.kind = CNode::Kind::constant;
        constant.pos = in.set->pos;
        constant.constant = item;
        if (auto f = convert_for(l.value(), constant)) return *f;
        n.set.push_back(std::move(constant.constant));
    }
    if (n.set.size() > limits::in_list_linear_max) {
        n.keys.reserve(n.set.size());
        for (const Value& item : n.set) n.keys.insert(in_key(item, n.rule));
    }
    n.kids.push_back(std::move(l.value()));
    return n;
}

QlResult<CNode> Compiler::node(const Expr& e) {
    CNode n;
    n.pos = e.pos;
    if (is_constant(e)) {
        QlResult<Value> v = eval_constant(e, ctx);
        if (!v) return v.take_error();
        n.kind = CNode::Kind::constant;
        n.constant = std::move(v.value());
        return n;
    }
    if (const auto* col = std::get_if<Column>(&e.node)) {
        if (col->field == "_score") return error_at(e.pos, "`_score` exists only in a ranked read's answer");
        QlResult<FieldRef> ref = resolve_column(schema, *col, e.pos, collection);
        if (!ref) return ref.take_error();
        n.kind = CNode::Kind::column;
        n.column = std::move(ref.value());
        return n;
    }
    if (const auto* c = std::get_if<Compare>(&e.node)) return compare(e, *c);
    if (const auto* in_node = std::get_if<In>(&e.node)) return in(e, *in_node);
    if (const auto* call = std::get_if<Call>(&e.node)) {
        n.kind = CNode::Kind::call;
        n.call = call;
        for (const Expr& a : call->args) {
            QlResult<CNode> k = node(a);
            if (!k) return k;
            n.kids.push_back(std::move(k.value()));
        }
        static const char* known[] = {"lower", "upper", "len", "coalesce", "now", "timestamp"};
        bool ok = false;
        for (const char* name : known) ok = ok || call->name == name;
        if (!ok) return error_at(e.pos, "unknown function `" + call->name + "`");
        return n;
    }
    const Expr* operand = nullptr;
    if (const auto* isn = std::get_if<IsNull>(&e.node)) {
        n.kind = CNode::Kind::is_null;
        n.negated = isn->negated;
        operand = isn->operand.get();
    } else if (const auto* no = std::get_if<Not>(&e.node)) {
        n.kind = CNode::Kind::not_;
        operand = no->operand.get();
    }
    if (operand) {
        QlResult<CNode> k = node(*operand);
        if (!k) return k;
        n.kids.push_back(std::move(k.value()));
        return n;
    }
    const std::vector<Expr>* terms = nullptr;
    if (const auto* a = std::get_if<And>(&e.node)) {
        n.kind = CNode::Kind::and_;
        terms = &a->terms;
    } else if (const auto* o = std::get_if<Or>(&e.node)) {
        n.kind = CNode::Kind::or_;
        terms = &o->terms;
    }
    if (terms) {
        for (const Expr& t : *terms) {
            QlResult<CNode> k = node(t);
            if (!k) return k;
            n.kids.push_back(std::move(k.value()));
        }
        return n;
    }
    return error_at(e.pos, "this expression is not allowed here");
}

bool is_true(const Value& v) {
    const bool* b = std::get_if<bool>(&v.rep);
    return b && *b;
}

bool holds(const Value& list, const Value& item, const index::TextRule& rule) {
    if (const auto* l = std::get_if<engine::List>(&list.rep)) {
        for (const Value& x : l->items) {
            if (equal_values(x, item, rule)) return true;
        }
        return false;
    }
    if (const auto* vf = std::get_if<engine::VectorF32>(&list.rep)) {
        for (float f : vf->v) {
            if (equal_values(Value(double(f)), item, rule)) return true;
        }
    }
    return false;
}

Value compare_values_op(const CNode& n, const Value& a, const Value& b) {
    switch (n.op) {
        case CompareOp::eq: return equal_values(a, b, n.rule);
        case CompareOp::ne: return !equal_values(a, b, n.rule);
        case CompareOp::lt: return comparable_for_range(a, b) && compare_values(a, b, n.rule) < 0;
        case CompareOp::le: return comparable_for_range(a, b) && compare_values(a, b, n.rule) <= 0;
        case CompareOp::gt: return comparable_for_range(a, b) && compare_values(a, b, n.rule) > 0;
        case CompareOp::ge: return comparable_for_range(a, b) && compare_values(a, b, n.rule) >= 0;
        case CompareOp::contains: {
            const auto* s = std::get_if<std::string>(&a.rep);
            const auto* t = std::get_if<std::string>(&b.rep);
            return s && t && index::contains_folded(*s, *t, n.turkish);
        }
        case CompareOp::has: return holds(a, b, n.rule);
    }
    return false;
}

}  // namespace

// Equality of texts never consults the collation (index::equal_text: the bytes, or the folds'
// bytes under nocase), and under the bytes collation a text's key is exactly those bytes. Every
// other kind's key is equal exactly when the values are (index/key.h: 1 and 1.0 alike, 0.0 and
// -0.0 alike, a vector as the list of its components). No ICU sort key is built per row.
std::string in_key(const Value& v, const index::TextRule& rule) {
    const index::TextRule equality{engine::Collation::bytes, rule.nocase, rule.fold};
    return index::key_of(v, equality);
}

QlResult<CNode> compile_where(const Expr& e, const engine::Schema& schema,
                              const std::string& collection, const Context& ctx) {
    Compiler c{schema, collection, ctx};
    return c.node(e);
}

Value eval(const CNode& n, engine::DocId id, const engine::DocView& doc, const Context& ctx) {
    switch (n.kind) {
        case CNode::Kind::constant: return n.constant;
        case CNode::Kind::column: return read_column(n.column, id, doc);
        case CNode::Kind::call: {
            std::vector<Value> args;
            for (const CNode& k : n.kids) args.push_back(eval(k, id, doc, ctx));
            QlResult<Value> v = eval_call(*n.call, n.pos, std::move(args), ctx);
            return v ? std::move(v.value()) : Value();
        }
        case CNode::Kind::compare:
            return compare_values_op(n, eval(n.kids[0], id, doc, ctx), eval(n.kids[1], id, doc, ctx));
        case CNode::Kind::in: {
            const Value v = eval(n.kids[0], id, doc, ctx);
            if (!n.keys.empty()) return n.keys.contains(in_key(v, n.rule)) != n.negated;
            bool found = false;
            for (const Value& s : n.set) {
                if (equal_values(v, s, n.rule)) {
                    found = true;
                    break;
                }
            }
            return found != n.negated;
        }
        case CNode::Kind::is_null: return eval(n.kids[0], id, doc, ctx).is_null() != n.negated;
        case CNode::Kind::not_: return !is_true(eval(n.kids[0], id, doc, ctx));
        case CNode::Kind::and_:
            for (const CNode& k : n.kids) {
                if (!is_true(eval(k, id, doc, ctx))) return false;
            }
            return true;
        case CNode::Kind::or_:
            for (const CNode& k : n.kids) {
                if (is_true(eval(k, id, doc, ctx))) return true;
            }
            return false;
    }
    return Value();
}

}  // namespace fenec::ql
