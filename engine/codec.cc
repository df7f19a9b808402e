// engine/codec.cc: schemas and ops to and from their FlatBuffers tables (engine/format.fbs).
// The one place that knows both the C++ shapes and the wire shapes.
#include <cstring>

#include "engine/database_internal.h"

namespace fenec::engine::codec {

namespace {

Status unknown(const char* what, unsigned v, uint64_t offset) {
    return Status::error(Code::corruption,
                         std::string("unknown ") + what + " " + std::to_string(v) +
                             " at offset " + std::to_string(offset),
                         Detail{.offset = offset});
}

flatbuffers::Offset<fb::TypeDesc> type_to_fb(flatbuffers::FlatBufferBuilder& b, const TypeDesc& t) {
    flatbuffers::Offset<fb::TypeDesc> item;
    if (t.item) item = type_to_fb(b, *t.item);
    return fb::CreateTypeDesc(b, static_cast<fb::BaseType>(t.base), t.dim,
                              static_cast<fb::VectorElem>(t.elem), item);
}

Result<TypeDesc> type_from_fb(const fb::TypeDesc* t, uint64_t offset, int depth) {
    if (!t) return Status::error(Code::corruption, "missing type at offset " + std::to_string(offset),
                                 Detail{.offset = offset});
    TypeDesc out;
    const unsigned base = static_cast<unsigned>(t->base());
    if (base < 1 || base > static_cast<unsigned>(BaseType::Json)) return unknown("BaseType", base, offset);
    out.base = static_cast<BaseType>(base);
    out.dim = t->dim();
    const unsigned elem = static_cast<unsigned>(t->elem());
    if (elem > 1) return unknown("VectorElem", elem, offset);
    out.elem = static_cast<VectorElem>(elem);
    if (out.base == BaseType::List) {
        if (depth > 64) return Status::error(Code::corruption, "type nested too deep",
                                             Detail{.offset = offset});
        FENEC_ASSIGN_OR_RETURN(TypeDesc item, type_from_fb(t->item(), offset, depth + 1));
        out.item = std::make_shared<const TypeDesc>(std::move(item));
    }
    return out;
}

}  // namespace

flatbuffers::Offset<fb::IndexDesc> to_fb(flatbuffers::FlatBufferBuilder& b, const IndexDesc& x) {
    auto hnsw = fb::CreateHnswParams(b, static_cast<fb::Metric>(x.hnsw.metric), x.hnsw.m,
                                     x.hnsw.ef_construction, x.hnsw.ef_search);
    // No stem is no string at all, so a field without one is written byte for byte as before.
    auto stem = x.text.stem.empty() ? flatbuffers::Offset<flatbuffers::String>()
                                    : b.CreateString(x.text.stem);
    auto text = fb::CreateTextParams(b, x.text.k1_hundredths, x.text.b_hundredths, x.text.prefix,
                                     x.text.prefix_min, x.text.chars, stem);
    return fb::CreateIndexDesc(b, static_cast<fb::IndexKind>(x.kind), x.ttl_ms, hnsw, text);
}

flatbuffers::Offset<fb::FieldDesc> to_fb(flatbuffers::FlatBufferBuilder& b, const FieldDesc& f) {
    auto name = b.CreateString(f.name);
    auto type = type_to_fb(b, f.type);
    auto index = to_fb(b, f.index);
    std::vector<flatbuffers::Offset<fb::PathIndex>> paths;
    for (const PathIndex& p : f.paths) {
        auto keys = b.CreateVectorOfStrings(p.keys);
        auto ix = to_fb(b, p.index);
        paths.push_back(fb::CreatePathIndex(b, keys, ix));
    }
    auto pv = b.CreateVector(paths);
    return fb::CreateFieldDesc(b, name, type, f.required, static_cast<fb::Collation>(f.collation),
                               f.nocase, index, pv, f.dropped);
}

flatbuffers::Offset<fb::Schema> to_fb(flatbuffers::FlatBufferBuilder& b, const Schema& s) {
    std::vector<flatbuffers::Offset<fb::FieldDesc>> fields;
    fields.reserve(s.fields.size());
    for (const FieldDesc& f : s.fields) fields.push_back(to_fb(b, f));
    return fb::CreateSchema(b, b.CreateVector(fields));
}

Result<IndexDesc> from_fb(const fb::IndexDesc* x, uint64_t offset) {
    IndexDesc out;
    if (!x) return out;
    const unsigned kind = static_cast<unsigned>(x->kind());
    if (kind > static_cast<unsigned>(IndexKind::hnsw)) return unknown("IndexKind", kind, offset);
    out.kind = static_cast<IndexKind>(kind);
    out.ttl_ms = x->ttl_ms();
    if (const fb::HnswParams* h = x->hnsw()) {
        const unsigned metric = static_cast<unsigned>(h->metric());
        if (metric > 2) return unknown("Metric", metric, offset);
        out.hnsw = HnswParams{static_cast<Metric>(metric), h->m(), h->ef_construction(),
                              h->ef_search()};
    }
    if (const fb::TextParams* t = x->text()) {
        std::string stem = t->stem() ? t->stem()->str() : std::string();
        out.text = TextParams{t->k1_hundredths(), t->b_hundredths(), t->prefix(), t->prefix_min(),
                              t->chars(), std::move(stem)};
    }
    return out;
}

Result<FieldDesc> from_fb(const fb::FieldDesc* f, uint64_t offset) {
    FieldDesc out;
    if (!f) return Status::error(Code::corruption, "missing field at offset " + std::to_string(offset),
                                 Detail{.offset = offset});
    if (f->name()) out.name = f->name()->str();
    FENEC_ASSIGN_OR_RETURN(out.type, type_from_fb(f->type(), offset, 1));
    out.required = f->required();
    const unsigned coll = static_cast<unsigned>(f->collation());
    if (coll > 2) return unknown("Collation", coll, offset);
    out.collation = static_cast<Collation>(coll);
    out.nocase = f->nocase();
    FENEC_ASSIGN_OR_RETURN(out.index, from_fb(f->index(), offset));
    if (f->paths()) {
        for (const fb::PathIndex* p : *f->paths()) {
            PathIndex pi;
            if (p->keys()) {
                for (const flatbuffers::String* k : *p->keys()) pi.keys.push_back(k->str());
            }
            FENEC_ASSIGN_OR_RETURN(pi.index, from_fb(p->index(), offset));
            out.paths.push_back(std::move(pi));
        }
    }
    out.dropped = f->dropped();
    return out;
}

Result<Schema> from_fb(const fb::Schema* s, uint64_t offset) {
    Schema out;
    if (!s || !s->fields()) return out;
    for (const fb::FieldDesc* f : *s->fields()) {
        FENEC_ASSIGN_OR_RETURN(FieldDesc fd, from_fb(f, offset));
        out.fields.push_back(std::move(fd));
    }
    return out;
}

flatbuffers::Offset<flatbuffers::Vector<fb::Op>> op_types(flatbuffers::FlatBufferBuilder& b,
                                                           const std::vector<Block::Op>& ops,
                                                           size_t begin, size_t end) {
    std::vector<uint8_t> types;
    types.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
        switch (ops[i].v.index()) {
            case 0: types.push_back(static_cast<uint8_t>(fb::Op::CreateCollection)); break;
            case 1: types.push_back(static_cast<uint8_t>(fb::Op::AlterCollection)); break;
            case 2: types.push_back(static_cast<uint8_t>(fb::Op::DropCollection)); break;
            case 3: types.push_back(static_cast<uint8_t>(fb::Op::PutDocs)); break;
            default: types.push_back(static_cast<uint8_t>(fb::Op::DeleteDocs)); break;
        }
    }
    return b.CreateVector(reinterpret_cast<const fb::Op*>(types.data()), types.size());
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<void>>> op_values(
    flatbuffers::FlatBufferBuilder& b, const std::vector<Block::Op>& ops, size_t begin,
    size_t end) {
    std::vector<flatbuffers::Offset<void>> values;
    values.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
        const Block::Op& op = ops[i];
        if (auto* c = std::get_if<Block::Op::Create>(&op.v)) {
            auto name = b.CreateString(c->name);
            auto schema = to_fb(b, c->schema);
            values.push_back(fb::CreateCreateCollection(b, c->collection.v, name, schema).Union());
        } else if (auto* a = std::get_if<Block::Op::Alter>(&op.v)) {
            flatbuffers::Offset<fb::FieldDesc> field;
            if (a->spec.kind == AlterKind::add_field) field = to_fb(b, a->spec.field_desc);
            auto keys = b.CreateVectorOfStrings(a->spec.keys);
            auto index = to_fb(b, a->spec.index);
            auto new_name = b.CreateString(a->spec.new_name);
            auto after = to_fb(b, a->after);
            values.push_back(fb::CreateAlterCollection(b, a->collection.v,
                                                       static_cast<fb::AlterKind>(a->spec.kind),
                                                       a->slot, field, keys, index, new_name, after)
                                 .Union());
        } else if (auto* d = std::get_if<Block::Op::Drop>(&op.v)) {
            values.push_back(fb::CreateDropCollection(b, d->collection.v).Union());
        } else if (auto* p = std::get_if<Block::Op::Put>(&op.v)) {
            size_t total = 0;
            for (const DocRef& r : p->refs) total += r.size;
            uint8_t* dst = nullptr;
            auto bodies = b.CreateUninitializedVector(total, &dst);
            std::vector<uint32_t> ends;
            ends.reserve(p->refs.size());
            size_t at = 0;
            for (const DocRef& r : p->refs) {
                if (r.size) std::memcpy(dst + at, r.data, r.size);
                at += r.size;
                ends.push_back(static_cast<uint32_t>(at));
            }
            auto ev = b.CreateVector(ends);
            auto iv = b.CreateVector(p->ids);
            values.push_back(fb::CreatePutDocs(b, p->collection.v, iv, ev, bodies).Union());
        } else if (auto* del = std::get_if<Block::Op::Delete>(&op.v)) {
            auto iv = b.CreateVector(del->ids);
            values.push_back(fb::CreateDeleteDocs(b, del->collection.v, iv).Union());
        }
    }
    return b.CreateVector(values);
}

