/* libFuzzer harness for sp_result_validate.  Each input is validated against
   three fixed outcome sets, and every verdict is checked against invariants:
   - the index is -1 or 1..SP_OUTCOME_COUNT, with a reason exactly when -1;
   - an accepted input is at most SP_RESULT_MAX_BYTES;
   - the canonical render of an accepted outcome validates to the same index;
   - an independent, hand-rolled reader of the one accepted form agrees with
     the yajl-based validator, both ways.  */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/answer.h"
#include "base/bounds.h"
#include "base/bytes.h"
#include "base/error.h"
#include "base/utf8.h"
#include "text/result.h"

#include "fuzz.h"

#define OUTCOME(s)                                                                                           \
  {                                                                                                          \
    (const uint8_t *)(s), sizeof (s) - 1                                                                     \
  }

static const struct sp_bytes outcome_sets[][SP_OUTCOME_COUNT] = {
  { OUTCOME ("YES"), OUTCOME ("NO"), OUTCOME ("MAYBE") },
  /* U+1F600 (a surrogate pair when escaped), and the two bytes JSON escapes.  */
  { OUTCOME ("\xF0\x9F\x98\x80"), OUTCOME ("a\"b"), OUTCOME ("c\\d") },
  /* "café" in NFC and in NFD, and a solidus (which may be written \/).  */
  { OUTCOME ("caf\xC3\xA9"), OUTCOME ("cafe\xCC\x81"), OUTCOME ("/") },
};

/* The reference reader: a straight-line recognizer of
   ws '{' ws "result" ws ':' ws "<value>" ws '}' ws, written without yajl or
   the pre-pass, so that the two can disagree.  */
struct reader
{
  const uint8_t *s;
  size_t len;
  size_t pos;
};

static void
skip_ws (struct reader *r)
{
  while (r->pos < r->len
         && (r->s[r->pos] == ' ' || r->s[r->pos] == '\t' || r->s[r->pos] == '\n' || r->s[r->pos] == '\r'))
    r->pos++;
}

