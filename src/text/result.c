/* Strict /probe/out validation: see src/text/result.h and
   docs/result-contract.md.  */
#include "text/result.h"

#include <stdint.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/outcome.h"
#include "text/json_text.h"
#include "text/yajl_util.h"

#define RESULT_KEY "result"

/* The only path through the document: { "result" : "<outcome>" }.  Every
   other event, in any state, cancels the parse.  */
enum result_state
{
  EXPECT_OPEN,  /* nothing seen yet; the root must be an object */
  EXPECT_KEY,   /* after '{'; the one key must come now */
  EXPECT_VALUE, /* after the key; a string must come now */
  EXPECT_CLOSE, /* after the value; only '}' may come */
  DONE,         /* the root object closed; nothing else may come */
};

struct result_ctx
{
  enum result_state state;
  const struct sp_bytes *outcomes;
  int index;          /* 1-based match, set on the value */
  const char *reason; /* why a callback cancelled; static text */
};

static int
reject (struct result_ctx *ctx, const char *reason)
{
  if (ctx->reason == NULL)
    ctx->reason = reason;
  return 0;
}

/* Any scalar other than a string is wrong wherever it appears.  */
static int
scalar_rejected (struct result_ctx *ctx)
{
  switch (ctx->state)
    {
    case EXPECT_OPEN:
      return reject (ctx, "root is not an object");
    case EXPECT_VALUE:
      return reject (ctx, "value of \"result\" is not a string");
    case EXPECT_KEY:
    case EXPECT_CLOSE:
    case DONE:
    default:
      return reject (ctx, "unexpected value");
    }
}

static int
on_null (void *ctx)
{
  return scalar_rejected (ctx);
}

static int
on_boolean (void *ctx, int value)
{
  return scalar_rejected (ctx);
}

static int
on_integer (void *ctx, long long value)
{
  return scalar_rejected (ctx);
}

static int
on_double (void *ctx, double value)
{
  return scalar_rejected (ctx);
}

static int
on_number (void *ctx, const char *text, size_t len)
{
  return scalar_rejected (ctx);
}

static int
on_string (void *opaque, const unsigned char *s, size_t len)
{
  struct result_ctx *ctx = opaque;
  struct sp_bytes value = { s, len };
  int match = -1;

  if (ctx->state != EXPECT_VALUE)
    return scalar_rejected (ctx);

  /* Exactly one: duplicated outcomes must not make an answer ambiguous.  */
  for (int i = 0; i < SP_OUTCOME_COUNT; i++)
    {
      if (!sp_bytes_equal (value, ctx->outcomes[i]))
        continue;
      if (match >= 0)
        return reject (ctx, "value matches more than one outcome");
      match = i;
    }
  if (match < 0)
    return reject (ctx, "value matches no outcome");
  ctx->index = match + 1;
  ctx->state = EXPECT_CLOSE;
  return 1;
}

static int
on_start_map (void *opaque)
{
  struct result_ctx *ctx = opaque;

  if (ctx->state == EXPECT_OPEN)
    {
      ctx->state = EXPECT_KEY;
      return 1;
    }
  if (ctx->state == EXPECT_VALUE)
    return reject (ctx, "value of \"result\" is not a string");
  return reject (ctx, "unexpected object");
}

static int
on_map_key (void *opaque, const unsigned char *key, size_t len)
{
  struct result_ctx *ctx = opaque;

  /* yajl hands over the decoded key, so "r\u0065sult" arrives as "result":
     an escaped duplicate is caught here like a plain one.  */
  if (ctx->state == EXPECT_CLOSE)
    return reject (ctx, "more than one key");
  if (ctx->state != EXPECT_KEY)
    return reject (ctx, "unexpected key");
  if (len != sizeof (RESULT_KEY) - 1 || memcmp (key, RESULT_KEY, len) != 0)
    return reject (ctx, "key is not \"result\"");
  ctx->state = EXPECT_VALUE;
  return 1;
}

static int
on_end_map (void *opaque)
{
  struct result_ctx *ctx = opaque;

  if (ctx->state == EXPECT_CLOSE)
    {
      ctx->state = DONE;
      return 1;
    }
  if (ctx->state == EXPECT_KEY)
    return reject (ctx, "object has no \"result\" key");
  return reject (ctx, "unexpected end of object");
}

static int
on_start_array (void *opaque)
{
  struct result_ctx *ctx = opaque;

  if (ctx->state == EXPECT_OPEN)
    return reject (ctx, "root is not an object");
  if (ctx->state == EXPECT_VALUE)
    return reject (ctx, "value of \"result\" is not a string");
  return reject (ctx, "unexpected array");
}

static int
on_end_array (void *opaque)
{
  return reject (opaque, "unexpected end of array");
}

int
sp_result_validate (const char *buf, size_t len, const struct sp_bytes outcomes[SP_OUTCOME_COUNT],
                    sp_error_t *err)
{
  /* Locals, not statics: the module keeps no global state.  Every callback is
     set, because yajl silently accepts events whose callback is NULL.  */
  const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_integer = on_integer,
    .yajl_double = on_double,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
  };
  struct result_ctx ctx = { .state = EXPECT_OPEN, .outcomes = outcomes, .index = -1, .reason = NULL };
  cleanup_yajl yajl_handle handle = NULL;
  yajl_status parsed, completed;
  size_t consumed;

  /* The cap comes first, so that an oversized file costs nothing more.  */
  if (len > SP_RESULT_MAX_BYTES)
    return sp_make_error (err, 0, "result is %zu bytes, more than %d", len, SP_RESULT_MAX_BYTES);
  if (len == 0 || buf == NULL)
    return sp_make_error (err, 0, "result is empty");
  /* Outcomes come from a validated request, but a wrong set here would make
     the answer ambiguous or let "ERROR" pass as a verdict: never trust it.  */
  if (outcomes == NULL)
    return sp_make_error (err, 0, "result: no outcomes");
  if (sp_outcomes_check (outcomes, err) < 0)
    return sp_error_wrap (err, "result");

  /* yajl alone lets \u0000, lone surrogates, overlong UTF-8 and \v through.  */
  if (sp_json_text_check (buf, len, SP_RESULT_MAX_DEPTH, err) < 0)
    return sp_error_wrap (err, "result");

  handle = sp_yajl_strict_alloc (&callbacks, &ctx);
  if (handle == NULL)
    return sp_make_error (err, 0, "result: cannot allocate the JSON parser");

  parsed = yajl_parse (handle, (const unsigned char *)buf, len);
  consumed = yajl_get_bytes_consumed (handle);
  /* Always finish: a document that stops mid-value is only reported here.  */
  completed = yajl_complete_parse (handle);

  if (ctx.reason != NULL)
    return sp_make_error (err, 0, "result: %s (near byte %zu)", ctx.reason, consumed);
  if (parsed != yajl_status_ok || completed != yajl_status_ok)
    {
      cleanup_free char *msg = sp_yajl_error_line (handle);
      return sp_make_error (err, 0, "result: invalid JSON near byte %zu: %s", consumed,
                            msg ? msg : "parse error");
    }
  /* Belt and braces: yajl said ok, so the state machine must have closed.  */
  if (ctx.state != DONE || ctx.index < 1 || ctx.index > SP_OUTCOME_COUNT)
    return sp_make_error (err, 0, "result: incomplete document");
  return ctx.index;
}
