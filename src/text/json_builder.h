/* Builds a struct sp_json tree (json.h) from a stream of parse events.  Both
   readers use it, json.c from yajl's callbacks and yaml_tree.c from libyaml's
   events, so that the tree, the duplicate-key rule and the error paths are
   the same whichever syntax a document is written in.  */
#ifndef SP_TEXT_JSON_BUILDER_H
#define SP_TEXT_JSON_BUILDER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "text/json.h"

/* One open array or object.  Its capacity lives here rather than in the
   node, because only an open container ever grows.  */
struct sp_json_builder_frame
{
  struct sp_json *node;
  size_t cap;
};

/* Start from all zeros.  Every node hangs on the tree the moment it is made,
   so sp_json_builder_release frees everything on every error path.  */
struct sp_json_builder
{
  struct sp_json *root;
  struct sp_json_builder_frame *frames;
  size_t depth; /* open containers */
  size_t frames_cap;
};

/* Each adds one value where the document is: as the root, as the next item
   of the innermost open array, or as the value of the innermost open
   object's pending key.  Text is copied (a NUL is added, none is checked
   for).  -1 with *err set when out of memory.  */
int sp_json_builder_null (struct sp_json_builder *b, sp_error_t *err);
int sp_json_builder_bool (struct sp_json_builder *b, bool value, sp_error_t *err);
int sp_json_builder_number (struct sp_json_builder *b, const char *text, size_t len, sp_error_t *err);
int sp_json_builder_string (struct sp_json_builder *b, const char *s, size_t len, sp_error_t *err);

/* Opens an SP_JSON_ARRAY or SP_JSON_OBJECT as the next value.  */
int sp_json_builder_open (struct sp_json_builder *b, enum sp_json_type type, sp_error_t *err);

/* The next key of the innermost open object.  */
int sp_json_builder_key (struct sp_json_builder *b, const char *key, size_t len, sp_error_t *err);

/* Closes the innermost container.  An object holding a key twice fails
   with `<path>: duplicate key "k"`, naming the first duplicate in document
   order.  */
int sp_json_builder_close (struct sp_json_builder *b, sp_error_t *err);

/* The path of the value being built: the open containers, then, when
   with_pending is set, the key or index that the innermost one is waiting
   on (`sealedProbes.timeout`, `host.list[3]`, or SP_JSON_ROOT_PATH).
   Allocated; NULL when out of memory.  */
char *sp_json_builder_path (const struct sp_json_builder *b, bool with_pending);

/* The finished tree, which the caller then owns, or NULL while a container
   is still open or nothing was added.  */
struct sp_json *sp_json_builder_take (struct sp_json_builder *b);

void sp_json_builder_release (struct sp_json_builder *b);

#endif