static int
hex4 (struct reader *r, uint32_t *unit)
{
  uint32_t v = 0;

  if (r->len - r->pos < 4)
    return -1;
  for (int k = 0; k < 4; k++)
    {
      uint8_t c = r->s[r->pos++];

      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= (uint32_t)(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= (uint32_t)(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= (uint32_t)(c - 'A' + 10);
      else
        return -1;
    }
  *unit = v;
  return 0;
}

static size_t
put_utf8 (uint8_t *out, uint32_t cp)
{
  if (cp < 0x80)
    {
      out[0] = (uint8_t)cp;
      return 1;
    }
  if (cp < 0x800)
    {
      out[0] = (uint8_t)(0xC0 | (cp >> 6));
      out[1] = (uint8_t)(0x80 | (cp & 0x3F));
      return 2;
    }
  if (cp < 0x10000)
    {
      out[0] = (uint8_t)(0xE0 | (cp >> 12));
      out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
      out[2] = (uint8_t)(0x80 | (cp & 0x3F));
      return 3;
    }
  out[0] = (uint8_t)(0xF0 | (cp >> 18));
  out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

/* Decodes one string at r->pos (the opening quote) into out, which has room
   for r->len bytes: decoding never grows a string.  */
static int
read_string (struct reader *r, uint8_t *out, size_t *out_len)
{
  size_t n = 0;

  if (r->pos >= r->len || r->s[r->pos] != '"')
    return -1;
  r->pos++;
  while (r->pos < r->len)
    {
      uint8_t c = r->s[r->pos];
      uint32_t cp, low;
      size_t used;

      if (c == '"')
        {
          r->pos++;
          *out_len = n;
          return 0;
        }
      if (c < 0x20)
        return -1;
      if (c >= 0x80)
        {
          used = sp_utf8_decode (r->s + r->pos, r->len - r->pos, &cp);
          if (used == 0)
            return -1;
          memcpy (out + n, r->s + r->pos, used);
          n += used;
          r->pos += used;
          continue;
        }
      r->pos++;
      if (c != '\\')
        {
          out[n++] = c;
          continue;
        }
      if (r->pos >= r->len)
        return -1;
      c = r->s[r->pos++];
      switch (c)
        {
        case '"':
        case '\\':
        case '/':
          out[n++] = c;
          continue;
        case 'b':
          out[n++] = '\b';
          continue;
        case 'f':
          out[n++] = '\f';
          continue;
        case 'n':
          out[n++] = '\n';
          continue;
        case 'r':
          out[n++] = '\r';
          continue;
        case 't':
          out[n++] = '\t';
          continue;
        case 'u':
          break;
        default:
          return -1;
        }
      if (hex4 (r, &cp) < 0 || cp == 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
        return -1;
      if (cp >= 0xD800 && cp <= 0xDBFF)
        {
          if (r->len - r->pos < 2 || r->s[r->pos] != '\\' || r->s[r->pos + 1] != 'u')
            return -1;
          r->pos += 2;
          if (hex4 (r, &low) < 0 || low < 0xDC00 || low > 0xDFFF)
            return -1;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
      n += put_utf8 (out + n, cp);
    }
  return -1;
}

static int
expect (struct reader *r, uint8_t c)
{
  skip_ws (r);
  if (r->pos >= r->len || r->s[r->pos] != c)
    return -1;
  r->pos++;
  return 0;
}

/* Returns the index the reference reader gives, or -1.  */
static int
reference_validate (const uint8_t *data, size_t size, const struct sp_bytes outcomes[SP_OUTCOME_COUNT])
{
  uint8_t key[SP_RESULT_MAX_BYTES], value[SP_RESULT_MAX_BYTES];
  size_t key_len, value_len;
  struct reader r = { data, size, 0 };
  int match = -1;

  if (size == 0 || size > SP_RESULT_MAX_BYTES)
    return -1;
  if (expect (&r, '{') < 0)
    return -1;
  skip_ws (&r);
  if (read_string (&r, key, &key_len) < 0)
    return -1;
  if (expect (&r, ':') < 0)
    return -1;
  skip_ws (&r);
  if (read_string (&r, value, &value_len) < 0)
    return -1;
  if (expect (&r, '}') < 0)
    return -1;
  skip_ws (&r);
  if (r.pos != r.len)
    return -1;
  if (key_len != 6 || memcmp (key, "result", 6) != 0)
    return -1;
  for (int i = 0; i < SP_OUTCOME_COUNT; i++)
    if (value_len == outcomes[i].len && memcmp (value, outcomes[i].data, value_len) == 0)
      {
        if (match > 0)
          return -1;
        match = i + 1;
      }
  return match;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  for (size_t s = 0; s < sizeof (outcome_sets) / sizeof (outcome_sets[0]); s++)
    {
      const struct sp_bytes *outcomes = outcome_sets[s];
      sp_error_t err = NULL;
      int got = sp_result_validate ((const char *)data, size, outcomes, &err);

      FUZZ_REQUIRE (got == -1 || (got >= 1 && got <= SP_OUTCOME_COUNT));
      FUZZ_REQUIRE ((got < 0) == (err != NULL));
      if (err)
        FUZZ_REQUIRE (sp_error_message (err)[0] != '\0');
      sp_error_release (&err);

      FUZZ_REQUIRE (reference_validate (data, size, outcomes) == got);

      if (got > 0)
        {
          char canonical[SP_ANSWER_MAX_BYTES];
          ssize_t n;

          FUZZ_REQUIRE (size > 0 && size <= SP_RESULT_MAX_BYTES);
          n = sp_answer_render (&outcomes[got - 1], canonical, sizeof (canonical));
          FUZZ_REQUIRE (n > 0);
          FUZZ_REQUIRE (sp_result_validate (canonical, (size_t)n, outcomes, &err) == got);
          FUZZ_REQUIRE (err == NULL);
        }
    }
  return 0;
}
