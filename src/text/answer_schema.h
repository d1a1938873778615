/* Finite answer schemas (issue 31): instead of three outcomes, a request may
   carry a small closed schema of the answers a script may give.  This module
   parses such a schema strictly into an immutable tree, counts its values
   exactly (its cardinality N), validates a script's output against it and
   writes the proxy's own canonical form of an accepted output.  Pure: no
   I/O, no globals.  The algebra, every bound and the canonical form are in
   docs/answer-schemas.md; they follow the agent firewall's protocol v2,
   stricter where that page says so.  serve uses it for requests that carry a schema
   (wire protocol v2, docs/protocol.md).  */
#ifndef SP_TEXT_ANSWER_SCHEMA_H
#define SP_TEXT_ANSWER_SCHEMA_H

#include <stddef.h>

#include "base/bignum.h"
#include "base/bounds.h"
#include "base/bytes.h"
#include "base/error.h"

struct sp_answer_schema;

/* Parses text[0..len) as a schema.  Refused, with *out NULL and *err naming
   the place as a path from the root `$` (`$.fields.count`, `$.items[2]`,
   `$.variants.ok`, `$.values[3]`) and the reason: text over
   SP_ANSWER_SCHEMA_MAX_BYTES, anything but strict JSON (duplicate keys and
   trailing data included), a node breaking a rule or bound of the algebra,
   or a cardinality above 2^SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2.  Error
   messages echo the schema's keys, never its string values.  */
int sp_answer_schema_parse (const char *text, size_t len, struct sp_answer_schema **out, sp_error_t *err);

/* The schema equivalent to three outcomes: an enum of the three strings, in
   order (N = 3, 2 content bits).  The outcomes must pass sp_outcomes_check.  */
int sp_answer_schema_from_outcomes (const struct sp_bytes outcomes[SP_OUTCOME_COUNT],
                                    struct sp_answer_schema **out, sp_error_t *err);

void sp_answer_schema_free (struct sp_answer_schema *schema);

static inline void
sp_answer_schema_freep (struct sp_answer_schema **schema)
{
  sp_answer_schema_free (*schema);
  *schema = NULL;
}
#define cleanup_answer_schema __attribute__ ((cleanup (sp_answer_schema_freep)))

/* N, the exact number of distinct answers: at least 1, at most
   2^SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2.  */
const struct sp_bignum *sp_answer_schema_cardinality (const struct sp_answer_schema *schema);

/* ceil(log2(N + 1)): the content bits this proxy charges, N answers and
   ERROR.  1..SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2 + 1.  */
unsigned sp_answer_schema_content_bits (const struct sp_answer_schema *schema);

/* ceil(log2(N)): the firewall's count of the same schema, which leaves
   ERROR to its separate status bit.  0..SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2.  */
unsigned sp_answer_schema_firewall_bits (const struct sp_answer_schema *schema);

/* Validates a script's output buf[0..len) against schema.  On success
   returns 0 with *canonical (allocated, NUL-terminated, the caller frees
   it) and *canonical_len set to the canonical serialisation, which is never
   longer than len.  Refused, with *canonical NULL, when the output is empty
   or over SP_ANSWER_OUTPUT_MAX_BYTES, is not strict JSON (the lexical rules
   of json_text.h, yajl's grammar, no duplicate key, no trailing data), or
   does not match the schema exactly: integers written canonically
   (-?(0|[1-9][0-9]*), no -0), objects with exactly the declared keys, unions
   as {"tag": T, "value": V}, const and enum compared by JSON type and value.
   *err names the place as a path into the value (`$.count`, `$[2]`,
   `$.u.value`), built from the schema's names, and the reason; it never echoes
   anything the output holds, keys included.  */
int sp_answer_schema_validate (const struct sp_answer_schema *schema, const char *buf, size_t len,
                               char **canonical, size_t *canonical_len, sp_error_t *err);

/* The same for a whole /probe/out in schema mode (docs/result-contract.md):
   buf[0..len), at most SP_ANSWER_OUTPUT_MAX_BYTES, must be a JSON object
   with exactly one member, "result" (the key compared after unescaping),
   whose value the schema accepts.  *canonical is the value's canonical
   serialisation alone, without the envelope; paths in *err start at
   `$.result`.  */
int sp_answer_schema_validate_result (const struct sp_answer_schema *schema, const char *buf, size_t len,
                                      char **canonical, size_t *canonical_len, sp_error_t *err);

#endif
