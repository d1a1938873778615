/* Finite answer schemas: see src/text/answer_schema.h and
   docs/answer-schemas.md.  The schema and the output are both read into
   the strict JSON tree (json.h) first: neither is larger than 8 KiB, and a
   tree lets every node's key set be checked whole, as the algebra asks.  */
#include "text/answer_schema.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/outcome.h"
#include "base/utf8.h"
#include "text/json.h"
#include "text/json_text.h"

/* The deepest JSON a schema within SP_ANSWER_SCHEMA_MAX_DEPTH needs is two
   levels a node (the node and its fields, items or variants) and the last
   node's enum values: 2 * 7 + 1 = 15.  A little more lets a schema one level
   too deep be refused by the algebra's own rule, naming its path.  */
#define SCHEMA_JSON_DEPTH (2 * (SP_ANSWER_SCHEMA_MAX_DEPTH + 2) + 1)
/* A valid output nests at most one container per schema level above its
   leaves; one more lets a value one level too deep get a precise reason.  */
#define OUTPUT_JSON_DEPTH (SP_ANSWER_SCHEMA_MAX_DEPTH + 1)
/* A path: at most 7 steps of ".variants." and a 64-byte identifier, and an
   index.  Longer is a bug, refused rather than cut.  */
#define PATH_MAX_BYTES 768

enum node_kind
{
  KIND_CONST,
  KIND_BOOLEAN,
  KIND_ENUM,
  KIND_INTEGER,
  KIND_OBJECT,
  KIND_TUPLE,
  KIND_ARRAY,
  KIND_UNION,
};

enum literal_type
{
  LIT_NULL,
  LIT_BOOLEAN,
  LIT_INTEGER,
  LIT_STRING,
};

struct literal
{
  enum literal_type type;
  bool boolean;
  int64_t integer;
  char *string; /* strict UTF-8, NUL-free, NUL-terminated */
  size_t len;
};

struct node
{
  enum node_kind kind;
  struct literal value;   /* const */
  struct literal *values; /* enum, in document order */
  size_t n_values;
  int64_t minimum, maximum; /* integer */
  size_t length;            /* array */
  /* The object's fields and the union's tags (names[i] names children[i]),
     the tuple's items, or the array's one item schema.  */
  char **names;
  struct node **children;
  size_t n_children;
};

struct sp_answer_schema
{
  struct node *root;
  struct sp_bignum cardinality;
};

/* Each node type and the keys it has besides "type", exactly.  */
struct kind_rule
{
  const char *name;
  const char *noun; /* for messages */
  enum node_kind kind;
  const char *keys[2];
  const char *key_list; /* for messages */
};

static const struct kind_rule kind_rules[] = {
  { "const", "a const node", KIND_CONST, { "value", NULL }, "\"type\" and \"value\"" },
  { "boolean", "a boolean node", KIND_BOOLEAN, { NULL, NULL }, "only \"type\"" },
  { "enum", "an enum node", KIND_ENUM, { "values", NULL }, "\"type\" and \"values\"" },
  { "integer",
    "an integer node",
    KIND_INTEGER,
    { "minimum", "maximum" },
    "\"type\", \"minimum\" and \"maximum\"" },
  { "object", "an object node", KIND_OBJECT, { "fields", NULL }, "\"type\" and \"fields\"" },
  { "tuple", "a tuple node", KIND_TUPLE, { "items", NULL }, "\"type\" and \"items\"" },
  { "array", "an array node", KIND_ARRAY, { "items", "length" }, "\"type\", \"items\" and \"length\"" },
  { "union", "a union node", KIND_UNION, { "variants", NULL }, "\"type\" and \"variants\"" },
};

#define KIND_NAMES "const, boolean, enum, integer, object, tuple, array, union"

/* ---- the tree ------------------------------------------------------------ */

static void
node_free (struct node *n)
{
  if (n == NULL)
    return;
  free (n->value.string);
  for (size_t i = 0; i < n->n_values; i++)
    free (n->values[i].string);
  free (n->values);
  for (size_t i = 0; i < n->n_children; i++)
    {
      if (n->names != NULL)
        free (n->names[i]);
      node_free (n->children[i]);
    }
  free (n->names);
  free (n->children);
  free (n);
}

void
sp_answer_schema_free (struct sp_answer_schema *schema)
{
  if (schema == NULL)
    return;
  node_free (schema->root);
  free (schema);
}

static int
oom (sp_error_t *err)
{
  return sp_make_error (err, ENOMEM, "answer schema: out of memory");
}

/* path, then step, then name (if any), into out; path_item ends with an
   index instead.  Refused rather than cut: a path is never that long.  */
static int
path_add (char out[PATH_MAX_BYTES], const char *path, const char *step, const char *name, sp_error_t *err)
{
  int n = snprintf (out, PATH_MAX_BYTES, "%s%s%s", path, step, name ? name : "");

  if (n < 0 || n >= PATH_MAX_BYTES)
    return sp_make_error (err, 0, "answer schema: %s: path too long", path);
  return 0;
}

static int
path_item (char out[PATH_MAX_BYTES], const char *path, const char *step, size_t index, sp_error_t *err)
{
  int n = snprintf (out, PATH_MAX_BYTES, "%s%s[%zu]", path, step, index);

  if (n < 0 || n >= PATH_MAX_BYTES)
    return sp_make_error (err, 0, "answer schema: %s: path too long", path);
  return 0;
}

/* ---- numbers and literals ------------------------------------------------ */

