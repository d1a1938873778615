/* Finite answer schemas (src/text/answer_schema.h): cardinality against a
   table of schemas with known N, a property test that enumerates random
   small schemas' values with a generator of its own, outputs that nearly
   match and must be refused, one schema refusal per bound and per malformed
   node, and the three-outcome schema.  Schemas in this file are written
   with ' for " (dq () swaps them back), so that they stay readable.  */
#define _GNU_SOURCE
#include "sp_check.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bignum.h"
#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "text/answer_schema.h"

/* s with every ' turned into ", allocated.  */
static char *
dq (const char *s)
{
  char *out = strdup (s);

  ck_assert_ptr_nonnull (out);
  for (char *p = out; *p; p++)
    if (*p == '\'')
      *p = '"';
  return out;
}

static struct sp_answer_schema *
parse_ok (const char *text)
{
  struct sp_answer_schema *schema = NULL;
  sp_error_t err = NULL;
  int ret = sp_answer_schema_parse (text, strlen (text), &schema, &err);

  ck_assert_msg (ret == 0, "schema refused: %s\n%s", sp_error_message (err), text);
  ck_assert_ptr_nonnull (schema);
  return schema;
}

static struct sp_answer_schema *
parse_ok_q (const char *quoted)
{
  cleanup_free char *text = dq (quoted);

  return parse_ok (text);
}

/* text must be refused with a message holding fragment.  */
static void
schema_refused (const char *text, size_t len, const char *fragment)
{
  SP_CHECK_PARSE_REFUSED (sp_answer_schema_parse, struct sp_answer_schema, text, len, fragment, NULL);
}

static void
schema_refused_q (const char *quoted, const char *fragment)
{
  cleanup_free char *text = dq (quoted);

  schema_refused (text, strlen (text), fragment);
}

static char *
cardinality_text (const struct sp_answer_schema *schema)
{
  char buf[SP_BIGNUM_DECIMAL_MAX];

  ck_assert_uint_gt (sp_bignum_decimal (sp_answer_schema_cardinality (schema), buf, sizeof buf), 0);
  return strdup (buf);
}

/* ---- cardinality: a table of schemas with known N ------------------------ */

#define P2_1024                                                                                              \
  "1797693134862315907729305190789024733617976978942306572734300811577326758055009631327084773224075360211"  \
  "2011387987139335765878976881441662249284743063947412437776789342486548527630221960124609411945308295208"  \
  "5005768838150682342462881473913110540827237163350510684586298239947245938479716304835356329624224137216"
#define P65535_64                                                                                            \
  "1795938418707296984485799695246978411049570179744660594079715154036678147448864776236435998814205518505"  \
  "7896617284950475048552650836230758202569666842374710784065085977874625479759092346370972379542872892170"  \
  "0936470267217953785353494884357109007985792956541564211609394476065748591508963727392256259918212890625"
#define SAFE_RANGE_16                                                                                        \
  "1230031557231360993190989793797367218199255023239290558641930461434767123970796449360780659464480620166"  \
  "5555515226618396644553488991678679757912607363468171378868058413612959978043664634540894181031600699299"  \
  "9856323483874849313357134091940580876832585533599252481"

#define FULL_RANGE "{'type':'integer','minimum':-9007199254740991,'maximum':9007199254740991}"
#define WORD16     "{'type':'integer','minimum':0,'maximum':65535}"

/* property, schema, N in decimal, content bits ceil(log2(N+1)), the
   firewall's ceil(log2(N)).  */
// clang-format off
#define CARD_TABLE(X) \
  X (const_counts_one,                      "{'type':'const','value':'x'}", "1", 1, 0) \
  X (null_const_counts_one,                 "{'type':'const','value':null}", "1", 1, 0) \
  X (boolean_counts_two,                    "{'type':'boolean'}", "2", 2, 1) \
  X (enum_counts_its_values,                "{'type':'enum','values':['a','b','c']}", "3", 2, 2) \
  X (enum_of_four_integers_counts_four,     "{'type':'enum','values':[1,2,3,4]}", "4", 3, 2) \
  X (integer_range_counts_max_minus_min_plus_one, "{'type':'integer','minimum':-5,'maximum':5}", "11", 4, 4) \
  X (single_integer_counts_one,             "{'type':'integer','minimum':7,'maximum':7}", "1", 1, 0) \
  X (negative_range_counts_its_width,       "{'type':'integer','minimum':-300,'maximum':-45}", "256", 9, 8) \
  X (full_safe_range_counts_2_to_54_minus_1, FULL_RANGE, "18014398509481983", 54, 54) \
  X (object_multiplies_its_fields,          "{'type':'object','fields':{'a':{'type':'boolean'},'b':{'type':'enum','values':['x','y','z']}}}", "6", 3, 3) \
  X (nested_object_multiplies_through,      "{'type':'object','fields':{'a':{'type':'boolean'},'b':{'type':'object','fields':{'c':{'type':'enum','values':[1,2,3]},'d':{'type':'integer','minimum':1,'maximum':10}}}}}", "60", 6, 6) \
  X (tuple_multiplies_its_items,            "{'type':'tuple','items':[{'type':'boolean'},{'type':'integer','minimum':0,'maximum':2},{'type':'const','value':1}]}", "6", 3, 3) \
  X (array_is_a_power,                      "{'type':'array','length':3,'items':{'type':'enum','values':['a','b','c']}}", "27", 5, 5) \
  X (array_of_length_zero_counts_one,       "{'type':'array','length':0,'items':{'type':'boolean'}}", "1", 1, 0) \
  X (union_adds_its_variants,               "{'type':'union','variants':{'a':{'type':'boolean'},'b':{'type':'const','value':null}}}", "3", 2, 2) \
  X (union_of_equal_variants_counts_each,   "{'type':'union','variants':{'a':{'type':'boolean'},'b':{'type':'boolean'}}}", "4", 3, 2) \
  X (union_of_overlapping_ranges_counts_each, "{'type':'union','variants':{'lo':{'type':'integer','minimum':0,'maximum':9},'hi':{'type':'integer','minimum':5,'maximum':14}}}", "20", 5, 5) \
  X (union_of_one_const_twice_counts_two,   "{'type':'union','variants':{'x':{'type':'const','value':1},'y':{'type':'const','value':1}}}", "2", 2, 1) \
  X (array_of_unions_of_objects,            "{'type':'array','length':2,'items':{'type':'union','variants':{'p':{'type':'object','fields':{'q':{'type':'boolean'}}},'r':{'type':'const','value':0}}}}", "9", 4, 4) \
  X (sixteen_full_ranges_count_exactly,     "{'type':'object','fields':{'a':" FULL_RANGE ",'b':" FULL_RANGE ",'c':" FULL_RANGE ",'d':" FULL_RANGE ",'e':" FULL_RANGE ",'f':" FULL_RANGE ",'g':" FULL_RANGE ",'h':" FULL_RANGE ",'i':" FULL_RANGE ",'j':" FULL_RANGE ",'k':" FULL_RANGE ",'l':" FULL_RANGE ",'m':" FULL_RANGE ",'n':" FULL_RANGE ",'o':" FULL_RANGE ",'p':" FULL_RANGE "}}", SAFE_RANGE_16, 864, 864) \
  X (just_below_the_cap_counts_exactly,     "{'type':'array','length':64,'items':{'type':'integer','minimum':1,'maximum':65535}}", P65535_64, 1024, 1024) \
  X (exactly_2_to_1024_is_accepted,         "{'type':'array','length':64,'items':" WORD16 "}", P2_1024, 1025, 1024)
// clang-format on

#define CARD_TEST(name, schema, n, bits, fw_bits)                                                            \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (schema);                                  \
    cleanup_free char *text = cardinality_text (s);                                                          \
    ck_assert_str_eq (text, n);                                                                              \
    ck_assert_uint_eq (sp_answer_schema_content_bits (s), bits);                                             \
    ck_assert_uint_eq (sp_answer_schema_firewall_bits (s), fw_bits);                                         \
  }                                                                                                          \
  END_TEST
CARD_TABLE (CARD_TEST)
#undef CARD_TEST

START_TEST (one_past_2_to_1024_is_refused)
{
  schema_refused_q ("{'type':'union','variants':{'a':{'type':'array','length':64,'items':" WORD16
                    "},'b':{'type':'const','value':1}}}",
                    "$: more than 2^1024 answers");
}
END_TEST

START_TEST (far_above_the_cap_is_refused_without_overflow)
{
  /* (2^54 - 1)^64 and then its 64th power: far beyond the bignum's width,
     so every step must saturate.  */
  schema_refused_q ("{'type':'array','length':64,'items':{'type':'array','length':64,'items':" FULL_RANGE
                    "}}",
                    "more than 2^1024 answers");
  schema_refused_q ("{'type':'array','length':64,'items':{'type':'integer','minimum':0,'maximum':131071}}",
                    "more than 2^1024 answers");
  schema_refused_q ("{'type':'object','fields':{'a':{'type':'array','length':64,'items':" WORD16
                    "},'b':{'type':'boolean'}}}",
                    "more than 2^1024 answers");
}
END_TEST

