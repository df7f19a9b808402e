// ql/convert.cc: the conversions of ql/convert.h.
#include "ql/convert.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "index/collation.h"
#include "json/timestamp.h"
#include "ql/value_json.h"

namespace fenec::ql {

using engine::Value;

Error error_at(uint32_t pos, std::string message) {
    Error e;
    e.message = std::move(message);
    e.position = pos;
    return e;
}

std::string kind_of(const Value& v) {
    if (std::holds_alternative<engine::VectorF32>(v.rep) ||
        std::holds_alternative<engine::VectorF16>(v.rep)) {
        return "vector";
    }
    return v.kind_name();
}

namespace {

QlResult<Value> apply_shift(Value v, const Shift& shift, const Context& ctx) {
    int64_t by = 0;
    if (const int64_t* lit = std::get_if<int64_t>(&shift.by)) {
        by = *lit;
    } else {
        const uint32_t n = std::get<Param>(shift.by).index;
        if (n > ctx.params.size()) return error_at(shift.pos, "$" + std::to_string(n) + " is not bound");
        const int64_t* p = std::get_if<int64_t>(&ctx.params[n - 1].rep);
        if (!p) return error_at(shift.pos, "a shift takes an int");
        by = *p;
    }
    if (shift.negative) {
        if (by == std::numeric_limits<int64_t>::min()) return error_at(shift.pos, "shift out of range");
        by = -by;
    }
    if (v.is_null()) return v;
    if (const int64_t* i = std::get_if<int64_t>(&v.rep)) {
        int64_t r;
        if (__builtin_add_overflow(*i, by, &r)) return error_at(shift.pos, "int shift outside int64");
        return Value(r);
    }
    if (const auto* t = std::get_if<engine::Timestamp>(&v.rep)) {
        int64_t r;
        if (__builtin_add_overflow(t->ms, by, &r) || !json::timestamp_in_range(r)) {
            return error_at(shift.pos, "timestamp shift outside years 0000 to 9999");
        }
        return Value(engine::Timestamp{r});
    }
    return error_at(shift.pos, "only an int or a timestamp can be shifted, found " + kind_of(v));
}

int64_t code_points(std::string_view s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

}  // namespace

QlResult<Value> as_timestamp(const Value& v, uint32_t pos, const std::string& what) {
    if (std::holds_alternative<engine::Timestamp>(v.rep) || v.is_null()) return v;
    if (const auto* s = std::get_if<std::string>(&v.rep)) {
        if (std::optional<int64_t> ms = json::parse_timestamp(*s))
            return Value(engine::Timestamp{*ms});
        return error_at(pos, "`" + what + "` expects a timestamp, and `" + *s + "` is not one");
    }
    if (const int64_t* i = std::get_if<int64_t>(&v.rep)) {
        if (!json::timestamp_in_range(*i))
            return error_at(pos, "`" + what + "`: timestamp outside years 0000 to 9999");
        return Value(engine::Timestamp{*i});
    }
    return error_at(pos, "`" + what + "` expects timestamp, found " + kind_of(v));
}

QlResult<Value> eval_call(const Call& call, uint32_t pos, std::vector<Value> args, const Context& ctx) {
    auto arity = [&](size_t n) -> Failure {
        if (args.size() != n) {
            return error_at(pos, "`" + call.name + "()` takes " + std::to_string(n) + " argument" +
                                     (n == 1 ? "" : "s"));
        }
        return std::nullopt;
    };
    Value out;
    if (call.name == "now") {
        if (auto f = arity(0)) return *f;
        out = engine::Timestamp{ctx.now_ms};
    } else if (call.name == "lower" || call.name == "upper") {
        if (auto f = arity(1)) return *f;
        const auto* s = std::get_if<std::string>(&args[0].rep);
        out = s ? Value(index::change_case(*s, call.name == "upper")) : Value();
    } else if (call.name == "len") {
        if (auto f = arity(1)) return *f;
        const Value& a = args[0];
        if (const auto* s = std::get_if<std::string>(&a.rep)) out = code_points(*s);
        else if (const auto* b = std::get_if<engine::Bytes>(&a.rep)) out = int64_t(b->data.size());
        else if (const auto* l = std::get_if<engine::List>(&a.rep)) out = int64_t(l->items.size());
        else if (const auto* vf = std::get_if<engine::VectorF32>(&a.rep)) out = int64_t(vf->v.size());
        else if (const auto* vh = std::get_if<engine::VectorF16>(&a.rep)) out = int64_t(vh->v.size());
    } else if (call.name == "coalesce") {
        for (Value& a : args) {
            if (!a.is_null()) {
                out = std::move(a);
                break;
            }
        }
    } else if (call.name == "timestamp") {
        if (auto f = arity(1)) return *f;
        QlResult<Value> t = as_timestamp(args[0], pos, "timestamp()");
        if (!t) return t.take_error();
        out = std::move(t.value());
    } else {
        return error_at(pos, "unknown function `" + call.name + "`");
    }
    if (call.shift) return apply_shift(std::move(out), *call.shift, ctx);
    return out;
}

QlResult<Value> eval_constant(const Expr& e, const Context& ctx) {
    if (const auto* lit = std::get_if<Literal>(&e.node)) return lit->value;
    if (const auto* p = std::get_if<Param>(&e.node)) {
        if (p->index > ctx.params.size()) return error_at(e.pos, "$" + std::to_string(p->index) + " is not bound");
        return ctx.params[p->index - 1];
    }
    if (const auto* l = std::get_if<ListExpr>(&e.node)) {
        engine::List out;
        for (const Expr& item : l->items) {
            QlResult<Value> v = eval_constant(item, ctx);
            if (!v) return v.take_error();
            out.items.push_back(std::move(v.value()));
        }
        return Value(std::move(out));
    }
    if (const auto* o = std::get_if<ObjectExpr>(&e.node)) {
        engine::Object out;
        for (const Member& m : o->members) {
            QlResult<Value> v = eval_constant(m.value, ctx);
            if (!v) return v.take_error();
            out.keys.push_back(m.key.text);
            out.values.push_back(std::move(v.value()));
        }
        return Value(std::move(out));
    }
    if (const auto* c = std::get_if<Call>(&e.node)) {
        std::vector<Value> args;
        for (const Expr& a : c->args) {
            QlResult<Value> v = eval_constant(a, ctx);
            if (!v) return v.take_error();
            args.push_back(std::move(v.value()));
        }
        return eval_call(*c, e.pos, std::move(args), ctx);
    }
    if (const auto* col = std::get_if<Column>(&e.node)) {
        return error_at(e.pos, "a value is expected here, not the field `" + col->text() + "`");
    }
    return error_at(e.pos, "a value is expected here");
}

namespace {

QlResult<Value> convert_type(const Value& v, const engine::TypeDesc& t, const std::string& field,
                             uint32_t pos, int depth);

Error misfit(uint32_t pos, const std::string& field, const std::string& expected, const Value& v) {
    return error_at(pos, "`" + field + "` expects " + expected + ", found " + kind_of(v));
}

QlResult<Value> to_json_value(const Value& v, const std::string& field, uint32_t pos, int depth) {
    if (depth > 64) {
        Error e = error_at(pos, "`" + field + "`: json nests deeper than 64");
        e.limit = Limit::json_depth;
        e.max = 64;
        return e;
    }
    if (std::holds_alternative<engine::Bytes>(v.rep)) return misfit(pos, field, "a json value", v);
    if (const auto* t = std::get_if<engine::Timestamp>(&v.rep))
        return Value(json::format_timestamp(t->ms));
    if (const auto* vf = std::get_if<engine::VectorF32>(&v.rep)) {
        engine::List l;
        for (float f : vf->v) l.items.push_back(double(f));
        return Value(std::move(l));
    }
    if (const auto* d = std::get_if<double>(&v.rep); d && !std::isfinite(*d)) {
        return error_at(pos, "`" + field + "`: floats must be finite");
    }
    if (const auto* l = std::get_if<engine::List>(&v.rep)) {
        engine::List out;
        for (const Value& item : l->items) {
            QlResult<Value> c = to_json_value(item, field, pos, depth + 1);
            if (!c) return c.take_error();
            out.items.push_back(std::move(c.value()));
        }
        return Value(std::move(out));
    }
    if (const auto* o = std::get_if<engine::Object>(&v.rep)) {
        engine::Object out;
        for (size_t i = 0; i < o->keys.size(); ++i) {
            for (size_t j = 0; j < i; ++j) {
                if (o->keys[j] == o->keys[i]) {
                    return error_at(
                        pos, "`" + field + "`: json object has key `" + o->keys[i] + "` twice");
                }
            }
            QlResult<Value> c = to_json_value(o->values[i], field, pos, depth + 1);
            if (!c) return c.take_error();
            out.keys.push_back(o->keys[i]);
            out.values.push_back(std::move(c.value()));
        }
        return Value(std::move(out));
    }
    return v;
}

QlResult<Value> to_vector(const Value& v, const engine::TypeDesc& t, const std::string& field, uint32_t pos) {
    const std::string expected = "vector<" + std::to_string(t.dim) + ">";
    const auto* l = std::get_if<engine::List>(&v.rep);
    if (const auto* vf = std::get_if<engine::VectorF32>(&v.rep)) {
        if (vf->v.size() != t.dim)
            return error_at(pos, "`" + field + "` expects " + expected + ", found vector<" +
                                     std::to_string(vf->v.size()) + ">");
        return v;
    }
    if (!l) return misfit(pos, field, expected, v);
    if (l->items.size() != t.dim) {
        return error_at(pos, "`" + field + "` expects " + expected + ", found a list of " +
                                 std::to_string(l->items.size()) + " numbers");
    }
    engine::VectorF32 out;
    out.v.reserve(t.dim);
    for (const Value& item : l->items) {
        double d;
        if (const int64_t* i = std::get_if<int64_t>(&item.rep)) d = double(*i);
        else if (const double* f = std::get_if<double>(&item.rep)) d = *f;
        else
            return error_at(pos, "`" + field + "` expects " + expected + ", found a list holding " +
                                     kind_of(item));
        if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
            return error_at(pos,
                            "`" + field + "`: vector components must be finite float32 values");
        }
        out.v.push_back(static_cast<float>(d));
    }
    if (t.elem == engine::VectorElem::f16) {
        engine::VectorF16 h;
        for (float f : out.v) h.v.push_back(engine::f32_to_f16(f));
        return Value(std::move(h));
    }
    return Value(std::move(out));
}

QlResult<Value> convert_type(const Value& v, const engine::TypeDesc& t, const std::string& field,
                             uint32_t pos, int depth) {
    if (v.is_null()) return v;
    switch (t.base) {
        case engine::BaseType::Bool:
            if (std::holds_alternative<bool>(v.rep)) return v;
            return misfit(pos, field, "bool", v);
        case engine::BaseType::Int:
            if (std::holds_alternative<int64_t>(v.rep)) return v;
            if (const double* d = std::get_if<double>(&v.rep)) {
                if (std::isfinite(*d) && std::trunc(*d) == *d && *d >= -9223372036854775808.0 &&
                    *d < 9223372036854775808.0) {
                    return Value(static_cast<int64_t>(*d));
                }
            }
            return misfit(pos, field, "int", v);
        case engine::BaseType::Float:
            if (const double* d = std::get_if<double>(&v.rep)) {
                if (!std::isfinite(*d))
                    return error_at(pos, "`" + field + "`: floats must be finite");
                return v;
            }
            if (const int64_t* i = std::get_if<int64_t>(&v.rep)) return Value(double(*i));
            return misfit(pos, field, "float", v);
        case engine::BaseType::Text:
            if (std::holds_alternative<std::string>(v.rep)) return v;
            return misfit(pos, field, "text", v);
        case engine::BaseType::Bytes:
            if (std::holds_alternative<engine::Bytes>(v.rep)) return v;
            if (const auto* s = std::get_if<std::string>(&v.rep)) {
                if (std::optional<std::string> b = base64_decode(*s)) return Value(engine::Bytes{*b});
                return error_at(pos, "`" + field + "` expects bytes, and the text is not base64");
            }
            return misfit(pos, field, "bytes", v);
        case engine::BaseType::Timestamp: return as_timestamp(v, pos, field);
        case engine::BaseType::Vector: return to_vector(v, t, field, pos);
        case engine::BaseType::List: {
            const auto* l = std::get_if<engine::List>(&v.rep);
            if (!l) return misfit(pos, field, t.to_string(), v);
            engine::List out;
            for (const Value& item : l->items) {
                if (item.is_null())
                    return error_at(pos, "`" + field + "`: list elements are never null");
                QlResult<Value> c = convert_type(item, *t.item, field, pos, depth + 1);
                if (!c) return c.take_error();
                out.items.push_back(std::move(c.value()));
            }
            return Value(std::move(out));
        }
        case engine::BaseType::Json: return to_json_value(v, field, pos, depth);
    }
    return misfit(pos, field, t.to_string(), v);
}

}  // namespace

QlResult<Value> convert_to(const Value& v, const engine::FieldDesc& f, uint32_t pos) {
    return convert_type(v, f.type, f.name, pos, 1);
}

QlResult<Value> convert_for_write(const Value& v, const engine::FieldDesc& f, uint32_t pos) {
    QlResult<Value> c = convert_to(v, f, pos);
    if (!c.is_ok() || f.index.kind != engine::IndexKind::hnsw ||
        f.index.hnsw.metric != engine::Metric::cosine) {
        return c;
    }
    bool zero = false;
    if (const auto* vf = std::get_if<engine::VectorF32>(&c.value().rep)) {
        zero = std::all_of(vf->v.begin(), vf->v.end(), [](float x) { return x == 0.0f; });
    } else if (const auto* vh = std::get_if<engine::VectorF16>(&c.value().rep)) {
        zero = std::all_of(vh->v.begin(), vh->v.end(),
                           [](uint16_t h) { return engine::f16_to_f32(h) == 0.0f; });
    }
    if (zero)
        return error_at(
            pos, "`" + f.name +
                     "`: a zero vector has no cosine similarity (the field is @hnsw(cosine))");
    return c;
}

}  // namespace fenec::ql