enum int_form
{
  INT_OK,
  INT_NOT_CANONICAL, /* a fraction, an exponent, a leading zero or -0 */
  INT_UNSAFE,        /* canonical, but beyond +-(2^53 - 1) */
};

/* The number's text as written, read as -?(0|[1-9][0-9]*) but not -0.  The
   firewall reads numbers as JavaScript does, so that 1.0, 1e2 and -0 are
   integers there; here they are refused, as docs/answer-schemas.md says.  */
static enum int_form
read_integer (const char *text, int64_t *out)
{
  const char *p = text;
  bool negative = false;
  uint64_t magnitude = 0;
  size_t digits;

  if (*p == '-')
    {
      negative = true;
      p++;
    }
  digits = strspn (p, "0123456789");
  if (digits == 0 || p[digits] != '\0')
    return INT_NOT_CANONICAL;
  if (p[0] == '0' && (digits > 1 || negative))
    return INT_NOT_CANONICAL;
  /* 17 digits without a leading zero are at least 10^16, above 2^53.  */
  if (digits > 16)
    return INT_UNSAFE;
  for (size_t i = 0; i < digits; i++)
    magnitude = magnitude * 10 + (uint64_t)(p[i] - '0');
  if (magnitude > (uint64_t)SP_ANSWER_SCHEMA_SAFE_INTEGER)
    return INT_UNSAFE;
  *out = negative ? -(int64_t)magnitude : (int64_t)magnitude;
  return INT_OK;
}

/* A schema's integer (a bound, a length, a literal), canonical and safe.  */
static int
schema_integer (const struct sp_json *v, const char *path, const char *what, int64_t *out, sp_error_t *err)
{
  if (v->type != SP_JSON_NUMBER)
    return sp_make_error (err, 0, "answer schema: %s: %s is not an integer", path, what);
  switch (read_integer (v->u.number, out))
    {
    case INT_OK:
      return 0;
    case INT_NOT_CANONICAL:
      return sp_make_error (err, 0,
                            "answer schema: %s: %s is not an integer written canonically (no fraction, "
                            "exponent, leading zero or -0)",
                            path, what);
    case INT_UNSAFE:
    default:
      return sp_make_error (err, 0, "answer schema: %s: %s is beyond +-(2^53 - 1)", path, what);
    }
}

/* The firewall refuses C0 and DEL; we refuse what an outcome may not hold,
   C1, separators and bidi controls too, for the same reason (outcome.h): the
   canonical answer is echoed into the agent's transcript.  */
static int
check_literal_string (const struct sp_json *v, const char *path, sp_error_t *err)
{
  const uint8_t *s = (const uint8_t *)v->u.string.data;
  size_t len = v->u.string.len;
  size_t off = 0;

  if (len > SP_ANSWER_SCHEMA_MAX_LITERAL_BYTES)
    return sp_make_error (err, 0, "answer schema: %s: a literal string is %zu bytes, more than %d", path, len,
                          SP_ANSWER_SCHEMA_MAX_LITERAL_BYTES);
  /* As no outcome may be: an answer "ERROR" would print as every failure
     does, two answers as one.  */
  if (len == 5 && memcmp (s, "ERROR", 5) == 0)
    return sp_make_error (err, 0,
                          "answer schema: %s: the literal string \"ERROR\" is reserved (every failure reads "
                          "so)",
                          path);
  while (off < len)
    {
      uint32_t cp;
      size_t n = sp_utf8_decode (s + off, len - off, &cp);

      if (n == 0)
        return sp_make_error (err, 0, "answer schema: %s: a literal string is not UTF-8 at byte %zu", path,
                              off);
      if (sp_outcome_char_forbidden (cp))
        return sp_make_error (err, 0,
                              "answer schema: %s: a literal string holds the control or formatting "
                              "character U+%04X at byte %zu",
                              path, (unsigned)cp, off);
      off += n;
    }
  return 0;
}

static int
parse_literal (const struct sp_json *v, const char *path, struct literal *out, sp_error_t *err)
{
  memset (out, 0, sizeof *out);
  switch (v->type)
    {
    case SP_JSON_NULL:
      out->type = LIT_NULL;
      return 0;
    case SP_JSON_BOOL:
      out->type = LIT_BOOLEAN;
      out->boolean = v->u.boolean;
      return 0;
    case SP_JSON_NUMBER:
      out->type = LIT_INTEGER;
      return schema_integer (v, path, "a literal number", &out->integer, err);
    case SP_JSON_STRING:
      if (check_literal_string (v, path, err) < 0)
        return -1;
      out->string = strndup (v->u.string.data, v->u.string.len);
      if (out->string == NULL)
        return oom (err);
      out->type = LIT_STRING;
      out->len = v->u.string.len;
      return 0;
    case SP_JSON_ARRAY:
    case SP_JSON_OBJECT:
    default:
      return sp_make_error (err, 0,
                            "answer schema: %s: a literal is a string, a safe integer, a boolean or null, "
                            "not an array or object",
                            path);
    }
}

static bool
literal_equal (const struct literal *a, const struct literal *b)
{
  if (a->type != b->type)
    return false;
  switch (a->type)
    {
    case LIT_BOOLEAN:
      return a->boolean == b->boolean;
    case LIT_INTEGER:
      return a->integer == b->integer;
    case LIT_STRING:
      return a->len == b->len && memcmp (a->string, b->string, a->len) == 0;
    case LIT_NULL:
    default:
      return true;
    }
}