START_TEST (bignum_multiplication_reports_overflow)
{
  struct sp_bignum a, b, out;
  char buf[SP_BIGNUM_DECIMAL_MAX];

  ck_assert (sp_bignum_set_pow2 (&a, 1000));
  ck_assert (sp_bignum_set_pow2 (&b, 55));
  ck_assert (sp_bignum_mul (&out, &a, &b));
  ck_assert_uint_eq (sp_bignum_bit_length (&out), 1056);
  ck_assert (sp_bignum_set_pow2 (&b, 56));
  ck_assert (!sp_bignum_mul (&out, &a, &b));
  ck_assert (!sp_bignum_set_pow2 (&a, SP_BIGNUM_BITS));
  sp_bignum_set_u64 (&a, UINT64_MAX);
  ck_assert (sp_bignum_mul (&a, &a, &a));
  ck_assert_uint_gt (sp_bignum_decimal (&a, buf, sizeof buf), 0);
  ck_assert_str_eq (buf, "340282366920938463426481119284349108225");
  ck_assert_uint_eq (sp_bignum_decimal (&a, buf, 39), 0);
}
END_TEST

/* ---- the property test: random schemas, every value enumerated ----------- */

/* A growable string for the generator.  */
struct str
{
  char *s;
  size_t len, cap;
};

static void
str_put (struct str *b, const char *s, size_t n)
{
  if (b->len + n + 1 > b->cap)
    {
      b->cap = (b->len + n + 1) * 2;
      b->s = realloc (b->s, b->cap);
      ck_assert_ptr_nonnull (b->s);
    }
  memcpy (b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void
str_puts (struct str *b, const char *s)
{
  str_put (b, s, strlen (s));
}

static char *
str_take (struct str *b)
{
  char *s = b->s ? b->s : strdup ("");

  ck_assert_ptr_nonnull (s);
  return s;
}

/* xorshift64*: seeded, so that a failure names its seed and repeats.  */
static uint64_t rng_state;

static uint32_t
rng (uint32_t bound)
{
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 2685821657736338717ULL) >> 33) % bound;
}

enum tkind
{
  T_CONST,
  T_BOOLEAN,
  T_ENUM,
  T_INTEGER,
  T_OBJECT,
  T_TUPLE,
  T_ARRAY,
  T_UNION,
};

/* The test's own model of a schema.  Literals are indexes into one pool per
   JSON type, so that uniqueness is easy to keep.  */
#define TMAX_KIDS 3
#define TMAX_LITS 7

struct tnode
{
  enum tkind kind;
  int lit_type; /* 0 null, 1 boolean, 2 integer, 3 string */
  int lits[TMAX_LITS];
  int n_lits;
  int64_t min, max;
  int length;
  struct tnode *kids[TMAX_KIDS];
  int n_kids;
};

/* Strings that need escaping, or are not ASCII, or are empty.  */
static const char *const string_pool[]
    = { "a", "q\"uote", "back\\slash", "caf\xC3\xA9", "", "sl/ash", "\xF0\x9F\x98\x80" };
static const int64_t int_pool[] = { 0, -1, 7, 9007199254740991LL, -9007199254740991LL, 42 };
static const char *const name_pool[] = { "a", "b", "Zed", "x_1", "tag", "value" };

static int
pool_size (int lit_type)
{
  switch (lit_type)
    {
    case 0:
      return 1;
    case 1:
      return 2;
    case 2:
      return (int)(sizeof int_pool / sizeof int_pool[0]);
    default:
      return (int)(sizeof string_pool / sizeof string_pool[0]);
    }
}

static void
tfree (struct tnode *n)
{
  for (int i = 0; i < n->n_kids; i++)
    tfree (n->kids[i]);
  free (n);
}

/* A random node of at most budget values.  */
static struct tnode *
tgen (int depth, uint64_t budget)
{
  struct tnode *n = calloc (1, sizeof *n);
  /* A container at the root, so that most schemas count more than a few.  */
  uint32_t pick = depth == 0 ? 4 + rng (4) : depth >= 3 ? rng (4) : rng (8);

  ck_assert_ptr_nonnull (n);
  if (budget < 2)
    pick = T_CONST;
  n->kind = (enum tkind)pick;
  switch (n->kind)
    {
    case T_CONST:
      n->lit_type = (int)rng (4);
      n->lits[0] = (int)rng ((uint32_t)pool_size (n->lit_type));
      n->n_lits = 1;
      break;
    case T_BOOLEAN:
      break;
    case T_ENUM:
      {
        int size, want;

        n->lit_type = (int)rng (4);
        size = pool_size (n->lit_type);
        want = 1 + (int)rng ((uint32_t)(budget < TMAX_LITS ? budget : TMAX_LITS));
        if (want > size)
          want = size;
        /* Distinct pool entries, from a random start.  */
        for (int i = 0, start = (int)rng ((uint32_t)size); i < want && i < size; i++)
          n->lits[n->n_lits++] = (start + i) % size;
      }
      break;
    case T_INTEGER:
      {
        uint64_t width = 1 + rng ((uint32_t)(budget < 40 ? budget : 40));

        n->min = (int64_t)rng (7) - 3;
        if (rng (5) == 0)
          n->min = 9007199254740991LL - (int64_t)width + 1; /* the top of the safe range */
        n->max = n->min + (int64_t)width - 1;
      }
      break;
    case T_OBJECT:
    case T_TUPLE:
    case T_UNION:
      {
        int kids = 1 + (int)rng (TMAX_KIDS);
        /* Each child at most budget^(1/kids) values, so that the product
           (and the sum, for a union) stays within budget.  */
        uint64_t each = (uint64_t)floor (pow ((double)budget, 1.0 / kids));

        if (n->kind == T_UNION)
          each = budget / (uint64_t)kids;
        for (int i = 0; i < kids; i++)
          n->kids[n->n_kids++] = tgen (depth + 1, each < 1 ? 1 : each);
      }
      break;
    case T_ARRAY:
    default:
      n->length = (int)rng (4);
      n->kids[n->n_kids++]
          = tgen (depth + 1, n->length == 0 ? 3 : (uint64_t)floor (pow ((double)budget, 1.0 / n->length)));
      break;
    }
  return n;
}

static uint64_t
tcount (const struct tnode *n)
{
  uint64_t c = 1;

  switch (n->kind)
    {
    case T_CONST:
      return 1;
    case T_BOOLEAN:
      return 2;
    case T_ENUM:
      return (uint64_t)n->n_lits;
    case T_INTEGER:
      return (uint64_t)(n->max - n->min) + 1;
    case T_OBJECT:
    case T_TUPLE:
      for (int i = 0; i < n->n_kids; i++)
        c *= tcount (n->kids[i]);
      return c;
    case T_ARRAY:
      for (int i = 0; i < n->length; i++)
        c *= tcount (n->kids[0]);
      return c;
    case T_UNION:
    default:
      c = 0;
      for (int i = 0; i < n->n_kids; i++)
        c += tcount (n->kids[i]);
      return c;
    }
}

/* A string literal as JSON: canonically ('"' and '\\' escaped, nothing
   else), or noisily (ASCII letters sometimes written as \u escapes, '/' as
   \/), which must read back the same.  */
static void
put_json_string (struct str *b, const char *s, bool noisy)
{
  str_puts (b, "\"");
  for (const char *p = s; *p; p++)
    {
      char esc[8];

      if (*p == '"' || *p == '\\')
        {
          esc[0] = '\\';
          esc[1] = *p;
          str_put (b, esc, 2);
        }
      else if (noisy && *p == '/' && rng (2) == 0)
        str_puts (b, "\\/");
      else if (noisy && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) && rng (3) == 0)
        {
          snprintf (esc, sizeof esc, "\\u%04x", (unsigned)*p);
          str_puts (b, esc);
        }
      else
        str_put (b, p, 1);
    }
  str_puts (b, "\"");
}

static void
put_literal (struct str *b, int lit_type, int index, bool noisy)
{
  char num[32];

  switch (lit_type)
    {
    case 0:
      str_puts (b, "null");
      return;
    case 1:
      str_puts (b, index ? "true" : "false");
      return;
    case 2:
      snprintf (num, sizeof num, "%" PRId64, int_pool[index]);
      str_puts (b, num);
      return;
    default:
      put_json_string (b, string_pool[index], noisy);
      return;
    }
}

static void
ws (struct str *b, bool noisy)
{
  static const char *const spaces[] = { "", " ", "\n", "\t", "\r\n  " };

  if (noisy)
    str_puts (b, spaces[rng (5)]);
}

