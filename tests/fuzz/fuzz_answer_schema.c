/* libFuzzer harness for sp_answer_schema_parse and the cardinality.  Each
   input is a schema's text.  Invariants:
   - a refusal has a one-line printable message and no schema; an accepted
     schema is at most SP_ANSWER_SCHEMA_MAX_BYTES;
   - the content bits are the firewall's plus one exactly when N is a power
     of two, and N's bit length lies within 1..1025;
   - an independent count in log2 space, from the JSON tree and not from the
     module's own, agrees with N's bit length;
   - the schema's first and last values, written by this harness from the
     JSON tree in canonical form, validate to exactly themselves (or are
     refused for their size when they are longer than an output may be).  */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bignum.h"
#include "base/bounds.h"
#include "base/error.h"
#include "text/answer_schema.h"
#include "text/json.h"

#include "fuzz.h"

/* log2 of a sum, from the log2 of its terms.  */
static double
log2_add (double a, double b)
{
  double hi = a > b ? a : b, lo = a > b ? b : a;

  if (isinf (lo))
    return hi;
  return hi + log2 (1.0 + exp2 (lo - hi));
}

static int64_t
integer_of (const struct sp_json *v)
{
  return strtoll (v->u.number, NULL, 10);
}

/* log2 N, counted from the JSON of an accepted schema.  */
static double
log2_count (const struct sp_json *node)
{
  const char *type = sp_json_object_get (node, "type")->u.string.data;
  const struct sp_json *x;
  double sum = 0;

  if (strcmp (type, "const") == 0)
    return 0;
  if (strcmp (type, "boolean") == 0)
    return 1;
  if (strcmp (type, "enum") == 0)
    return log2 ((double)sp_json_object_get (node, "values")->u.array.len);
  if (strcmp (type, "integer") == 0)
    return log2 ((double)(integer_of (sp_json_object_get (node, "maximum"))
                          - integer_of (sp_json_object_get (node, "minimum")))
                 + 1.0);
  if (strcmp (type, "array") == 0)
    return (double)integer_of (sp_json_object_get (node, "length"))
           * log2_count (sp_json_object_get (node, "items"));
  if (strcmp (type, "tuple") == 0)
    {
      x = sp_json_object_get (node, "items");
      for (size_t i = 0; i < x->u.array.len; i++)
        sum += log2_count (x->u.array.items[i]);
      return sum;
    }
  if (strcmp (type, "object") == 0)
    {
      x = sp_json_object_get (node, "fields");
      for (size_t i = 0; i < x->u.object.len; i++)
        sum += log2_count (x->u.object.members[i].value);
      return sum;
    }
  FUZZ_REQUIRE (strcmp (type, "union") == 0);
  x = sp_json_object_get (node, "variants");
  sum = -INFINITY;
  for (size_t i = 0; i < x->u.object.len; i++)
    sum = log2_add (sum, log2_count (x->u.object.members[i].value));
  return sum;
}

/* The canonical text of one value, capped: past the cap only the length
   grows, so that a huge array costs nothing.  */
struct text
{
  char buf[SP_ANSWER_OUTPUT_MAX_BYTES + 1];
  size_t len;
};

static void
put (struct text *t, const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++, t->len++)
    if (t->len < sizeof t->buf)
      t->buf[t->len] = s[i];
}

static void
put_str (struct text *t, const char *s)
{
  put (t, s, strlen (s));
}

static void
put_json_string (struct text *t, const char *s, size_t len)
{
  put (t, "\"", 1);
  for (size_t i = 0; i < len; i++)
    {
      if (s[i] == '"' || s[i] == '\\')
        put (t, "\\", 1);
      put (t, &s[i], 1);
    }
  put (t, "\"", 1);
}

static void
put_scalar (struct text *t, const struct sp_json *v)
{
  switch (v->type)
    {
    case SP_JSON_NULL:
      put_str (t, "null");
      return;
    case SP_JSON_BOOL:
      put_str (t, v->u.boolean ? "true" : "false");
      return;
    case SP_JSON_NUMBER:
      put_str (t, v->u.number);
      return;
    case SP_JSON_STRING:
      put_json_string (t, v->u.string.data, v->u.string.len);
      return;
    case SP_JSON_ARRAY:
    case SP_JSON_OBJECT:
    default:
      FUZZ_REQUIRE (0);
    }
}

/* The first (last: the last enum value, the maximum, true, the last tag)
   value of an accepted schema, written canonically.  */
