// ql/parser.h: FenecQL text to a syntax tree (fenecql.md §1 to §3). The public surface of the
// front end; ast.h is the tree, error.h the refusal.
//
// parse() refuses, with a 400 naming what it expected and what it found at a code point position:
// text that does not lex or follow the grammar (§2, §3), a second statement, a clause repeated or
// out of place (§3 rules 1 to 7), and every rule that needs no schema:
//   - create/alter field definitions: names not starting with `_`, distinct, at least one field;
//     types; `collate` (tr, und) and `nocase` on text only; one annotation per field, fitting its
//     type, with arguments in range (§4.1); at most one `@ttl` per created collection;
//   - writes: documents are objects of constants with distinct keys; `set` never sets `_id`;
//     `returning` lists columns only;
//   - reads (§7.2): `near` with `match`; either with `order`, `group`, an aggregate or a lookup;
//     aggregates without `group` with `order`/`limit`/`offset`; a plain column next to an
//     aggregate that is not a group key; `group` without an explicit select list, or keyed by a
//     path or `_id`; an order key of a grouped read that is neither a select column nor a group
//     key; two answer columns of one name in an explicit select list; a lookup named like one of
//     its level's selected columns; aggregates next to columns in a lookup's select; a lookup
//     under a level of aggregates or groups; `collate` on `_id`, `count`, `sum` or `avg`.
// It answers 413 for the limits of §14 it can see: statement_bytes, parameters, expression_depth,
// json_depth, path_keys, name_bytes, fields, vector_dimension, lookup_depth, and ranked_rows when
// `offset` and `limit` are literals.
// What needs the schema (unknown fields, types of values, annotations added by `alter ... add
// index`, `*` expansions) and what needs the bound parameters is the executor's.
//
// Thread-safe (no shared state). Parsing does not recurse: nesting lives on an explicit heap
// stack, so any statement costs the same machine stack. Destroying a tree recurses once per
// nesting level, at most limits::expression_depth_max levels (under 64 KiB in a release build).
#pragma once

#include <optional>
#include <string_view>

#include "engine/value.h"
#include "ql/ast.h"
#include "ql/error.h"

namespace fenec::ql {

// Parses one statement: UTF-8 text of at most limits::statement_bytes_max bytes, with an optional
// trailing `;`. The tree holds no view into `text`.
QlResult<ParsedStatement> parse(std::string_view text);

// The value of a constant expression (literals, and lists and objects of them) as the engine
// holds it; nullopt if the expression holds a parameter, a call or anything else.
std::optional<engine::Value> fold_constant(const Expr& expr);

}  // namespace fenec::ql