static void
put_schema (struct str *b, const struct tnode *n)
{
  static const char *const kinds[]
      = { "const", "boolean", "enum", "integer", "object", "tuple", "array", "union" };
  char num[64];

  str_puts (b, "{\"type\":\"");
  str_puts (b, kinds[n->kind]);
  str_puts (b, "\"");
  switch (n->kind)
    {
    case T_CONST:
      str_puts (b, ",\"value\":");
      put_literal (b, n->lit_type, n->lits[0], false);
      break;
    case T_ENUM:
      str_puts (b, ",\"values\":[");
      for (int i = 0; i < n->n_lits; i++)
        {
          if (i > 0)
            str_puts (b, ",");
          put_literal (b, n->lit_type, n->lits[i], false);
        }
      str_puts (b, "]");
      break;
    case T_INTEGER:
      snprintf (num, sizeof num, ",\"minimum\":%" PRId64 ",\"maximum\":%" PRId64, n->min, n->max);
      str_puts (b, num);
      break;
    case T_OBJECT:
    case T_UNION:
      str_puts (b, n->kind == T_OBJECT ? ",\"fields\":{" : ",\"variants\":{");
      for (int i = 0; i < n->n_kids; i++)
        {
          snprintf (num, sizeof num, "%s\"%s\":", i > 0 ? "," : "", name_pool[i]);
          str_puts (b, num);
          put_schema (b, n->kids[i]);
        }
      str_puts (b, "}");
      break;
    case T_TUPLE:
      str_puts (b, ",\"items\":[");
      for (int i = 0; i < n->n_kids; i++)
        {
          if (i > 0)
            str_puts (b, ",");
          put_schema (b, n->kids[i]);
        }
      str_puts (b, "]");
      break;
    case T_ARRAY:
      snprintf (num, sizeof num, ",\"length\":%d,\"items\":", n->length);
      str_puts (b, num);
      put_schema (b, n->kids[0]);
      break;
    case T_BOOLEAN:
    default:
      break;
    }
  str_puts (b, "}");
}

/* Value number k (0 <= k < tcount (n)) of n, twice: as the canonical text
   the test expects, and as a noisy text (whitespace, reordered keys,
   escapes) that must validate to it.  */
static void
put_value (struct str *canon, struct str *noisy, const struct tnode *n, uint64_t k)
{
  char num[32];

  ws (noisy, true);
  switch (n->kind)
    {
    case T_CONST:
      put_literal (canon, n->lit_type, n->lits[0], false);
      put_literal (noisy, n->lit_type, n->lits[0], true);
      break;
    case T_BOOLEAN:
      str_puts (canon, k ? "true" : "false");
      str_puts (noisy, k ? "true" : "false");
      break;
    case T_ENUM:
      put_literal (canon, n->lit_type, n->lits[k], false);
      put_literal (noisy, n->lit_type, n->lits[k], true);
      break;
    case T_INTEGER:
      snprintf (num, sizeof num, "%" PRId64, n->min + (int64_t)k);
      str_puts (canon, num);
      str_puts (noisy, num);
      break;
    case T_OBJECT:
      {
        /* Mixed radix: field i's digit is k mod its count.  The noisy text
           writes the fields in reverse, so that order must not matter.  */
        uint64_t digits[TMAX_KIDS];
        struct str unused = { 0 };

        for (int i = 0; i < n->n_kids; i++)
          {
            uint64_t c = tcount (n->kids[i]);

            digits[i] = k % c;
            k /= c;
          }
        str_puts (canon, "{");
        for (int i = 0; i < n->n_kids; i++)
          {
            snprintf (num, sizeof num, "%s\"%s\":", i > 0 ? "," : "", name_pool[i]);
            str_puts (canon, num);
            put_value (canon, &unused, n->kids[i], digits[i]);
          }
        str_puts (canon, "}");
        str_puts (noisy, "{");
        for (int i = n->n_kids - 1; i >= 0; i--)
          {
            ws (noisy, true);
            put_json_string (noisy, name_pool[i], true);
            ws (noisy, true);
            str_puts (noisy, ":");
            put_value (&unused, noisy, n->kids[i], digits[i]);
            ws (noisy, true);
            if (i > 0)
              str_puts (noisy, ",");
          }
        str_puts (noisy, "}");
        free (unused.s);
      }
      break;
    case T_TUPLE:
    case T_ARRAY:
      {
        int items = n->kind == T_TUPLE ? n->n_kids : n->length;

        str_puts (canon, "[");
        str_puts (noisy, "[");
        for (int i = 0; i < items; i++)
          {
            const struct tnode *item = n->kind == T_TUPLE ? n->kids[i] : n->kids[0];
            uint64_t c = tcount (item);

            if (i > 0)
              {
                str_puts (canon, ",");
                str_puts (noisy, ",");
              }
            put_value (canon, noisy, item, k % c);
            ws (noisy, true);
            k /= c;
          }
        str_puts (canon, "]");
        str_puts (noisy, "]");
      }
      break;
    case T_UNION:
    default:
      {
        int v = 0;
        bool value_first = rng (2) == 0;

        while (k >= tcount (n->kids[v]))
          k -= tcount (n->kids[v++]);
        str_puts (canon, "{\"tag\":");
        put_json_string (canon, name_pool[v], false);
        str_puts (canon, ",\"value\":");
        str_puts (noisy, "{");
        if (!value_first)
          {
            put_json_string (noisy, "tag", true);
            str_puts (noisy, ":");
            put_json_string (noisy, name_pool[v], true);
            str_puts (noisy, ",");
          }
        put_json_string (noisy, "value", true);
        ws (noisy, true);
        str_puts (noisy, ":");
        put_value (canon, noisy, n->kids[v], k);
        if (value_first)
          {
            str_puts (noisy, ",");
            put_json_string (noisy, "tag", true);
            str_puts (noisy, ":");
            put_json_string (noisy, name_pool[v], true);
          }
        str_puts (canon, "}");
        str_puts (noisy, "}");
      }
      break;
    }
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static char *
validate_ok (const struct sp_answer_schema *s, const char *text, size_t len)
{
  char *canonical = NULL;
  size_t clen = 0;
  sp_error_t err = NULL;
  int ret = sp_answer_schema_validate (s, text, len, &canonical, &clen, &err);

  ck_assert_msg (ret == 0, "output refused: %s\n%.*s", sp_error_message (err), (int)len, text);
  ck_assert_ptr_nonnull (canonical);
  ck_assert_uint_eq (clen, strlen (canonical));
  ck_assert_uint_le (clen, len);
  return canonical;
}

/* Wraps value in /probe/out's envelope, with noise around it, and checks
   that sp_answer_schema_validate_result gives want.  */
static void
result_ok (const struct sp_answer_schema *s, const char *value, const char *want)
{
  cleanup_free char *text = NULL;
  cleanup_free char *canonical = NULL;
  size_t clen = 0;
  sp_error_t err = NULL;
  int n = asprintf (&text, " {\n\"\\u0072esult\" :\t%s }\r\n", value);

  ck_assert_int_gt (n, 0);
  ck_assert_msg (sp_answer_schema_validate_result (s, text, (size_t)n, &canonical, &clen, &err) == 0,
                 "envelope refused: %s\n%s", sp_error_message (err), text);
  ck_assert_str_eq (canonical, want);
  ck_assert_uint_eq (clen, strlen (want));
}

START_TEST (every_value_of_random_small_schemas_validates_canonically)
{
  unsigned schemas = 0;
  uint64_t values = 0;

  for (uint64_t seed = 1; seed <= 400; seed++)
    {
      struct tnode *t;
      struct str text = { 0 };
      cleanup_answer_schema struct sp_answer_schema *s = NULL;
      cleanup_free char *n_text = NULL;
      char want[32];
      uint64_t n;
      char **canon;

      rng_state = seed * 0x9E3779B97F4A7C15ULL;
      t = tgen (0, 1 + rng (3000));
      n = tcount (t);
      put_schema (&text, t);
      s = parse_ok (text.s);
      n_text = cardinality_text (s);
      snprintf (want, sizeof want, "%" PRIu64, n);
      ck_assert_msg (strcmp (n_text, want) == 0, "seed %" PRIu64 ": N %s, the model counts %s\n%s", seed,
                     n_text, want, text.s);
      ck_assert_uint_eq (sp_answer_schema_content_bits (s), (unsigned)ceil (log2 ((double)n + 1)));

      canon = calloc (n, sizeof *canon);
      ck_assert_ptr_nonnull (canon);
      for (uint64_t k = 0; k < n; k++)
        {
          struct str expect = { 0 }, noisy = { 0 };
          cleanup_free char *again = NULL;

          put_value (&expect, &noisy, t, k);
          canon[k] = validate_ok (s, noisy.s, noisy.len);
          ck_assert_msg (strcmp (canon[k], expect.s) == 0, "seed %" PRIu64 " value %" PRIu64 ": %s, want %s",
                         seed, k, canon[k], expect.s);
          /* The canonical form is a fixed point.  */
          again = validate_ok (s, canon[k], strlen (canon[k]));
          ck_assert_str_eq (again, canon[k]);
          /* /probe/out's envelope around the same value gives the same
             canonical value.  */
          result_ok (s, noisy.s, canon[k]);
          free (expect.s);
          free (noisy.s);
        }
      /* n values, n distinct canonical texts.  */
      qsort (canon, n, sizeof *canon, cmp_str);
      for (uint64_t k = 1; k < n; k++)
        ck_assert_msg (strcmp (canon[k - 1], canon[k]) != 0, "seed %" PRIu64 ": two values give %s", seed,
                       canon[k]);
      for (uint64_t k = 0; k < n; k++)
        free (canon[k]);
      free (canon);
      free (text.s);
      tfree (t);
      schemas++;
      values += n;
    }
  ck_assert_uint_eq (schemas, 400);
  ck_assert_uint_gt (values, 10000);
}
END_TEST

/* ---- outputs that nearly match ------------------------------------------- */

#define NEAR_SCHEMA                                                                                          \
  "{'type':'object','fields':{"                                                                              \
  "'count':{'type':'integer','minimum':-5,'maximum':100},"                                                   \
  "'flag':{'type':'boolean'},"                                                                               \
  "'kind':{'type':'enum','values':['a','b']},"                                                               \
  "'pair':{'type':'tuple','items':[{'type':'const','value':null},{'type':'enum','values':[1,2]}]},"          \
  "'u':{'type':'union','variants':{'n':{'type':'integer','minimum':0,'maximum':3},'s':{'type':'const','"     \
  "value':'x'}}}}}"

#define NEAR_GOOD "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}"

/* ---- /probe/out's envelope in schema mode -------------------------------- */

static void
result_refused (const char *quoted, const char *fragment)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (NEAR_SCHEMA);
  cleanup_free char *text = dq (quoted);
  char *canonical = (char *)1;
  size_t clen = 99;
  sp_error_t err = NULL;
  const char *msg;

  ck_assert_int_eq (sp_answer_schema_validate_result (s, text, strlen (text), &canonical, &clen, &err), -1);
  ck_assert_ptr_null (canonical);
  ck_assert_uint_eq (clen, 0);
  msg = sp_error_message (err);
  ck_assert_msg (strstr (msg, fragment) != NULL, "message \"%s\" lacks \"%s\"", msg, fragment);
  ck_assert_msg (strstr (msg, "SECRET") == NULL, "message echoes the output: %s", msg);
  sp_error_release (&err);
}