static const char *
literal_type_name (enum literal_type t)
{
  switch (t)
    {
    case LIT_NULL:
      return "null";
    case LIT_BOOLEAN:
      return "a boolean";
    case LIT_INTEGER:
      return "an integer";
    case LIT_STRING:
    default:
      return "a string";
    }
}

/* ---- the schema's nodes -------------------------------------------------- */

struct parse_ctx
{
  size_t nodes;
};

static int parse_node (struct parse_ctx *ctx, const struct sp_json *v, const char *path, unsigned depth,
                       struct node **out, sp_error_t *err);

/* ^[A-Za-z][A-Za-z0-9_]{0,63}$: field names and union tags.  */
static bool
is_identifier (const char *s)
{
  size_t len = strlen (s);

  if (len == 0 || len > SP_ANSWER_SCHEMA_MAX_IDENTIFIER_BYTES)
    return false;
  if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
    return false;
  for (size_t i = 1; i < len; i++)
    {
      char c = s[i];

      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
        return false;
    }
  return true;
}

/* The node's keys are "type" and the rule's keys, exactly.  */
static int
check_keys (const struct sp_json *v, const struct kind_rule *rule, const char *path, sp_error_t *err)
{
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      const char *key = v->u.object.members[i].key;
      bool known = strcmp (key, "type") == 0;
      cleanup_free char *quoted = NULL;

      for (size_t k = 0; k < 2 && !known; k++)
        known = rule->keys[k] != NULL && strcmp (key, rule->keys[k]) == 0;
      if (known)
        continue;
      quoted = sp_json_quote (key, strlen (key));
      if (quoted == NULL)
        return oom (err);
      return sp_make_error (err, 0, "answer schema: %s: %s has %s, and %s is not one", path, rule->noun,
                            rule->key_list, quoted);
    }
  for (size_t k = 0; k < 2; k++)
    if (rule->keys[k] != NULL && sp_json_object_get (v, rule->keys[k]) == NULL)
      return sp_make_error (err, 0, "answer schema: %s: %s has %s, and \"%s\" is missing", path, rule->noun,
                            rule->key_list, rule->keys[k]);
  return 0;
}

static int
parse_enum (struct node *n, const struct sp_json *v, const char *path, sp_error_t *err)
{
  const struct sp_json *values = sp_json_object_get (v, "values");
  char at[PATH_MAX_BYTES];
  size_t count;

  if (path_add (at, path, ".values", NULL, err) < 0)
    return -1;
  if (values->type != SP_JSON_ARRAY || values->u.array.len == 0)
    return sp_make_error (err, 0, "answer schema: %s: enum values are a non-empty array", at);
  count = values->u.array.len;
  if (count > SP_ANSWER_SCHEMA_MAX_ENUM_VALUES)
    return sp_make_error (err, 0, "answer schema: %s: %zu enum values, more than %d", at, count,
                          SP_ANSWER_SCHEMA_MAX_ENUM_VALUES);
  n->values = calloc (count, sizeof *n->values);
  if (n->values == NULL)
    return oom (err);
  for (size_t i = 0; i < count; i++)
    {
      char item[PATH_MAX_BYTES];

      if (path_item (item, path, ".values", i, err) < 0)
        return -1;
      n->n_values++;
      if (parse_literal (values->u.array.items[i], item, &n->values[i], err) < 0)
        return -1;
    }
  /* Every value a literal first, then one type, then unique: the
     firewall's order.  */
  for (size_t i = 1; i < count; i++)
    if (n->values[i].type != n->values[0].type)
      return sp_make_error (err, 0, "answer schema: %s[%zu]: %s, where the first enum value is %s", at, i,
                            literal_type_name (n->values[i].type), literal_type_name (n->values[0].type));
  /* At most some 2,000 values fit in the schema's 4,096 bytes: the quadratic
     scan costs a few million comparisons at worst.  */
  for (size_t i = 1; i < count; i++)
    for (size_t j = 0; j < i; j++)
      if (literal_equal (&n->values[i], &n->values[j]))
        return sp_make_error (err, 0, "answer schema: %s[%zu]: the same enum value as %s[%zu]", at, i, at, j);
  return 0;
}

static int
parse_integer (struct node *n, const struct sp_json *v, const char *path, sp_error_t *err)
{
  char at[PATH_MAX_BYTES];

  if (path_add (at, path, ".minimum", NULL, err) < 0)
    return -1;
  if (schema_integer (sp_json_object_get (v, "minimum"), at, "the minimum", &n->minimum, err) < 0)
    return -1;
  if (path_add (at, path, ".maximum", NULL, err) < 0)
    return -1;
  if (schema_integer (sp_json_object_get (v, "maximum"), at, "the maximum", &n->maximum, err) < 0)
    return -1;
  if (n->maximum < n->minimum)
    return sp_make_error (err, 0, "answer schema: %s: the maximum is below the minimum", at);
  return 0;
}

/* An object's "fields" or a union's "variants": identifiers to nodes, in
   document order, which is also the canonical form's.  */
