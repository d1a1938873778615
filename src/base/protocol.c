/* Wire protocol v1 framing: see src/base/protocol.h and
   docs/protocol.md.  Every length is checked against what is left before it
   is used, so no read goes past len.  */
#include "base/protocol.h"

#include <string.h>

/* The tag of each request field, in the only order v1 allows.  */
static const uint8_t field_tags[SP_REQUEST_FIELD_COUNT] = {
  SP_TAG_REPO, SP_TAG_OUTCOME, SP_TAG_OUTCOME, SP_TAG_OUTCOME, SP_TAG_SCRIPT,
};

static uint32_t
get_u32_be (const uint8_t *p)
{
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void
put_u32_be (uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static const char *
tag_name (uint8_t tag)
{
  switch (tag)
    {
    case SP_TAG_REPO:
      return "repo";
    case SP_TAG_OUTCOME:
      return "outcome";
    case SP_TAG_SCRIPT:
      return "script";
    default:
      return "unknown";
    }
}

static size_t
tag_max_bytes (uint8_t tag)
{
  switch (tag)
    {
    case SP_TAG_REPO:
      return SP_REPO_MAX_BYTES;
    case SP_TAG_OUTCOME:
      return SP_OUTCOME_MAX_BYTES;
    case SP_TAG_SCRIPT:
      return SP_SCRIPT_MAX_BYTES;
    default:
      return 0;
    }
}

/* The request's fields in wire order, so that encoder and decoder walk the
   same table.  */
static void
request_fields (const struct sp_request *req, const struct sp_bytes *fields[SP_REQUEST_FIELD_COUNT])
{
  fields[0] = &req->repo;
  for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
    fields[1 + i] = &req->outcomes[i];
  fields[SP_REQUEST_FIELD_COUNT - 1] = &req->script;
}

int
sp_frame_header_decode (const uint8_t hdr[SP_FRAME_HEADER_BYTES], uint8_t expected_kind, size_t *body_len,
                        sp_error_t *err)
{
  uint32_t announced;

  if (memcmp (hdr, SP_FRAME_MAGIC, SP_FRAME_MAGIC_BYTES) != 0)
    return sp_make_error (err, 0, "frame: bad magic");
  if (hdr[4] != SP_FRAME_VERSION)
    return sp_make_error (err, 0, "frame: unsupported version %u", hdr[4]);
  if (hdr[5] != expected_kind)
    return sp_make_error (err, 0, "frame: kind %u where %u was expected", hdr[5], expected_kind);

  announced = get_u32_be (hdr + 6);
  switch (expected_kind)
    {
    case SP_FRAME_KIND_REQUEST:
      if (announced > SP_REQUEST_BODY_MAX_BYTES)
        return sp_make_error (err, 0, "frame: body length %u above the largest request (%u)", announced,
                              (unsigned)SP_REQUEST_BODY_MAX_BYTES);
      if (announced < SP_REQUEST_BODY_MIN_BYTES)
        return sp_make_error (err, 0, "frame: body length %u below the smallest request (%u)", announced,
                              (unsigned)SP_REQUEST_BODY_MIN_BYTES);
      break;
    case SP_FRAME_KIND_RESPONSE:
      if (announced != SP_RESPONSE_BODY_BYTES)
        return sp_make_error (err, 0, "frame: response body length %u, not %u", announced,
                              (unsigned)SP_RESPONSE_BODY_BYTES);
      break;
    case SP_FRAME_KIND_HELLO:
      if (announced != 0)
        return sp_make_error (err, 0, "frame: hello body length %u, not 0", announced);
      break;
    case SP_FRAME_KIND_HELLO_REPLY:
      if (announced != SP_HELLO_REPLY_BODY_BYTES)
        return sp_make_error (err, 0, "frame: hello reply body length %u, not %u", announced,
                              (unsigned)SP_HELLO_REPLY_BODY_BYTES);
      break;
    default:
      return sp_make_error (err, 0, "frame: no such kind %u", expected_kind);
    }
  *body_len = announced;
  return 0;
}

/* Reads the field at body[*off..body_len) that must carry field_tags[i].  */
static int
decode_field (const uint8_t *body, size_t body_len, size_t *off, size_t i, struct sp_bytes *out,
              sp_error_t *err)
{
  uint8_t want = field_tags[i];
  uint8_t tag;
  uint32_t len;

  if (body_len - *off < SP_FIELD_HEADER_BYTES)
    return sp_make_error (err, 0, "field %zu (%s): truncated field header", i + 1, tag_name (want));
  tag = body[*off];
  len = get_u32_be (body + *off + 1);

  if (tag != want)
    {
      /* Name the common mistakes; the verdict is the same for all.  */
      if (tag_max_bytes (tag) == 0)
        return sp_make_error (err, 0, "field %zu: unknown tag 0x%02x", i + 1, tag);
      if (want == SP_TAG_OUTCOME && tag == SP_TAG_SCRIPT)
        return sp_make_error (err, 0, "field %zu: only %zu outcomes, %d required", i + 1, i - 1,
                              SP_OUTCOME_COUNT);
      if (want == SP_TAG_SCRIPT && tag == SP_TAG_OUTCOME)
        return sp_make_error (err, 0, "field %zu: more than %d outcomes", i + 1, SP_OUTCOME_COUNT);
      return sp_make_error (err, 0, "field %zu: tag %s where %s is required (duplicate or out of order)",
                            i + 1, tag_name (tag), tag_name (want));
    }
  if (len == 0)
    return sp_make_error (err, 0, "field %zu (%s): empty", i + 1, tag_name (want));
  if (len > tag_max_bytes (want))
    return sp_make_error (err, 0, "field %zu (%s): length %u above its bound %zu", i + 1, tag_name (want),
                          len, tag_max_bytes (want));
  *off += SP_FIELD_HEADER_BYTES;
  if (body_len - *off < len)
    return sp_make_error (err, 0, "field %zu (%s): length %u runs past the body", i + 1, tag_name (want),
                          len);
  out->data = body + *off;
  out->len = len;
  *off += len;
  return 0;
}

int
sp_request_decode (const uint8_t *buf, size_t len, struct sp_request *out, sp_error_t *err)
{
  struct sp_bytes got[SP_REQUEST_FIELD_COUNT];
  const uint8_t *body;
  size_t body_len;
  size_t off = 0;
  int ret;

  if (len < SP_FRAME_HEADER_BYTES)
    return sp_make_error (err, 0, "frame: truncated header (%zu bytes)", len);
  ret = sp_frame_header_decode (buf, SP_FRAME_KIND_REQUEST, &body_len, err);
  if (ret < 0)
    return ret;
  if (len - SP_FRAME_HEADER_BYTES < body_len)
    return sp_make_error (err, 0, "frame: truncated body (%zu of %zu bytes)", len - SP_FRAME_HEADER_BYTES,
                          body_len);
  if (len - SP_FRAME_HEADER_BYTES > body_len)
    return sp_make_error (err, 0, "frame: %zu trailing bytes after the body",
                          len - SP_FRAME_HEADER_BYTES - body_len);

  body = buf + SP_FRAME_HEADER_BYTES;
  for (size_t i = 0; i < SP_REQUEST_FIELD_COUNT; i++)
    {
      ret = decode_field (body, body_len, &off, i, &got[i], err);
      if (ret < 0)
        return ret;
    }
  /* A sixth field or stray bytes: either way the announced length lies.  */
  if (off != body_len)
    return sp_make_error (err, 0, "frame: %zu bytes after the script field, body length %zu disagrees",
                          body_len - off, body_len);

  out->repo = got[0];
  for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
    out->outcomes[i] = got[1 + i];
  out->script = got[SP_REQUEST_FIELD_COUNT - 1];
  return 0;
}

size_t
sp_request_frame_size (const struct sp_request *req)
{
  const struct sp_bytes *fields[SP_REQUEST_FIELD_COUNT];
  size_t total = SP_FRAME_HEADER_BYTES;

  request_fields (req, fields);
  for (size_t i = 0; i < SP_REQUEST_FIELD_COUNT; i++)
    {
      if (fields[i]->len == 0 || fields[i]->len > tag_max_bytes (field_tags[i]) || fields[i]->data == NULL)
        return 0;
      total += SP_FIELD_HEADER_BYTES + fields[i]->len;
    }
  return total;
}

int
sp_request_encode (const struct sp_request *req, uint8_t *buf, size_t cap, size_t *len, sp_error_t *err)
{
  const struct sp_bytes *fields[SP_REQUEST_FIELD_COUNT];
  size_t total = sp_request_frame_size (req);
  size_t off;

  if (total == 0)
    return sp_make_error (err, 0, "request: a field is empty or above its bound");
  if (cap < total)
    return sp_make_error (err, 0, "request: needs %zu bytes, buffer holds %zu", total, cap);

  memcpy (buf, SP_FRAME_MAGIC, SP_FRAME_MAGIC_BYTES);
  buf[4] = SP_FRAME_VERSION;
  buf[5] = SP_FRAME_KIND_REQUEST;
  put_u32_be (buf + 6, (uint32_t)(total - SP_FRAME_HEADER_BYTES));
  off = SP_FRAME_HEADER_BYTES;

  request_fields (req, fields);
  for (size_t i = 0; i < SP_REQUEST_FIELD_COUNT; i++)
    {
      buf[off] = field_tags[i];
      put_u32_be (buf + off + 1, (uint32_t)fields[i]->len);
      off += SP_FIELD_HEADER_BYTES;
      memcpy (buf + off, fields[i]->data, fields[i]->len);
      off += fields[i]->len;
    }
  *len = off;
  return 0;
}

int
sp_response_encode (uint8_t index, uint8_t buf[SP_RESPONSE_FRAME_BYTES], sp_error_t *err)
{
  if (index > SP_OUTCOME_COUNT)
    return sp_make_error (err, 0, "response: index %u above %d", index, SP_OUTCOME_COUNT);
  memcpy (buf, SP_FRAME_MAGIC, SP_FRAME_MAGIC_BYTES);
  buf[4] = SP_FRAME_VERSION;
  buf[5] = SP_FRAME_KIND_RESPONSE;
  put_u32_be (buf + 6, SP_RESPONSE_BODY_BYTES);
  buf[SP_FRAME_HEADER_BYTES] = index;
  return 0;
}

int
sp_response_decode (const uint8_t *buf, size_t len, uint8_t *index, sp_error_t *err)
{
  size_t body_len;
  int ret;

  if (len != SP_RESPONSE_FRAME_BYTES)
    return sp_make_error (err, 0, "response: %zu bytes, not %d", len, SP_RESPONSE_FRAME_BYTES);
  ret = sp_frame_header_decode (buf, SP_FRAME_KIND_RESPONSE, &body_len, err);
  if (ret < 0)
    return ret;
  if (buf[SP_FRAME_HEADER_BYTES] > SP_OUTCOME_COUNT)
    return sp_make_error (err, 0, "response: index %u above %d", buf[SP_FRAME_HEADER_BYTES],
                          SP_OUTCOME_COUNT);
  *index = buf[SP_FRAME_HEADER_BYTES];
  return 0;
}

/* Writes a header of kind and body_length body_len at buf.  */
static void
put_header (uint8_t *buf, uint8_t kind, uint32_t body_len)
{
  memcpy (buf, SP_FRAME_MAGIC, SP_FRAME_MAGIC_BYTES);
  buf[4] = SP_FRAME_VERSION;
  buf[5] = kind;
  put_u32_be (buf + 6, body_len);
}

uint8_t
sp_frame_client_kind (const uint8_t hdr[SP_FRAME_HEADER_BYTES])
{
  return hdr[5] == SP_FRAME_KIND_HELLO ? SP_FRAME_KIND_HELLO : SP_FRAME_KIND_REQUEST;
}

void
sp_hello_encode (uint8_t buf[SP_HELLO_FRAME_BYTES])
{
  put_header (buf, SP_FRAME_KIND_HELLO, 0);
}

int
sp_hello_decode (const uint8_t *buf, size_t len, sp_error_t *err)
{
  size_t body_len;

  if (len < SP_FRAME_HEADER_BYTES)
    return sp_make_error (err, 0, "hello: truncated header (%zu bytes)", len);
  if (sp_frame_header_decode (buf, SP_FRAME_KIND_HELLO, &body_len, err) < 0)
    return -1;
  if (len != SP_HELLO_FRAME_BYTES)
    return sp_make_error (err, 0, "hello: %zu trailing bytes after the header", len - SP_HELLO_FRAME_BYTES);
  return 0;
}

void
sp_hello_reply_encode (uint8_t buf[SP_HELLO_REPLY_FRAME_BYTES])
{
  put_header (buf, SP_FRAME_KIND_HELLO_REPLY, SP_HELLO_REPLY_BODY_BYTES);
  buf[SP_FRAME_HEADER_BYTES] = SP_FRAME_VERSION;
}

int
sp_hello_reply_decode (const uint8_t *buf, size_t len, uint8_t *version, sp_error_t *err)
{
  size_t body_len;

  if (len != SP_HELLO_REPLY_FRAME_BYTES)
    return sp_make_error (err, 0, "hello reply: %zu bytes, not %d", len, SP_HELLO_REPLY_FRAME_BYTES);
  if (sp_frame_header_decode (buf, SP_FRAME_KIND_HELLO_REPLY, &body_len, err) < 0)
    return -1;
  *version = buf[SP_FRAME_HEADER_BYTES];
  return 0;
}