START_TEST (envelope_holds_the_value_and_gives_it_alone_canonically)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (NEAR_SCHEMA);
  cleanup_free char *good = dq (NEAR_GOOD);

  result_ok (s, good, good);
}
END_TEST

START_TEST (envelope_near_misses_are_refused)
{
  result_refused ("{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}",
                  "keys where");
  result_refused ("{'result':" NEAR_GOOD ",'SECRET':1}", "2 keys where");
  result_refused ("{'SECRET':" NEAR_GOOD "}", "exactly one");
  result_refused ("{'result':" NEAR_GOOD ",'result':" NEAR_GOOD "}", "duplicate key");
  result_refused ("[" NEAR_GOOD "]", "not an object");
  result_refused ("'SECRET'", "not an object");
  result_refused ("{'result':" NEAR_GOOD "} {}", "not one JSON value");
  result_refused ("{'result':{'count':7.0,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}}",
                  "$.result.count");
  result_refused ("{'result':{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3},"
                  "'SECRET':0}}",
                  "$.result");
  result_refused ("", "empty");
}
END_TEST

START_TEST (envelope_of_8193_bytes_is_refused_before_it_is_read)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (NEAR_SCHEMA);
  char *canonical = NULL;
  size_t clen = 0;
  sp_error_t err = NULL;

  /* A NULL buffer of 8193 bytes: the bound is checked first.  */
  ck_assert_int_eq (
      sp_answer_schema_validate_result (s, NULL, SP_ANSWER_OUTPUT_MAX_BYTES + 1, &canonical, &clen, &err),
      -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "more than 8192"));
  sp_error_release (&err);
}
END_TEST

static void
output_refused (const char *quoted, size_t len, const char *fragment)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (NEAR_SCHEMA);
  cleanup_free char *text = NULL;
  char *canonical = (char *)1;
  size_t clen = 99;
  sp_error_t err = NULL;
  const char *msg;

  text = malloc (len + 1);
  ck_assert_ptr_nonnull (text);
  memcpy (text, quoted, len);
  text[len] = '\0';
  for (size_t i = 0; i < len; i++)
    if (text[i] == '\'')
      text[i] = '"';
  ck_assert_int_eq (sp_answer_schema_validate (s, text, len, &canonical, &clen, &err), -1);
  ck_assert_ptr_null (canonical);
  ck_assert_uint_eq (clen, 0);
  msg = sp_error_message (err);
  ck_assert_msg (strstr (msg, fragment) != NULL, "message \"%s\" lacks \"%s\"", msg, fragment);
  /* Nothing the script wrote is repeated.  */
  ck_assert_msg (strstr (msg, "SECRET") == NULL, "message echoes the output: %s", msg);
  sp_error_release (&err);
}

START_TEST (near_miss_base_output_is_accepted)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (NEAR_SCHEMA);
  cleanup_free char *text
      = dq (" { 'u' : {'value':3,'tag':'n'}, 'pair':[null,2],'kind':'\\u0061','flag':true,"
            "'count':7 }\n");
  cleanup_free char *canonical = validate_ok (s, text, strlen (text));
  cleanup_free char *want = dq (NEAR_GOOD);

  ck_assert_str_eq (canonical, want);
}
END_TEST

/* property, output (with ' for "), the reason's fragment.  */
// clang-format off
#define NEAR_TABLE(X) \
  X (extra_key_is_refused,                 "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3},'SECRET':1}", "$: 6 keys where the schema declares 5") \
  X (missing_key_is_refused,               "{'count':7,'flag':true,'kind':'a','pair':[null,2]}", "$: 4 keys where") \
  /* The firewall's parser assigns "__proto__" to the prototype, so that the key vanishes there.  */ \
  X (proto_key_is_an_extra_key,            "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3},'__proto__':{}}", "$: 6 keys where the schema declares 5") \
  X (proto_key_in_union_is_an_extra_key,   "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3,'__proto__':null}}", "$.u: a union's value is an object of exactly") \
  X (renamed_key_is_refused,               "{'count':7,'flag':true,'kind':'a','pair':[null,2],'SECRET':{'tag':'n','value':3}}", "$.u: missing") \
  X (string_for_integer_is_refused,        "{'count':'7','flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: not an integer") \
  X (integer_above_range_is_refused,       "{'count':101,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: out of the range -5..100") \
  X (integer_below_range_is_refused,       "{'count':-6,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: out of the range") \
  X (huge_integer_is_refused,              "{'count':123456789012345678901234567890,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: out of the range") \
  X (float_for_integer_is_refused,         "{'count':7.5,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: not an integer written canonically") \
  X (integral_float_is_refused,            "{'count':1.0,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: not an integer written canonically") \
  X (negative_zero_is_refused,             "{'count':-0,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: not an integer written canonically") \
  X (leading_zero_is_refused,              "{'count':07,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "not one JSON value") \
  X (exponent_is_refused,                  "{'count':1e2,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: not an integer written canonically") \
  X (capital_exponent_is_refused,          "{'count':1E1,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.count: not an integer written canonically") \
  X (non_canonical_enum_integer_is_refused, "{'count':7,'flag':true,'kind':'a','pair':[null,2.0],'u':{'tag':'n','value':3}}", "$.pair[1]: not an integer written canonically") \
  X (duplicate_key_is_refused,             "{'count':7,'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "duplicate key") \
  X (duplicate_key_via_escape_is_refused,  "{'count':7,'\\u0063ount':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "duplicate key") \
  X (trailing_data_is_refused,             "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}} SECRET", "not one JSON value") \
  X (second_value_is_refused,              "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}{}", "not one JSON value") \
  X (truncated_output_is_refused,          "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}", "not one JSON value") \
  X (string_for_boolean_is_refused,        "{'count':7,'flag':'true','kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.flag: not a boolean") \
  X (null_for_boolean_is_refused,          "{'count':7,'flag':null,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3}}", "$.flag: not a boolean") \
  X (enum_value_of_wrong_type_is_refused,  "{'count':7,'flag':true,'kind':1,'pair':[null,2],'u':{'tag':'n','value':3}}", "$.kind: not a string") \
  X (enum_value_not_listed_is_refused,     "{'count':7,'flag':true,'kind':'SECRET','pair':[null,2],'u':{'tag':'n','value':3}}", "$.kind: matches no enum value") \
  X (enum_value_differing_in_case_is_refused, "{'count':7,'flag':true,'kind':'A','pair':[null,2],'u':{'tag':'n','value':3}}", "$.kind: matches no enum value") \
  X (string_for_integer_enum_is_refused,   "{'count':7,'flag':true,'kind':'a','pair':[null,'2'],'u':{'tag':'n','value':3}}", "$.pair[1]: not an integer") \
  X (const_of_wrong_type_is_refused,       "{'count':7,'flag':true,'kind':'a','pair':['null',2],'u':{'tag':'n','value':3}}", "$.pair[0]: not null") \
  X (short_tuple_is_refused,               "{'count':7,'flag':true,'kind':'a','pair':[null],'u':{'tag':'n','value':3}}", "$.pair: 1 items where the schema declares 2") \
  X (long_tuple_is_refused,                "{'count':7,'flag':true,'kind':'a','pair':[null,2,2],'u':{'tag':'n','value':3}}", "$.pair: 3 items where") \
  X (object_for_tuple_is_refused,          "{'count':7,'flag':true,'kind':'a','pair':{'0':null,'1':2},'u':{'tag':'n','value':3}}", "$.pair: not an array") \
  X (union_without_tag_is_refused,         "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'value':3}}", "$.u: a union's value is an object of exactly") \
  X (union_with_extra_key_is_refused,      "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':3,'SECRET':0}}", "$.u: a union's value is an object of exactly") \
  X (union_with_unknown_tag_is_refused,    "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'SECRET','value':3}}", "$.u: the union's tag names no variant") \
  X (union_with_numeric_tag_is_refused,    "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':0,'value':3}}", "$.u: the union's tag is not a string") \
  X (union_as_bare_value_is_refused,       "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':3}", "$.u: a union's value is an object") \
  X (union_as_array_is_refused,            "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':['n',3]}", "$.u: a union's value is an object") \
  X (union_value_of_other_variant_is_refused, "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'n','value':'x'}}", "$.u.value: not an integer") \
  X (union_value_out_of_range_is_refused,  "{'count':7,'flag':true,'kind':'a','pair':[null,2],'u':{'tag':'s','value':'y'}}", "$.u.value: not the schema's constant") \
  X (array_at_root_is_refused,             "[7,true,'a',[null,2],{'tag':'n','value':3}]", "$: not an object") \
  X (empty_output_is_refused,              "", "answer output: empty") \
  X (whitespace_only_output_is_refused,    "  \n", "answer output") \
  X (byte_order_mark_is_refused,           "\xEF\xBB\xBF{}", "byte order mark") \
  X (invalid_utf8_is_refused,              "{'count':7,'flag':true,'kind':'\xC0\xAF','pair':[null,2],'u':{'tag':'n','value':3}}", "invalid UTF-8") \
  X (lone_surrogate_is_refused,            "{'count':7,'flag':true,'kind':'\\ud83d','pair':[null,2],'u':{'tag':'n','value':3}}", "surrogate") \
  X (too_deep_output_is_refused,           "{'count':[[[[[[[[1]]]]]]]]}", "nesting deeper than 7")