static int
parse_named (struct parse_ctx *ctx, struct node *n, const struct sp_json *map, const char *path,
             const char *key, const char *what, int max, unsigned depth, sp_error_t *err)
{
  char at[PATH_MAX_BYTES];
  size_t count;

  if (path_add (at, path, ".", key, err) < 0)
    return -1;
  if (map->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "answer schema: %s: not an object of %ss", at, what);
  count = map->u.object.len;
  if (count == 0)
    return sp_make_error (err, 0, "answer schema: %s: no %ss; at least one is needed", at, what);
  if (count > (size_t)max)
    return sp_make_error (err, 0, "answer schema: %s: %zu %ss, more than %d", at, count, what, max);
  for (size_t i = 0; i < count; i++)
    {
      const char *name = map->u.object.members[i].key;

      if (!is_identifier (name))
        {
          cleanup_free char *quoted = sp_json_quote (name, strlen (name));

          if (quoted == NULL)
            return oom (err);
          return sp_make_error (
              err, 0, "answer schema: %s: the %s %s is not an identifier ([A-Za-z][A-Za-z0-9_]{0,63})", at,
              what, quoted);
        }
    }
  n->names = calloc (count, sizeof *n->names);
  n->children = calloc (count, sizeof *n->children);
  if (n->names == NULL || n->children == NULL)
    return oom (err);
  for (size_t i = 0; i < count; i++)
    {
      const char *name = map->u.object.members[i].key;
      char child[PATH_MAX_BYTES];

      n->n_children++;
      n->names[i] = strdup (name);
      if (n->names[i] == NULL)
        return oom (err);
      if (path_add (child, at, ".", name, err) < 0)
        return -1;
      if (parse_node (ctx, map->u.object.members[i].value, child, depth + 1, &n->children[i], err) < 0)
        return -1;
    }
  return 0;
}

static int
parse_tuple (struct parse_ctx *ctx, struct node *n, const struct sp_json *v, const char *path, unsigned depth,
             sp_error_t *err)
{
  const struct sp_json *items = sp_json_object_get (v, "items");
  char at[PATH_MAX_BYTES];
  size_t count;

  if (path_add (at, path, ".items", NULL, err) < 0)
    return -1;
  if (items->type != SP_JSON_ARRAY || items->u.array.len == 0)
    return sp_make_error (err, 0, "answer schema: %s: tuple items are a non-empty array", at);
  count = items->u.array.len;
  if (count > SP_ANSWER_SCHEMA_MAX_ITEMS)
    return sp_make_error (err, 0, "answer schema: %s: %zu tuple items, more than %d", at, count,
                          SP_ANSWER_SCHEMA_MAX_ITEMS);
  n->children = calloc (count, sizeof *n->children);
  if (n->children == NULL)
    return oom (err);
  for (size_t i = 0; i < count; i++)
    {
      char child[PATH_MAX_BYTES];

      n->n_children++;
      if (path_item (child, path, ".items", i, err) < 0)
        return -1;
      if (parse_node (ctx, items->u.array.items[i], child, depth + 1, &n->children[i], err) < 0)
        return -1;
    }
  return 0;
}

static int
parse_array (struct parse_ctx *ctx, struct node *n, const struct sp_json *v, const char *path, unsigned depth,
             sp_error_t *err)
{
  char at[PATH_MAX_BYTES];
  int64_t length;

  if (path_add (at, path, ".length", NULL, err) < 0)
    return -1;
  if (schema_integer (sp_json_object_get (v, "length"), at, "the length", &length, err) < 0)
    return -1;
  if (length < 0 || length > SP_ANSWER_SCHEMA_MAX_ARRAY_LENGTH)
    return sp_make_error (err, 0, "answer schema: %s: the length is not within 0..%d", at,
                          SP_ANSWER_SCHEMA_MAX_ARRAY_LENGTH);
  n->length = (size_t)length;
  n->children = calloc (1, sizeof *n->children);
  if (n->children == NULL)
    return oom (err);
  n->n_children = 1;
  if (path_add (at, path, ".items", NULL, err) < 0)
    return -1;
  return parse_node (ctx, sp_json_object_get (v, "items"), at, depth + 1, &n->children[0], err);
}

static const struct kind_rule *
find_kind (const struct sp_json *v)
{
  const struct sp_json *type = sp_json_object_get (v, "type");

  if (type == NULL || type->type != SP_JSON_STRING)
    return NULL;
  for (size_t i = 0; i < sizeof kind_rules / sizeof kind_rules[0]; i++)
    if (type->u.string.len == strlen (kind_rules[i].name)
        && strcmp (type->u.string.data, kind_rules[i].name) == 0)
      return &kind_rules[i];
  return NULL;
}

/* The firewall's order: depth, then the node count, then the node's shape,
   so that the first rule broken is the one both name.  */
static int
parse_node (struct parse_ctx *ctx, const struct sp_json *v, const char *path, unsigned depth,
            struct node **out, sp_error_t *err)
{
  const struct kind_rule *rule;
  struct node *n;

  if (depth > SP_ANSWER_SCHEMA_MAX_DEPTH)
    return sp_make_error (err, 0, "answer schema: %s: deeper than %d levels below the root", path,
                          SP_ANSWER_SCHEMA_MAX_DEPTH);
  if (++ctx->nodes > SP_ANSWER_SCHEMA_MAX_NODES)
    return sp_make_error (err, 0, "answer schema: %s: more than %d nodes", path, SP_ANSWER_SCHEMA_MAX_NODES);
  if (v->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "answer schema: %s: a schema node is a JSON object", path);
  rule = find_kind (v);
  if (rule == NULL)
    return sp_make_error (err, 0, "answer schema: %s: \"type\" is one of " KIND_NAMES, path);
  if (check_keys (v, rule, path, err) < 0)
    return -1;

