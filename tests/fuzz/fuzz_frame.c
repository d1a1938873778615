/* libFuzzer harness for the wire protocol (docs/protocol.md).  Whatever the
   bytes, decoding must not crash or read out of bounds; a frame it accepts
   must re-encode to exactly the same bytes, and validation must stand on
   its fields.  Requests of either version (v1's outcomes, v2's schema);
   the response decoders of both versions, the client's check of a v2
   answer, the handshake's two decoders and the outcome rules get a prefix
   of the same input.  */
#include <stdlib.h>
#include <string.h>

#include "base/answer.h"
#include "base/cleanup.h"
#include "base/outcome.h"
#include "base/protocol.h"
#include "base/request.h"
#include "base/utf8.h"

#include "fuzz.h"

static char *const allowlist[] = { "acme/widgets", "octo/hello-world" };

static bool
inside (struct sp_bytes b, const uint8_t *data, size_t size)
{
  return b.data >= data && b.len <= size && (size_t)(b.data - data) <= size - b.len;
}

static void
fuzz_request (const uint8_t *data, size_t size)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_request req;
  uint8_t *again;
  size_t len = 0;

  if (sp_request_decode (data, size, &req, &err) < 0)
    {
      if (err == NULL)
        abort ();
      return;
    }
  if (!inside (req.repo, data, size) || !inside (req.script, data, size))
    abort ();
  if (req.version != data[4] || (req.version != SP_FRAME_VERSION_V1 && req.version != SP_FRAME_VERSION_V2))
    abort ();
  /* Each version carries its own fields and none of the other's.  */
  if (req.version == SP_FRAME_VERSION_V2 ? (!inside (req.schema, data, size) || req.schema.len == 0
                                            || req.schema.len > SP_ANSWER_SCHEMA_MAX_BYTES)
                                         : req.schema.len != 0)
    abort ();
  for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
    if (req.version == SP_FRAME_VERSION_V2 ? req.outcomes[i].len != 0 : !inside (req.outcomes[i], data, size))
      abort ();

  again = malloc (size);
  if (again == NULL || sp_request_frame_size (&req) != size)
    abort ();
  if (sp_request_encode (&req, again, size, &len, &err) < 0 || len != size || memcmp (again, data, size) != 0)
    abort ();
  free (again);

  if (sp_request_validate (&req, allowlist, sizeof (allowlist) / sizeof (allowlist[0]), &err) == 0)
    {
      /* What passes must meet every documented rule.  */
      if (!sp_bytes_equal_str (req.repo, allowlist[0]) && !sp_bytes_equal_str (req.repo, allowlist[1]))
        abort ();
      for (size_t i = 0; i < SP_OUTCOME_COUNT && req.version == SP_FRAME_VERSION_V1; i++)
        if (!sp_utf8_valid (req.outcomes[i].data, req.outcomes[i].len, NULL)
            || sp_bytes_equal_str (req.outcomes[i], SP_OUTCOME_RESERVED))
          abort ();
    }
}

static void
fuzz_response (const uint8_t *data, size_t size)
{
  cleanup_error sp_error_t err = NULL;
  size_t n = size < SP_RESPONSE_READ_MAX_BYTES ? size : SP_RESPONSE_READ_MAX_BYTES;
  uint8_t again[SP_RESPONSE_FRAME_BYTES];
  uint8_t index;

  if (sp_response_decode (data, n, &index, &err) < 0)
    return;
  if (n != SP_RESPONSE_FRAME_BYTES || index > SP_OUTCOME_COUNT)
    abort ();
  if (sp_response_encode (index, again, &err) < 0 || memcmp (again, data, SP_RESPONSE_FRAME_BYTES) != 0)
    abort ();
}

/* A v2 response that decodes re-encodes to the same bytes, and the line
   the client would print from it holds exactly one newline-free value.  */
static void
fuzz_response_v2 (const uint8_t *data, size_t size)
{
  cleanup_error sp_error_t err = NULL;
  size_t n = size < SP_RESPONSE_V2_READ_MAX_BYTES ? size : SP_RESPONSE_V2_READ_MAX_BYTES;
  uint8_t *again;
  struct sp_bytes answer;
  char line[SP_ANSWER_VALUE_MAX_BYTES];
  size_t len = 0;
  ssize_t rendered;

  if (sp_response_v2_decode (data, n, &answer, &err) < 0)
    return;
  if (answer.len > SP_ANSWER_OUTPUT_MAX_BYTES || (answer.len > 0 && !inside (answer, data, n)))
    abort ();
  again = malloc (SP_RESPONSE_V2_FRAME_MAX_BYTES);
  if (again == NULL
      || sp_response_v2_encode (answer.len > 0 ? &answer : NULL, again, SP_RESPONSE_V2_FRAME_MAX_BYTES, &len,
                                &err)
             < 0
      || len != n || memcmp (again, data, n) != 0)
    abort ();
  free (again);
  rendered = sp_answer_render_value (answer.len > 0 ? &answer : NULL, line, sizeof (line));
  if (answer.len > 0 && (rendered >= 0) != sp_answer_value_ok (answer))
    abort ();
  if (rendered >= 0 && memchr (line, '\n', (size_t)rendered) != NULL)
    abort ();
}

/* A hello or its reply that decodes is exactly what the encoder writes: the
   handshake carries nothing that could vary.  */
static void
fuzz_hello (const uint8_t *data, size_t size)
{
  cleanup_error sp_error_t err = NULL;
  size_t n = size < SP_RESPONSE_READ_MAX_BYTES ? size : SP_RESPONSE_READ_MAX_BYTES;
  uint8_t hello[SP_HELLO_FRAME_BYTES];
  uint8_t reply[SP_HELLO_REPLY_FRAME_BYTES];
  uint8_t version;

  if (sp_hello_decode (data, n, &err) == 0)
    {
      sp_hello_encode (hello);
      if (n != SP_HELLO_FRAME_BYTES || memcmp (hello, data, n) != 0
          || sp_frame_client_kind (data) != SP_FRAME_KIND_HELLO)
        abort ();
    }
  sp_error_release (&err);
  if (sp_hello_reply_decode (data, n, &version, &err) == 0)
    {
      sp_hello_reply_encode (reply);
      if (n != SP_HELLO_REPLY_FRAME_BYTES || memcmp (reply, data, SP_FRAME_HEADER_BYTES) != 0
          || version != data[SP_FRAME_HEADER_BYTES])
        abort ();
    }
}

static void
fuzz_outcome (const uint8_t *data, size_t size)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_bytes outcome = { data, size < SP_OUTCOME_MAX_BYTES + 2 ? size : SP_OUTCOME_MAX_BYTES + 2 };

  if (sp_outcome_check (outcome, &err) < 0)
    return;
  if (outcome.len == 0 || outcome.len > SP_OUTCOME_MAX_BYTES
      || !sp_utf8_valid (outcome.data, outcome.len, NULL))
    abort ();
  for (size_t i = 0; i < outcome.len; i++)
    if (outcome.data[i] < 0x20 || outcome.data[i] == 0x7F)
      abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fuzz_request (data, size);
  fuzz_response (data, size);
  fuzz_response_v2 (data, size);
  fuzz_hello (data, size);
  fuzz_outcome (data, size);
  return 0;
}