// clang-format on

#define NEAR_TEST(name, output, fragment)                                                                    \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    output_refused (output, sizeof (output) - 1, fragment);                                                  \
  }                                                                                                          \
  END_TEST
NEAR_TABLE (NEAR_TEST)
#undef NEAR_TEST

START_TEST (single_quoted_string_is_refused)
{
  /* Written here, not in the table, whose rows turn ' into ".  */
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q ("{'type':'boolean'}");
  char *canonical = NULL;
  size_t clen;
  sp_error_t err = NULL;

  ck_assert_int_eq (sp_answer_schema_validate (s, "'x'", 3, &canonical, &clen, &err), -1);
  sp_error_release (&err);
}
END_TEST

/* A valid output padded with spaces to n bytes.  */
static char *
padded (size_t n)
{
  cleanup_free char *good = dq (NEAR_GOOD);
  char *text = malloc (n + 1);

  ck_assert_ptr_nonnull (text);
  memset (text, ' ', n);
  memcpy (text, good, strlen (good));
  text[n] = '\0';
  return text;
}

START_TEST (output_of_exactly_8192_bytes_is_accepted)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (NEAR_SCHEMA);
  cleanup_free char *text = padded (SP_ANSWER_OUTPUT_MAX_BYTES);
  cleanup_free char *canonical = validate_ok (s, text, SP_ANSWER_OUTPUT_MAX_BYTES);
  cleanup_free char *want = dq (NEAR_GOOD);

  ck_assert_str_eq (canonical, want);
}
END_TEST

START_TEST (output_of_8193_bytes_is_refused)
{
  cleanup_free char *text = padded (SP_ANSWER_OUTPUT_MAX_BYTES + 1);

  output_refused (text, SP_ANSWER_OUTPUT_MAX_BYTES + 1, "8193 bytes, more than 8192");
}
END_TEST

START_TEST (output_length_is_checked_before_the_buffer_is_read)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q ("{'type':'boolean'}");
  char *canonical = NULL;
  size_t clen;
  sp_error_t err = NULL;

  /* A NULL buffer with a length over the cap: read, it would crash.  */
  ck_assert_int_eq (
      sp_answer_schema_validate (s, NULL, SP_ANSWER_OUTPUT_MAX_BYTES + 1, &canonical, &clen, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "more than 8192"));
  sp_error_release (&err);
}
END_TEST

START_TEST (output_with_embedded_nul_is_refused)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q ("{'type':'boolean'}");
  char *canonical = NULL;
  size_t clen;
  sp_error_t err = NULL;

  ck_assert_int_eq (sp_answer_schema_validate (s, "true\0", 5, &canonical, &clen, &err), -1);
  ck_assert_ptr_null (canonical);
  sp_error_release (&err);
}
END_TEST

START_TEST (canonical_form_of_each_scalar_kind)
{
  static const struct
  {
    const char *schema, *output, *canonical;
  } rows[] = {
    { "{'type':'const','value':'a\\'b'}", " 'a\\u0022b' ", "'a\\'b'" },
    { "{'type':'enum','values':['\\\\','\\/']}", "'\\u005c'", "'\\\\'" },
    { "{'type':'enum','values':['\\\\','\\/']}", "'\\/'", "'/'" },
    { "{'type':'enum','values':['caf\\u00e9']}", "'caf\xC3\xA9'", "'caf\xC3\xA9'" },
    { "{'type':'enum','values':[true,false]}", "\tfalse\r\n", "false" },
    { "{'type':'enum','values':[null]}", "null", "null" },
    { "{'type':'const','value':-9007199254740991}", "-9007199254740991", "-9007199254740991" },
    { FULL_RANGE, "9007199254740991", "9007199254740991" },
    { "{'type':'array','length':0,'items':{'type':'boolean'}}", "[ ]", "[]" },
    { "{'type':'union','variants':{'b':{'type':'boolean'},'a':{'type':'boolean'}}}",
      "{'value':true,'tag':'a'}", "{'tag':'a','value':true}" },
  };

  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    {
      cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (rows[i].schema);
      cleanup_free char *output = dq (rows[i].output);
      cleanup_free char *want = dq (rows[i].canonical);
      cleanup_free char *got = validate_ok (s, output, strlen (output));

      ck_assert_msg (strcmp (got, want) == 0, "row %zu: %s, want %s", i, got, want);
    }
}
END_TEST

/* ---- schema refusals ----------------------------------------------------- */