  /* Attached before it is filled, so that the caller's free reaches it.  */
  n = calloc (1, sizeof *n);
  if (n == NULL)
    return oom (err);
  *out = n;
  n->kind = rule->kind;
  switch (rule->kind)
    {
    case KIND_CONST:
      {
        char at[PATH_MAX_BYTES];

        if (path_add (at, path, ".value", NULL, err) < 0)
          return -1;
        return parse_literal (sp_json_object_get (v, "value"), at, &n->value, err);
      }
    case KIND_BOOLEAN:
      return 0;
    case KIND_ENUM:
      return parse_enum (n, v, path, err);
    case KIND_INTEGER:
      return parse_integer (n, v, path, err);
    case KIND_OBJECT:
      return parse_named (ctx, n, sp_json_object_get (v, "fields"), path, "fields", "field",
                          SP_ANSWER_SCHEMA_MAX_FIELDS, depth, err);
    case KIND_TUPLE:
      return parse_tuple (ctx, n, v, path, depth, err);
    case KIND_ARRAY:
      return parse_array (ctx, n, v, path, depth, err);
    case KIND_UNION:
    default:
      return parse_named (ctx, n, sp_json_object_get (v, "variants"), path, "variants", "variant",
                          SP_ANSWER_SCHEMA_MAX_VARIANTS, depth, err);
    }
}

/* ---- cardinality --------------------------------------------------------- */

/* Counted exactly up to 2^1024 (LIMIT); anything above is OVER (2^1024 + 1),
   as the firewall's cappedSchemaCardinality does, so that no intermediate
   ever needs more than the bignum's width.  */
struct count_bounds
{
  struct sp_bignum limit;
  struct sp_bignum over;
};

static void
saturate (struct sp_bignum *n, bool fits, const struct count_bounds *b)
{
  if (!fits || sp_bignum_cmp (n, &b->limit) > 0)
    *n = b->over;
}

static void
count_node (const struct node *n, const struct count_bounds *b, struct sp_bignum *out)
{
  struct sp_bignum part;

  switch (n->kind)
    {
    case KIND_CONST:
      sp_bignum_set_u64 (out, 1);
      return;
    case KIND_BOOLEAN:
      sp_bignum_set_u64 (out, 2);
      return;
    case KIND_ENUM:
      sp_bignum_set_u64 (out, n->n_values);
      return;
    case KIND_INTEGER:
      /* Both within +-(2^53 - 1): the width is below 2^54.  */
      sp_bignum_set_u64 (out, (uint64_t)(n->maximum - n->minimum) + 1);
      return;
    case KIND_OBJECT:
    case KIND_TUPLE:
      sp_bignum_set_u64 (out, 1);
      for (size_t i = 0; i < n->n_children; i++)
        {
          count_node (n->children[i], b, &part);
          saturate (out, sp_bignum_mul (out, out, &part), b);
        }
      return;
    case KIND_ARRAY:
      /* At most 64 factors: plain repeated multiplication is cheap enough.  */
      count_node (n->children[0], b, &part);
      sp_bignum_set_u64 (out, 1);
      for (size_t i = 0; i < n->length && sp_bignum_cmp (out, &b->over) != 0; i++)
        saturate (out, sp_bignum_mul (out, out, &part), b);
      return;
    case KIND_UNION:
    default:
      /* Tagged: variants whose values coincide still give distinct answers.  */
      sp_bignum_set_u64 (out, 0);
      for (size_t i = 0; i < n->n_children; i++)
        {
          count_node (n->children[i], b, &part);
          saturate (out, sp_bignum_add (out, out, &part), b);
        }
      return;
    }
}

static int
finish_schema (struct sp_answer_schema *schema, sp_error_t *err)
{
  struct count_bounds b;
  struct sp_bignum one;

  sp_bignum_set_pow2 (&b.limit, SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2);
  sp_bignum_set_u64 (&one, 1);
  sp_bignum_add (&b.over, &b.limit, &one);
  count_node (schema->root, &b, &schema->cardinality);
  if (sp_bignum_cmp (&schema->cardinality, &b.limit) > 0)
    return sp_make_error (err, 0, "answer schema: $: more than 2^%d answers",
                          SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2);
  return 0;
}

int
sp_answer_schema_parse (const char *text, size_t len, struct sp_answer_schema **out, sp_error_t *err)
{
  cleanup_json struct sp_json *doc = NULL;
  struct sp_answer_schema *schema;
  struct parse_ctx ctx = { 0 };

  *out = NULL;
  /* The firewall bounds its own compact re-serialisation; we bound the text
     we are given, which is never shorter: stricter, and known before any
     parsing.  */
  if (len > SP_ANSWER_SCHEMA_MAX_BYTES)
    return sp_make_error (err, 0, "answer schema: %zu bytes, more than %d", len, SP_ANSWER_SCHEMA_MAX_BYTES);
  if (text == NULL || len == 0)
    return sp_make_error (err, 0, "answer schema: empty");
  if (sp_json_parse (text, len, SCHEMA_JSON_DEPTH, &doc, err) < 0)
    return sp_error_wrap (err, "answer schema");

  schema = calloc (1, sizeof *schema);
  if (schema == NULL)
    return oom (err);
  if (parse_node (&ctx, doc, "$", 0, &schema->root, err) < 0 || finish_schema (schema, err) < 0)
    {
      sp_answer_schema_free (schema);
      return -1;
    }
  *out = schema;
  return 0;
}

int
sp_answer_schema_from_outcomes (const struct sp_bytes outcomes[SP_OUTCOME_COUNT],
                                struct sp_answer_schema **out, sp_error_t *err)
{
  struct sp_answer_schema *schema;
  struct node *n;

