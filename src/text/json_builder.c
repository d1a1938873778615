/* The tree builder: see src/text/json_builder.h.  Both readers feed it,
   json.c from yajl's callbacks and yaml_tree.c from libyaml's events.  */
#include "text/json_builder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"

/* See sp_json_builder_path.  Built only when an error is reported, from
   the public path renderers (json.h), one step at a time.  */
char *
sp_json_builder_path (const struct sp_json_builder *b, bool with_pending)
{
  cleanup_free char *path = NULL; /* NULL: still at the root */

  for (size_t i = 0; i < b->depth; i++)
    {
      const struct sp_json *c = b->frames[i].node;
      bool last = i + 1 == b->depth;
      char *next;

      if (last && !with_pending)
        break;
      if (c->type == SP_JSON_OBJECT)
        {
          /* A pending key sits in the last member with no value yet.  */
          if (c->u.object.len == 0 || (last && c->u.object.members[c->u.object.len - 1].value != NULL))
            break;
          next = sp_json_path_key (path, c->u.object.members[c->u.object.len - 1].key);
        }
      else
        {
          size_t idx = c->u.array.len;
          /* An open child is the last item; a failing scalar would be next.  */
          if (!last)
            idx--;
          next = sp_json_path_index (path, idx);
        }
      if (next == NULL)
        return NULL;
      free (path);
      path = next;
    }
  if (path == NULL)
    return strdup (SP_JSON_ROOT_PATH);
  return get_and_reset (&path);
}

/* ---- tree building ------------------------------------------------------- */

/* Grows *array of elem-sized items to hold one more than len.  */
static int
grow (void **array, size_t *cap, size_t len, size_t elem)
{
  size_t next;
  void *grown;

  if (len < *cap)
    return 0;
  next = *cap ? *cap * 2 : 4;
  if (next < *cap || next > SIZE_MAX / elem)
    return -1;
  grown = realloc (*array, next * elem);
  if (grown == NULL)
    return -1;
  *array = grown;
  *cap = next;
  return 0;
}

static int
fail_oom (sp_error_t *err)
{
  return sp_make_error (err, ENOMEM, "build the document tree");
}

static char *
copy_text (const void *s, size_t len)
{
  char *p;

  if (len == SIZE_MAX)
    return NULL;
  p = malloc (len + 1);
  if (p == NULL)
    return NULL;
  memcpy (p, s, len);
  p[len] = '\0';
  return p;
}

/* Hangs a new node on the innermost open container (or makes it the root).
   On failure the node is freed here.  */
static int
attach (struct sp_json_builder *b, struct sp_json *node, sp_error_t *err)
{
  struct sp_json_builder_frame *top;
  struct sp_json *c;

  if (b->depth == 0)
    {
      if (b->root != NULL)
        {
          sp_json_free (node);
          return sp_make_error (err, EINVAL, "%s: a second root value", SP_JSON_ROOT_PATH);
        }
      b->root = node;
      return 0;
    }
  top = &b->frames[b->depth - 1];
  c = top->node;
  if (c->type == SP_JSON_OBJECT)
    {
      /* Both readers deliver a key before its value; a reader bug must not
         overwrite a member.  */
      if (c->u.object.len == 0 || c->u.object.members[c->u.object.len - 1].value != NULL)
        {
          sp_json_free (node);
          return sp_make_error (err, EINVAL, "a value without a key");
        }
      c->u.object.members[c->u.object.len - 1].value = node;
      return 0;
    }
  if (grow ((void **)&c->u.array.items, &top->cap, c->u.array.len, sizeof (struct sp_json *)) < 0)
    {
      sp_json_free (node);
      return fail_oom (err);
    }
  c->u.array.items[c->u.array.len++] = node;
  return 0;
}

static struct sp_json *
new_node (enum sp_json_type type)
{
  struct sp_json *node = calloc (1, sizeof (*node));

  if (node)
    node->type = type;
  return node;
}

static int
add_scalar (struct sp_json_builder *b, struct sp_json *node, sp_error_t *err)
{
  if (node == NULL)
    return fail_oom (err);
  return attach (b, node, err);
}

int
sp_json_builder_null (struct sp_json_builder *b, sp_error_t *err)
{
  return add_scalar (b, new_node (SP_JSON_NULL), err);
}

int
sp_json_builder_bool (struct sp_json_builder *b, bool value, sp_error_t *err)
{
  struct sp_json *node = new_node (SP_JSON_BOOL);

  if (node)
    node->u.boolean = value;
  return add_scalar (b, node, err);
}

int
sp_json_builder_number (struct sp_json_builder *b, const char *text, size_t len, sp_error_t *err)
{
  struct sp_json *node = new_node (SP_JSON_NUMBER);

  if (node && (node->u.number = copy_text (text, len)) == NULL)
    {
      free (node);
      node = NULL;
    }
  return add_scalar (b, node, err);
}

int
sp_json_builder_string (struct sp_json_builder *b, const char *s, size_t len, sp_error_t *err)
{
  struct sp_json *node = new_node (SP_JSON_STRING);

  if (node && (node->u.string.data = copy_text (s, len)) == NULL)
    {
      free (node);
      node = NULL;
    }
  if (node)
    node->u.string.len = len;
  return add_scalar (b, node, err);
}