/* property, schema (with ' for "), the fragment its refusal holds.  */
// clang-format off
#define REFUSE_TABLE(X) \
  /* Not a node.  */ \
  X (root_string_is_refused,                "'boolean'", "$: a schema node is a JSON object") \
  /* "ERROR" is every failure's answer, anywhere a literal stands.  */ \
  X (const_error_is_refused,                "{'type':'const','value':'ERROR'}", "$.value: the literal string \"ERROR\" is reserved") \
  X (enum_error_is_refused,                 "{'type':'enum','values':['OK','ERROR']}", "$.values[1]: the literal string \"ERROR\" is reserved") \
  X (nested_error_is_refused,               "{'type':'object','fields':{'a':{'type':'const','value':'ERROR'}}}", "$.fields.a.value: the literal string") \
  X (root_array_is_refused,                 "[{'type':'boolean'}]", "$: a schema node is a JSON object") \
  X (missing_type_is_refused,               "{'value':1}", "$: \"type\" is one of const, boolean") \
  X (unknown_type_is_refused,               "{'type':'string'}", "$: \"type\" is one of") \
  X (type_differing_in_case_is_refused,     "{'type':'Boolean'}", "$: \"type\" is one of") \
  X (non_string_type_is_refused,            "{'type':1}", "$: \"type\" is one of") \
  X (nested_non_object_node_is_refused,     "{'type':'tuple','items':[{'type':'boolean'},3]}", "$.items[1]: a schema node is a JSON object") \
  /* Key sets, per node type.  */ \
  X (const_without_value_is_refused,        "{'type':'const'}", "$: a const node has \"type\" and \"value\", and \"value\" is missing") \
  X (const_with_extra_key_is_refused,       "{'type':'const','value':1,'note':1}", "$: a const node has \"type\" and \"value\", and \"note\" is not one") \
  X (boolean_with_extra_key_is_refused,     "{'type':'boolean','values':[true]}", "$: a boolean node has only \"type\", and \"values\" is not one") \
  X (enum_without_values_is_refused,        "{'type':'enum'}", "\"values\" is missing") \
  X (integer_without_maximum_is_refused,    "{'type':'integer','minimum':0}", "$: an integer node") \
  X (integer_with_extra_key_is_refused,     "{'type':'integer','minimum':0,'maximum':1,'step':1}", "\"step\" is not one") \
  X (object_without_fields_is_refused,      "{'type':'object'}", "\"fields\" is missing") \
  X (object_with_items_is_refused,          "{'type':'object','fields':{'a':{'type':'boolean'}},'items':[]}", "\"items\" is not one") \
  X (tuple_without_items_is_refused,        "{'type':'tuple'}", "\"items\" is missing") \
  X (array_without_length_is_refused,       "{'type':'array','items':{'type':'boolean'}}", "\"length\" is missing") \
  X (union_without_variants_is_refused,     "{'type':'union'}", "\"variants\" is missing") \
  X (union_with_fields_is_refused,          "{'type':'union','variants':{'a':{'type':'boolean'}},'fields':{}}", "\"fields\" is not one") \
  /* Literals.  */ \
  X (const_array_value_is_refused,          "{'type':'const','value':[1]}", "$.value: a literal is a string, a safe integer, a boolean or null") \
  X (const_object_value_is_refused,         "{'type':'const','value':{}}", "$.value: a literal is") \
  X (literal_of_65_bytes_is_refused,        "{'type':'const','value':'" "0123456789012345678901234567890123456789012345678901234567890123" "4'}", "$.value: a literal string is 65 bytes, more than 64") \
  X (literal_of_33_two_byte_chars_is_refused, "{'type':'enum','values':['" "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9" "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9" "']}", "$.values[0]: a literal string is 66 bytes") \
  X (literal_with_tab_is_refused,           "{'type':'const','value':'a\\tb'}", "$.value: a literal string holds the control or formatting character U+0009") \
  X (literal_with_escaped_bell_is_refused,  "{'type':'enum','values':['ok','\\u0007']}", "$.values[1]: a literal string holds the control or formatting character U+0007") \
  X (literal_with_delete_is_refused,        "{'type':'const','value':'\\u007f'}", "U+007F") \
  X (literal_with_c1_control_is_refused,    "{'type':'const','value':'\\u0085'}", "U+0085") \
  X (literal_with_bidi_override_is_refused, "{'type':'const','value':'a\xE2\x80\xAE'}", "U+202E") \
  X (literal_with_line_separator_is_refused, "{'type':'const','value':'\\u2028'}", "U+2028") \
  X (literal_integer_above_safe_is_refused, "{'type':'const','value':9007199254740992}", "$.value: a literal number is beyond +-(2^53 - 1)") \
  X (literal_integer_below_safe_is_refused, "{'type':'enum','values':[1,-9007199254740992]}", "$.values[1]: a literal number is beyond") \
  X (literal_float_is_refused,              "{'type':'const','value':1.5}", "$.value: a literal number is not an integer written canonically") \
  X (literal_integral_float_is_refused,     "{'type':'const','value':1.0}", "$.value: a literal number is not an integer written canonically") \
  X (literal_negative_zero_is_refused,      "{'type':'const','value':-0}", "$.value: a literal number is not an integer written canonically") \
  X (literal_exponent_is_refused,           "{'type':'const','value':1e2}", "not an integer written canonically") \
  /* Enums.  */ \
  X (enum_of_no_values_is_refused,          "{'type':'enum','values':[]}", "$.values: enum values are a non-empty array") \
  X (enum_values_not_an_array_is_refused,   "{'type':'enum','values':'a'}", "$.values: enum values are a non-empty array") \
  X (enum_of_mixed_types_is_refused,        "{'type':'enum','values':['a',1]}", "$.values[1]: an integer, where the first enum value is a string") \
  X (enum_literals_are_checked_before_their_type, "{'type':'enum','values':['a',1,{}]}", "$.values[2]: a literal is") \
  X (enum_of_boolean_and_null_is_refused,   "{'type':'enum','values':[true,null]}", "$.values[1]: null, where the first enum value is a boolean") \
  X (enum_with_repeated_value_is_refused,   "{'type':'enum','values':['a','b','a']}", "$.values[2]: the same enum value as $.values[0]") \
  X (enum_repeated_through_escape_is_refused, "{'type':'enum','values':['a','\\u0061']}", "$.values[1]: the same enum value as $.values[0]") \
  X (enum_repeated_integer_is_refused,      "{'type':'enum','values':[3,4,3]}", "$.values[2]: the same enum value") \
  /* Integers.  */ \
  X (maximum_below_minimum_is_refused,      "{'type':'integer','minimum':2,'maximum':1}", "$.maximum: the maximum is below the minimum") \
  X (minimum_above_safe_is_refused,         "{'type':'integer','minimum':-9007199254740992,'maximum':1}", "$.minimum: the minimum is beyond +-(2^53 - 1)") \
  X (maximum_above_safe_is_refused,         "{'type':'integer','minimum':0,'maximum':99999999999999999999}", "$.maximum: the maximum is beyond") \
  X (minimum_as_string_is_refused,          "{'type':'integer','minimum':'0','maximum':1}", "$.minimum: the minimum is not an integer") \
  X (maximum_as_float_is_refused,           "{'type':'integer','minimum':0,'maximum':1.0}", "$.maximum: the maximum is not an integer written canonically") \
  /* Objects and unions.  */ \
  X (object_of_no_fields_is_refused,        "{'type':'object','fields':{}}", "$.fields: no fields; at least one is needed") \
  X (object_fields_as_array_is_refused,     "{'type':'object','fields':[{'type':'boolean'}]}", "$.fields: not an object of fields") \
  X (field_name_with_digit_first_is_refused, "{'type':'object','fields':{'1a':{'type':'boolean'}}}", "$.fields: the field \"1a\" is not an identifier") \
  X (field_name_with_dash_is_refused,       "{'type':'object','fields':{'a-b':{'type':'boolean'}}}", "the field \"a-b\" is not an identifier") \
  X (empty_field_name_is_refused,           "{'type':'object','fields':{'':{'type':'boolean'}}}", "the field \"\" is not an identifier") \
  X (field_name_of_65_bytes_is_refused,     "{'type':'object','fields':{'a1234567890123456789012345678901234567890123456789012345678901234':{'type':'boolean'}}}", "is not an identifier") \
  X (non_ascii_field_name_is_refused,       "{'type':'object','fields':{'caf\xC3\xA9':{'type':'boolean'}}}", "the field \"caf\\u00E9\" is not an identifier") \
  X (union_of_no_variants_is_refused,       "{'type':'union','variants':{}}", "$.variants: no variants") \
  X (union_variants_as_array_is_refused,    "{'type':'union','variants':[]}", "$.variants: not an object of variants") \
  X (union_tag_with_space_is_refused,       "{'type':'union','variants':{'a b':{'type':'boolean'}}}", "$.variants: the variant \"a b\" is not an identifier") \
  X (bad_node_under_field_names_its_path,   "{'type':'object','fields':{'count':{'type':'integer','minimum':0}}}", "$.fields.count: an integer node") \
  X (bad_node_under_variant_names_its_path, "{'type':'union','variants':{'ok':{'type':'object','fields':{'n':{'type':'enum','values':[]}}}}}", "$.variants.ok.fields.n.values: enum values are a non-empty array") \
  /* Tuples and arrays.  */ \
  X (tuple_of_no_items_is_refused,          "{'type':'tuple','items':[]}", "$.items: tuple items are a non-empty array") \
  X (tuple_items_as_object_is_refused,      "{'type':'tuple','items':{'type':'boolean'}}", "$.items: tuple items are a non-empty array") \
  X (array_length_65_is_refused,            "{'type':'array','length':65,'items':{'type':'boolean'}}", "$.length: the length is not within 0..64") \
  X (negative_array_length_is_refused,      "{'type':'array','length':-1,'items':{'type':'boolean'}}", "$.length: the length is not within 0..64") \
  X (float_array_length_is_refused,         "{'type':'array','length':2.0,'items':{'type':'boolean'}}", "$.length: the length is not an integer written canonically") \
  X (array_items_as_list_is_refused,        "{'type':'array','length':1,'items':[{'type':'boolean'}]}", "$.items: a schema node is a JSON object") \
  X (bad_node_under_array_names_its_path,   "{'type':'array','length':2,'items':{'type':'tuple','items':[{'type':'boolean'},{'type':'nope'}]}}", "$.items.items[1]: \"type\" is one of") \
  /* JSON itself.  */ \
  X (duplicate_key_in_schema_is_refused,    "{'type':'boolean','type':'boolean'}", "duplicate key \"type\"") \
  X (duplicate_field_is_refused,            "{'type':'object','fields':{'a':{'type':'boolean'},'a':{'type':'boolean'}}}", "duplicate key \"a\"") \
  X (trailing_data_in_schema_is_refused,    "{'type':'boolean'} x", "answer schema") \
  X (comment_in_schema_is_refused,          "{'type':'boolean'} // note", "answer schema") \
  X (truncated_schema_is_refused,           "{'type':'boolean'", "answer schema")