uint64_t count_writes(const std::vector<Block::Op>& ops, size_t begin, size_t end) {
    uint64_t n = 0;
    for (size_t i = begin; i < end; ++i) {
        if (auto* p = std::get_if<Block::Op::Put>(&ops[i].v)) n += p->ids.size();
        else if (auto* d = std::get_if<Block::Op::Delete>(&ops[i].v)) n += d->ids.size();
        else n += 1;
    }
    return n;
}

std::span<const std::byte> body_of(const flatbuffers::FlatBufferBuilder& b) {
    return {reinterpret_cast<const std::byte*>(b.GetBufferPointer()), b.GetSize()};
}

Result<AlterSpec> alter_spec_of(const fb::AlterCollection* a, const Schema& before, uint64_t p) {
    auto corrupt = [&](const std::string& what) {
        return Status::error(Code::corruption, what + " at offset " + std::to_string(p),
                             Detail{.offset = p});
    };
    AlterSpec spec;
    const unsigned k = static_cast<unsigned>(a->kind());
    if (k > 3) return corrupt("unknown AlterKind " + std::to_string(k));
    spec.kind = static_cast<AlterKind>(k);
    if (spec.kind == AlterKind::add_field) {
        FENEC_ASSIGN_OR_RETURN(spec.field_desc, from_fb(a->field(), p));
    } else {
        if (a->slot() >= before.fields.size() || before.fields[a->slot()].dropped) {
            return corrupt("alter names a slot that holds no field");
        }
        spec.field = before.fields[a->slot()].name;
    }
    if (a->new_name()) spec.new_name = a->new_name()->str();
    if (a->keys()) {
        for (const auto* key : *a->keys()) spec.keys.push_back(key->str());
    }
    FENEC_ASSIGN_OR_RETURN(spec.index, from_fb(a->index(), p));
    return spec;
}

}  // namespace fenec::engine::codec