  *out = NULL;
  if (outcomes == NULL)
    return sp_make_error (err, 0, "answer schema: no outcomes");
  /* The outcome rules are the literal rules and more (non-empty, not ERROR,
     distinct), so the enum needs no check of its own.  */
  if (sp_outcomes_check (outcomes, err) < 0)
    return sp_error_wrap (err, "answer schema");
  schema = calloc (1, sizeof *schema);
  if (schema == NULL)
    return oom (err);
  n = calloc (1, sizeof *n);
  schema->root = n;
  if (n == NULL || (n->values = calloc (SP_OUTCOME_COUNT, sizeof *n->values)) == NULL)
    {
      sp_answer_schema_free (schema);
      return oom (err);
    }
  n->kind = KIND_ENUM;
  for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
    {
      struct literal *lit = &n->values[i];

      n->n_values++;
      lit->type = LIT_STRING;
      lit->len = outcomes[i].len;
      lit->string = strndup ((const char *)outcomes[i].data, outcomes[i].len);
      if (lit->string == NULL)
        {
          sp_answer_schema_free (schema);
          return oom (err);
        }
    }
  if (finish_schema (schema, err) < 0)
    {
      sp_answer_schema_free (schema);
      return -1;
    }
  *out = schema;
  return 0;
}

const struct sp_bignum *
sp_answer_schema_cardinality (const struct sp_answer_schema *schema)
{
  return &schema->cardinality;
}

unsigned
sp_answer_schema_content_bits (const struct sp_answer_schema *schema)
{
  /* For N >= 1, ceil(log2(N + 1)) is N's bit length.  */
  return sp_bignum_bit_length (&schema->cardinality);
}

unsigned
sp_answer_schema_firewall_bits (const struct sp_answer_schema *schema)
{
  /* ceil(log2(N)) is the bit length of N - 1: one less than N's own when N
     is a power of two, the same otherwise.  */
  unsigned bits = sp_bignum_bit_length (&schema->cardinality);

  return sp_bignum_is_pow2 (&schema->cardinality) ? bits - 1 : bits;
}

/* ---- the output ---------------------------------------------------------- */

static int
refuse (sp_error_t *err, const char *path, const char *reason)
{
  return sp_make_error (err, 0, "answer output: %s: %s", path, reason);
}

/* The value's integer, or a refusal that says which rule it broke.  */
static int
output_integer (const struct sp_json *v, const char *path, int64_t *out, bool *safe, sp_error_t *err)
{
  if (v->type != SP_JSON_NUMBER)
    return refuse (err, path, "not an integer");
  switch (read_integer (v->u.number, out))
    {
    case INT_OK:
      *safe = true;
      return 0;
    case INT_UNSAFE:
      *safe = false;
      return 0;
    case INT_NOT_CANONICAL:
    default:
      return refuse (err, path,
                     "not an integer written canonically (no fraction, exponent, leading zero or -0)");
    }
}

/* Whether v is the literal: the same JSON type and value.  A type that no
   literal of this kind has is a refusal of its own.  */
static int
literal_matches (const struct literal *lit, const struct sp_json *v, const char *path, bool *equal,
                 sp_error_t *err)
{
  int64_t i;
  bool safe;

  *equal = false;
  switch (lit->type)
    {
    case LIT_NULL:
      if (v->type != SP_JSON_NULL)
        return refuse (err, path, "not null");
      *equal = true;
      return 0;
    case LIT_BOOLEAN:
      if (v->type != SP_JSON_BOOL)
        return refuse (err, path, "not a boolean");
      *equal = v->u.boolean == lit->boolean;
      return 0;
    case LIT_INTEGER:
      if (output_integer (v, path, &i, &safe, err) < 0)
        return -1;
      *equal = safe && i == lit->integer;
      return 0;
    case LIT_STRING:
    default:
      if (v->type != SP_JSON_STRING)
        return refuse (err, path, "not a string");
      *equal = v->u.string.len == lit->len && memcmp (v->u.string.data, lit->string, lit->len) == 0;
      return 0;
    }
}

static int match_node (const struct node *n, const struct sp_json *v, const char *path, sp_error_t *err);

static int
match_object (const struct node *n, const struct sp_json *v, const char *path, sp_error_t *err)
{
  if (v->type != SP_JSON_OBJECT)
    return refuse (err, path, "not an object");
  if (v->u.object.len != n->n_children)
    return sp_make_error (err, 0, "answer output: %s: %zu keys where the schema declares %zu", path,
                          v->u.object.len, n->n_children);
  /* As many keys as fields, none repeated (the parser saw to that), and
     every field present: exactly the declared keys.  */
  for (size_t i = 0; i < n->n_children; i++)
    {
      const struct sp_json *field = sp_json_object_get (v, n->names[i]);
      char at[PATH_MAX_BYTES];

      if (path_add (at, path, ".", n->names[i], err) < 0)
        return -1;
      if (field == NULL)
        return refuse (err, at, "missing");
      if (match_node (n->children[i], field, at, err) < 0)
        return -1;
    }
  return 0;
}