// clang-format on

#define REFUSE_TEST(name, schema, fragment)                                                                  \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    schema_refused_q (schema, fragment);                                                                     \
  }                                                                                                          \
  END_TEST
REFUSE_TABLE (REFUSE_TEST)
#undef REFUSE_TEST

/* Bounds, each at its edge and one past it.  */

static char *
nested_arrays (int levels)
{
  struct str b = { 0 };

  for (int i = 0; i < levels; i++)
    str_puts (&b, "{'type':'array','length':1,'items':");
  str_puts (&b, "{'type':'boolean'}");
  for (int i = 0; i < levels; i++)
    str_puts (&b, "}");
  return str_take (&b);
}

START_TEST (schema_six_levels_deep_is_accepted)
{
  cleanup_free char *q = nested_arrays (SP_ANSWER_SCHEMA_MAX_DEPTH);
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (q);

  ck_assert_uint_eq (sp_answer_schema_content_bits (s), 2);
}
END_TEST

START_TEST (schema_seven_levels_deep_is_refused)
{
  cleanup_free char *q = nested_arrays (SP_ANSWER_SCHEMA_MAX_DEPTH + 1);

  schema_refused_q (q, "$.items.items.items.items.items.items.items: deeper than 6 levels below the root");
}
END_TEST

START_TEST (schema_seven_object_levels_deep_is_refused)
{
  struct str b = { 0 };
  cleanup_free char *q = NULL;

  for (int i = 0; i < 7; i++)
    str_puts (&b, "{'type':'object','fields':{'f':");
  str_puts (&b, "{'type':'boolean'}");
  for (int i = 0; i < 7; i++)
    str_puts (&b, "}}");
  q = str_take (&b);
  schema_refused_q (q,
                    "$.fields.f.fields.f.fields.f.fields.f.fields.f.fields.f.fields.f: deeper than 6 levels");
}
END_TEST

/* A tuple of k items, each a tuple of 3 booleans: 1 + 4k nodes.  */
static char *
tuple_of_tuples (int k, int inner)
{
  struct str b = { 0 };

  str_puts (&b, "{'type':'tuple','items':[");
  for (int i = 0; i < k; i++)
    {
      str_puts (&b, i ? ",{'type':'tuple','items':[" : "{'type':'tuple','items':[");
      for (int j = 0; j < inner; j++)
        str_puts (&b, j ? ",{'type':'boolean'}" : "{'type':'boolean'}");
      str_puts (&b, "]}");
    }
  str_puts (&b, "]}");
  return str_take (&b);
}

START_TEST (schema_of_64_nodes_is_accepted)
{
  /* 1 + 9 * 7 = 64.  */
  cleanup_free char *q = tuple_of_tuples (9, 6);
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (q);

  ck_assert_uint_eq (sp_answer_schema_content_bits (s), 55); /* 2^54 values */
}
END_TEST

START_TEST (schema_of_65_nodes_is_refused)
{
  /* 1 + 16 * 4 = 65: the 65th is the last boolean.  */
  cleanup_free char *q = tuple_of_tuples (16, 3);

  schema_refused_q (q, "$.items[15].items[2]: more than 64 nodes");
}
END_TEST

static char *
object_of (const char *type, const char *key, int fields)
{
  struct str b = { 0 };
  char name[16];

  str_puts (&b, "{'type':'");
  str_puts (&b, type);
  str_puts (&b, "','");
  str_puts (&b, key);
  str_puts (&b, "':{");
  for (int i = 0; i < fields; i++)
    {
      snprintf (name, sizeof name, "%s'f%d':", i ? "," : "", i);
      str_puts (&b, name);
      str_puts (&b, "{'type':'boolean'}");
    }
  str_puts (&b, "}}");
  return str_take (&b);
}

START_TEST (object_of_16_fields_is_accepted_and_17_refused)
{
  cleanup_free char *ok = object_of ("object", "fields", SP_ANSWER_SCHEMA_MAX_FIELDS);
  cleanup_free char *bad = object_of ("object", "fields", SP_ANSWER_SCHEMA_MAX_FIELDS + 1);
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (ok);

  ck_assert_uint_eq (sp_answer_schema_content_bits (s), 17);
  schema_refused_q (bad, "$.fields: 17 fields, more than 16");
}
END_TEST

START_TEST (union_of_16_variants_is_accepted_and_17_refused)
{
  cleanup_free char *ok = object_of ("union", "variants", SP_ANSWER_SCHEMA_MAX_VARIANTS);
  cleanup_free char *bad = object_of ("union", "variants", SP_ANSWER_SCHEMA_MAX_VARIANTS + 1);
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (ok);

  ck_assert_uint_eq (sp_answer_schema_content_bits (s), 6); /* 32 */
  schema_refused_q (bad, "$.variants: 17 variants, more than 16");
}
END_TEST

START_TEST (tuple_of_16_items_is_accepted_and_17_refused)
{
  cleanup_free char *ok = tuple_of_tuples (SP_ANSWER_SCHEMA_MAX_ITEMS, 1);
  cleanup_free char *bad = tuple_of_tuples (SP_ANSWER_SCHEMA_MAX_ITEMS + 1, 1);
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (ok);

  ck_assert_uint_eq (sp_answer_schema_content_bits (s), 17);
  schema_refused_q (bad, "$.items: 17 tuple items, more than 16");
}
END_TEST

START_TEST (array_of_length_64_is_accepted)
{
  cleanup_answer_schema struct sp_answer_schema *s
      = parse_ok_q ("{'type':'array','length':64,'items':{'type':'boolean'}}");

  ck_assert_uint_eq (sp_answer_schema_content_bits (s), 65);
  ck_assert_uint_eq (sp_answer_schema_firewall_bits (s), 64);
}
END_TEST

START_TEST (literal_of_64_bytes_and_identifier_of_64_are_accepted)
{
  cleanup_answer_schema struct sp_answer_schema *s = parse_ok_q (
      "{'type':'object','fields':{'a123456789012345678901234567890123456789012345678901234567890123':"
      "{'type':'const','value':'0123456789012345678901234567890123456789012345678901234567890123'}}}");

  ck_assert_uint_eq (sp_answer_schema_content_bits (s), 1);
}
END_TEST

START_TEST (schema_of_exactly_4096_bytes_is_accepted_and_4097_refused)
{
  static const char base[] = "{\"type\":\"boolean\"}";
  char text[SP_ANSWER_SCHEMA_MAX_BYTES + 1];
  struct sp_answer_schema *s = NULL;
  sp_error_t err = NULL;

  memset (text, ' ', sizeof text);
  memcpy (text, base, sizeof base - 1);
  ck_assert_int_eq (sp_answer_schema_parse (text, SP_ANSWER_SCHEMA_MAX_BYTES, &s, &err), 0);
  sp_answer_schema_free (s);
  schema_refused (text, SP_ANSWER_SCHEMA_MAX_BYTES + 1, "answer schema: 4097 bytes, more than 4096");
}
END_TEST

START_TEST (schema_length_is_checked_before_the_buffer_is_read)
{
  schema_refused (NULL, SP_ANSWER_SCHEMA_MAX_BYTES + 1, "4097 bytes");
  schema_refused (NULL, 0, "answer schema: empty");
  schema_refused ("", 0, "answer schema: empty");
}
END_TEST

/* The enum bound (4,096 values) cannot be reached within 4,096 bytes: the
   shortest distinct values take two bytes each after the first ten.  The
   largest enum that fits is counted exactly, and its neighbour is refused by
   the byte bound, not by a miscount.  */
START_TEST (enum_bound_is_below_the_byte_bound)
{
  struct str b = { 0 };
  cleanup_free char *text = NULL;
  cleanup_free char *n = NULL;
  cleanup_answer_schema struct sp_answer_schema *s = NULL;
  char num[16];
  int count = 0;

  str_puts (&b, "{\"type\":\"enum\",\"values\":[");
  while (b.len + 10 < SP_ANSWER_SCHEMA_MAX_BYTES)
    {
      snprintf (num, sizeof num, "%s%d", count ? "," : "", count);
      str_puts (&b, num);
      count++;
    }
  str_puts (&b, "]}");
  text = str_take (&b);
  s = parse_ok (text);
  n = cardinality_text (s);
  snprintf (num, sizeof num, "%d", count);
  ck_assert_str_eq (n, num);
  ck_assert_int_lt (count, SP_ANSWER_SCHEMA_MAX_ENUM_VALUES);
}
END_TEST