static void
put_value (struct text *t, const struct sp_json *node, bool last)
{
  const char *type = sp_json_object_get (node, "type")->u.string.data;
  const struct sp_json *x;

  if (strcmp (type, "const") == 0)
    put_scalar (t, sp_json_object_get (node, "value"));
  else if (strcmp (type, "boolean") == 0)
    put_str (t, last ? "true" : "false");
  else if (strcmp (type, "enum") == 0)
    {
      x = sp_json_object_get (node, "values");
      put_scalar (t, x->u.array.items[last ? x->u.array.len - 1 : 0]);
    }
  else if (strcmp (type, "integer") == 0)
    put_scalar (t, sp_json_object_get (node, last ? "maximum" : "minimum"));
  else if (strcmp (type, "object") == 0)
    {
      x = sp_json_object_get (node, "fields");
      put (t, "{", 1);
      for (size_t i = 0; i < x->u.object.len; i++)
        {
          if (i > 0)
            put (t, ",", 1);
          put_json_string (t, x->u.object.members[i].key, strlen (x->u.object.members[i].key));
          put (t, ":", 1);
          put_value (t, x->u.object.members[i].value, last);
        }
      put (t, "}", 1);
    }
  else if (strcmp (type, "tuple") == 0 || strcmp (type, "array") == 0)
    {
      bool tuple = type[0] == 't';
      const struct sp_json *items = sp_json_object_get (node, "items");
      size_t n = tuple ? items->u.array.len : (size_t)integer_of (sp_json_object_get (node, "length"));

      put (t, "[", 1);
      for (size_t i = 0; i < n && t->len <= SP_ANSWER_OUTPUT_MAX_BYTES; i++)
        {
          if (i > 0)
            put (t, ",", 1);
          put_value (t, tuple ? items->u.array.items[i] : items, last);
        }
      put (t, "]", 1);
    }
  else
    {
      const struct sp_json_member *m;

      x = sp_json_object_get (node, "variants");
      m = &x->u.object.members[last ? x->u.object.len - 1 : 0];
      put_str (t, "{\"tag\":");
      put_json_string (t, m->key, strlen (m->key));
      put_str (t, ",\"value\":");
      put_value (t, m->value, last);
      put (t, "}", 1);
    }
}

static void
check_value (const struct sp_answer_schema *schema, const struct sp_json *doc, bool last)
{
  struct text *t = calloc (1, sizeof *t);
  char *canonical = NULL;
  size_t clen = 0;
  sp_error_t err = NULL;
  int ret;

  FUZZ_REQUIRE (t != NULL);
  put_value (t, doc, last);
  if (t->len > SP_ANSWER_OUTPUT_MAX_BYTES)
    {
      /* Too long to be an output: refused for that, whatever it holds.  */
      ret = sp_answer_schema_validate (schema, t->buf, SP_ANSWER_OUTPUT_MAX_BYTES + 1, &canonical, &clen,
                                       &err);
      FUZZ_REQUIRE (ret == -1 && canonical == NULL);
      FUZZ_REQUIRE (strstr (sp_error_message (err), "more than") != NULL);
      sp_error_release (&err);
      free (t);
      return;
    }
  ret = sp_answer_schema_validate (schema, t->buf, t->len, &canonical, &clen, &err);
  FUZZ_REQUIRE (ret == 0 && err == NULL);
  FUZZ_REQUIRE (clen == t->len && memcmp (canonical, t->buf, clen) == 0);
  free (canonical);
  free (t);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = fuzz_exact_copy (data, size);
  struct sp_answer_schema *schema = NULL;
  sp_error_t err = NULL;
  int ret = sp_answer_schema_parse (text, size, &schema, &err);

  FUZZ_REQUIRE ((ret == 0) == (schema != NULL));
  FUZZ_REQUIRE ((ret == 0) == (err == NULL));
  if (ret < 0)
    {
      FUZZ_REQUIRE (ret == -1);
      FUZZ_REQUIRE (fuzz_message_ok (sp_error_message (err)));
      sp_error_release (&err);
      free (text);
      return 0;
    }

  {
    const struct sp_bignum *n = sp_answer_schema_cardinality (schema);
    unsigned bits = sp_answer_schema_content_bits (schema);
    unsigned fw = sp_answer_schema_firewall_bits (schema);
    struct sp_json *doc = NULL;
    double ref;

    FUZZ_REQUIRE (size <= SP_ANSWER_SCHEMA_MAX_BYTES);
    FUZZ_REQUIRE (bits >= 1 && bits <= SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2 + 1);
    FUZZ_REQUIRE (bits == sp_bignum_bit_length (n));
    FUZZ_REQUIRE (bits - fw == (sp_bignum_is_pow2 (n) ? 1u : 0u));

    /* The module accepted it, so the tree parser does too.  */
    FUZZ_REQUIRE (sp_json_parse (text, size, 64, &doc, &err) == 0);
    ref = log2_count (doc);
    /* N's bit length is floor(log2 N) + 1; doubles are off by far less
       than the margin.  */
    FUZZ_REQUIRE (ref > (double)bits - 1.0 - 1e-6 && ref < (double)bits + 1e-6);

    check_value (schema, doc, false);
    check_value (schema, doc, true);
    sp_json_free (doc);
  }
  sp_answer_schema_free (schema);
  free (text);
  return 0;
}