static int
match_items (const struct node *n, const struct sp_json *v, const char *path, sp_error_t *err)
{
  size_t want = n->kind == KIND_ARRAY ? n->length : n->n_children;

  if (v->type != SP_JSON_ARRAY)
    return refuse (err, path, "not an array");
  if (v->u.array.len != want)
    return sp_make_error (err, 0, "answer output: %s: %zu items where the schema declares %zu", path,
                          v->u.array.len, want);
  for (size_t i = 0; i < want; i++)
    {
      const struct node *item = n->kind == KIND_ARRAY ? n->children[0] : n->children[i];
      char at[PATH_MAX_BYTES];

      if (path_item (at, path, "", i, err) < 0)
        return -1;
      if (match_node (item, v->u.array.items[i], at, err) < 0)
        return -1;
    }
  return 0;
}

/* The variant a union's value names, or -1.  */
static int
union_variant (const struct node *n, const struct sp_json *tag)
{
  for (size_t i = 0; i < n->n_children; i++)
    if (tag->u.string.len == strlen (n->names[i])
        && memcmp (tag->u.string.data, n->names[i], tag->u.string.len) == 0)
      return (int)i;
  return -1;
}

static int
match_union (const struct node *n, const struct sp_json *v, const char *path, sp_error_t *err)
{
  const struct sp_json *tag = sp_json_object_get (v, "tag");
  const struct sp_json *value = sp_json_object_get (v, "value");
  char at[PATH_MAX_BYTES];
  int which;

  if (v->type != SP_JSON_OBJECT || v->u.object.len != 2 || tag == NULL || value == NULL)
    return refuse (err, path, "a union's value is an object of exactly \"tag\" and \"value\"");
  if (tag->type != SP_JSON_STRING)
    return refuse (err, path, "the union's tag is not a string");
  which = union_variant (n, tag);
  if (which < 0)
    return refuse (err, path, "the union's tag names no variant");
  if (path_add (at, path, ".value", NULL, err) < 0)
    return -1;
  return match_node (n->children[which], value, at, err);
}

static int
match_node (const struct node *n, const struct sp_json *v, const char *path, sp_error_t *err)
{
  bool equal;
  int64_t i;
  bool safe;

  switch (n->kind)
    {
    case KIND_CONST:
      if (literal_matches (&n->value, v, path, &equal, err) < 0)
        return -1;
      return equal ? 0 : refuse (err, path, "not the schema's constant");
    case KIND_BOOLEAN:
      return v->type == SP_JSON_BOOL ? 0 : refuse (err, path, "not a boolean");
    case KIND_ENUM:
      for (size_t k = 0; k < n->n_values; k++)
        {
          if (literal_matches (&n->values[k], v, path, &equal, err) < 0)
            return -1;
          if (equal)
            return 0;
        }
      return refuse (err, path, "matches no enum value");
    case KIND_INTEGER:
      if (output_integer (v, path, &i, &safe, err) < 0)
        return -1;
      if (!safe || i < n->minimum || i > n->maximum)
        return sp_make_error (err, 0, "answer output: %s: out of the range %" PRId64 "..%" PRId64, path,
                              n->minimum, n->maximum);
      return 0;
    case KIND_OBJECT:
      return match_object (n, v, path, err);
    case KIND_TUPLE:
    case KIND_ARRAY:
      return match_items (n, v, path, err);
    case KIND_UNION:
    default:
      return match_union (n, v, path, err);
    }
}

/* The canonical text, grown as it is written; it ends no longer than the
   output it comes from, but nothing here depends on that.  */
struct outbuf
{
  char *data;
  size_t len;
  size_t cap;
  bool oom;
};