START_TEST (error_names_keys_but_never_string_values)
{
  schema_refused_q ("{'type':'const','value':'SECRET\\u0001'}", "$.value");
  {
    cleanup_free char *q = dq ("{'type':'const','value':'SECRET\\u0001'}");
    SP_CHECK_PARSE_REFUSED (sp_answer_schema_parse, struct sp_answer_schema, q, strlen (q), "U+0001",
                            "SECRET");
  }
}
END_TEST

/* ---- the three outcomes -------------------------------------------------- */

#define OUTCOME(s)                                                                                           \
  {                                                                                                          \
    (const uint8_t *)(s), sizeof (s) - 1                                                                     \
  }

/* The firewall's own vectors (its snapshot f5509576): its MCP tests call
   with the schema {"type":"boolean"} and a script answering `true`
   (src/enclave/mcp-server.test.ts), and its ledger test spends a
   confidential repository's 8 bits in two calls of 4, its least charge
   (1 status bit, ceil(log2 N) = 0 for a const, 3 timing bits), refusing
   a third (src/enclave/information-budget.test.ts).  */
START_TEST (firewall_vectors_agree)
{
  cleanup_answer_schema struct sp_answer_schema *boolean = parse_ok_q ("{'type':'boolean'}");
  cleanup_answer_schema struct sp_answer_schema *one = parse_ok_q ("{'type':'const','value':'done'}");
  cleanup_free char *answer = validate_ok (boolean, "true", 4);

  ck_assert_str_eq (answer, "true");
  /* The firewall charges 1 + 1 + 3 = 5 for the boolean; we charge
     ceil(log2 3) = 2 content bits, plus the release mode's timing bits.  */
  ck_assert_uint_eq (sp_answer_schema_firewall_bits (boolean), 1);
  ck_assert_uint_eq (sp_answer_schema_content_bits (boolean), 2);
  /* Its least call, a const: 0 + its status bit there, 1 here.  */
  ck_assert_uint_eq (sp_answer_schema_firewall_bits (one), 0);
  ck_assert_uint_eq (sp_answer_schema_content_bits (one), 1);
  ck_assert_uint_eq (1 + sp_answer_schema_firewall_bits (one) + 3, 4);
}
END_TEST

START_TEST (three_outcomes_are_an_enum_of_two_content_bits)
{
  static const struct sp_bytes outcomes[SP_OUTCOME_COUNT]
      = { OUTCOME ("YES"), OUTCOME ("NO"), OUTCOME ("a\"b") };
  cleanup_answer_schema struct sp_answer_schema *s = NULL;
  cleanup_answer_schema struct sp_answer_schema *same
      = parse_ok_q ("{'type':'enum','values':['YES','NO','a\\'b']}");
  cleanup_free char *n = NULL;
  sp_error_t err = NULL;
  char *canonical = NULL;
  size_t clen;

  ck_assert_int_eq (sp_answer_schema_from_outcomes (outcomes, &s, &err), 0);
  n = cardinality_text (s);
  ck_assert_str_eq (n, "3");
  /* Today's charge: 2 bits for three outcomes and ERROR.  */
  ck_assert_uint_eq (sp_answer_schema_content_bits (s), 2);
  ck_assert_uint_eq (sp_answer_schema_firewall_bits (s), 2);
  ck_assert_int_eq (sp_bignum_cmp (sp_answer_schema_cardinality (s), sp_answer_schema_cardinality (same)), 0);
  for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
    {
      cleanup_free char *mine = NULL;
      cleanup_free char *theirs = NULL;
      char text[80];

      snprintf (text, sizeof text, "\"%s\"", i == 2 ? "a\\\"b" : (const char *)outcomes[i].data);
      mine = validate_ok (s, text, strlen (text));
      theirs = validate_ok (same, text, strlen (text));
      ck_assert_str_eq (mine, theirs);
      ck_assert_str_eq (mine, text);
    }
  ck_assert_int_eq (sp_answer_schema_validate (s, "\"ERROR\"", 7, &canonical, &clen, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (sp_answer_schema_validate (s, "{\"result\":\"YES\"}", 16, &canonical, &clen, &err), -1);
  sp_error_release (&err);
}
END_TEST

static void
outcomes_refused (const struct sp_bytes outcomes[SP_OUTCOME_COUNT], const char *fragment)
{
  struct sp_answer_schema *schema = (struct sp_answer_schema *)1;
  sp_error_t err = NULL;
  int ret = sp_answer_schema_from_outcomes (outcomes, &schema, &err);

  sp_check_refused (ret, schema, &err, fragment, NULL);
}

START_TEST (invalid_outcomes_give_no_schema)
{
  static const struct sp_bytes dup[SP_OUTCOME_COUNT] = { OUTCOME ("YES"), OUTCOME ("YES"), OUTCOME ("NO") };
  static const struct sp_bytes reserved[SP_OUTCOME_COUNT]
      = { OUTCOME ("YES"), OUTCOME ("NO"), OUTCOME ("ERROR") };
  static const struct sp_bytes ctrl[SP_OUTCOME_COUNT] = { OUTCOME ("A\tB"), OUTCOME ("YES"), OUTCOME ("NO") };

  outcomes_refused (dup, "answer schema: outcome 2: same as outcome 1");
  outcomes_refused (reserved, "answer schema: outcome 3: the answer reserved for failures");
  outcomes_refused (ctrl, "answer schema: outcome 1: control or formatting character U+0009");
  outcomes_refused (NULL, "answer schema: no outcomes");
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_answer_schema");
  TCase *card = tcase_create ("cardinality");
  TCase *prop = tcase_create ("property");
  TCase *near = tcase_create ("output");
  TCase *refuse = tcase_create ("schema");
  TCase *outcomes = tcase_create ("outcomes");

#define ROW_ADD(name, ...) tcase_add_test (card, name);
  CARD_TABLE (ROW_ADD)
#undef ROW_ADD
  tcase_add_test (card, one_past_2_to_1024_is_refused);
  tcase_add_test (card, far_above_the_cap_is_refused_without_overflow);
  tcase_add_test (card, bignum_multiplication_reports_overflow);
  suite_add_tcase (s, card);

  tcase_set_timeout (prop, 120);
  tcase_add_test (prop, every_value_of_random_small_schemas_validates_canonically);
  suite_add_tcase (s, prop);

  tcase_add_test (near, near_miss_base_output_is_accepted);
#define ROW_ADD(name, ...) tcase_add_test (near, name);
  NEAR_TABLE (ROW_ADD)
#undef ROW_ADD
  tcase_add_test (near, single_quoted_string_is_refused);
  tcase_add_test (near, output_of_exactly_8192_bytes_is_accepted);
  tcase_add_test (near, output_of_8193_bytes_is_refused);
  tcase_add_test (near, output_length_is_checked_before_the_buffer_is_read);
  tcase_add_test (near, output_with_embedded_nul_is_refused);
  tcase_add_test (near, canonical_form_of_each_scalar_kind);
  tcase_add_test (near, envelope_holds_the_value_and_gives_it_alone_canonically);
  tcase_add_test (near, envelope_near_misses_are_refused);
  tcase_add_test (near, envelope_of_8193_bytes_is_refused_before_it_is_read);
  suite_add_tcase (s, near);

#define ROW_ADD(name, ...) tcase_add_test (refuse, name);
  REFUSE_TABLE (ROW_ADD)
#undef ROW_ADD
  tcase_add_test (refuse, schema_six_levels_deep_is_accepted);
  tcase_add_test (refuse, schema_seven_levels_deep_is_refused);
  tcase_add_test (refuse, schema_seven_object_levels_deep_is_refused);
  tcase_add_test (refuse, schema_of_64_nodes_is_accepted);
  tcase_add_test (refuse, schema_of_65_nodes_is_refused);
  tcase_add_test (refuse, object_of_16_fields_is_accepted_and_17_refused);
  tcase_add_test (refuse, union_of_16_variants_is_accepted_and_17_refused);
  tcase_add_test (refuse, tuple_of_16_items_is_accepted_and_17_refused);
  tcase_add_test (refuse, array_of_length_64_is_accepted);
  tcase_add_test (refuse, literal_of_64_bytes_and_identifier_of_64_are_accepted);
  tcase_add_test (refuse, schema_of_exactly_4096_bytes_is_accepted_and_4097_refused);
  tcase_add_test (refuse, schema_length_is_checked_before_the_buffer_is_read);
  tcase_add_test (refuse, enum_bound_is_below_the_byte_bound);
  tcase_add_test (refuse, error_names_keys_but_never_string_values);
  suite_add_tcase (s, refuse);

  tcase_add_test (outcomes, three_outcomes_are_an_enum_of_two_content_bits);
  tcase_add_test (outcomes, invalid_outcomes_give_no_schema);
  tcase_add_test (outcomes, firewall_vectors_agree);
  suite_add_tcase (s, outcomes);
  return s;
}

SP_CHECK_MAIN (make_suite)
