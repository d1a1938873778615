/* A strict YAML reader for the config document: one YAML document read with
   libyaml's event API into the same struct sp_json tree that sp_json_parse
   builds (json.h), through the same builder (json_builder.h), so the same
   duplicate-key rule and the same error paths hold.  docs/config.md, "YAML",
   is the reference.  Pure; no I/O.

   Scalars follow the YAML 1.2 core schema, narrowed to what JSON can write:
   a plain `null`, `Null`, `NULL`, `~` or empty scalar is null; `true`,
   `True`, `TRUE` (and `false` alike) a boolean; a plain scalar written as a
   JSON number is a number (its text kept as written); anything quoted, and
   every other plain scalar, a string.  Refused, with the path named:
   anchors, aliases, tags, `%YAML`/`%TAG` directives, a second document,
   merge keys (`<<`), keys that are not plain strings or quoted, and plain
   scalars that YAML 1.1 and YAML 1.2 read differently or that JSON cannot
   write (`yes`/`no`/`on`/`off`/`y`/`n` in any case, `0o17`, `0x1f`,
   `0b101`, `017`, `1_000`, `1:30`, `2001-12-14`, `.inf`, `.nan`, `+1`,
   `.5`).  */
#ifndef SP_TEXT_YAML_TREE_H
#define SP_TEXT_YAML_TREE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "text/json.h"

/* Parses the whole of buf[0..len) with at most max_depth nested mappings
   and sequences (capped at SP_JSON_DEPTH_LIMIT, as for JSON).  The text is
   strict UTF-8 without a byte order mark, NUL or other control character,
   and without U+0085, U+2028 or U+2029, which YAML 1.1 reads as line breaks
   and YAML 1.2 does not.  On error, *err reads "<path>: <reason>" as
   sp_json_parse's do, and never echoes a value; *not_yaml is set when
   libyaml refused the text's syntax (the config loader then says the text
   is neither JSON nor YAML), and cleared for every other failure.  */
int sp_yaml_tree_parse (const char *buf, size_t len, unsigned max_depth, struct sp_json **out, bool *not_yaml,
                        sp_error_t *err);

#endif