static void
put (struct outbuf *b, const char *s, size_t n)
{
  if (b->oom)
    return;
  if (b->cap - b->len < n + 1)
    {
      size_t next = b->cap ? b->cap * 2 : 256;
      char *grown;

      while (next - b->len < n + 1)
        next *= 2;
      grown = realloc (b->data, next);
      if (grown == NULL)
        {
          b->oom = true;
          return;
        }
      b->data = grown;
      b->cap = next;
    }
  memcpy (b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void
puts_ (struct outbuf *b, const char *s)
{
  put (b, s, strlen (s));
}

/* JSON.stringify's form for the strings a schema can hold: '"' and '\\'
   escaped, every other byte as is.  Literals and identifiers hold no control
   character, so no other escape can arise.  */
static void
put_string (struct outbuf *b, const char *s, size_t len)
{
  put (b, "\"", 1);
  for (size_t i = 0; i < len; i++)
    {
      if (s[i] == '"' || s[i] == '\\')
        put (b, "\\", 1);
      put (b, &s[i], 1);
    }
  put (b, "\"", 1);
}

static void
put_integer (struct outbuf *b, int64_t v)
{
  char text[24];

  snprintf (text, sizeof text, "%" PRId64, v);
  puts_ (b, text);
}

static void
put_literal (struct outbuf *b, const struct literal *lit)
{
  switch (lit->type)
    {
    case LIT_NULL:
      puts_ (b, "null");
      return;
    case LIT_BOOLEAN:
      puts_ (b, lit->boolean ? "true" : "false");
      return;
    case LIT_INTEGER:
      put_integer (b, lit->integer);
      return;
    case LIT_STRING:
    default:
      put_string (b, lit->string, lit->len);
      return;
    }
}

/* Writes v, which match_node accepted, from the schema's side: literals,
   names and tags are the schema's own, integers re-printed.  */
static void
render_node (struct outbuf *b, const struct node *n, const struct sp_json *v)
{
  int64_t i = 0;
  bool equal;
  int which;

  switch (n->kind)
    {
    case KIND_CONST:
      put_literal (b, &n->value);
      return;
    case KIND_BOOLEAN:
      puts_ (b, v->u.boolean ? "true" : "false");
      return;
    case KIND_ENUM:
      for (size_t k = 0; k < n->n_values; k++)
        {
          sp_error_t ignored = NULL;

          if (literal_matches (&n->values[k], v, "$", &equal, &ignored) == 0 && equal)
            {
              put_literal (b, &n->values[k]);
              return;
            }
          sp_error_release (&ignored);
        }
      b->oom = true; /* unreachable after match_node; fail closed */
      return;
    case KIND_INTEGER:
      if (v->type != SP_JSON_NUMBER || read_integer (v->u.number, &i) != INT_OK)
        b->oom = true; /* unreachable after match_node; fail closed */
      put_integer (b, i);
      return;
    case KIND_OBJECT:
      put (b, "{", 1);
      for (size_t k = 0; k < n->n_children; k++)
        {
          if (k > 0)
            put (b, ",", 1);
          put_string (b, n->names[k], strlen (n->names[k]));
          put (b, ":", 1);
          render_node (b, n->children[k], sp_json_object_get (v, n->names[k]));
        }
      put (b, "}", 1);
      return;
    case KIND_TUPLE:
    case KIND_ARRAY:
      put (b, "[", 1);
      for (size_t k = 0; k < v->u.array.len; k++)
        {
          if (k > 0)
            put (b, ",", 1);
          render_node (b, n->kind == KIND_ARRAY ? n->children[0] : n->children[k], v->u.array.items[k]);
        }
      put (b, "]", 1);
      return;
    case KIND_UNION:
    default:
      which = union_variant (n, sp_json_object_get (v, "tag"));
      puts_ (b, "{\"tag\":");
      put_string (b, n->names[which], strlen (n->names[which]));
      puts_ (b, ",\"value\":");
      render_node (b, n->children[which], sp_json_object_get (v, "value"));
      put (b, "}", 1);
      return;
    }
}

/* Reads an output buf[0..len) of at most max_bytes into *doc, with the
   checks both validators share; what names it in messages is `what`.  */
static int
parse_output (const char *buf, size_t len, size_t max_bytes, unsigned depth, const char *what,
              struct sp_json **doc, sp_error_t *err)
{
  bool not_json;

  if (len > max_bytes)
    return sp_make_error (err, 0, "%s: %zu bytes, more than %zu", what, len, max_bytes);
  if (buf == NULL || len == 0)
    return sp_make_error (err, 0, "%s: empty", what);
  /* The lexical rules first, on their own: their reasons name a byte offset
     and nothing of the text.  The tree parser's own messages may quote a key,
     which is the script's and is not repeated.  */
  if (sp_json_text_check (buf, len, depth, err) < 0)
    return sp_error_wrap (err, "%s", what);
  if (sp_json_parse_checked (buf, len, depth, doc, &not_json, err) < 0)
    {
      int status = (*err)->status;

      sp_error_release (err);
      if (not_json)
        return sp_make_error (
            err, 0, "%s: not one JSON value (a grammar error, trailing data or a truncated value)", what);
      if (status == ENOMEM)
        return sp_make_error (err, ENOMEM, "%s: out of memory", what);
      return sp_make_error (err, 0, "%s: an object with a duplicate key", what);
    }
  return 0;
}

/* Matches v against the schema's root and renders its canonical form.  */
static int
match_and_render (const struct sp_answer_schema *schema, const struct sp_json *v, const char *path,
                  char **canonical, size_t *canonical_len, sp_error_t *err)
{
  struct outbuf b = { 0 };

  if (match_node (schema->root, v, path, err) < 0)
    return -1;
  render_node (&b, schema->root, v);
  if (b.oom || b.data == NULL)
    {
      free (b.data);
      return sp_make_error (err, ENOMEM, "answer output: out of memory");
    }
  *canonical = b.data;
  *canonical_len = b.len;
  return 0;
}

int
sp_answer_schema_validate (const struct sp_answer_schema *schema, const char *buf, size_t len,
                           char **canonical, size_t *canonical_len, sp_error_t *err)
{
  cleanup_json struct sp_json *doc = NULL;

  *canonical = NULL;
  *canonical_len = 0;
  if (schema == NULL)
    return sp_make_error (err, 0, "answer output: no schema");
  if (parse_output (buf, len, SP_ANSWER_OUTPUT_MAX_BYTES, OUTPUT_JSON_DEPTH, "answer output", &doc, err) < 0)
    return -1;
  return match_and_render (schema, doc, "$", canonical, canonical_len, err);
}

int
sp_answer_schema_validate_result (const struct sp_answer_schema *schema, const char *buf, size_t len,
                                  char **canonical, size_t *canonical_len, sp_error_t *err)
{
  cleanup_json struct sp_json *doc = NULL;
  const struct sp_json *value;

  *canonical = NULL;
  *canonical_len = 0;
  if (schema == NULL)
    return sp_make_error (err, 0, "answer output: no schema");
  /* One level more than a bare value: the envelope.  */
  if (parse_output (buf, len, SP_ANSWER_OUTPUT_MAX_BYTES, OUTPUT_JSON_DEPTH + 1, "answer output", &doc, err)
      < 0)
    return -1;
  if (doc->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "answer output: not an object {\"result\": ...}");
  if (doc->u.object.len != 1 || (value = sp_json_object_get (doc, "result")) == NULL)
    return sp_make_error (err, 0, "answer output: %zu keys where exactly one, \"result\", is expected",
                          doc->u.object.len);
  return match_and_render (schema, value, "$.result", canonical, canonical_len, err);
}