int
sp_json_builder_open (struct sp_json_builder *b, enum sp_json_type type, sp_error_t *err)
{
  struct sp_json *node = new_node (type);

  if (node == NULL)
    return fail_oom (err);
  if (attach (b, node, err) < 0)
    return -1;
  if (grow ((void **)&b->frames, &b->frames_cap, b->depth, sizeof (struct sp_json_builder_frame)) < 0)
    return fail_oom (err);
  b->frames[b->depth].node = node;
  b->frames[b->depth].cap = 0;
  b->depth++;
  return 0;
}

int
sp_json_builder_key (struct sp_json_builder *b, const char *key, size_t len, sp_error_t *err)
{
  struct sp_json_builder_frame *top;
  struct sp_json *c;
  char *copy;

  if (b->depth == 0 || b->frames[b->depth - 1].node->type != SP_JSON_OBJECT)
    return sp_make_error (err, EINVAL, "a key outside an object");
  top = &b->frames[b->depth - 1];
  c = top->node;
  if (c->u.object.len > 0 && c->u.object.members[c->u.object.len - 1].value == NULL)
    return sp_make_error (err, EINVAL, "a key without a value");
  copy = copy_text (key, len);
  if (copy == NULL)
    return fail_oom (err);
  if (grow ((void **)&c->u.object.members, &top->cap, c->u.object.len, sizeof (struct sp_json_member)) < 0)
    {
      free (copy);
      return fail_oom (err);
    }
  c->u.object.members[c->u.object.len].key = copy;
  c->u.object.members[c->u.object.len].value = NULL;
  c->u.object.len++;
  return 0;
}

static int
compare_members (const void *a, const void *b)
{
  const struct sp_json_member *ma = *(const struct sp_json_member *const *)a;
  const struct sp_json_member *mb = *(const struct sp_json_member *const *)b;
  int r = strcmp (ma->key, mb->key);

  if (r != 0)
    return r;
  /* Same array, so address order is document order.  */
  return (ma > mb) - (ma < mb);
}

/* Sorting a copy keeps the check O(n log n): a 1 MiB config can hold some
   100 000 keys in one object.  Reports the duplicate that occurs first.  */
static int
check_duplicates (const struct sp_json_builder *b, const struct sp_json *obj, sp_error_t *err)
{
  size_t n = obj->u.object.len;
  cleanup_free const struct sp_json_member **sorted = NULL;
  const struct sp_json_member *first_dup = NULL;
  cleanup_free char *path = NULL;
  cleanup_free char *quoted = NULL;

  if (n < 2)
    return 0;
  sorted = calloc (n, sizeof (*sorted));
  if (sorted == NULL)
    return fail_oom (err);
  for (size_t i = 0; i < n; i++)
    sorted[i] = &obj->u.object.members[i];
  qsort (sorted, n, sizeof (*sorted), compare_members);
  for (size_t i = 0; i + 1 < n; i++)
    if (strcmp (sorted[i]->key, sorted[i + 1]->key) == 0 && (first_dup == NULL || sorted[i + 1] < first_dup))
      first_dup = sorted[i + 1];
  if (first_dup == NULL)
    return 0;

  path = sp_json_builder_path (b, false);
  quoted = sp_json_quote (first_dup->key, strlen (first_dup->key));
  if (path == NULL || quoted == NULL)
    return fail_oom (err);
  return sp_make_error (err, 0, "%s: duplicate key %s", path, quoted);
}

static void
shrink_top (struct sp_json_builder *b)
{
  struct sp_json *c = b->frames[b->depth - 1].node;
  void *smaller;

  /* Give back the slack of geometric growth; failure to shrink is harmless.  */
  if (c->type == SP_JSON_OBJECT && c->u.object.len > 0)
    {
      smaller = realloc (c->u.object.members, c->u.object.len * sizeof (struct sp_json_member));
      if (smaller)
        c->u.object.members = smaller;
    }
  else if (c->type == SP_JSON_ARRAY && c->u.array.len > 0)
    {
      smaller = realloc (c->u.array.items, c->u.array.len * sizeof (struct sp_json *));
      if (smaller)
        c->u.array.items = smaller;
    }
}

int
sp_json_builder_close (struct sp_json_builder *b, sp_error_t *err)
{
  const struct sp_json *c;

  if (b->depth == 0)
    return sp_make_error (err, EINVAL, "a close with nothing open");
  c = b->frames[b->depth - 1].node;
  if (c->type == SP_JSON_OBJECT)
    {
      if (c->u.object.len > 0 && c->u.object.members[c->u.object.len - 1].value == NULL)
        return sp_make_error (err, EINVAL, "a key without a value");
      if (check_duplicates (b, c, err) < 0)
        return -1;
    }
  shrink_top (b);
  b->depth--;
  return 0;
}

struct sp_json *
sp_json_builder_take (struct sp_json_builder *b)
{
  if (b->depth != 0)
    return NULL;
  return get_and_reset (&b->root);
}

void
sp_json_builder_release (struct sp_json_builder *b)
{
  sp_json_free (b->root);
  free (b->frames);
  *b = (struct sp_json_builder){ 0 };
}
